#pragma once
// Helpers shared by the core tests.

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "../support/expect_error.hpp"
#include "pact/core/core.hpp"

namespace pact::test {

/// Runs f and returns the code of the pact::Error it throws; fails the test when nothing is thrown.

/// A contiguous f32 cpu tensor holding 0, 1, 2, ... in row-major order.
inline Tensor iota_tensor(const Dims& shape) {
  std::int64_t n = 1;
  for (auto e : shape) n *= e;
  std::vector<float> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), 0.0f);
  return Tensor::from_values<float>(shape, std::span<const float>(v));
}

/// Every element of a float view in logical order, read through prepared host access.
inline std::vector<float> read_all(TensorView view) {
  std::vector<float> out;
  auto prepared = std::move(view).prepare_host<float>();
  EXPECT_TRUE(prepared.has_value());
  if (!prepared) return out;
  std::visit(
      [&](auto& p) {
        if constexpr (requires { p.as_span(); }) {
          out.assign(p.as_span().begin(), p.as_span().end());
        } else {
          auto c = p.cursor();
          while (const float* v = c.next()) out.push_back(*v);
        }
      },
      prepared.value());
  return out;
}

}  // namespace pact::test
