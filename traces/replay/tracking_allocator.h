// TrackingAllocator: an Allocator decorator for replay that remembers, per memory category, the
// peak and the moment it happened (simulated time, step, phase, module), and samples the bytes
// held over time for the timeline's memory counter track. Every call is forwarded to the inner
// allocator (the simulator's may refuse it: fault injection).
//
//   TrackingAllocator memory(sim.allocator(), clock);
//   memory.set_place(step, "forward", "h.0.attn");
//   Zero3Engine engine(model, comm, memory, cpu_kernels(), config);
#pragma once
#include <array>
#include <string>
#include <vector>

#include "core/tensor/allocator.h"
#include "traces/replay/stream_clock.h"

namespace zero3 {

struct PeakMoment {
  int64_t bytes = 0;
  double at_s = 0.0;
  int64_t step = 0;
  std::string phase{};
  std::string module{};
};

struct MemorySample {
  double time_s = 0.0;
  std::array<int64_t, kMemoryCategoryCount> bytes{};
};

class TrackingAllocator : public Allocator {
 public:
  TrackingAllocator(Allocator& inner, const ReplayClock& clock) : inner_(inner), clock_(clock) {}

  void acquire(MemoryCategory category, int64_t bytes, const std::string& what) override;
  void release(MemoryCategory category, int64_t bytes) override;
  // Where the replay is, for the peak moments recorded from now on.
  void set_place(int64_t step, std::string phase, std::string module);

  const PeakMoment& peak(MemoryCategory category) const { return peaks_[static_cast<size_t>(category)]; }
  const PeakMoment& peak_total() const { return peak_total_; }
  const std::vector<MemorySample>& samples() const { return samples_; }

 private:
  void note_change();
  PeakMoment moment(int64_t bytes) const;

  Allocator& inner_;
  const ReplayClock& clock_;
  std::array<int64_t, kMemoryCategoryCount> current_{};
  std::array<PeakMoment, kMemoryCategoryCount> peaks_{};
  int64_t current_total_ = 0;
  PeakMoment peak_total_;
  int64_t step_ = 0;
  std::string phase_ = "setup";
  std::string module_;
  std::vector<MemorySample> samples_;
};

}  // namespace zero3
