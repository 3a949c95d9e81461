// The handler row of the collective ops (op role collective: data-parallel training's gradient mean over
// the ranks). A collective is not a kernel call on one process's values: the training session hands the
// gradient buckets to its train::Communicator (pact/dist's MpiCommunicator: MPI_Iallreduce, or a
// rank-ordered fold), started as backward finishes them (Note [Gradient buckets] in pact/train/reducer.cpp).
// This row exists so that the plan admits the op through a capsule of the communicator's provider, under a
// profile that admits its trusted boundary; its update function refuses to be called.

#include <fmt/format.h>

#include "pact/kernels/cpu/handler_table.hpp"

namespace pact::kernels {

namespace cpu::mpi {
void allreduce_mean_update(std::span<Tensor* const>, std::span<const TensorView>, const ops::Attributes&) {
  throw_error(ErrorCode::unsupported, "kernel.allreduce_mean",
              "a collective runs through the training session's communicator (TrainingSession::set_data_parallel), "
              "not as a kernel call");
}
}  // namespace cpu::mpi

std::span<const Handler> collective_handlers() {
  static const Handler table[] = {PACT_CPU_UPDATE_HANDLER(mpi, "pact/kernels/cpu/collective.cpp", allreduce_mean)};
  return table;
}

}  // namespace pact::kernels
