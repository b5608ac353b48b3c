// Names and descriptions for collective signatures and call sites.
#include "core/sharding/communicator.h"

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

}  // namespace zero3
