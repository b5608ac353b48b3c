// poll_until_ready (host_wait.h): the host's polling wait for a GPU, with a watchdog between polls.
#include "backend_cuda/cuda/host_wait.h"

#include <thread>

namespace zero3 {

void poll_until_ready(const std::function<bool()>& is_ready, const std::function<void()>& watchdog,
                      const HostWaitSchedule& schedule) {
  for (int64_t polls = 0; !is_ready(); ++polls) {
    if (watchdog) watchdog();
    if (polls < schedule.yielding_polls) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(schedule.sleep_between_polls);
    }
  }
}

}  // namespace zero3
