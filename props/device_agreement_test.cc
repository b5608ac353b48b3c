// The device-agreement property over generated cases: a run on the opaque device (the simulator's
// stand-in for a GPU, whose memory the host may not read) equals the same run on cpu bit for bit.
// The other properties compare runs made on one device, so a device's own rounding would pass them.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "props/generators.h"
#include "props/properties.h"

namespace zero3 {
namespace {

RC_GTEST_PROP(DeviceAgreement, TheOpaqueDeviceEqualsCpuBitForBitOnEverySpmdModelAndConfig, ()) {
  const FuzzCase fuzz_case = *gen_spmd_case({.max_ranks = 8});
  const Verdict verdict = check_device_agreement(fuzz_case);
  if (!verdict.ok) RC_FAIL(verdict.message);
}

}  // namespace
}  // namespace zero3
