#pragma once
/// Data-parallel training over Open MPI (issue 25): MPI_COMM_WORLD as a train::Communicator. MPI is
/// started on first use (only the calling thread talks to it; OpenMP threads compute) and finalised at
/// exit. Every wait is bounded: a collective that has not completed within the timeout (a rank died or
/// hangs) ends the whole job through MPI_Abort, with a message that names this rank, what it waited
/// for, for how long, and which ranks never reached it (Note [Roll call] in mpi.cpp), so no job hangs
/// silently.

#include <cstdint>
#include <memory>
#include <string>

#include "pact/train/communicator.hpp"

namespace pact::dist {

struct MpiOptions {
  /// Seconds a collective may take before the job is ended (a dead or hung rank).
  double timeout_seconds = 120;
  /// Sum in rank order (every rank gathers every rank's buffer and folds them left to right): bitwise
  /// repeatable, for cpu-deterministic. Otherwise MPI_Iallreduce, in the order Open MPI chooses.
  bool fixed_order = false;
};

class MpiCommunicator final : public train::Communicator {
 public:
  explicit MpiCommunicator(MpiOptions options = {});
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  std::unique_ptr<train::PendingReduction> start_sum(std::span<std::byte> data, DType dtype) override;
  std::vector<std::string> gather_all(const std::string& text) override;
  std::string_view boundary() const noexcept override { return "mpi.allreduce"; }
  std::string_view reduction_order() const noexcept override {
    return options_.fixed_order ? "fixed (rank order, left fold)" : "Open MPI's (MPI_Iallreduce)";
  }
  bool rank_ordered() const noexcept override { return options_.fixed_order; }
  void progress() override;
  const MpiOptions& options() const noexcept { return options_; }

  /// True when this process was started by mpirun (Open MPI's launch environment is present).
  static bool launched_by_mpirun() noexcept;
  /// The job's ranks on this host (mpirun's OMPI_COMM_WORLD_LOCAL_SIZE; size() when it is absent or not a
  /// count in [1, size()]): the ranks that share this host's cores.
  int ranks_on_this_host() const noexcept;
  /// Ends every rank of the job: prints "pact: rank R: `why`" on stderr and calls MPI_Abort.
  [[noreturn]] void abort(const std::string& why) const;

  /// The roll call (Note [Roll call]): announces to every other rank that this one has started its next
  /// collective and returns that collective's number (1, 2, ...).
  std::uint64_t announce() const;
  /// The ranks that have not announced collective `number`, as a sentence for a timeout's message.
  std::string absent(std::uint64_t number) const;

 private:
  struct RollCall;
  MpiOptions options_;
  int rank_ = 0, size_ = 1;
  std::unique_ptr<RollCall> roll_;
};

}  // namespace pact::dist
