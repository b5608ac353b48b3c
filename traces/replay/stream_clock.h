// The simulated clock of one rank during replay: a compute stream that advances by flops / peak
// and waits for collectives, and one communication stream on which collectives run one after
// another. StreamClock keeps both for the symmetric (one representative rank) replay; SimClock
// reads a SimWorld rank's clock, whose matcher keeps the communication stream itself.
#pragma once
#include <algorithm>

#include "sim/hardware_profile.h"
#include "sim/sim_world.h"

namespace zero3 {

class ReplayClock {
 public:
  virtual ~ReplayClock() = default;
  virtual double now_s() const = 0;
  virtual void advance_compute(double flops) = 0;
  // Host work the compute stream waits for (ZeRO-Offload's copies and host AdamW).
  virtual void advance_s(double seconds) = 0;
};

class StreamClock : public ReplayClock {
 public:
  explicit StreamClock(const HardwareProfile& hardware) : hardware_(hardware) {}

  double now_s() const override { return now_s_; }
  void advance_compute(double flops) override { now_s_ += compute_time_s(hardware_, flops); }
  void advance_s(double seconds) override { now_s_ += seconds; }
  void wait_until(double time_s) { now_s_ = std::max(now_s_, time_s); }
  // A collective of `duration_s` issued now starts once the communication stream is free.
  double start_collective(double duration_s) {
    const double start_s = std::max(now_s_, stream_free_s_);
    stream_free_s_ = start_s + duration_s;
    return start_s;
  }
  // When the communication stream finishes the last collective issued.
  double stream_free_s() const { return stream_free_s_; }
  const HardwareProfile& hardware() const { return hardware_; }

 private:
  HardwareProfile hardware_;
  double now_s_ = 0.0;
  double stream_free_s_ = 0.0;
};

class SimClock : public ReplayClock {
 public:
  SimClock(SimRank& sim, const HardwareProfile& hardware) : sim_(sim), peak_flops_(hardware.peak_flops) {}
  double now_s() const override { return sim_.now_s(); }
  void advance_compute(double flops) override { sim_.advance_compute(flops); }
  // The rank's clock moves only by compute: host time as the flops it would take as long as.
  void advance_s(double seconds) override { sim_.advance_compute(seconds * peak_flops_); }

 private:
  SimRank& sim_;
  double peak_flops_;
};

}  // namespace zero3
