// Peaks with their moment, and memory samples over simulated time.
#include "traces/replay/tracking_allocator.h"

#include "core/base/errors.h"

namespace zero3 {

void TrackingAllocator::acquire(MemoryCategory category, int64_t bytes, const std::string& what) {
  inner_.acquire(category, bytes, what);  // may throw OutOfMemoryError: then nothing changes here
  const size_t index = static_cast<size_t>(category);
  current_[index] += bytes;
  if (!is_host_memory(category)) current_total_ += bytes;  // the total is the device's
  if (current_[index] > peaks_[index].bytes) peaks_[index] = moment(current_[index]);
  if (current_total_ > peak_total_.bytes) peak_total_ = moment(current_total_);
  note_change();
}

void TrackingAllocator::release(MemoryCategory category, int64_t bytes) {
  const size_t index = static_cast<size_t>(category);
  ZERO3_CHECK(current_[index] >= bytes, std::string("release of ") + std::to_string(bytes) + " bytes of " +
                                            memory_category_name(category) + " holding " + std::to_string(current_[index]));
  inner_.release(category, bytes);
  current_[index] -= bytes;
  if (!is_host_memory(category)) current_total_ -= bytes;
  note_change();
}

void TrackingAllocator::set_place(int64_t step, std::string phase, std::string module) {
  step_ = step;
  phase_ = std::move(phase);
  module_ = std::move(module);
}

PeakMoment TrackingAllocator::moment(int64_t bytes) const {
  return {.bytes = bytes, .at_s = clock_.now_s(), .step = step_, .phase = phase_, .module = module_};
}

void TrackingAllocator::note_change() {
  const double now_s = clock_.now_s();
  // Changes at one instant collapse into one sample: the counter track shows what lasted.
  if (!samples_.empty() && samples_.back().time_s == now_s) {
    samples_.back().bytes = current_;
    return;
  }
  samples_.push_back({now_s, current_});
}

}  // namespace zero3
