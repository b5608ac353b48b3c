// `zero3 fuzz faults`: the fault campaign over generated cases (props/fault_tolerance.h), its
// outcomes per fault site, and the first counterexample shrunk and saved; `--model NAME` runs the
// first table's campaign instead: one fixed model under many fault seeds (props/fault_campaign.h).
#pragma once
#include <cstdint>
#include <string>

namespace zero3 {

struct FaultCampaignCommandOptions {
  int64_t runs = 100;
  uint64_t seed = 1;
  bool seed_given = false;
  int max_ranks = 8;
  std::string out_dir = "fuzz-out";
  std::string model;  // "": generated cases; else the fixed-model campaign on this model
  std::string plan = "all?";  // the fixed-model campaign's plan (generated cases draw their own)
};

// Exit 2 (CorrectnessError) on a hang, silent corruption, unexplained error or a checkpoint the
// faults damaged, and when a lever path's site saw no fault in a campaign of 1,000 runs or more
// with --max-ranks 4 or more (where every lever and group can be drawn).
void run_fault_campaign_command(const FaultCampaignCommandOptions& options);

}  // namespace zero3
