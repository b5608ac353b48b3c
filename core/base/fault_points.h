// Fault points: the places outside a collective where a real run can die or run out of memory —
// an offload copy, a host allocation, a checkpoint file being written. The engine and the rank
// program call them; the simulator (SimRank) and the MPI process (tools/runs) decide whether a
// fault fires there. Null means nothing ever fires, which is every run without a fault plan.
//
//   if (faults && faults->armed()) faults->reach(kSiteOffloadDown, "gradient shard of 'h.0.w' to the host");
//
// A site's class is a short fixed phrase; fault plans can aim at one (`crash@checkpoint`) and the
// fault campaign counts outcomes per class, so a class no fault reaches shows as such.
#pragma once
#include <cstdint>
#include <string>

namespace zero3 {

inline constexpr const char* kSiteOffloadDown = "offload copy down";
inline constexpr const char* kSiteOffloadUp = "offload copy up";
inline constexpr const char* kSiteOffloadHostBuffer = "offload host buffer";
inline constexpr const char* kSiteCheckpointWrite = "checkpoint write";

class FaultPoints {
 public:
  virtual ~FaultPoints() = default;
  // Whether any fault can fire at all: callers skip building a site's text when not (offload's
  // copies are on every step's path).
  virtual bool armed() const = 0;
  // The run passes a point where the process could die: a fault may crash or stall it here.
  virtual void reach(const char* site_class, const std::string& where) = 0;
  // The run allocates `bytes` of host memory here: a fault may refuse it (OutOfMemoryError).
  virtual void host_allocation(const char* site_class, int64_t bytes, const std::string& what) = 0;
};

}  // namespace zero3
