// Element access through an owner, a view and a mutable view (docs/guides/element-access.md).
// Build: cmake --preset release && cmake --build --preset release; run: build/release/examples/example_element_access

#include <cstdio>
#include <numeric>
#include <vector>

#include "pact/core/core.hpp"

using namespace pact;

int main() {
  // 1. An owner. Tensor is move-only: it is the one owner of its storage claim.
  std::vector<float> values(6);
  std::iota(values.begin(), values.end(), 1.0f);  // 1 2 3 / 4 5 6
  Tensor owner = Tensor::from_values<float>(Dims{2, 3}, values);

  // Checked random access: validates the index and maps once per call, O(rank). Fine for a few
  // elements, never for a loop over all of them.
  double corner = owner.get(Dims{1, 2}).real;  // 6

  // 2. A view: as_view() is O(1), allocates nothing and takes no reference count. Preparing it for the
  // host validates nothing again (the descriptor was checked when it was made); it maps once and
  // picks exactly one traversal: a typed span for contiguous data ...
  float row_major_sum = 0;
  {
    auto prepared = owner.as_view().prepare_host<float>();
    for (float x : std::get<PreparedContiguousRead<float>>(prepared.value()).as_span()) row_major_sum += x;
  }

  // ... or a strided cursor for anything else. The transposed view visits 1 4 2 5 3 6; next() only
  // adds precomputed strides.
  std::vector<float> transposed;
  {
    auto prepared = owner.transpose(0, 1).prepare_host<float>();
    auto cursor = std::get<PreparedStridedRead<float>>(prepared.value()).cursor();
    while (const float* x = cursor.next()) transposed.push_back(*x);
  }

  // 3. A mutable view: exclusive; the write layout must be injective. Here: double column 1.
  {
    TensorViewMut column = owner.slice_mut(1, 1, 2);
    auto prepared = std::move(column).prepare_host_mut<float>();
    std::get<PreparedStridedWrite<float>>(prepared.value()).for_each([](float& x) { x *= 2; });
  }

  // Failures are typed and hand the input back: meta storage has geometry only.
  Tensor meta = Tensor::empty(Dims{4096, 4096}, DType::f32, meta_provider());
  auto refused = meta.prepare_host<float>();
  const bool meta_refused = !refused.has_value() && refused.error().error.code() == ErrorCode::no_host_bytes;

  std::printf("corner %.0f, sum %.0f, transposed", corner, row_major_sum);
  for (float x : transposed) std::printf(" %.0f", x);
  std::printf(", column 1 after doubling: %.0f %.0f, meta refused: %s\n", owner.get(Dims{0, 1}).real,
              owner.get(Dims{1, 1}).real, meta_refused ? "yes" : "no");

  const bool ok = corner == 6 && row_major_sum == 21 && transposed == std::vector<float>{1, 4, 2, 5, 3, 6} &&
                  owner.get(Dims{0, 1}).real == 4 && owner.get(Dims{1, 1}).real == 10 && meta_refused;
  return ok ? 0 : 1;
}
