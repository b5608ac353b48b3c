// Checkpoint files on their own: round trips at any world size (zero-sized, numel < world and tied
// parameters included), consolidation, and every way a checkpoint can be broken on disk, each of
// which must be an InputError naming the file, the JSON path and what was expected.
#include "core/training/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "core/base/hash.h"
#include "core/models/model_zoo.h"
#include "core/training/replicated_trainer.h"
#include "core/nn/tied_linear.h"

namespace zero3 {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test, removed afterwards.
class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ =
        fs::temp_directory_path() / ("zero3_checkpoint_" + std::string(info->name()) + "_" + std::to_string(getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string dir(const std::string& name) const { return (root_ / name).string(); }

  fs::path root_;
};

BuiltModel initialized(const std::string& name_or_spec) {
  BuiltModel built = name_or_spec.starts_with("{")
                         ? build_model_from_spec(nlohmann::json::parse(name_or_spec), "test-spec", {.seed = 1})
                         : build_model(name_or_spec, {.seed = 1, .data_file = ""});
  built.model->initialize(1);
  return built;
}

// Master weights from the model, moments with distinct small values so misplaced shards show.
std::vector<OptimizerSlot> full_state(const Model& model) {
  std::vector<OptimizerSlot> full;
  for (const Parameter* param : model.parameters()) {
    OptimizerSlot slot = make_optimizer_slot(cpu_kernels(), param->data);
    for (int64_t i = 0; i < param->numel(); ++i) {
      slot.exp_avg.data()[i] = static_cast<float>((param->id() * 131 + i * 7) % 17) - 8.0f;
      slot.exp_avg_sq.data()[i] = 0.25f * static_cast<float>((param->id() * 31 + i * 3) % 13);
    }
    full.push_back(slot);
  }
  return full;
}

CheckpointManifest manifest(const BuiltModel& built, int world) {
  return manifest_of(*built.model, world, 7, 1234, built.spec, TrainConfig{});
}

void expect_same_state(const std::vector<OptimizerSlot>& a, const std::vector<OptimizerSlot>& b,
                       const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t id = 0; id < a.size(); ++id) {
    for (const auto& [x, y] : {std::pair{&a[id].master, &b[id].master}, std::pair{&a[id].exp_avg, &b[id].exp_avg},
                               std::pair{&a[id].exp_avg_sq, &b[id].exp_avg_sq}}) {
      ASSERT_EQ(x->shape(), y->shape()) << what << " param " << id;
      if (x->numel() == 0) continue;  // a zero-sized tensor has no storage to compare (memcmp of null is UB)
      EXPECT_EQ(std::memcmp(x->data(), y->data(), static_cast<size_t>(x->numel()) * 4), 0) << what << " param " << id;
    }
  }
}

std::string load_error(const std::function<void()>& load) {
  try {
    load();
  } catch (const InputError& error) {
    return error.what();
  }
  ADD_FAILURE() << "expected an InputError";
  return "";
}

void expect_mentions(const std::string& text, const std::vector<std::string>& parts) {
  for (const std::string& part : parts)
    EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST_F(CheckpointTest, EveryValueRoundTripsBitwiseAtAnyWorldSize) {
  const BuiltModel built = initialized("mlp-tiny");
  const std::vector<OptimizerSlot> full = full_state(*built.model);
  for (int world : {1, 3, 4, 7}) {
    const std::string path = dir("w" + std::to_string(world));
    save_checkpoint(path, manifest(built, world), full);
    const Checkpoint loaded = load_checkpoint(path, *built.model);
    expect_same_state(loaded.full, full, "world " + std::to_string(world));
    EXPECT_EQ(loaded.manifest.world, world);
    EXPECT_EQ(loaded.manifest.step, 7);
    EXPECT_EQ(loaded.manifest.seed, 1234u);
    EXPECT_EQ(loaded.manifest.model_spec, built.spec);
    EXPECT_EQ(loaded.manifest.train_config, train_config_to_json(TrainConfig{}));
    EXPECT_TRUE(fs::exists(path + "/" + shard_file_name(world - 1)));
  }
}

TEST_F(CheckpointTest, ZeroSizedAndSmallerThanWorldParametersRoundTripWithZeroPadding) {
  // Linear(8, 0) has a [0, 8] weight and a [0] bias; the last layer's [4] bias is smaller than 5 ranks.
  const BuiltModel built = initialized("zero-sized");
  const std::vector<OptimizerSlot> full = full_state(*built.model);
  const std::string path = dir("zero");
  save_checkpoint(path, manifest(built, 5), full);
  expect_same_state(load_checkpoint(path, *built.model).full, full, "zero-sized at world 5");
  for (const Parameter* param : built.model->parameters()) {
    for (int rank = 0; rank < 5; ++rank) {
      const OptimizerSlot shard = shard_state(full, 5, rank)[static_cast<size_t>(param->id())];
      ASSERT_EQ(shard.master.numel(), (param->numel() + 4) / 5) << param->name();
      for (int64_t i = param->numel() - rank * shard.master.numel(); i < shard.master.numel(); ++i) {
        if (i < 0) continue;
        EXPECT_EQ(shard.exp_avg.data()[i], 0.0f) << param->name() << " rank " << rank << " padding " << i;
      }
    }
  }
}

TEST_F(CheckpointTest, AShardWithNonZeroPaddingIsRefusedNamingTheParameter) {
  const BuiltModel built = initialized("zero-sized");
  const CheckpointManifest saved = manifest(built, 5);
  const std::string path = dir("padding");
  fs::create_directories(path);
  for (int rank = 0; rank < 5; ++rank) {
    std::vector<OptimizerSlot> shards = shard_state(full_state(*built.model), 5, rank);
    if (rank == 4) shards.back().master.data()[0] = 3.0f;  // rank 4 owns none of the [4] bias: padding
    write_shard_file(path, saved, rank, shards);
  }
  write_metadata(path, saved);
  expect_mentions(
      load_error([&] { read_checkpoint(path); }),
      {"rank_00004.bin", "'" + built.model->parameters().back()->name() + "' master", "padding", "expected 0"});
}

TEST_F(CheckpointTest, ATiedWeightIsOneEntryAndTheTieSurvivesALoad) {
  const BuiltModel built = initialized("gpt-tiny");
  const std::string path = dir("tied");
  save_checkpoint(path, manifest(built, 4), full_state(*built.model));
  const Checkpoint loaded = load_checkpoint(path, *built.model);
  int wte_entries = 0;
  for (const CheckpointParam& param : loaded.manifest.params) {
    wte_entries += param.name == "wte.weight";
    EXPECT_EQ(param.name.find("lm_head"), std::string::npos) << "the LM head owns no weight: " << param.name;
  }
  EXPECT_EQ(wte_entries, 1);
  ASSERT_EQ(loaded.manifest.ties.size(), 1u);
  EXPECT_EQ(loaded.manifest.ties[0], (CheckpointTie{.parameter = "wte.weight", .users = {"lm_head"}}));

  // Loaded into a fresh model, the LM head computes with the loaded wte values.
  BuiltModel fresh = initialized("gpt-tiny");
  ReplicatedTrainer trainer(*fresh.model, TrainConfig{}, {});
  trainer.load_state(loaded.full);
  Parameter& wte = fresh.model->parameter("wte.weight");
  const Module* head = nullptr;
  for (const auto& child : fresh.model->root().children()) head = child->name() == "lm_head" ? child.get() : head;
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(&dynamic_cast<const TiedLinear&>(*head).tied_weight(), &wte);
  EXPECT_EQ(std::memcmp(wte.data.data(), loaded.full[static_cast<size_t>(wte.id())].master.data(),
                        static_cast<size_t>(wte.numel()) * 4),
            0);
}

TEST_F(CheckpointTest, ConsolidationWritesAWorldOneCheckpointWithTheSameFullState) {
  const BuiltModel built = initialized("gpt-tiny");
  const std::vector<OptimizerSlot> full = full_state(*built.model);
  save_checkpoint(dir("sharded"), manifest(built, 4), full);
  consolidate_checkpoint(dir("sharded"), dir("full"));
  const Checkpoint consolidated = load_checkpoint(dir("full"), *built.model);
  EXPECT_EQ(consolidated.manifest.world, 1);
  EXPECT_EQ(consolidated.manifest.step, 7);
  EXPECT_FALSE(fs::exists(dir("full") + "/" + shard_file_name(1)));
  expect_same_state(consolidated.full, full, "consolidated");
}

class BrokenCheckpointTest : public CheckpointTest {
 protected:
  void SetUp() override {
    CheckpointTest::SetUp();
    save_checkpoint(dir("ckpt"), manifest(built_, 4), full_state(*built_.model));
  }
  std::string shard(int rank) const { return dir("ckpt") + "/" + shard_file_name(rank); }
  std::string error_of_load() {
    return load_error([&] { load_checkpoint(dir("ckpt"), *built_.model); });
  }
  nlohmann::json metadata() const { return nlohmann::json::parse(read_file(dir("ckpt") + "/metadata.json")); }

  BuiltModel built_ = initialized("mlp-tiny");
};

TEST_F(BrokenCheckpointTest, OneFlippedByteIsAChecksumErrorNamingTheFileAndBothChecksums) {
  std::string bytes = read_file(shard(2));
  bytes[bytes.size() / 2] ^= 0x01;
  write_file(shard(2), bytes);
  Fnv1a actual;
  actual.add_bytes(bytes.data(), bytes.size());
  expect_mentions(error_of_load(), {"rank_00002.bin", "checksum", hex64(actual.value()),
                                    metadata()["shard_files"][2]["fnv1a"].get<std::string>(), "/shard_files/2/fnv1a"});
}

TEST_F(BrokenCheckpointTest, ATruncatedShardFileIsRefusedWithItsExpectedSize) {
  const std::string bytes = read_file(shard(1));
  write_file(shard(1), bytes.substr(0, bytes.size() - 4));
  expect_mentions(error_of_load(), {"rank_00001.bin", std::to_string(bytes.size() - 4) + " bytes",
                                    "expected " + std::to_string(bytes.size()), "truncated"});
}

TEST_F(BrokenCheckpointTest, AMissingShardFileIsNamed) {
  fs::remove(shard(3));
  expect_mentions(error_of_load(), {"rank_00003.bin", "cannot be read", "listed in metadata.json"});
}

TEST_F(BrokenCheckpointTest, ADirectoryWithoutMetadataIsNotACheckpoint) {
  fs::remove(dir("ckpt") + "/metadata.json");
  expect_mentions(error_of_load(), {dir("ckpt"), "metadata.json", "missing", "not a complete checkpoint"});
  expect_mentions(load_error([&] { read_checkpoint(dir("nowhere")); }),
                  {dir("nowhere"), "no such checkpoint directory"});
}

TEST_F(BrokenCheckpointTest, ANewerFormatVersionIsRefusedAsNewer) {
  nlohmann::json json = metadata();
  json["zero3_checkpoint"] = 99;
  write_file(dir("ckpt") + "/metadata.json", json.dump());
  expect_mentions(error_of_load(), {"metadata.json", "/zero3_checkpoint", "version 2", "newer", "99"});
}

TEST_F(BrokenCheckpointTest, AVersionOneCheckpointIsRefusedForItsUncheckedMetadata) {
  nlohmann::json json = metadata();
  json["zero3_checkpoint"] = 1;
  json.erase("metadata_fnv1a");
  write_file(dir("ckpt") + "/metadata.json", json.dump());
  expect_mentions(error_of_load(), {"metadata.json", "/zero3_checkpoint", "version 2", "no checksum"});
}

TEST_F(BrokenCheckpointTest, AShardHeaderWithAnotherWorldSizeIsRefused) {
  std::string bytes = read_file(shard(1));
  bytes[16] = 3;  // the header's u32 world, little-endian
  write_file(shard(1), bytes);
  expect_mentions(error_of_load(), {"rank_00001.bin", "'world' is 3", "expected 4"});
}

TEST_F(BrokenCheckpointTest, MalformedMetadataNamesTheJsonPath) {
  const nlohmann::json original = metadata();
  nlohmann::json json = original;
  json["parameters"][1]["shard_numel"] = 5;
  write_file(dir("ckpt") + "/metadata.json", json.dump());
  expect_mentions(error_of_load(), {"metadata.json", "/parameters/1/shard_numel", "ceil(numel / world)"});
  json = original;
  json["parameters"][0]["shape"] = {int64_t{1} << 30, int64_t{1} << 30};
  write_file(dir("ckpt") + "/metadata.json", json.dump());
  expect_mentions(error_of_load(), {"/parameters/0/shape", "at most 2^40 elements"});
  json = original;
  json["shard_files"][0]["file"] = "../elsewhere.bin";
  write_file(dir("ckpt") + "/metadata.json", json.dump());
  expect_mentions(error_of_load(), {"/shard_files/0/file", "rank_00000.bin"});
}

TEST_F(BrokenCheckpointTest, AnEditedStepInMetadataIsAChecksumErrorNamingTheFileAndTheExpectedChecksum) {
  const std::string path = dir("ckpt") + "/metadata.json";
  std::string text = read_file(path);
  const size_t step = text.find("\"step\": 7");
  ASSERT_NE(step, std::string::npos) << text;
  text.replace(step, 9, "\"step\": 8");  // well-formed, so only a checksum of the metadata can tell
  write_file(path, text);
  nlohmann::json edited = nlohmann::json::parse(text);
  const std::string stored = edited.value("metadata_fnv1a", std::string("(no checksum in the file)"));
  edited.erase("metadata_fnv1a");
  Fnv1a canonical;
  canonical.add_string(edited.dump());
  const std::string error = error_of_load();
  expect_mentions(error, {path, "/metadata_fnv1a", "expected " + hex64(canonical.value()), stored});
  EXPECT_EQ(load_error([&] { read_checkpoint_manifest(dir("ckpt")); }), error);
}

TEST_F(BrokenCheckpointTest, ReindentedMetadataStillLoads) {
  // The checksum covers the JSON values, not their layout, so formatting the file is no damage.
  write_file(dir("ckpt") + "/metadata.json", metadata().dump(4));
  EXPECT_EQ(load_checkpoint(dir("ckpt"), *built_.model).manifest.step, 7);
}

constexpr const char* kTwoLinears = R"({"zero3_model_spec": 1, "kind": "sequential", "input_width": 8, "loss": "mse", "layers": [
    {"type": "linear", "out": 4}, {"type": "gelu"}, {"type": "linear", "out": 4}]})";

TEST_F(CheckpointTest, LoadingIntoAModelWithOtherNamesOrShapesNamesTheParameterAndJsonPath) {
  const BuiltModel saved = initialized(kTwoLinears);
  save_checkpoint(dir("ckpt"), manifest(saved, 2), full_state(*saved.model));
  const BuiltModel renamed = initialized(R"({"zero3_model_spec": 1, "kind": "sequential", "input_width": 8, "loss": "mse", "layers": [
      {"type": "linear", "out": 4}, {"type": "gelu"}, {"type": "gelu"}, {"type": "linear", "out": 4}]})");
  expect_mentions(load_error([&] { load_checkpoint(dir("ckpt"), *renamed.model); }),
                  {"metadata.json", "/parameters/2/name", "'layers.3.weight'", "'layers.2.weight'", "another model"});
  const BuiltModel reshaped = initialized(R"({"zero3_model_spec": 1, "kind": "sequential", "input_width": 8, "loss": "mse", "layers": [
      {"type": "linear", "out": 4}, {"type": "gelu"}, {"type": "linear", "out": 5}]})");
  expect_mentions(load_error([&] { load_checkpoint(dir("ckpt"), *reshaped.model); }),
                  {"/parameters/2/shape", "[5,4]", "'layers.2.weight'", "[4,4]"});
  const BuiltModel longer = initialized(R"({"zero3_model_spec": 1, "kind": "sequential", "input_width": 8, "loss": "mse", "layers": [
      {"type": "linear", "out": 4}, {"type": "gelu"}, {"type": "linear", "out": 4}, {"type": "linear", "out": 2}]})");
  expect_mentions(load_error([&] { load_checkpoint(dir("ckpt"), *longer.model); }),
                  {"/parameters", "6 parameters", "'layers.3.weight' is missing from the checkpoint"});
}

TEST_F(CheckpointTest, LoadingIntoAModelWhoseTiesDifferIsRefused) {
  const auto spec = [](const char* tie_to) {
    return std::string(R"({"zero3_model_spec": 1, "kind": "sequential", "input_width": 8, "loss": "mse", "layers": [
        {"type": "linear", "out": 8}, {"type": "linear", "out": 8}, {"type": "tied_linear", "tie_to": ")") +
           tie_to + R"("}, {"type": "linear", "out": 4}]})";
  };
  const BuiltModel saved = initialized(spec("layers.0"));
  save_checkpoint(dir("ckpt"), manifest(saved, 2), full_state(*saved.model));
  const BuiltModel retied = initialized(spec("layers.1"));
  expect_mentions(load_error([&] { load_checkpoint(dir("ckpt"), *retied.model); }),
                  {"/ties", "layers.1.weight used by layers.2", "layers.0.weight used by layers.2"});
}

TEST_F(CheckpointTest, ASaveIntoAnUnwritablePlaceWritesNothing) {
  const BuiltModel built = initialized("mlp-tiny");
  write_file(dir("a_file"), "not a directory");
  EXPECT_THROW(save_checkpoint(dir("a_file") + "/ckpt", manifest(built, 2), full_state(*built.model)), InputError);
  EXPECT_EQ(read_file(dir("a_file")), "not a directory");
  EXPECT_EQ(std::distance(fs::directory_iterator(root_), fs::directory_iterator()), 1);
}

std::vector<std::string> listing(const std::string& path) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(path)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST_F(CheckpointTest, ASaveOverAnExistingCheckpointReplacesItWholeAndLeavesNoStagingBehind) {
  const BuiltModel built = initialized("mlp-tiny");
  const std::string existing = dir("existing");
  save_checkpoint(existing, manifest(built, 4), full_state(*built.model));
  save_checkpoint(existing, manifest(built, 2), full_state(*built.model));
  EXPECT_EQ(read_checkpoint(existing).manifest.world, 2);
  // The 4-rank save's rank_00002.bin and rank_00003.bin went with it.
  EXPECT_EQ(listing(existing), (std::vector<std::string>{"metadata.json", shard_file_name(0), shard_file_name(1)}));
  EXPECT_EQ(listing(root_.string()), std::vector<std::string>{"existing"});
}

TEST_F(CheckpointTest, ASaveIntoAFolderHoldingOtherFilesIsRefusedAndTouchesNothing) {
  const BuiltModel built = initialized("mlp-tiny");
  const std::string folder = dir("results");
  write_file(folder + "/notes.txt", "mine");
  expect_mentions(load_error([&] { save_checkpoint(folder, manifest(built, 2), full_state(*built.model)); }),
                  {folder, "'notes.txt'", "not a checkpoint's file"});
  EXPECT_EQ(listing(folder), std::vector<std::string>{"notes.txt"});
  EXPECT_EQ(listing(root_.string()), std::vector<std::string>{"results"});
}

TEST_F(CheckpointTest, AKilledSavesStagingFolderIsClearedByTheNextSave) {
  const BuiltModel built = initialized("mlp-tiny");
  const std::string path = dir("ckpt");
  write_file(checkpoint_staging_dir(path) + "/" + shard_file_name(0) + ".tmp.4242", "half written");
  save_checkpoint(path, manifest(built, 2), full_state(*built.model));
  EXPECT_EQ(read_checkpoint(path).manifest.world, 2);
  EXPECT_EQ(listing(root_.string()), std::vector<std::string>{"ckpt"});
}

// A save stopped where a kill between publish's two renames stops it: the old checkpoint set aside
// as DIR.previous, the new one complete in the staging folder, and no DIR.
void save_killed_between_the_renames(const std::string& path, const CheckpointManifest& saved,
                                     const std::vector<OptimizerSlot>& full) {
  prepare_checkpoint_save(path);
  for (int rank = 0; rank < saved.world; ++rank) {
    write_shard_file(checkpoint_staging_dir(path), saved, rank, shard_state(full, saved.world, rank));
  }
  write_metadata(checkpoint_staging_dir(path), saved);
  set_aside_published_checkpoint(path);
}

class KilledPublishTest : public CheckpointTest {
 protected:
  void SetUp() override {
    CheckpointTest::SetUp();
    path_ = dir("ckpt");
    save_checkpoint(path_, manifest(built_, 4), full_);  // step 7
    CheckpointManifest next = manifest(built_, 4);
    next.step = 8;
    save_killed_between_the_renames(path_, next, full_);
    ASSERT_FALSE(fs::exists(path_));
    ASSERT_TRUE(fs::exists(checkpoint_previous_dir(path_)));
  }
  // The load's result and what it said on stderr.
  std::pair<int64_t, std::string> step_and_warning_of_load() {
    ::testing::internal::CaptureStderr();
    const int64_t step = load_checkpoint(path_, *built_.model).manifest.step;
    return {step, ::testing::internal::GetCapturedStderr()};
  }

  BuiltModel built_ = initialized("mlp-tiny");
  std::vector<OptimizerSlot> full_ = full_state(*built_.model);
  std::string path_;
};

TEST_F(KilledPublishTest, ALoadFallsBackToTheSetAsideCheckpointWithAWarning) {
  const auto [step, warning] = step_and_warning_of_load();
  EXPECT_EQ(step, 7);
  expect_mentions(warning, {"warning", path_, "missing", checkpoint_previous_dir(path_)});
  EXPECT_EQ(read_checkpoint_manifest(path_).step, 7);
}

TEST_F(KilledPublishTest, ACorruptSetAsideCheckpointIsStillRefused) {
  const std::string shard = checkpoint_previous_dir(path_) + "/" + shard_file_name(2);
  std::string bytes = read_file(shard);
  bytes[bytes.size() / 2] ^= 0x01;
  write_file(shard, bytes);
  ::testing::internal::CaptureStderr();
  expect_mentions(load_error([&] { load_checkpoint(path_, *built_.model); }), {shard, "checksum"});
  ::testing::internal::GetCapturedStderr();
}

TEST_F(KilledPublishTest, TheNextSaveKeepsTheSetAsideCheckpointUntilItsOwnIsInPlace) {
  CheckpointManifest next = manifest(built_, 2);
  next.step = 9;
  // Killed again at the same point: DIR.previous is still the only complete checkpoint, so it stays.
  save_killed_between_the_renames(path_, next, full_);
  EXPECT_EQ(step_and_warning_of_load().first, 7);
  save_checkpoint(path_, next, full_);
  EXPECT_EQ(step_and_warning_of_load(), (std::pair<int64_t, std::string>{9, ""}));
  EXPECT_EQ(listing(root_.string()), std::vector<std::string>{"ckpt"});
}

TEST(CheckpointSteps, AResumedRunNeedsStepsLeftAndASaveStepItTakes) {
  EXPECT_NO_THROW(check_checkpoint_steps("ckpt", 3, 5, 0));
  EXPECT_NO_THROW(check_checkpoint_steps("ckpt", 3, 5, 4));
  EXPECT_NO_THROW(check_checkpoint_steps("", 0, 5, 5));
  expect_mentions(load_error([] { check_checkpoint_steps("ckpt", 5, 5, 0); }), {"ckpt", "at step 5", "greater"});
  expect_mentions(load_error([] { check_checkpoint_steps("ckpt", 3, 5, 3); }), {"save step 3", "4 to 5"});
  expect_mentions(load_error([] { check_checkpoint_steps("", 0, 5, 6); }), {"save step 6", "1 to 5"});
}

}  // namespace
}  // namespace zero3
