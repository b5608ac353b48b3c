// Checkpoints across simulated ranks: save at step k and resume (same or another world size) equals
// the uninterrupted run or the DDP reference bit for bit, consolidation equals the DDP reference,
// zero-sized, numel < world and tied parameters survive, and a failed save leaves nothing behind.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "core/training/checkpoint.h"
#include "core/base/errors.h"
#include "core/models/model_zoo.h"
#include "sim/distributed_training.h"

namespace zero3 {
namespace {

namespace fs = std::filesystem;

class CheckpointResume : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = fs::temp_directory_path() / ("zero3_resume_" + std::string(info->name()) + "_" + std::to_string(getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string dir(const std::string& name) const { return (root_ / name).string(); }

  fs::path root_;
};

// Small persistence threshold and buckets, so persistent and released parameters and several
// buckets all take part; MoE layers are leaves, so ranks that route differently stay in step.
DistributedRunOptions run_options(const std::string& model, int world, int64_t steps, int stage, bool bf16 = false) {
  DistributedRunOptions options;
  options.model = model;
  options.seed = 3;
  options.world = world;
  options.steps = steps;
  options.config.zero.stage = stage;
  options.config.zero.persistence_threshold = 40;
  options.config.zero.prefetch_bucket_elements = 300;
  options.config.zero.reduce_bucket_elements = 300;
  options.config.zero.leaf_modules = {"moe"};
  options.config.bf16 = bf16;
  return options;
}

DistributedRunResult run_ok(const DistributedRunOptions& options) {
  DistributedRunResult result = run_distributed(options);
  EXPECT_TRUE(result.sim.all_ok()) << result.sim.summary();
  return result;
}

// The uninterrupted run as a run resumed at `first_step` reports it: only the later steps.
DistributedRunResult from_step(DistributedRunResult result, int64_t first_step) {
  if (static_cast<int64_t>(result.steps.size()) < first_step) {
    ADD_FAILURE() << "the uninterrupted run took " << result.steps.size() << " steps";
    return result;
  }
  result.steps.erase(result.steps.begin(), result.steps.begin() + first_step);
  return result;
}

void expect_bitwise_equal(const DistributedRunResult& a, const DistributedRunResult& b, const std::string& model,
                          const std::string& what_run) {
  const std::string what = model + ", " + what_run;
  ASSERT_FALSE(a.steps.empty()) << what;
  ASSERT_EQ(a.steps.size(), b.steps.size()) << what;
  EXPECT_EQ(a.steps.front().step, b.steps.front().step) << what;
  const StateComparison comparison = compare_runs(a, b);
  EXPECT_TRUE(comparison.bitwise_equal) << what << ": #wrong " << comparison.wrong << ", max diff "
                                        << comparison.max_abs_diff << "\n"
                                        << comparison.first_differences;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

TEST_F(CheckpointResume, SavingAtStepKAndResumingAtTheSameWorldSizeEqualsTheUninterruptedRun) {
  for (bool bf16 : {false, true}) {
    const std::string what = bf16 ? "bf16" : "f32";
    const DistributedRunResult uninterrupted = run_ok(run_options("kitchen-sink", 4, 5, 3, bf16));
    DistributedRunOptions saving = run_options("kitchen-sink", 4, 5, 3, bf16);
    saving.save_checkpoint = dir(what);
    saving.save_at_step = 2;
    // Saving in the middle of a run does not disturb it.
    expect_bitwise_equal(run_ok(saving), uninterrupted, "kitchen-sink", what + " run that saved");
    EXPECT_EQ(read_checkpoint(dir(what)).manifest.step, 2);

    DistributedRunOptions resumed = run_options("kitchen-sink", 4, 5, 3, bf16);
    resumed.load_checkpoint = dir(what);
    expect_bitwise_equal(run_ok(resumed), from_step(uninterrupted, 2), "kitchen-sink", what + " resumed at step 2");
  }
}

TEST_F(CheckpointResume, ResumingAtAnotherWorldSizeEqualsTheDdpReferenceStartedFromTheConsolidatedState) {
  DistributedRunOptions saving = run_options("kitchen-sink", 4, 2, 3);
  saving.save_checkpoint = dir("w4");
  run_ok(saving);
  consolidate_checkpoint(dir("w4"), dir("full"));

  DistributedRunOptions zero3 = run_options("kitchen-sink", 3, 5, 3);
  zero3.load_checkpoint = dir("w4");
  DistributedRunOptions ddp = run_options("kitchen-sink", 3, 5, 0);
  ddp.load_checkpoint = dir("full");
  const DistributedRunResult resharded = run_ok(zero3);
  EXPECT_EQ(resharded.steps.front().step, 2);
  expect_bitwise_equal(resharded, run_ok(ddp), "kitchen-sink", "ZeRO-3 W=3 from W=4 vs DDP W=3 from consolidated");
}

TEST_F(CheckpointResume, ConsolidationEqualsTheDdpReferenceOfTheSameRun) {
  DistributedRunOptions zero3 = run_options("kitchen-sink", 4, 3, 3);
  zero3.save_checkpoint = dir("zero3");
  run_ok(zero3);
  DistributedRunOptions ddp = run_options("kitchen-sink", 4, 3, 0);
  ddp.save_checkpoint = dir("ddp");
  const DistributedRunResult reference = run_ok(ddp);

  // `zero3 consolidate`'s own path: a world-1 checkpoint written from the W=4 shards, read back.
  consolidate_checkpoint(dir("zero3"), dir("full"));
  const Checkpoint full = read_checkpoint(dir("full"));
  EXPECT_EQ(full.manifest.world, 1);
  EXPECT_EQ(full.manifest.step, 3);
  // Only the final states are compared: a checkpoint holds no losses.
  DistributedRunResult consolidated;
  consolidated.final_state = full.full;
  consolidated.param_names = reference.param_names;
  DistributedRunResult reference_state;
  reference_state.final_state = reference.final_state;
  reference_state.param_names = reference.param_names;
  const StateComparison comparison = compare_runs(consolidated, reference_state);
  EXPECT_TRUE(comparison.bitwise_equal) << "consolidated ZeRO-3 checkpoint vs DDP: #wrong " << comparison.wrong << "\n"
                                        << comparison.first_differences;
  EXPECT_EQ(consolidated.final_state.size(), reference.param_names.size());
  // The DDP reference saves its shards in the same format: the same bytes, rank by rank.
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(read_file(dir("zero3") + "/" + shard_file_name(rank)),
              read_file(dir("ddp") + "/" + shard_file_name(rank)))
        << shard_file_name(rank);
  }
}

TEST_F(CheckpointResume, ZeroSizedAndSmallerThanWorldParametersSurviveResumeAndReshard) {
  // At 5 ranks the [0, 8] and [0] parameters have empty shards and the [4] bias is all padding on rank 4.
  const DistributedRunResult uninterrupted = run_ok(run_options("zero-sized", 5, 4, 3));
  DistributedRunOptions saving = run_options("zero-sized", 5, 4, 3);
  saving.save_checkpoint = dir("ckpt");
  saving.save_at_step = 2;
  run_ok(saving);

  DistributedRunOptions same_world = run_options("zero-sized", 5, 4, 3);
  same_world.load_checkpoint = dir("ckpt");
  expect_bitwise_equal(run_ok(same_world), from_step(uninterrupted, 2), "zero-sized", "resumed at 5 ranks");
  for (int world : {3, 8}) {
    DistributedRunOptions zero3 = run_options("zero-sized", world, 4, 3);
    zero3.load_checkpoint = dir("ckpt");
    DistributedRunOptions ddp = run_options("zero-sized", world, 4, 0);
    ddp.load_checkpoint = dir("ckpt");
    expect_bitwise_equal(run_ok(zero3), run_ok(ddp), "zero-sized", "resharded to " + std::to_string(world));
  }
}

TEST_F(CheckpointResume, ATiedModelResumesWithItsOneSharedSlotAndReshards) {
  const DistributedRunResult uninterrupted = run_ok(run_options("gpt-tiny", 4, 4, 3));
  DistributedRunOptions saving = run_options("gpt-tiny", 4, 4, 3);
  saving.save_checkpoint = dir("ckpt");
  saving.save_at_step = 2;
  run_ok(saving);
  const Checkpoint saved = read_checkpoint(dir("ckpt"));
  ASSERT_EQ(saved.manifest.ties.size(), 1u);
  EXPECT_EQ(saved.manifest.ties[0], (CheckpointTie{.parameter = "wte.weight", .users = {"lm_head"}}));

  DistributedRunOptions resumed = run_options("gpt-tiny", 4, 4, 3);
  resumed.load_checkpoint = dir("ckpt");
  expect_bitwise_equal(run_ok(resumed), from_step(uninterrupted, 2), "gpt-tiny", "resumed at 4 ranks");
  DistributedRunOptions zero3 = run_options("gpt-tiny", 2, 4, 3);
  zero3.load_checkpoint = dir("ckpt");
  DistributedRunOptions ddp = run_options("gpt-tiny", 2, 4, 0);
  ddp.load_checkpoint = dir("ckpt");
  expect_bitwise_equal(run_ok(zero3), run_ok(ddp), "gpt-tiny", "resharded to 2 ranks");
}

TEST_F(CheckpointResume, LoadingIntoAnEngineThatHasTrainedReplacesItsGatheredPersistentParameters) {
  // Persistent parameters stay gathered between steps; a load must not leave their old values in use.
  DistributedRunOptions saving = run_options("kitchen-sink", 2, 2, 3);
  saving.save_checkpoint = dir("ckpt");
  run_ok(saving);
  DistributedRunOptions resumed = run_options("kitchen-sink", 2, 4, 3);
  resumed.load_checkpoint = dir("ckpt");
  const DistributedRunResult fresh_engine = run_ok(resumed);

  const Checkpoint checkpoint = read_checkpoint(dir("ckpt"));
  std::vector<std::vector<OptimizerSlot>> final_states(2);
  const SimResult sim = SimWorld(SimOptions{.world = 2, .seed = 3}).run([&](SimRank& rank) {
    BuiltModel built = build_model("kitchen-sink", {.seed = 3, .data_file = ""});
    built.model->initialize(9);  // other initial values: different values gathered before the load
    Zero3Engine engine(*built.model, rank.comm(), rank.allocator(), rank.kernels(), resumed.config);
    Context ctx(rank.kernels(), &engine, rank.rank());
    for (int64_t step = 0; step < 2; ++step) engine.train_step(ctx, *built.data, step);
    engine.load_shard_state(ctx, shard_state(checkpoint.full, 2, rank.rank()));
    for (int64_t step = 2; step < 4; ++step) engine.train_step(ctx, *built.data, step);
    final_states[static_cast<size_t>(rank.rank())] = engine.gather_full_state(4);
  });
  ASSERT_TRUE(sim.all_ok()) << sim.summary();
  DistributedRunResult reloaded = fresh_engine;
  reloaded.final_state = final_states[0];
  expect_bitwise_equal(reloaded, fresh_engine, "kitchen-sink", "engine loaded after training vs fresh engine");
}

TEST_F(CheckpointResume, ASaveThatFailsOnOneRankLeavesThePreviousCheckpointAsItWas) {
  DistributedRunOptions first = run_options("mlp-tiny", 4, 1, 3);
  first.save_checkpoint = dir("ckpt");
  run_ok(first);
  const std::string metadata_before = read_file(dir("ckpt") + "/" + kCheckpointMetadataFile);

  // After step 1, rank 0 puts a directory where rank 2's shard file goes, so at the save after
  // step 2 rank 2 fails while the others have written theirs or wait at the barrier.
  DistributedRunOptions second = run_options("mlp-tiny", 4, 2, 3);
  second.save_checkpoint = dir("ckpt");
  second.on_step = [&](const StepStats& stats) {
    if (stats.step == 0) fs::create_directories(checkpoint_staging_dir(dir("ckpt")) + "/" + shard_file_name(2));
  };
  const DistributedRunResult result = run_distributed(second);
  ASSERT_FALSE(result.sim.all_ok());
  EXPECT_EQ(result.sim.root_cause_rank, 2);
  EXPECT_EQ(result.sim.exit_code(), kExitBadInput);
  EXPECT_NE(result.sim.root_cause().find(shard_file_name(2)), std::string::npos) << result.sim.root_cause();
  // The checkpoint of the first run is untouched and loads; no staging folder is left.
  EXPECT_EQ(read_file(dir("ckpt") + "/" + kCheckpointMetadataFile), metadata_before);
  EXPECT_EQ(read_checkpoint(dir("ckpt")).manifest.step, 1);
  EXPECT_FALSE(fs::exists(checkpoint_staging_dir(dir("ckpt"))));
}

TEST_F(CheckpointResume, AnUnusableCheckpointIsAnInputErrorBeforeAnyRankRuns) {
  DistributedRunOptions saving = run_options("mlp-tiny", 2, 2, 3);
  saving.save_checkpoint = dir("ckpt");
  run_ok(saving);
  DistributedRunOptions other_model = run_options("classifier-tiny", 2, 4, 3);
  other_model.load_checkpoint = dir("ckpt");
  EXPECT_THROW(run_distributed(other_model), InputError);
  DistributedRunOptions no_steps_left = run_options("mlp-tiny", 2, 2, 3);
  no_steps_left.load_checkpoint = dir("ckpt");
  EXPECT_THROW(run_distributed(no_steps_left), InputError);
}

// HSDP ranks hold their block's shards; the checkpoint still holds one world shard per rank (the
// block gathers the full state to cut them), so an HSDP run resumes as itself, bit for bit, and a
// flat run can resume from it (and hpZ, whose shards are the world's, the same).
TEST_F(CheckpointResume, HierarchicalShardingSavesWorldShardsAndResumesBitForBit) {
  for (const char* scheme : {"hsdp", "hpz"}) {
    DistributedRunOptions options = run_options("kitchen-sink", 4, 4, 3);
    if (std::string(scheme) == "hsdp") options.config.zero.shard_group_size = 2;
    else options.config.zero.hpz_group_size = 2;
    const DistributedRunResult uninterrupted = run_ok(options);
    DistributedRunOptions saving = options;
    saving.save_checkpoint = dir(scheme);
    saving.save_at_step = 2;
    expect_bitwise_equal(run_ok(saving), uninterrupted, "kitchen-sink", std::string(scheme) + " run that saved");
    DistributedRunOptions resumed = options;
    resumed.load_checkpoint = dir(scheme);
    expect_bitwise_equal(run_ok(resumed), from_step(uninterrupted, 2), "kitchen-sink",
                         std::string(scheme) + " resumed at step 2");
    // The files are world shards: a flat ZeRO-3 run at W=2 resumes from them like from any checkpoint.
    DistributedRunOptions flat = run_options("kitchen-sink", 2, 4, 3);
    flat.load_checkpoint = dir(scheme);
    EXPECT_EQ(run_ok(flat).steps.front().step, 2) << scheme;
  }
}

}  // namespace
}  // namespace zero3
