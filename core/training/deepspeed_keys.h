// What to tell a user about a ds_config.json key zero3 does not read. Users bring configs written
// for DeepSpeed, so an unread key is one of three things, and each needs a different answer: a slip
// of the pen (name the key they meant), a real DeepSpeed key zero3 has no use for or has not built
// (say so, and what zero3 does instead), or something else entirely (say it is ignored).
//
//   unused_key_advice("/zero_optimization", "stage3_param_persitence_threshold", keys_zero3_reads)
//   // "/zero_optimization/stage3_param_persitence_threshold is not a DeepSpeed key: did you mean
//   //  stage3_param_persistence_threshold?"
#pragma once
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace zero3 {

// Why zero3 leaves a DeepSpeed key unread; each reads differently in the advice.
enum class KeySupport {
  not_built_yet,         // a feature zero3 has not built yet (hpZ, nvme offload, partitioned activations)
  not_used,              // zero3 has no need for it or does the job another way
  removed_by_deepspeed,  // DeepSpeed 0.19.8 itself refuses it: a leftover from an older config
};

struct DeepSpeedKey {
  std::string_view section;  // JSON path of the object holding the key: "" (top level), "/zero_optimization", ...
  std::string_view key;
  KeySupport support;
  std::string_view instead;  // what zero3 does instead, short
};

// DeepSpeed 0.19.8's config keys that zero3 does not read, by section. The keys zero3 reads are not
// here: the parser's own lists are the one place that says which those are.
std::span<const DeepSpeedKey> unread_deepspeed_keys();

// Advice for a config key zero3 does not read. `section` is the JSON path of the object holding it
// ("" for the top level, "/zero_optimization", "/bf16", "/optimizer/params", ...), `key` the key,
// `keys_zero3_reads` the keys zero3 reads in that object. Returns one line without a newline:
//   "<path> is not a DeepSpeed key: did you mean <key>?"
//   "<path> is a DeepSpeed key zero3 does not implement yet: <what zero3 does instead>"
//   "<path> is a DeepSpeed key zero3 does not use: <what zero3 does instead>"
//   "<path> was removed from DeepSpeed, and 0.19.8 refuses it; zero3 does not use it either: <...>"
//   "<path> is neither a DeepSpeed key nor one zero3 reads; ignored"
// (and, for a section whose DeepSpeed keys are not listed here, "<path> is not a key zero3 reads ...").
std::string unused_key_advice(const std::string& section, const std::string& key,
                              const std::vector<std::string>& keys_zero3_reads);

// Whether DeepSpeed 0.19.8 validates the section strictly: its pydantic config models forbid
// unknown fields in /zero_optimization, its /offload_optimizer and /offload_param, /bf16 and /fp16,
// so a key there that DeepSpeed does not know is an error there, not a warning; the top level and
// the optimizer's params are plain dicts it reads what it needs from.
bool deepspeed_refuses_unknown_keys(const std::string& section);
// How zero3 treats a DeepSpeed key it does not read (the table above); nullptr when the key is not
// one of them (a key zero3 reads, or not a DeepSpeed key at all).
const DeepSpeedKey* unread_deepspeed_key(const std::string& section, const std::string& key);

// The closest of `candidates` to `word` by edit distance (insertions, deletions, substitutions and
// adjacent transpositions, letter case ignored), or "" when none is close enough to be a slip: at
// most one edit per five letters of `word`, and at least one. Ties go to the earlier candidate.
std::string closest_key(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace zero3
