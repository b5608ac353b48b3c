// Names and descriptions for collective signatures and call sites, and the argument check every
// Communicator shares.
#include "core/sharding/communicator.h"

#include <algorithm>
#include <utility>

#include "core/base/errors.h"

namespace zero3 {

const char* collective_op_name(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::all_gather: return "all_gather";
    case CollectiveOp::reduce_scatter: return "reduce_scatter";
    case CollectiveOp::all_reduce: return "all_reduce";
    case CollectiveOp::broadcast: return "broadcast";
    case CollectiveOp::barrier: return "barrier";
  }
  return "unknown";
}

const char* reduce_op_name(ReduceOp op) { return op == ReduceOp::max ? "max" : "sum"; }

std::string describe(const CallSite& site) {
  std::string text = "module '" + site.module + "'";
  if (!site.phase.empty()) text += " " + site.phase;
  if (site.step >= 0) text += " step " + std::to_string(site.step);
  if (!site.params.empty()) {
    text += " params [";
    for (size_t i = 0; i < site.params.size(); ++i) text += (i ? ", " : "") + site.params[i];
    text += "]";
  }
  return text;
}

std::string describe(const CollectiveSignature& signature) {
  std::string text = std::string(collective_op_name(signature.op)) + " " + dtype_name(signature.dtype) +
                     " count=" + std::to_string(signature.count);
  if (signature.op == CollectiveOp::broadcast) text += " root=" + std::to_string(signature.root);
  if (signature.op == CollectiveOp::reduce_scatter || signature.op == CollectiveOp::all_reduce) {
    text += std::string(" reduce=") + reduce_op_name(signature.reduce);
  }
  return text;
}

int64_t collective_buffer_bytes(const CollectiveSignature& signature, int world) {
  const int64_t block_bytes = signature.count * dtype_bytes(signature.dtype);
  switch (signature.op) {
    case CollectiveOp::all_gather:
    case CollectiveOp::reduce_scatter: return block_bytes * world;
    case CollectiveOp::all_reduce:
    case CollectiveOp::broadcast: return block_bytes;
    case CollectiveOp::barrier: return 0;
  }
  return 0;
}

namespace {

[[noreturn]] void throw_bad_argument(CollectiveOp op, int rank, const CallSite& site, const std::string& problem) {
  throw ShapeError(std::string(collective_op_name(op)) + " on rank " + std::to_string(rank) + " (" + describe(site) +
                   "): " + problem);
}

void check_defined(CollectiveOp op, int rank, const CallSite& site, const char* name, const Tensor& tensor) {
  if (!tensor.defined()) throw_bad_argument(op, rank, site, std::string(name) + " is an undefined tensor");
}

// send and recv of all-gather / reduce-scatter: same dtype and device, the large buffer world
// times the small one.
void check_pair(CollectiveOp op, int rank, int world, const CallSite& site, const Tensor& send, const Tensor& recv) {
  check_defined(op, rank, site, "send", send);
  check_defined(op, rank, site, "recv", recv);
  if (send.dtype() != recv.dtype() || send.device() != recv.device()) {
    throw_bad_argument(op, rank, site, "send is " + describe(send) + " but recv is " + describe(recv) +
                                           "; they must have the same dtype and device");
  }
  const bool gather = op == CollectiveOp::all_gather;
  const int64_t small = gather ? send.numel() : recv.numel();
  const int64_t large = gather ? recv.numel() : send.numel();
  if (large != small * world) {
    throw_bad_argument(op, rank, site, std::string(gather ? "recv" : "send") + " has " + std::to_string(large) +
                                           " elements, expected " + (gather ? "send" : "recv") + ".numel() * world = " +
                                           std::to_string(small) + " * " + std::to_string(world) + " = " +
                                           std::to_string(small * world));
  }
}

}  // namespace

CollectiveSignature check_all_gather(const Tensor& send, const Tensor& recv, int rank, int world,
                                     const CallSite& site) {
  check_pair(CollectiveOp::all_gather, rank, world, site, send, recv);
  return {CollectiveOp::all_gather, send.dtype(), send.numel()};
}

CollectiveSignature check_reduce_scatter(const Tensor& send, const Tensor& recv, ReduceOp op, int rank, int world,
                                         const CallSite& site) {
  check_pair(CollectiveOp::reduce_scatter, rank, world, site, send, recv);
  return {CollectiveOp::reduce_scatter, send.dtype(), recv.numel(), -1, op};
}

CollectiveSignature check_all_reduce(const Tensor& buffer, ReduceOp op, int rank, const CallSite& site) {
  check_defined(CollectiveOp::all_reduce, rank, site, "buffer", buffer);
  return {CollectiveOp::all_reduce, buffer.dtype(), buffer.numel(), -1, op};
}

CollectiveSignature check_broadcast(const Tensor& buffer, int root, int rank, int world, const CallSite& site) {
  check_defined(CollectiveOp::broadcast, rank, site, "buffer", buffer);
  if (root < 0 || root >= world) {
    throw_bad_argument(CollectiveOp::broadcast, rank, site,
                       "root " + std::to_string(root) + " is not a rank of a world of " + std::to_string(world));
  }
  return {CollectiveOp::broadcast, buffer.dtype(), buffer.numel(), root};
}

CollectiveSignature barrier_signature() { return {CollectiveOp::barrier, DType::f32, 0}; }

void check_split(int color, int key, int rank, const CallSite& site) {
  // 2^24: the largest range of integers f32 holds exactly, as the simulator exchanges them.
  constexpr int kLimit = 1 << 24;
  const auto refuse = [&](const char* what, int value) {
    throw InputError("split on rank " + std::to_string(rank) + " (" + describe(site) + "): " + what + " " +
                     std::to_string(value) + " is outside the expected range 0.." + std::to_string(kLimit - 1));
  };
  if (color < 0 || color >= kLimit) refuse("color", color);
  if (key < 0 || key >= kLimit) refuse("key", key);
}

std::vector<int> split_members(const std::vector<int>& colors, const std::vector<int>& keys, int color) {
  ZERO3_CHECK(colors.size() == keys.size(), "split with " + std::to_string(colors.size()) + " colors and " +
                                                std::to_string(keys.size()) + " keys");
  std::vector<int> members;
  for (size_t rank = 0; rank < colors.size(); ++rank) {
    if (colors[rank] == color) members.push_back(static_cast<int>(rank));
  }
  // stable_sort keeps equal keys in parent-rank order, MPI_Comm_split's tie-break.
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
    return keys[static_cast<size_t>(a)] < keys[static_cast<size_t>(b)];
  });
  return members;
}

std::string split_group_name(int color, const std::vector<int>& world_ranks) {
  std::string text = "group " + std::to_string(color) + " (rank" + (world_ranks.size() == 1 ? " " : "s ");
  for (size_t i = 0; i < world_ranks.size(); ++i) text += (i ? "," : "") + std::to_string(world_ranks[i]);
  return text + ")";
}

namespace {

void check_block_size(int block_size, int world) {
  ZERO3_CHECK(block_size >= 1 && world % block_size == 0,
              "blocks of " + std::to_string(block_size) + " ranks in a world of " + std::to_string(world));
}

}  // namespace

std::unique_ptr<Communicator> Communicator::split_block(int block_size, const CallSite& site) {
  check_block_size(block_size, world());
  return split(rank() / block_size, rank(), site);
}

std::unique_ptr<Communicator> Communicator::split_across_blocks(int block_size, const CallSite& site) {
  check_block_size(block_size, world());
  return split(rank() % block_size, rank(), site);
}

BlockGroups split_into_blocks(Communicator& comm, int block_size, const CallSite& site) {
  if (block_size >= comm.world()) return {};
  std::unique_ptr<Communicator> block = comm.split_block(block_size, site);
  return {std::move(block), comm.split_across_blocks(block_size, site)};
}

}  // namespace zero3
