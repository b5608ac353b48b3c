// Lists of ranks in reports, compressed into ranges so that 1024-rank reports stay readable.
#pragma once
#include <string>
#include <vector>

namespace zero3 {

// Ascending ranks as "rank 3", "ranks 0,1", "ranks 0-5,9".
std::string format_ranks(const std::vector<int>& ranks);

}  // namespace zero3
