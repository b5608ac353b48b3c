// Case files: a generated case survives the round trip through its JSON case file unchanged, and
// `zero3 fuzz --replay` re-runs a saved counterexample and reports that it reproduces.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <filesystem>

#include "core/base/atomic_file.h"
#include "core/base/errors.h"
#include "props/fuzzer.h"
#include "props/generators.h"

namespace zero3 {
namespace {

RC_GTEST_PROP(CaseFile, EveryGeneratedCaseRoundTripsThroughItsCaseFile, ()) {
  const FuzzCase original = *gen_any_case({.max_ranks = 16});
  const std::string file = case_file_json(original, "equivalence", "why").dump();
  const FuzzCase read = case_from_file_json(nlohmann::json::parse(file), "case.json");
  RC_ASSERT(case_file_json(read, "equivalence", "why").dump() == file);
  // The levers come back as drawn, not as the parser's defaults.
  RC_ASSERT(read.config.zero.stage == original.config.zero.stage);
  RC_ASSERT(read.config.checkpoint_modules == original.config.checkpoint_modules);
  RC_ASSERT(read.config.zero.offload_optimizer == original.config.zero.offload_optimizer);
  RC_ASSERT(read.config.zero.offload_param == original.config.zero.offload_param);
  RC_ASSERT(read.config.zero.shard_group_size == original.config.zero.shard_group_size);
  RC_ASSERT(read.config.zero.hpz_group_size == original.config.zero.hpz_group_size);
  RC_TAG(original.config.zero.shard_group_size > 0 ? "HSDP" : original.config.zero.hpz_group_size > 1 ? "hpZ" : "flat");
}

RC_GTEST_PROP(CaseFile, EveryCheckpointCaseRoundTripsThroughItsCaseFile, ()) {
  const FuzzCase original = *gen_checkpoint_case({.max_ranks = 16});
  const std::string file = case_file_json(original, "checkpoint-round-trip", "why").dump();
  const FuzzCase read = case_from_file_json(nlohmann::json::parse(file), "case.json");
  RC_ASSERT(read.checkpoint == original.checkpoint);
  RC_ASSERT(case_file_json(read, "checkpoint-round-trip", "why").dump() == file);
}

TEST(CaseFile, ACheckpointStepOutsideTheRunIsAnInputErrorNamingThePath) {
  FuzzCase fuzz_case{.model_spec = {{"zero3_model_spec", 1}}, .steps = 3};
  fuzz_case.checkpoint = {.save_at_step = 1, .resume_world = 2};
  nlohmann::json file = case_file_json(fuzz_case, "checkpoint-round-trip", "");
  file["run"]["checkpoint"]["save_at_step"] = 3;  // the last step: nothing left to resume
  try {
    case_from_file_json(file, "bad.json");
    FAIL() << "expected an InputError";
  } catch (const InputError& error) {
    EXPECT_EQ(std::string(error.what()).rfind("bad.json: at /run/checkpoint/save_at_step: expected an integer", 0), 0u)
        << error.what();
  }
}

TEST(CaseFile, AGroupSizeThatDoesNotDivideTheWorldIsAnInputErrorNamingThePath) {
  FuzzCase fuzz_case{.model_spec = {{"zero3_model_spec", 1}}, .world = 4};
  fuzz_case.config.zero.shard_group_size = 2;
  nlohmann::json file = case_file_json(fuzz_case, "equivalence", "");
  EXPECT_EQ(case_from_file_json(file, "good.json").config.zero.shard_group_size, 2);
  file["run"]["world"] = 3;
  try {
    case_from_file_json(file, "bad.json");
    FAIL() << "expected an InputError";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("bad.json /run/config: /zero_optimization/mics_shard_size = 2 does not "
                                             "divide the world size 3"),
              std::string::npos)
        << error.what();
  }
}

TEST(CaseFile, AMalformedCaseFileIsAnInputErrorNamingThePath) {
  nlohmann::json file = case_file_json(FuzzCase{.model_spec = {{"zero3_model_spec", 1}}}, "equivalence", "");
  file["run"]["world"] = 0;
  try {
    case_from_file_json(file, "bad.json");
    FAIL() << "expected an InputError";
  } catch (const InputError& error) {
    EXPECT_EQ(std::string(error.what()).rfind("bad.json: at /run/world: expected an integer", 0), 0u) << error.what();
  }
}

TEST(CaseFile, ReplayReproducesASavedCounterexample) {
  FuzzOptions options{.cases = 50, .seed = 3, .max_ranks = 4, .inject = "gas-scale-twice"};
  options.properties = {"equivalence"};
  const FuzzReport report = run_fuzz(options);
  const PropertyResult* failure = report.first_failure();
  ASSERT_NE(failure, nullptr);
  const std::string path = (std::filesystem::temp_directory_path() / "zero3-replay-test.json").string();
  write_file_atomically(path, case_file_json(failure->counterexample, failure->property, failure->message).dump(2));
  const ReplayResult replay = replay_case_file(path);
  std::filesystem::remove(path);
  EXPECT_TRUE(replay.reproduced);
  EXPECT_NE(failure->message.find(replay.message), std::string::npos);
}

// `zero3 fuzz --device opaque`: the counterexample's case file names the device, and its replay
// runs there again (a cpu replay would not prove the opaque run failed).
TEST(CaseFile, ACounterexampleFoundOnTheOpaqueDeviceKeepsItsDeviceThroughTheCaseFile) {
  FuzzOptions options{.cases = 50, .seed = 3, .max_ranks = 4, .inject = "gas-scale-twice"};
  options.properties = {"equivalence"};
  options.device = Device::opaque;
  const FuzzReport report = run_fuzz(options);
  const PropertyResult* failure = report.first_failure();
  ASSERT_NE(failure, nullptr);
  EXPECT_EQ(failure->counterexample.device, Device::opaque);
  const nlohmann::json file = case_file_json(failure->counterexample, failure->property, failure->message);
  EXPECT_EQ(file["run"]["device"], "opaque:0");
  const FuzzCase read = case_from_file_json(file, "case.json");
  EXPECT_EQ(read.device, Device::opaque);
  EXPECT_EQ(run_options(read).device, Device::opaque);
}

TEST(CaseFile, ACaseFileOnADeviceTheSimulatorCannotRunIsAnInputErrorNamingThePath) {
  nlohmann::json file = case_file_json(FuzzCase{.model_spec = {{"zero3_model_spec", 1}}}, "equivalence", "");
  EXPECT_FALSE(file["run"].contains("device")) << "cpu cases are written as before the field existed";
  file["run"]["device"] = "cuda:0";
  try {
    case_from_file_json(file, "bad.json");
    FAIL() << "expected an InputError";
  } catch (const InputError& error) {
    EXPECT_EQ(std::string(error.what()).rfind("bad.json: at /run/device: expected \"cpu\" or \"opaque\"", 0), 0u)
        << error.what();
  }
}

}  // namespace
}  // namespace zero3
