// Assertion failure reporting.
#include "core/base/errors.h"

namespace zero3 {

void check_failed(const char* expression, const char* file, int line, const std::string& detail) {
  std::string message = std::string("internal check failed: ") + expression + " at " + file + ":" +
                        std::to_string(line);
  if (!detail.empty()) message += " (" + detail + ")";
  throw std::logic_error(message);
}

}  // namespace zero3
