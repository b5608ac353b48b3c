// Rank ranges for reports.
#include "sim/rank_ranges.h"

namespace zero3 {

std::string format_ranks(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t begin = 0; begin < ranks.size();) {
    size_t end = begin + 1;
    while (end < ranks.size() && ranks[end] == ranks[end - 1] + 1) ++end;
    if (begin > 0) text += ",";
    text += std::to_string(ranks[begin]);
    if (end - begin == 2) text += "," + std::to_string(ranks[begin + 1]);
    if (end - begin > 2) text += "-" + std::to_string(ranks[end - 1]);
    begin = end;
  }
  return text;
}

}  // namespace zero3
