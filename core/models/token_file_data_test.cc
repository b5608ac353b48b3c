// llm.c token files: the header checked, windows as llm.c's DataLoader takes them (consecutive,
// rank r at r·B·T within its global window, wrapping when the next window does not fit), rank
// batches that concatenate to the world-1 batch, and each malformed file refused by name.
#include "core/models/token_file_data.h"

#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <vector>

#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "core/models/model_zoo.h"

namespace zero3 {
namespace {

std::string token_file(const std::string& tag, const std::vector<uint16_t>& tokens, int32_t version = 1,
                       int64_t count_field = -1) {
  const auto path = std::filesystem::temp_directory_path() / ("zero3_tokens_" + tag + "_" + std::to_string(getpid()));
  std::vector<int32_t> header(256, 0);
  header[0] = TokenFileData::kMagic;
  header[1] = version;
  header[2] = static_cast<int32_t>(count_field < 0 ? static_cast<int64_t>(tokens.size()) : count_field);
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header.data()), 1024);
  out.write(reinterpret_cast<const char*>(tokens.data()), static_cast<std::streamsize>(tokens.size() * 2));
  return path.string();
}

std::vector<uint16_t> counting(int n, int vocab) {
  std::vector<uint16_t> tokens;
  for (int i = 0; i < n; ++i) tokens.push_back(static_cast<uint16_t>(i % vocab));
  return tokens;
}

std::string error_of(const std::string& path, int64_t vocab = 64) {
  try {
    TokenFileData(path, vocab, 4, 1);
  } catch (const InputError& error) {
    return error.what();
  }
  return "accepted";
}

TEST(TokenFileData, WindowsAreLlmcsConsecutiveSlicesWrappingWhenTheNextDoesNotFit) {
  // 100 tokens 0..99, W = 2, B = 3, T = 4: a global window is 24 + 1 tokens, (100 - 1) / 24 = 4 fit.
  const std::string path = token_file("windows", counting(100, 100));
  const TokenFileData data(path, 100, 4, /*micro_steps=*/2);
  EXPECT_TRUE(TokenFileData::is_token_file(path));
  for (int64_t step = 0; step < 3; ++step) {
    for (int64_t micro = 0; micro < 2; ++micro) {
      const int64_t window = (step * 2 + micro) % 4;
      for (int rank = 0; rank < 2; ++rank) {
        const Batch batch = data.batch(step, micro, rank, 2, 3);
        const int64_t start = window * 24 + rank * 12;
        for (int64_t i = 0; i < 12; ++i) {
          EXPECT_EQ(batch.inputs.data()[i], static_cast<float>(start + i)) << step << " " << micro << " " << rank;
          EXPECT_EQ(batch.targets.data()[i], static_cast<float>(start + i + 1));
        }
      }
      // The two rank batches are the world-1 batch of 6 rows.
      const Batch whole = data.batch(step, micro, 0, 1, 6);
      std::vector<float> joined = data.batch(step, micro, 0, 2, 3).inputs.to_floats();
      const std::vector<float> second = data.batch(step, micro, 1, 2, 3).inputs.to_floats();
      joined.insert(joined.end(), second.begin(), second.end());
      EXPECT_EQ(whole.inputs.to_floats(), joined);
    }
  }
  std::filesystem::remove(path);
}

TEST(TokenFileData, AGptTakesATokenFileByItsMagicAndChecksTokensAgainstItsVocab) {
  const std::string path = token_file("zoo", counting(200, 64));
  const BuiltModel built = build_model("gpt-tiny", {.seed = 1, .data_file = path});
  EXPECT_NE(built.data->description().find("llm.c tokens"), std::string::npos) << built.data->description();
  const std::string too_large = token_file("vocab", {1, 2, 64, 3});
  EXPECT_NE(error_of(too_large).find("token 2 is 64: expected ids below the model's vocab of 64"), std::string::npos)
      << error_of(too_large);
  std::filesystem::remove(path);
  std::filesystem::remove(too_large);
}

TEST(TokenFileData, MalformedFilesAreInputErrorsNamingTheFileAndTheProblem) {
  const std::string version = token_file("version", counting(10, 8), 2);
  EXPECT_NE(error_of(version).find("header[1] (version) is 2: expected 1"), std::string::npos) << error_of(version);
  const std::string count = token_file("count", counting(10, 8), 1, 11);
  EXPECT_NE(error_of(count).find("header[2] says 11 tokens but the file holds 10"), std::string::npos)
      << error_of(count);
  const std::string one = token_file("one", counting(1, 8));
  EXPECT_NE(error_of(one).find("expected at least 2 tokens"), std::string::npos) << error_of(one);
  for (const std::string& path : {version, count, one}) {
    EXPECT_NE(error_of(path).find(path), std::string::npos);
    std::filesystem::remove(path);
  }
  const std::string few = token_file("few", counting(20, 8));
  const TokenFileData data(few, 8, 4, 1);
  try {
    data.batch(0, 0, 0, 2, 3);
    FAIL() << "a global batch larger than the file was served";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("2 x 3 x 4 + 1 = 25 tokens needs more"), std::string::npos) << error.what();
  }
  std::filesystem::remove(few);
}

}  // namespace
}  // namespace zero3
