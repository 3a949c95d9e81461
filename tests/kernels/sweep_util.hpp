#pragma once
// Helpers of the op sweep: reading any tensor as doubles, perturbing one element, comparing with a
// tolerance.

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "pact/verify/oracle.hpp"
#include "pact/verify/samples.hpp"

namespace pact::test {

using verify::describe;
using verify::make_input;
using verify::Sample;
using verify::SampleInput;
using verify::samples;
using verify::update_samples;
using namespace verify::sampling;

/// Every element as a double, in row-major order.
inline std::vector<double> values_of(const TensorView& v) { return v.to_doubles(); }

/// A copy of `t` (f64) with element `flat` increased by `delta`.
inline Tensor perturbed(const Tensor& t, std::int64_t flat, double delta) {
  Tensor c = t.duplicate();
  {
    auto p = c.prepare_host_mut<double>();
    std::get<PreparedContiguousWrite<double>>(p.value()).as_span()[static_cast<std::size_t>(flat)] += delta;
  }
  return c;
}

/// max |a - b| <= abs + rel * max(1, max |b|), elementwise over equally long value lists.
inline ::testing::AssertionResult close(const std::vector<double>& a, const std::vector<double>& b,
                                        ops::Tolerance tol) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "sizes " << a.size() << " vs " << b.size();
  const ops::Agreement r = ops::compare(a, b, tol);  // the one comparison (sweep, falsify, PyTorch parity)
  if (r.within) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "element " << r.worst << ": " << a[r.worst] << " vs " << b[r.worst]
                                       << " (tolerance " << tol.abs << " + " << tol.rel << " * " << r.scale << ")";
}

using verify::views_of;

/// Runs an update op's handler on copies of `ins` (verify::updated_state) and returns every state operand's
/// new values, concatenated in operand order.
inline std::vector<double> updated_state(const kernels::Handler& h, const std::vector<Tensor>& ins,
                                         const ops::Attributes& attrs) {
  std::vector<double> out;
  for (const auto& t : verify::updated_state(h, ins, attrs)) {
    const auto v = values_of(t.as_view());
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

}  // namespace pact::test
