// Small text helpers for messages.
#include "core/base/text.h"

namespace zero3 {

std::string join_words(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& word : words) out += (out.empty() ? "" : ", ") + word;
  return out;
}

}  // namespace zero3
