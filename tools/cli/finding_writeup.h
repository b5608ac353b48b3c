// A finding of `zero3 fuzz --target` as a maintainer reads it: the shrunk model in one sentence,
// and ISSUE.md (title, versions, the verified script, observed against expected, the minimal case,
// the upstream status and the mechanism as far as it is triaged), ready to paste into the
// framework's tracker.
//
//   std::string sentence = model_sentence(finding.shrunk);   // "linear(2), sum_residual[...]; W=2, ..."
//   write_file_atomically(dir + "/ISSUE.md", issue_markdown(writeup));
#pragma once
#include <string>

#include "props/target/target_fuzzer.h"
#include "props/target/target_upstream.h"

namespace zero3 {

// "input width 3: scale [3, 1], sum_residual[raw_scale(reads layers.0.scale)]; W=2, 1 step of
// 4 micro-steps of 1 row; raw reads through a cached reference" — the layers as MODEL_SPEC.md
// names them, with what changes the framework's path (frozen, leaves, HSDP, clipping).
std::string model_sentence(const TargetCase& target_case);

struct FindingWriteup {
  std::string target;         // deepspeed, fsdp2, torch
  std::string versions;       // "torch 2.15.0+cu132, deepspeed 0.19.8, python 3.11.2"
  const TargetFinding* finding = nullptr;
  const UpstreamRow* upstream = nullptr;  // nullptr: no row matches
  const UpstreamTable* table = nullptr;
  std::string script_path;    // "" when no verified script
  std::string script_text;
  std::string script_output;  // the verified run's output (its tail)
  std::string no_script_why;  // when script_path is ""
};

std::string issue_markdown(const FindingWriteup& writeup);

}  // namespace zero3
