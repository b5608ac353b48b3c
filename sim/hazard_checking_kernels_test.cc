// Async hazards: an in-flight output is poisoned and reading it through the kernels throws, naming
// the collective; after wait() it is fine; a missing wait is found the same way for the same seed;
// a blocking call that never completes leaves its output poisoned too.
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "sim/hazard_checking_kernels.h"
#include "sim/sim_world.h"
#include "sim/test_support.h"

namespace zero3 {
namespace {

// Records the kernels it was asked to run; computes nothing.
class RecordingKernels : public Kernels {
 public:
  const char* name() const override { return "recording"; }
  Device device() const override { return Device::cpu; }
  void binary(BinaryOp, const Tensor&, const Tensor&, Tensor&) override { calls.push_back("binary"); }
  void sum_to_shape(const Tensor&, Tensor&) override { calls.push_back("sum_to_shape"); }
  void unary(UnaryOp, const Tensor&, Tensor&) override { calls.push_back("unary"); }
  void unary_backward(UnaryOp, const Tensor&, const Tensor&, Tensor&) override { calls.push_back("unary_backward"); }
  void scale(const Tensor&, float, Tensor&) override { calls.push_back("scale"); }
  void add_into(Tensor&, const Tensor&) override { calls.push_back("add_into"); }
  void fill(Tensor&, float) override { calls.push_back("fill"); }
  void copy(const Tensor&, Tensor&) override { calls.push_back("copy"); }
  void copy_segments(const Tensor&, Tensor&, const std::vector<CopySegment>&) override {
    calls.push_back("copy_segments");
  }
  void fill_range(Tensor&, int64_t, int64_t, float) override { calls.push_back("fill_range"); }
  void fill_from_scalar(Tensor&, const Tensor&, float, float) override { calls.push_back("fill_from_scalar"); }
  void scale_by_scalar(const Tensor&, const Tensor&, float, float, Tensor&) override {
    calls.push_back("scale_by_scalar");
  }
  void row_argmax(const Tensor&, Tensor&) override { calls.push_back("row_argmax"); }
  void matmul(const Tensor&, bool, const Tensor&, bool, Tensor&, int64_t, int64_t, int64_t, int64_t, bool,
              float) override {
    calls.push_back("matmul");
  }
  void layer_norm_forward(const Tensor&, const Tensor&, const Tensor&, float, Tensor&, Tensor&, Tensor&) override {
    calls.push_back("layer_norm_forward");
  }
  void layer_norm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&, Tensor&,
                           Tensor&) override {
    calls.push_back("layer_norm_backward");
  }
  void rms_norm_forward(const Tensor&, const Tensor&, float, Tensor&, Tensor&) override {
    calls.push_back("rms_norm_forward");
  }
  void rms_norm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&, Tensor&) override {
    calls.push_back("rms_norm_backward");
  }
  void embedding_forward(const Tensor&, const Tensor&, Tensor&) override { calls.push_back("embedding_forward"); }
  void embedding_backward_into(const Tensor&, const Tensor&, Tensor&) override {
    calls.push_back("embedding_backward");
  }
  void cross_entropy_forward(const Tensor&, const Tensor&, Tensor&, Tensor&) override { calls.push_back("ce_forward"); }
  void cross_entropy_backward(const Tensor&, const Tensor&, const Tensor&, Tensor&) override {
    calls.push_back("ce_backward");
  }
  void causal_softmax_forward(const Tensor&, Tensor&) override { calls.push_back("softmax_forward"); }
  void causal_softmax_backward(const Tensor&, const Tensor&, Tensor&) override { calls.push_back("softmax_backward"); }
  void permute(const Tensor&, const std::vector<int64_t>&, Tensor&) override { calls.push_back("permute"); }
  void slice(const Tensor&, int64_t, int64_t, Tensor&) override { calls.push_back("slice"); }
  void slice_backward_into(const Tensor&, int64_t, int64_t, Tensor&) override { calls.push_back("slice_backward"); }
  void select_rows(const Tensor&, const std::vector<int64_t>&, Tensor&) override { calls.push_back("select_rows"); }
  void select_rows_backward_into(const Tensor&, const std::vector<int64_t>&, Tensor&) override {
    calls.push_back("select_rows_backward");
  }
  void sum_all(const Tensor&, Tensor&) override { calls.push_back("sum_all"); }
  void average(const Tensor&, Tensor&) override { calls.push_back("average"); }
  void sum_of_squares_into(const std::vector<TensorRange>&, Tensor&, int64_t, double) override {
    calls.push_back("sum_of_squares_into");
  }
  void adamw(Tensor&, const Tensor&, Tensor&, Tensor&, const AdamWCoefficients&) override { calls.push_back("adamw"); }

  std::vector<std::string> calls;

 protected:
  void download(const Tensor&, Tensor&) override { calls.push_back("download"); }
  void upload(const Tensor&, Tensor&) override { calls.push_back("upload"); }
};

void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "missing '" << part << "' in:\n" << text;
}

TEST(HazardCheckingKernels, ReadingAnInFlightGatherOutputThrowsNamingTheCollectiveAndIsFineAfterWait) {
  RecordingKernels inner;
  const SimResult result = SimWorld(SimOptions{.world = 2, .seed = 3, .kernels = &inner}).run([](SimRank& sim) {
    Tensor shard = test_tensor(9, sim.rank(), 4);
    Tensor full = Tensor::zeros({8});
    Tensor out = Tensor::zeros({8});
    auto work = sim.comm().all_gather_async(shard, full, call_site("h.4.attn", 1, "", {"h.4.attn.qkv"}));
    try {
      sim.kernels().scale(full, 2.0f, out);
      ADD_FAILURE() << "reading an in-flight buffer was not detected";
    } catch (const CorrectnessError& error) {
      expect_contains(error.what(), "rank " + std::to_string(sim.rank()) + ": kernel scale reads f32[8] cpu");
      expect_contains(error.what(), "the output of all_gather #0 (module 'h.4.attn' step 1 params [h.4.attn.qkv])");
      expect_contains(error.what(), "still in flight");
    }
    // The shard is only read by the gather: reading it meanwhile is fine, overwriting it is not.
    sim.kernels().scale(shard, 2.0f, out);
    EXPECT_THROW(sim.kernels().fill(shard, 0.0f), CorrectnessError);
    work->wait();
    sim.kernels().scale(full, 2.0f, out);
    sim.kernels().fill(shard, 0.0f);
  });
  ASSERT_TRUE(result.all_ok()) << result.summary();
  // Only the checked calls reach the inner kernels: both ranks read the shard while the gather is
  // in flight; then each rank, once its wait returns, runs to its end.
  EXPECT_EQ(inner.calls, (std::vector<std::string>{"scale", "scale", "scale", "fill", "scale", "fill"}));
}

TEST(HazardCheckingKernels, AnInFlightOutputIsPoisonedUntilItCompletes) {
  const SimResult result = SimWorld(SimOptions{.world = 3, .seed = 4}).run([](SimRank& sim) {
    Tensor grads = test_tensor(5, sim.rank(), 9);
    Tensor shard = Tensor::full({3}, 7.0f);
    auto work = sim.comm().reduce_scatter_async(grads, shard, ReduceOp::sum, call_site("h.0"));
    for (float value : shard.values()) EXPECT_TRUE(std::isnan(value));
    work->wait();
    for (float value : shard.values()) EXPECT_FALSE(std::isnan(value));
  });
  EXPECT_TRUE(result.all_ok()) << result.summary();
}

// A blocking call's rank runs nothing before the call completes, so its output is poisoned only
// if the world fails first: the rank then sees the NaNs an asynchronous call would show.
TEST(HazardCheckingKernels, ABlockingCallsOutputIsPoisonedWhenTheWorldFailsBeforeItCompletes) {
  int checked = 0;
  SimWorld(SimOptions{.world = 2, .seed = 6}).run([&](SimRank& sim) {
    Tensor shard = Tensor::full({3}, 1.0f);
    Tensor full = Tensor::full({6}, 7.0f);
    Tensor total = Tensor::full({4}, 2.0f);
    try {
      if (sim.rank() == 0) {
        sim.comm().all_gather(shard, full, call_site("h.0"));
      } else {
        sim.comm().all_reduce(total, ReduceOp::sum, call_site("loss"));
      }
    } catch (const CollectiveMismatchError&) {
    }
    for (float value : (sim.rank() == 0 ? full : total).values()) EXPECT_TRUE(std::isnan(value)) << sim.rank();
    for (float value : shard.values()) EXPECT_EQ(value, 1.0f);  // inputs are only read
    ++checked;
  });
  EXPECT_EQ(checked, 2);
}

TEST(HazardCheckingKernels, ABlockingInPlaceCallsBufferIsPoisonedWhenItDeadlocks) {
  bool checked = false;
  SimWorld(SimOptions{.world = 2, .seed = 7}).run([&](SimRank& sim) {
    if (sim.rank() == 1) return;  // never joins: rank 0 waits in a collective that cannot complete
    Tensor total = Tensor::full({4}, 2.0f);
    EXPECT_THROW(sim.comm().all_reduce(total, ReduceOp::sum, call_site("loss")), DeadlockError);
    for (float value : total.values()) EXPECT_TRUE(std::isnan(value));
    checked = true;
  });
  EXPECT_TRUE(checked);
}

TEST(HazardCheckingKernels, PassingAnInFlightOutputToAnotherCollectiveThrows) {
  const SimResult result = SimWorld(SimOptions{.world = 2, .seed = 5}).run([](SimRank& sim) {
    Tensor shard = Tensor::zeros({4});
    Tensor full = Tensor::zeros({8});
    auto work = sim.comm().all_gather_async(shard, full, call_site("h.0"));
    sim.comm().all_reduce(full, ReduceOp::sum, call_site("h.0.norm"));
  });
  ASSERT_FALSE(result.all_ok());
  EXPECT_THROW(std::rethrow_exception(result.ranks[static_cast<size_t>(result.root_cause_rank)].exception),
               CorrectnessError);
  expect_contains(result.root_cause(), "all_reduce #1 (module 'h.0.norm') reads f32[8] cpu, which is the output of "
                                       "all_gather #0 (module 'h.0') still in flight");
}

// A program that forgets a wait and reads the gathered buffer after some compute: whether the
// gather has completed by then depends on the seeded schedule and faults, never on luck.
bool missing_wait_detected(uint64_t seed) {
  SimOptions options{.world = 2, .seed = seed, .faults = FaultPlan::parse("late=0.5")};
  options.faults.delay_s_max = 1e-4;
  bool detected = false;
  const SimResult result = SimWorld(options).run([&](SimRank& sim) {
    Tensor shard = test_tensor(seed, sim.rank(), 4);
    Tensor full = Tensor::zeros({8});
    Tensor out = Tensor::zeros({8});
    auto work = sim.comm().all_gather_async(shard, full, call_site("h.0"));
    sim.advance_compute(5e9);  // 50 us at the default 100 TFLOP/s: longer than the gather unless it is late
    try {
      sim.kernels().scale(full, 1.0f, out);
    } catch (const CorrectnessError&) {
      if (sim.rank() == 0) detected = true;
    }
    work->wait();
  });
  EXPECT_TRUE(result.all_ok()) << result.summary();
  return detected;
}

TEST(HazardCheckingKernels, AMissingWaitIsFoundForSomeSeedsAndEverySeedGivesTheSameVerdictTwice) {
  int detected = 0;
  for (uint64_t seed = 0; seed < 16; ++seed) {
    const bool first = missing_wait_detected(seed);
    EXPECT_EQ(first, missing_wait_detected(seed)) << "seed " << seed;
    detected += first;
  }
  EXPECT_GT(detected, 0);
  EXPECT_LT(detected, 16);
}

}  // namespace
}  // namespace zero3
