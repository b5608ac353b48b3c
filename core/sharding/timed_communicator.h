// TimedCommunicator: a Communicator decorator that measures how long this rank is blocked waiting
// for collectives to complete — communication not hidden behind compute — for the step's phase
// times (core/training/step_stats.h, PhaseTimes::communication_wait_s). It times:
//   - Work::wait() of every asynchronous collective it issued (each returned Work is wrapped);
//   - the blocking forms (all_gather(), all_reduce(), ...), whole: issue and wait;
//   - synchronize().
// Issuing an asynchronous collective is not waiting and is not counted. split(), split_block() and
// split_across_blocks() wrap the group in a TimedCommunicator that adds into the same total, so
// HSDP's and hpZ's groups are counted with the world. Nothing else changes: every call goes to the
// inner communicator as it is (blocking forms included), so results are the same bits.
// Wall clock (steady_clock), for reports only; one rank's thread uses it, as it uses the inner one.
//
//   TimedCommunicator timed(*mpi_comm);
//   run_rank_program({.comm = &timed, ..., .communication_wait_seconds = [&] { return timed.wait_seconds(); }}, ...);
#pragma once
#include <memory>
#include <string>

#include "core/sharding/communicator.h"

namespace zero3 {

class TimedCommunicator final : public Communicator {
 public:
  // Wraps `inner`, which must outlive it.
  explicit TimedCommunicator(Communicator& inner)
      : TimedCommunicator(&inner, nullptr, std::make_shared<double>(0.0)) {}
  // Owns `inner`.
  explicit TimedCommunicator(std::unique_ptr<Communicator> inner)
      : TimedCommunicator(nullptr, std::move(inner), std::make_shared<double>(0.0)) {}

  // Seconds blocked so far, by this communicator and every group split from it (a running total:
  // a step's share is the difference around it).
  double wait_seconds() const { return *total_; }

  int rank() const override { return inner_.rank(); }
  int world() const override { return inner_.world(); }
  std::string group_name() const override { return inner_.group_name(); }
  std::unique_ptr<Communicator> split(int color, int key, const CallSite& site) override;
  std::unique_ptr<Communicator> split_block(int block_size, const CallSite& site) override;
  std::unique_ptr<Communicator> split_across_blocks(int block_size, const CallSite& site) override;

  std::shared_ptr<Work> all_gather_async(const Tensor& send, Tensor& recv, const CallSite& site) override;
  std::shared_ptr<Work> reduce_scatter_async(const Tensor& send, Tensor& recv, ReduceOp op,
                                             const CallSite& site) override;
  std::shared_ptr<Work> all_reduce_async(Tensor& buffer, ReduceOp op, const CallSite& site) override;
  std::shared_ptr<Work> broadcast_async(Tensor& buffer, int root, const CallSite& site) override;
  std::shared_ptr<Work> barrier_async(const CallSite& site) override;
  void synchronize() override;
  void abort(const std::string& reason) override { inner_.abort(reason); }

  void all_gather(const Tensor& send, Tensor& recv, const CallSite& site) override;
  void reduce_scatter(const Tensor& send, Tensor& recv, ReduceOp op, const CallSite& site) override;
  void all_reduce(Tensor& buffer, ReduceOp op, const CallSite& site) override;
  void broadcast(Tensor& buffer, int root, const CallSite& site) override;
  void barrier(const CallSite& site) override;

 private:
  // Over `borrowed`, or else over `owned`.
  TimedCommunicator(Communicator* borrowed, std::unique_ptr<Communicator> owned, std::shared_ptr<double> total)
      : owned_(std::move(owned)), inner_(borrowed ? *borrowed : *owned_), total_(std::move(total)) {}
  std::unique_ptr<Communicator> wrap(std::unique_ptr<Communicator> group) const;
  std::shared_ptr<Work> wrap(std::shared_ptr<Work> work) const;

  std::unique_ptr<Communicator> owned_;  // declared first: inner_ may refer to it
  Communicator& inner_;
  std::shared_ptr<double> total_;  // shared with the groups split from this one and the Works issued
};

}  // namespace zero3
