#pragma once
// How the CPU kernels share work across OpenMP threads.

#include <omp.h>

#include <cstdint>

namespace pact::kernels::cpu {

/// Calls f(begin, end) over [0, n) split into one contiguous range per thread when `worth_sharing` and
/// there is more than one thread to share with; otherwise calls f(0, n) directly. An OpenMP region is
/// never entered for work too small to share: even under if(false), or with a team of one, a region
/// costs a team's setup and teardown (allocation and synchronisation), which for the small products of a
/// training step (an attention head's 64 x 64 scores) outweighs the arithmetic.
template <class F>
void parallel_ranges(std::int64_t n, bool worth_sharing, F&& f) {
  if (n <= 0) return;
  if (!worth_sharing || omp_in_parallel() || omp_get_max_threads() < 2 || n < 2) {
    f(std::int64_t{0}, n);
    return;
  }
#pragma omp parallel
  {
    const std::int64_t t = omp_get_thread_num(), teams = omp_get_num_threads();
    const std::int64_t begin = n * t / teams, end = n * (t + 1) / teams;
    if (begin < end) f(begin, end);
  }
}

}  // namespace pact::kernels::cpu
