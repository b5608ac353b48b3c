// `zero3 train --backend mpi`: this process is one rank of a job that mpirun or srun started; every
// rank runs the per-rank program over the MPI communicator (backend_cuda/mpi/mpi_world.h), rank 0
// prints and writes the report, and any failure ends the whole job (MPI_Abort with the failure's
// exit code) rather than leaving peers waiting.
#pragma once
#include <functional>
#include <memory>

#include "core/base/fault_points.h"
#include "core/sharding/communicator.h"
#include "core/sharding/timed_communicator.h"
#include "tools/runs/train_options.h"
#include "tools/runs/training_run.h"

namespace zero3 {

// Starts MPI, silences stdout on ranks other than 0, runs `body`, and on an exception prints it
// with the rank and aborts the job with its exit code. Returns only on success.
void run_as_mpi_process(const std::function<void()>& body);

// The same for training: the world size comes from the launcher (--ranks, when given, must agree);
// a failing rank, whichever it is, still writes the failure report.
TrainOutcome run_training_as_mpi_process(const TrainOptions& options,
                                         const std::function<TrainOutcome(const TrainOptions&)>& train);

// This rank's seams for the run: MPI's communicator and, when --faults asks for a crash (the only
// kind that can fire under MPI: a real process death, SIGKILL, on a seeded rank), the fault points
// where it may fire besides the collectives (checkpoint writes: `crash@checkpoint`). Throws
// InputError for the sim-only fault kinds.
struct MpiTrainingRank {
  // MPI's, wrapped by the crash fault when there is one, and outermost by the timing of its waits
  // (each step's PhaseTimes::communication_wait_s).
  std::unique_ptr<TimedCommunicator> comm;
  std::unique_ptr<FaultPoints> faults;  // the same crash, the same seeded draws; null without faults
};
MpiTrainingRank mpi_training_rank(const TrainOptions& options);

}  // namespace zero3
