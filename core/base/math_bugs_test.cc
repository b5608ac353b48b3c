// The math-bug switches: names that parse back, an error naming the known ones, and scopes that
// restore what was on before them. What each switch does to the math is tested beside that math
// (optimizer_test.cc, activation_test.cc, layer_norm_test.cc).
#include "core/base/math_bugs.h"

#include <gtest/gtest.h>

#include <set>

#include "core/base/errors.h"

namespace zero3 {
namespace {

TEST(MathBugs, EveryNameIsDistinctDescribedAndParsesBack) {
  std::set<std::string> names;
  for (MathBug bug : all_math_bugs()) {
    EXPECT_TRUE(names.insert(math_bug_name(bug)).second) << math_bug_name(bug);
    EXPECT_GT(std::string(math_bug_description(bug)).size(), 20u) << math_bug_name(bug);
    EXPECT_EQ(parse_math_bug(math_bug_name(bug)), bug);
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(MathBug::count_));
}

TEST(MathBugs, UnknownNameIsAnInputErrorListingTheKnownOnes) {
  try {
    parse_math_bug("gelu-exact");
    FAIL() << "parsed an unknown name";
  } catch (const InputError& error) {
    const std::string message = error.what();
    for (MathBug bug : all_math_bugs()) EXPECT_NE(message.find(math_bug_name(bug)), std::string::npos) << message;
  }
}

TEST(MathBugs, AllOffByDefaultAndScopesNestAndRestore) {
  for (MathBug bug : all_math_bugs()) EXPECT_FALSE(math_bug_on(bug)) << math_bug_name(bug);
  {
    const ScopedMathBug outer(MathBug::clip_norm_squared);
    EXPECT_TRUE(math_bug_on(MathBug::clip_norm_squared));
    {
      const ScopedMathBug inner(MathBug::layer_norm_eps_1e3);
      EXPECT_TRUE(math_bug_on(MathBug::layer_norm_eps_1e3));
      EXPECT_TRUE(math_bug_on(MathBug::clip_norm_squared));
      EXPECT_FALSE(math_bug_on(MathBug::gelu_exact_instead_of_tanh));
    }
    EXPECT_FALSE(math_bug_on(MathBug::layer_norm_eps_1e3));
    EXPECT_TRUE(math_bug_on(MathBug::clip_norm_squared));
  }
  for (MathBug bug : all_math_bugs()) EXPECT_FALSE(math_bug_on(bug)) << math_bug_name(bug);
}

}  // namespace
}  // namespace zero3
