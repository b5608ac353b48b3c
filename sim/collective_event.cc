// A completed collective as JSON and as hash input.
#include "sim/collective_event.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>

#include "core/base/errors.h"

namespace zero3 {

namespace {

// JSON dumps of events start with '{'; this byte marks a binary collective event instead.
constexpr uint8_t kCollectiveEventTag = 0x01;

bool has_root(const CollectiveSignature& signature) { return signature.op == CollectiveOp::broadcast; }

bool has_reduce(const CollectiveSignature& signature) {
  return signature.op == CollectiveOp::reduce_scatter || signature.op == CollectiveOp::all_reduce;
}

// FNV-1a's step over whole 64-bit words instead of bytes: eight times fewer multiplies, which
// matters for the event recorded per rank per collective. Each step (xor, then multiply by an odd
// number) is a bijection of the running value, so a change in any one word changes the digest.
class WordDigest {
 public:
  void add(uint64_t word) { value_ = (value_ ^ word) * 0x100000001B3ull; }
  void add_signed(int64_t word) { add(static_cast<uint64_t>(word)); }
  void add_double(double value) { add(std::bit_cast<uint64_t>(value)); }
  // The length first, so that ("ab", "c") and ("a", "bc") differ; then the bytes 8 at a time, the
  // last word zero-padded.
  void add_text(const std::string& text) {
    add(text.size());
    for (size_t offset = 0; offset < text.size(); offset += sizeof(uint64_t)) {
      uint64_t word = 0;
      std::memcpy(&word, text.data() + offset, std::min(sizeof(uint64_t), text.size() - offset));
      add(word);
    }
  }
  // Folds the high bits down, which the multiplications alone never move to the low ones.
  uint64_t value() const { return value_ ^ (value_ >> 32); }

 private:
  uint64_t value_ = 0xCBF29CE484222325ull;
};

}  // namespace

nlohmann::json collective_event_json(const CollectiveEvent& event) {
  ZERO3_CHECK(event.site != nullptr, "collective event #" + std::to_string(event.sequence) + " without a call site");
  const CollectiveSignature& signature = event.signature;
  nlohmann::json json = {{"type", "collective"},
                         {"seq", event.sequence},
                         {"op", collective_op_name(signature.op)},
                         {"dtype", dtype_name(signature.dtype)},
                         {"count", signature.count},
                         {"bytes", event.bytes},
                         {"meta", event.meta},
                         {"module", event.site->module},
                         {"params", event.site->params},
                         {"step", event.site->step},
                         {"phase", event.site->phase},
                         {"issue_s", event.issue_s},
                         {"start_s", event.start_s},
                         {"end_s", event.end_s}};
  if (has_root(signature)) json["root"] = signature.root;
  if (has_reduce(signature)) json["reduce"] = reduce_op_name(signature.reduce);
  if (event.group != nullptr) {
    json["group"] = event.group;
    json["level"] = event.level;
  }
  return json;
}

void add_collective_event(Fnv1a& hash, const CollectiveEvent& event) {
  ZERO3_CHECK(event.site != nullptr, "collective event #" + std::to_string(event.sequence) + " without a call site");
  const CollectiveSignature& signature = event.signature;
  WordDigest digest;
  digest.add_signed(event.sequence);
  digest.add(static_cast<uint64_t>(signature.op) | static_cast<uint64_t>(signature.dtype) << 8 |
             uint64_t{event.meta} << 16);
  digest.add_signed(signature.count);
  digest.add_signed(event.bytes);
  digest.add_text(event.site->module);
  digest.add(event.site->params.size());
  for (const std::string& param : event.site->params) digest.add_text(param);
  digest.add_signed(event.site->step);
  digest.add_text(event.site->phase);
  digest.add_double(event.issue_s);
  digest.add_double(event.start_s);
  digest.add_double(event.end_s);
  if (has_root(signature)) digest.add_signed(signature.root);
  if (has_reduce(signature)) digest.add(static_cast<uint64_t>(signature.reduce));
  if (event.group != nullptr) {
    digest.add_text(event.group);
    digest.add_text(event.level);
  }
  const uint8_t tag = kCollectiveEventTag;
  hash.add_bytes(&tag, 1);
  hash.add_u64(digest.value());
}

}  // namespace zero3
