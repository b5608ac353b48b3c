// llm.c token files (token_file_data.h).
#include "core/models/token_file_data.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include "core/base/errors.h"

namespace zero3 {

namespace {

int32_t read_le32(const std::string& bytes, size_t at) {
  uint32_t value = 0;
  for (int i = 3; i >= 0; --i) value = (value << 8) | static_cast<uint8_t>(bytes[at + static_cast<size_t>(i)]);
  return static_cast<int32_t>(value);
}

std::string read_all(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw InputError("data file '" + path + "': cannot open it (" + std::strerror(errno) + ")");
  std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (file.bad()) throw InputError("data file '" + path + "': read failed (" + std::strerror(errno) + ")");
  return bytes;
}

}  // namespace

bool TokenFileData::is_token_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::string head(4, '\0');
  return file.read(head.data(), 4) && read_le32(head, 0) == kMagic;
}

TokenFileData::TokenFileData(const std::string& path, int64_t vocab, int64_t context, int64_t micro_steps)
    : path_(path), context_(context), micro_steps_(micro_steps) {
  ZERO3_CHECK(context > 0 && micro_steps > 0, "token data needs context and micro steps > 0");
  const std::string bytes = read_all(path);
  const std::string where = "data file '" + path + "' (llm.c tokens): ";
  constexpr size_t kHeaderBytes = kHeaderInts * 4;
  if (bytes.size() < kHeaderBytes) {
    throw InputError(where + std::to_string(bytes.size()) + " bytes: expected a header of 256 int32 (1024 bytes)");
  }
  if (read_le32(bytes, 4) != kVersion) {
    throw InputError(where + "header[1] (version) is " + std::to_string(read_le32(bytes, 4)) + ": expected 1");
  }
  const int64_t count = read_le32(bytes, 8);
  const int64_t stored = static_cast<int64_t>(bytes.size() - kHeaderBytes) / 2;
  if (count < 2 || static_cast<int64_t>(bytes.size() - kHeaderBytes) != 2 * count) {
    throw InputError(where + "header[2] says " + std::to_string(count) + " tokens but the file holds " +
                     std::to_string(stored) + (bytes.size() % 2 ? " and a half" : "") +
                     ": expected at least 2 tokens, as many as the header says");
  }
  tokens_.resize(static_cast<size_t>(count));
  std::memcpy(tokens_.data(), bytes.data() + kHeaderBytes, static_cast<size_t>(count) * 2);  // little-endian host
  std::map<uint16_t, int64_t> counts;
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (tokens_[i] >= vocab) {
      throw InputError(where + "token " + std::to_string(i) + " is " + std::to_string(tokens_[i]) +
                       ": expected ids below the model's vocab of " + std::to_string(vocab));
    }
    ++counts[tokens_[i]];
  }
  for (const auto& [token, n] : counts) {
    const double p = static_cast<double>(n) / static_cast<double>(count);
    unigram_entropy_ -= p * std::log(p);
  }
}

Batch TokenFileData::batch(int64_t step, int64_t micro, int rank, int world, int64_t batch_size) const {
  ZERO3_CHECK(rank >= 0 && rank < world && batch_size >= 0, "batch for rank " + std::to_string(rank));
  const int64_t rank_tokens = batch_size * context_;
  const int64_t global_tokens = rank_tokens * world;
  const int64_t count = static_cast<int64_t>(tokens_.size());
  if (global_tokens + 1 > count) {
    throw InputError("data file '" + path_ + "' (llm.c tokens): " + std::to_string(count) + " tokens, but a global batch of " +
                     std::to_string(world) + " x " + std::to_string(batch_size) + " x " + std::to_string(context_) +
                     " + 1 = " + std::to_string(global_tokens + 1) + " tokens needs more");
  }
  const int64_t windows = (count - 1) / global_tokens;
  const int64_t window = (step * micro_steps_ + micro) % windows;
  const int64_t start = window * global_tokens + rank * rank_tokens;
  Tensor inputs = Tensor::zeros({batch_size, context_});
  Tensor targets = Tensor::zeros({batch_size, context_});
  for (int64_t i = 0; i < rank_tokens; ++i) {
    inputs.data()[i] = tokens_[static_cast<size_t>(start + i)];
    targets.data()[i] = tokens_[static_cast<size_t>(start + i + 1)];
  }
  return {inputs, targets};
}

std::string TokenFileData::description() const {
  std::ostringstream out;
  out << "llm.c tokens of '" << path_ << "' (" << tokens_.size() << " tokens), context " << context_
      << ", consecutive windows as llm.c's DataLoader; unigram entropy " << unigram_entropy_ << " nats";
  return out.str();
}

std::optional<double> TokenFileData::unigram_entropy_nats() const { return unigram_entropy_; }

}  // namespace zero3
