// safetensors: round trips (f32, bf16, zero-sized, metadata) byte for byte, and malformed files
// refused with an InputError naming the file and what was wrong: 32 targeted corruptions of the
// header and buffer, and the file cut at 20 points.
#include "core/tensor/safetensors.h"

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/base/errors.h"

namespace zero3 {
namespace {

std::vector<NamedTensor> sample_tensors() {
  return {{"wte.weight", Tensor::from_values({2, 3}, {1, -2, 3.5f, 4, 5, 6})},
          {"h.0.ln.bias", Tensor::from_values({3}, {0.5f, -1.25f, 3.140625f}, DType::bf16)},
          {"empty", Tensor::zeros({0, 4})}};
}

TEST(Safetensors, ARoundTripKeepsNamesShapesDtypesBitsAndMetadata) {
  const std::string bytes = encode_safetensors(sample_tensors(), {{"format", "pt"}});
  EXPECT_EQ((bytes.size() - 30) % 8, 0u) << "the header padded to 8 bytes, then 24 + 6 bytes of data";
  const SafetensorsFile file = decode_safetensors(bytes, "test.safetensors");
  ASSERT_EQ(file.tensors.size(), 3u);
  EXPECT_EQ(file.metadata.at("format"), "pt");
  const Tensor* wte = file.find("wte.weight");
  ASSERT_NE(wte, nullptr);
  EXPECT_EQ(wte->shape(), (Shape{2, 3}));
  EXPECT_EQ(wte->to_floats(), (std::vector<float>{1, -2, 3.5f, 4, 5, 6}));
  const Tensor* bias = file.find("h.0.ln.bias");
  ASSERT_NE(bias, nullptr);
  EXPECT_EQ(bias->dtype(), DType::bf16);
  EXPECT_EQ(bias->bytes(), 6);
  EXPECT_EQ(bias->to_floats(), (std::vector<float>{0.5f, -1.25f, 3.140625f}));
  EXPECT_EQ(file.find("empty")->shape(), (Shape{0, 4}));
  EXPECT_EQ(file.find("missing"), nullptr);
  EXPECT_EQ(encode_safetensors(file.tensors, file.metadata), bytes) << "decode then encode is byte-identical";
}

// The header as written, and a file built from any header and buffer.
nlohmann::json header_of(const std::string& bytes) {
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<uint8_t>(bytes[static_cast<size_t>(i)]);
  return nlohmann::json::parse(bytes.substr(8, length));
}
std::string buffer_of(const std::string& bytes) {
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<uint8_t>(bytes[static_cast<size_t>(i)]);
  return bytes.substr(8 + length);
}
std::string file_from(const std::string& header_text, const std::string& buffer, uint64_t length_field) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((length_field >> (8 * i)) & 0xFF);
  return out + header_text + buffer;
}
std::string file_from(const nlohmann::json& header, const std::string& buffer) {
  const std::string text = header.dump();
  return file_from(text, buffer, text.size());
}

struct Corruption {
  const char* what;
  std::function<std::string(const nlohmann::json& header, const std::string& buffer)> make;
  const char* expected;  // in the error message
};

std::function<std::string(const nlohmann::json&, const std::string&)> edit(
    const std::function<void(nlohmann::json&)>& change) {
  return [change](const nlohmann::json& header, const std::string& buffer) {
    nlohmann::json edited = header;
    change(edited);
    return file_from(edited, buffer);
  };
}

std::vector<Corruption> corruptions() {
  using J = nlohmann::json;
  return {
      {"empty file", [](const J&, const std::string&) { return std::string(); }, "expected a safetensors file"},
      {"7 bytes", [](const J&, const std::string&) { return std::string(7, '\0'); }, "expected a safetensors file"},
      {"header length over 100 MiB", [](const J& h, const std::string& b) { return file_from(h.dump(), b, uint64_t{1} << 62); },
       "100 MiB limit"},
      {"header length past the end", [](const J& h, const std::string& b) { return file_from(h.dump(), b, h.dump().size() + b.size() + 1); },
       "bytes that follow it"},
      {"header not JSON", [](const J&, const std::string& b) { return file_from(std::string("{\"a\":"), b, 5); }, "not JSON"},
      {"header an array", [](const J&, const std::string& b) { return file_from(J::array({1, 2}), b); }, "expected"},
      {"header a number", [](const J&, const std::string& b) { return file_from(J(7), b); }, "expected"},
      {"entry a string", edit([](J& h) { h["wte.weight"] = "x"; }), "wte.weight"},
      {"no dtype", edit([](J& h) { h["wte.weight"].erase("dtype"); }), "dtype"},
      {"no shape", edit([](J& h) { h["wte.weight"].erase("shape"); }), "shape"},
      {"no data_offsets", edit([](J& h) { h["wte.weight"].erase("data_offsets"); }), "data_offsets"},
      {"unknown key", edit([](J& h) { h["wte.weight"]["strides"] = J::array({3, 1}); }), "strides"},
      {"dtype F16", edit([](J& h) { h["wte.weight"]["dtype"] = "F16"; }), "F32 or BF16"},
      {"dtype I64", edit([](J& h) { h["wte.weight"]["dtype"] = "I64"; }), "F32 or BF16"},
      {"dtype lowercase", edit([](J& h) { h["wte.weight"]["dtype"] = "f32"; }), "F32 or BF16"},
      {"dtype a number", edit([](J& h) { h["wte.weight"]["dtype"] = 4; }), "dtype"},
      {"shape an object", edit([](J& h) { h["wte.weight"]["shape"] = J::object(); }), "shape"},
      {"shape negative", edit([](J& h) { h["wte.weight"]["shape"] = J::array({-2, -3}); }), "shape"},
      {"shape fractional", edit([](J& h) { h["wte.weight"]["shape"] = J::array({2.5, 3}); }), "shape"},
      {"shape a string", edit([](J& h) { h["wte.weight"]["shape"] = J::array({"2", 3}); }), "shape"},
      {"shape too large", edit([](J& h) { h["wte.weight"]["shape"] = J::array({1 << 30, 1 << 30, 1 << 30}); }), "2^50"},
      {"one offset", edit([](J& h) { h["wte.weight"]["data_offsets"] = J::array({0}); }), "two byte offsets"},
      {"three offsets", edit([](J& h) { h["wte.weight"]["data_offsets"] = J::array({0, 24, 30}); }), "two byte offsets"},
      {"negative offset", edit([](J& h) { h["wte.weight"]["data_offsets"] = J::array({-24, 0}); }), "data_offsets"},
      {"offsets reversed", edit([](J& h) { h["wte.weight"]["data_offsets"] = J::array({24, 0}); }), "BEGIN <= END"},
      {"size does not match the shape", edit([](J& h) { h["wte.weight"]["shape"] = J::array({2, 2}); }), "bytes for F32 of 4"},
      {"bf16 read as f32", edit([](J& h) { h["h.0.ln.bias"]["dtype"] = "F32"; }), "bytes for F32 of 3"},
      {"overlap", edit([](J& h) { h["h.0.ln.bias"]["data_offsets"] = J::array({22, 28}); }), "overlaps"},
      {"hole", edit([](J& h) { h["h.0.ln.bias"]["data_offsets"] = J::array({26, 32}); }), "hole"},
      {"end past the buffer", [](const J& h, const std::string& b) { return file_from(h, b.substr(0, b.size() - 2)); },
       "END within"},
      {"bytes after the last tensor", [](const J& h, const std::string& b) { return file_from(h, b + "xx"); },
       "cover the whole buffer"},
      {"metadata value a number", edit([](J& h) { h["__metadata__"] = {{"format", 1}}; }), "__metadata__"},
  };
}

std::string error_of(const std::string& bytes) {
  try {
    decode_safetensors(bytes, "bad.safetensors");
  } catch (const InputError& error) {
    return error.what();
  }
  return "accepted";
}

TEST(Safetensors, EachTargetedCorruptionIsAnInputErrorSayingWhatWasWrong) {
  const std::string good = encode_safetensors(sample_tensors(), {{"format", "pt"}});
  const nlohmann::json header = header_of(good);
  const std::string buffer = buffer_of(good);
  ASSERT_EQ(error_of(file_from(header, buffer)), "accepted") << "the rebuilt original is valid";
  const std::vector<Corruption> all = corruptions();
  EXPECT_EQ(all.size(), 32u);
  for (const Corruption& corruption : all) {
    const std::string message = error_of(corruption.make(header, buffer));
    EXPECT_NE(message.find("bad.safetensors"), std::string::npos) << corruption.what << ": " << message;
    EXPECT_NE(message.find(corruption.expected), std::string::npos) << corruption.what << ": " << message;
  }
}

TEST(Safetensors, AFileCutAnywhereIsRefused) {
  const std::string good = encode_safetensors(sample_tensors(), {{"format", "pt"}});
  for (int cut = 0; cut < 20; ++cut) {
    const size_t length = good.size() * static_cast<size_t>(cut) / 20;
    const std::string message = error_of(good.substr(0, length));
    EXPECT_NE(message.find("bad.safetensors"), std::string::npos) << "cut at " << length << ": " << message;
  }
}

TEST(Safetensors, AMissingFileIsNamed) {
  try {
    read_safetensors("/nonexistent/w.safetensors");
    FAIL() << "read a missing file";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("/nonexistent/w.safetensors: cannot open"), std::string::npos);
  }
}

}  // namespace
}  // namespace zero3
