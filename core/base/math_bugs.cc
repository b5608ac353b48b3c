// Names, descriptions and the scoped switch of the shared-math bugs (math_bugs.h).
#include "core/base/math_bugs.h"

#include <iterator>

#include "core/base/errors.h"
#include "core/base/text.h"

namespace zero3 {

namespace {
struct MathBugInfo {
  const char* name;
  const char* description;
};
constexpr MathBugInfo kMathBugs[] = {
    {"adamw-bias-correction-off-by-one", "AdamW's bias corrections use step + 1 instead of step"},
    {"adamw-decay-in-gradient", "weight decay added to the gradient (Adam + L2) instead of decoupled (AdamW)"},
    {"clip-coefficient-unclamped", "the clip coefficient max_norm / (norm + 1e-6) is applied even when it exceeds 1"},
    {"clip-norm-squared", "clipping decided and scaled by the squared norm (the square root left out)"},
    {"gelu-exact-instead-of-tanh", "GELU computed with erf where the tanh approximation is the model's"},
    {"layer-norm-eps-1e3", "LayerNorm's eps is 1e-3 instead of 1e-5"},
    {"rms-norm-eps-1e3", "RMSNorm's eps is 1e-3 instead of 1e-5"},
    {"causal-mask-leaks-next-token", "the causal mask lets each position see the next token too"},
    {"attention-backward-value-at-key", "attention's backward reads the values at the keys' offset in qkv"},
    {"embedding-backward-repeated-id-once", "the embedding's gradient counts a repeated id once, not once per use"},
};
static_assert(std::size(kMathBugs) == static_cast<size_t>(MathBug::count_));
}  // namespace

const char* math_bug_name(MathBug bug) { return kMathBugs[static_cast<size_t>(bug)].name; }
const char* math_bug_description(MathBug bug) { return kMathBugs[static_cast<size_t>(bug)].description; }

std::vector<MathBug> all_math_bugs() {
  std::vector<MathBug> bugs;
  for (size_t i = 0; i < static_cast<size_t>(MathBug::count_); ++i) bugs.push_back(static_cast<MathBug>(i));
  return bugs;
}

MathBug parse_math_bug(const std::string& name) {
  std::vector<std::string> known;
  for (MathBug bug : all_math_bugs()) {
    if (name == math_bug_name(bug)) return bug;
    known.push_back(math_bug_name(bug));
  }
  throw InputError("unknown math bug '" + name + "' (known: " + join_words(known) + ")");
}

ScopedMathBug::ScopedMathBug(MathBug bug)
    : previous_bits_(math_bugs_detail::active_bits.fetch_or(1u << static_cast<uint32_t>(bug))) {
  ZERO3_CHECK(math_bug_on(bug), std::string("math bug ") + math_bug_name(bug) + " did not switch on");
}

ScopedMathBug::~ScopedMathBug() { math_bugs_detail::active_bits.store(previous_bits_); }

}  // namespace zero3
