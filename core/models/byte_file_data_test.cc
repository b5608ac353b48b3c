// Byte-level file data: windows of the file, exact unigram entropy, and clear errors.
#include "core/models/byte_file_data.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "core/models/model_zoo.h"

namespace zero3 {
namespace {

std::string temp_file(const std::string& tag, const std::string& contents) {
  const auto path = std::filesystem::temp_directory_path() / ("zero3_" + tag + "_" + std::to_string(getpid()));
  std::ofstream(path, std::ios::binary) << contents;
  return path.string();
}

TEST(ByteFileData, WindowsAreConsecutiveBytesOfTheFileWrappingAround) {
  const std::string text = "abcdefghij";
  const std::string path = temp_file("window", text);
  const ByteFileData data(path, 3, 4);
  const Batch batch = data.batch(0, 0, 0, 1, 8);
  for (int64_t b = 0; b < 8; ++b) {
    const auto first = static_cast<char>(batch.inputs.data()[b * 4]);
    const size_t start = text.find(first);
    ASSERT_NE(start, std::string::npos);
    for (int64_t t = 0; t < 4; ++t) {
      EXPECT_EQ(batch.inputs.data()[b * 4 + t], static_cast<float>(text[(start + t) % text.size()]));
      EXPECT_EQ(batch.targets.data()[b * 4 + t], static_cast<float>(text[(start + t + 1) % text.size()]));
    }
  }
  std::filesystem::remove(path);
}

TEST(ByteFileData, UnigramEntropyIsThatOfTheFilesByteFrequencies) {
  const std::string path = temp_file("entropy", "aab");
  const ByteFileData data(path, 1, 2);
  const double expected = -(2.0 / 3.0) * std::log(2.0 / 3.0) - (1.0 / 3.0) * std::log(1.0 / 3.0);
  EXPECT_NEAR(*data.unigram_entropy_nats(), expected, 1e-12);
  std::filesystem::remove(path);
}

TEST(ByteFileData, MissingOrEmptyFilesAreInputErrorsNamingThem) {
  const std::string empty = temp_file("empty", "");
  for (const std::string& path : {empty, std::string("/nonexistent/zero3/data.txt")}) {
    try {
      ByteFileData(path, 1, 4);
      ADD_FAILURE() << "expected InputError for " << path;
    } catch (const InputError& error) {
      EXPECT_NE(std::string(error.what()).find(path), std::string::npos) << error.what();
    }
  }
  std::filesystem::remove(empty);
}

TEST(ByteFileData, GptWithAVocabBelow256IsRejectedNamingTheFileAndThePath) {
  const std::string path = temp_file("vocab", "hello");
  try {
    build_model("gpt-tiny", {.seed = 1, .data_file = path});
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& error) {
    const std::string message = error.what();
    for (const std::string& part : {std::string("builtin:gpt-tiny"), std::string("/vocab"), path}) {
      EXPECT_NE(message.find(part), std::string::npos) << message;
    }
  }
  const nlohmann::json spec = {{"zero3_model_spec", 1}, {"kind", "gpt"}, {"vocab", 256}, {"context", 8},
                               {"layers", 1}, {"heads", 1}, {"width", 8}};
  BuiltModel built = build_model_from_spec(spec, "bytes.json", {.seed = 1, .data_file = path});
  EXPECT_EQ(built.data->batch(0, 0, 0, 1, 2).inputs.shape(), (Shape{2, 8}));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace zero3
