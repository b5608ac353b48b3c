// The loop in which the host waits for a GPU, without CUDA: poll a readiness query, and between
// polls run a watchdog that may end the wait by throwing. CudaContext::wait_for_compute_stream
// feeds it an event query and the NcclCommunicator's liveness check; a blocking CUDA call in its
// place would sleep inside the driver, where no watchdog runs, and a hung collective that the
// compute stream waits for would then hang the process instead of ending it with exit 3.
// Kept free of CUDA so that a plain CPU test checks the loop's logic.
//
//   poll_until_ready([&] { return cudaEventQuery(event) == cudaSuccess; },
//                    [&] { communicator_liveness_check(); });   // throws to end the wait
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>

namespace zero3 {

// How the host polls. The first polls only yield the core, so that a wait at the end of a step
// costs little more than the work itself; after them each poll sleeps, leaving the core to the
// other ranks' host threads.
struct HostWaitSchedule {
  int64_t yielding_polls = 64;
  std::chrono::microseconds sleep_between_polls{100};
};

// Returns once `is_ready()` is true. While it is false, `watchdog()` runs after every poll (when
// it is set; an empty function is no watchdog); whatever either throws ends the wait and
// propagates, so a watchdog that throws ends a wait whose work will never finish.
void poll_until_ready(const std::function<bool()>& is_ready, const std::function<void()>& watchdog,
                      const HostWaitSchedule& schedule = {});

}  // namespace zero3
