// The argument check every Communicator shares: what it accepts, the signature it returns, and the
// words of each refusal (op, rank, call site, what was expected).
#include <string>

#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "core/sharding/communicator.h"

namespace zero3 {
namespace {

const CallSite kSite{.module = "h.2.mlp", .params = {"h.2.mlp.w"}, .step = 5, .phase = "forward"};

// The message of the ShapeError `call` throws, or "" when it throws none.
template <typename Call>
std::string refusal(Call call) {
  try {
    call();
  } catch (const ShapeError& error) {
    return error.what();
  }
  return "";
}

TEST(CollectiveArgumentCheck, AcceptedCallsReturnTheSignatureRanksMustAgreeOn) {
  const Tensor shard = Tensor::zeros({3}, DType::bf16);
  const Tensor full = Tensor::zeros({12}, DType::bf16);
  EXPECT_EQ(check_all_gather(shard, full, 1, 4, kSite),
            (CollectiveSignature{CollectiveOp::all_gather, DType::bf16, 3, -1, ReduceOp::sum}));
  EXPECT_EQ(check_reduce_scatter(full, shard, ReduceOp::max, 1, 4, kSite),
            (CollectiveSignature{CollectiveOp::reduce_scatter, DType::bf16, 3, -1, ReduceOp::max}));
  EXPECT_EQ(check_all_reduce(full, ReduceOp::sum, 0, kSite),
            (CollectiveSignature{CollectiveOp::all_reduce, DType::bf16, 12, -1, ReduceOp::sum}));
  EXPECT_EQ(check_broadcast(shard, 3, 0, 4, kSite),
            (CollectiveSignature{CollectiveOp::broadcast, DType::bf16, 3, 3, ReduceOp::sum}));
  // Zero-count collectives are legal (and matched in the simulator).
  EXPECT_EQ(check_all_gather(Tensor::zeros({0}), Tensor::zeros({0}), 0, 4, kSite).count, 0);
  // Meta buffers pass: replays match and time collectives without data.
  EXPECT_EQ(check_all_gather(Tensor::meta({2}), Tensor::meta({8}), 0, 4, kSite).count, 2);
}

TEST(CollectiveArgumentCheck, WrongSizesNameTheOpRankCallSiteAndTheExpectedCount) {
  const std::string gather = refusal([] { check_all_gather(Tensor::zeros({4}), Tensor::zeros({11}), 1, 3, kSite); });
  EXPECT_NE(gather.find("all_gather on rank 1 (module 'h.2.mlp' forward step 5 params [h.2.mlp.w])"),
            std::string::npos)
      << gather;
  EXPECT_NE(gather.find("recv has 11 elements, expected send.numel() * world = 4 * 3 = 12"), std::string::npos)
      << gather;
  const std::string scatter =
      refusal([] { check_reduce_scatter(Tensor::zeros({10}), Tensor::zeros({3}), ReduceOp::sum, 0, 3, kSite); });
  EXPECT_NE(scatter.find("send has 10 elements, expected recv.numel() * world = 3 * 3 = 9"), std::string::npos)
      << scatter;
}

TEST(CollectiveArgumentCheck, MixedDtypesOrDevicesUndefinedBuffersAndRootsOutsideTheWorldAreRefused) {
  const std::string dtypes =
      refusal([] { check_all_gather(Tensor::zeros({2}, DType::bf16), Tensor::zeros({4}), 0, 2, kSite); });
  EXPECT_NE(dtypes.find("they must have the same dtype and device"), std::string::npos) << dtypes;
  const std::string devices = refusal([] { check_all_gather(Tensor::zeros({2}), Tensor::meta({4}), 0, 2, kSite); });
  EXPECT_NE(devices.find("they must have the same dtype and device"), std::string::npos) << devices;
  const std::string undefined = refusal([] { check_all_reduce(Tensor(), ReduceOp::sum, 0, kSite); });
  EXPECT_NE(undefined.find("all_reduce on rank 0"), std::string::npos) << undefined;
  EXPECT_NE(undefined.find("buffer is an undefined tensor"), std::string::npos) << undefined;
  for (int root : {-1, 4}) {
    const std::string bad_root = refusal([&] { check_broadcast(Tensor::zeros({2}), root, 2, 4, kSite); });
    EXPECT_NE(bad_root.find("root " + std::to_string(root) + " is not a rank of a world of 4"), std::string::npos)
        << bad_root;
  }
}

}  // namespace
}  // namespace zero3
