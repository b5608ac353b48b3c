// The property suite's case budget in CI: RapidCheck reads RC_PARAMS when the first property runs,
// so a default set here before main() applies unless the caller set RC_PARAMS. tools/test sets
// RC_PARAMS itself with one seed for the whole run and prints it; a binary run alone lets
// RapidCheck choose, printed at the start ("Using configuration: seed=..."); to replay, run with
// RC_PARAMS="seed=N" or the reproduce string RapidCheck prints on failure.
#include <cstdlib>

namespace {

const bool kDefaultBudgetSet = [] {
  ::setenv("RC_PARAMS", "max_success=300 max_size=100", /*overwrite=*/0);
  return true;
}();

}  // namespace
