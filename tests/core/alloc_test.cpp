// as_view()/as_view_mut() are O(1), allocation-free and change no reference count (seed 001 G4,
// p3-as-view-zero-allocation). Allocations are counted with a replaced global operator new.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "test_util.hpp"

namespace {
std::atomic<long> g_news{0};
}

void* operator new(std::size_t n) {
  g_news.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace pact {
namespace {

TEST(ViewCost, AsViewAndAsViewMutAllocateNothingAndKeepUseCount) {
  Tensor t = test::iota_tensor(Dims{16, 16});
  TypedTensor<float, 2> typed = TypedTensor<float, 2>::zeros(Dims{4, 4});
  const long uses = t.root_use_count();
  // Warm up once (first calls may touch lazily initialised state elsewhere).
  { auto v = t.as_view(); }
  { auto m = t.as_view_mut(); }
  const long before = g_news.load();
  for (int i = 0; i < 1000; ++i) {
    TensorView v = t.as_view();
    EXPECT_EQ(v.numel(), 256);
  }
  for (int i = 0; i < 1000; ++i) {
    TensorViewMut m = t.as_view_mut();
    TensorView reborrow = m.as_view();
    EXPECT_EQ(reborrow.rank(), 2);
  }
  for (int i = 0; i < 1000; ++i) {
    {
      auto v = typed.as_view();
      EXPECT_EQ(v.rank(), 2);
    }
    {
      auto m = typed.as_view_mut();
      EXPECT_EQ(m.rank(), 2);
    }
  }
  const long after = g_news.load();
  EXPECT_EQ(after - before, 0) << "as_view/as_view_mut allocated";
  EXPECT_EQ(t.root_use_count(), uses) << "a view changed the root's reference count";
  {
    TensorView held = t.as_view();
    EXPECT_EQ(t.root_use_count(), uses);  // a live view holds no reference either
  }
}

TEST(ViewCost, PreparedTraversalAllocatesNothing) {
  Tensor t = test::iota_tensor(Dims{64, 64});
  const long before = g_news.load();
  double sum = 0;
  {
    auto p = t.transpose(0, 1).prepare_host<float>();
    auto c = std::get<PreparedStridedRead<float>>(p.value()).cursor();
    while (const float* x = c.next()) sum += *x;
  }
  EXPECT_EQ(g_news.load() - before, 0);
  EXPECT_EQ(sum, 4095.0 * 4096.0 / 2.0);
}

}  // namespace
}  // namespace pact
