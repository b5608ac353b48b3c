// `zero3 train --backend mpi`: this process is one rank of a job that mpirun or srun started; every
// rank runs the per-rank program over the MPI communicator (backend_cuda/mpi/mpi_world.h), rank 0
// prints and writes the report, and any failure ends the whole job (MPI_Abort with the failure's
// exit code) rather than leaving peers waiting.
#pragma once
#include <functional>
#include <memory>

#include "core/sharding/communicator.h"
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

// This rank's communicator for the run: MPI's, wrapped by the crash fault when --faults asks for
// one (only crash can fire under MPI: a real process death, SIGKILL, at a seeded collective of a
// seeded rank). Throws InputError for the sim-only fault kinds.
std::unique_ptr<Communicator> mpi_training_communicator(const TrainOptions& options);

}  // namespace zero3
