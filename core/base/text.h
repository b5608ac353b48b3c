// Small text helpers for messages: lists of names in errors ("known: a, b, c").
#pragma once
#include <string>
#include <vector>

namespace zero3 {

// "a, b, c" from a list of words; "" for none.
std::string join_words(const std::vector<std::string>& words);

}  // namespace zero3
