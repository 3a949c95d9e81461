// Eager session, tape, retention and the graph executor.

#include <gtest/gtest.h>

#include "../support/expect_error.hpp"
#include "pact/runtime/executor.hpp"
#include "pact/runtime/session.hpp"

namespace pact::runtime {
namespace {

using ::pact::test::code_of;

Tensor values(Dims shape, std::vector<float> v) { return Tensor::from_values<float>(shape, v); }

TEST(EagerSession, CachesOneAdmittedSelectionPerSignature) {
  Session s(contract::builtin_profile("cpu-checked"));
  EagerTensor a = s.constant(values({2, 2}, {1, 2, 3, 4}));
  EagerTensor b = s.constant(values({2, 2}, {5, 6, 7, 8}));
  EagerTensor c = s.apply(ops::OpTag::add, std::vector{a, b});
  EXPECT_EQ(c.view().get(Dims{1, 1}).real, 12.0);
  EXPECT_EQ(s.cache_entries(), 1u);
  EXPECT_EQ(s.cache_hits(), 0u);
  s.apply(ops::OpTag::add, std::vector{c, b});  // same signature: a hit, the result is recomputed
  EXPECT_EQ(s.cache_entries(), 1u);
  EXPECT_EQ(s.cache_hits(), 1u);
  EagerTensor d = s.constant(Tensor::from_values<double>(Dims{2}, std::vector<double>{1, 2}));
  s.apply(ops::OpTag::add, std::vector{d, d});  // another dtype: another signature
  EXPECT_EQ(s.cache_entries(), 2u);
  s.apply(
      ops::OpTag::add,
      std::vector{
          EagerTensor{
              retain(
                  Tensor::from_values<float>(Dims{2, 2}, std::vector<float>{1, 2, 3, 4}).transpose(0, 1).duplicate()),
              -1},
          b});
  ASSERT_NE(s.selected(ops::OpTag::add), nullptr);
  EXPECT_EQ(s.selected(ops::OpTag::add)->provider, "native");  // cpu-checked prefers native
}

TEST(EagerSession, AdmitsByInputTypesThroughTheOneAdmission) {
  // f64 operands go to a kernel that computes f64 (reference), f32 ones to native, under one profile.
  Session s(contract::builtin_profile("cpu-checked"));
  EagerTensor d = s.constant(Tensor::from_values<double>(Dims{2}, std::vector<double>{1, 2}));
  EagerTensor f = s.constant(values({2}, {1, 2}));
  EXPECT_EQ(s.apply(ops::OpTag::mul, std::vector{d, d}).view().get(Dims{1}).real, 4.0);
  EXPECT_EQ(s.selected(ops::OpTag::mul)->provider, "reference");
  EXPECT_EQ(s.apply(ops::OpTag::sub, std::vector{f, f}).view().get(Dims{1}).real, 0.0);
  EXPECT_EQ(s.selected(ops::OpTag::sub)->provider, "native");
  // A profile with no provider computing f64 refuses before any kernel runs, naming op and types.
  contract::BackendProfile p = contract::builtin_profile("cpu-checked");
  p.modules = {&contract::native_module()};
  p.providers = {"native"};
  p.policy.provider_preference = {"native"};
  Session n(p);
  EagerTensor nd = n.constant(Tensor::from_values<double>(Dims{2}, std::vector<double>{1, 2}));
  try {
    n.apply(ops::OpTag::add, std::vector{nd, nd});
    FAIL() << "an f64 add was admitted by a profile whose kernels compute f32 only";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unsupported);
    EXPECT_NE(std::string(e.what()).find("(f64[2], f64[2])"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("native.add computes f32 only"), std::string::npos) << e.what();
  }
  EXPECT_EQ(n.cache_entries(), 0u);  // a refusal is not cached as an admission
}

TEST(EagerSession, RefusesWhatThePolicyDoesNotAdmit) {
  // A checked-policy profile that prefers blas: selection picks blas (no evidence filter), admission refuses.
  contract::BackendProfile p = contract::builtin_profile("cpu-checked");
  p.modules.push_back(&contract::blas_module());
  p.providers.push_back("blas");
  p.policy.provider_preference.insert(p.policy.provider_preference.begin(), "blas");
  Session s(p);
  EagerTensor a = s.constant(values({2, 2}, {1, 2, 3, 4}));
  try {
    s.apply(ops::OpTag::matmul, std::vector{a, a});
    FAIL() << "a trusted-external capsule was admitted under the checked policy";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("blas.matmul"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("trustedBoundary"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(s.apply(ops::OpTag::relu, std::vector{a}));  // other ops are unaffected
}

// A view op keeps a view of its input's storage (no allocation, no copy) where one exists, reading
// the same values the copying handler gives; a strided reshape has none, so its handler copies.
TEST(EagerSession, ViewOpsAliasTheirInputWithoutACopy) {
  Session s(contract::builtin_profile("cpu-checked"));
  EagerTensor x = s.constant(values({2, 3}, {0, 1, 2, 3, 4, 5}));
  const auto id = x.view().span_identity().allocation_id;
  AccountingRecorder ledger;
  EagerTensor r =
      s.apply(ops::OpTag::reshape, std::vector{x}, ops::Attributes{{"shape", std::vector<std::int64_t>{3, 2}}});
  EagerTensor t = s.apply(ops::OpTag::transpose, std::vector{x},
                          ops::Attributes{{"dim0", std::int64_t{0}}, {"dim1", std::int64_t{1}}});
  EagerTensor p =
      s.apply(ops::OpTag::permute, std::vector{r}, ops::Attributes{{"dims", std::vector<std::int64_t>{1, 0}}});
  EagerTensor sl = s.apply(
      ops::OpTag::slice, std::vector{x},
      ops::Attributes{
          {"dim", std::int64_t{1}}, {"start", std::int64_t{0}}, {"end", std::int64_t{3}}, {"step", std::int64_t{2}}});
  EXPECT_TRUE(ledger.allocations().empty()) << "a view op allocated";
  EXPECT_TRUE(ledger.copies().empty());
  for (const EagerTensor* v : {&r, &t, &p, &sl}) EXPECT_EQ(v->view().span_identity().allocation_id, id);
  EXPECT_EQ(r.shape(), (Dims{3, 2}));
  EXPECT_EQ(r.view().get(Dims{2, 0}).real, 4.0);
  EXPECT_EQ(t.shape(), (Dims{3, 2}));
  EXPECT_EQ(t.view().get(Dims{2, 1}).real, 5.0);  // x[1][2]
  EXPECT_EQ(p.view().get(Dims{1, 2}).real, 5.0);  // r[2][1]
  EXPECT_EQ(sl.shape(), (Dims{2, 2}));
  EXPECT_EQ(sl.view().get(Dims{1, 1}).real, 5.0);  // x[1][2]
  // A strided view has no zero-copy reshape: the handler gathers it in row-major order.
  EagerTensor flat =
      s.apply(ops::OpTag::reshape, std::vector{t}, ops::Attributes{{"shape", std::vector<std::int64_t>{6}}});
  EXPECT_NE(flat.view().span_identity().allocation_id, id);
  EXPECT_EQ(ledger.allocations().size(), 1u);
  const double want[] = {0, 3, 1, 4, 2, 5};
  for (std::int64_t i = 0; i < 6; ++i) EXPECT_EQ(flat.view().get(Dims{i}).real, want[i]) << i;
  // An alias owns no allocation: into_value refuses it, an explicit duplicate copies it. It keeps its
  // base's storage alive after every other handle is gone (ASan would catch a read of freed storage).
  auto refused = into_value(ValueRef(t.value));
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().first, IntoValueFailure::Extract);
  EXPECT_EQ(duplicate_value(t.value).as_view().get(Dims{0, 1}).real, 3.0);
  x = EagerTensor{};
  r = EagerTensor{};
  EXPECT_EQ(p.view().get(Dims{0, 2}).real, 4.0);  // r[2][0], through two aliases of a released base
  // Bad attributes are the shape rule's typed errors, as from the handler.
  EXPECT_EQ(code_of([&] {
              s.apply(ops::OpTag::reshape, std::vector{p}, ops::Attributes{{"shape", std::vector<std::int64_t>{4}}});
            }),
            ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([&] {
              s.apply(ops::OpTag::permute, std::vector{p}, ops::Attributes{{"dims", std::vector<std::int64_t>{0, 0}}});
            }),
            ErrorCode::invalid_argument);
}

// Gradients through aliased views equal the chain rule's, dense and sparse; in a sparse pass a reshape's
// contiguous cotangent moves to its input (one allocation fewer per reshape than the dense pass, which
// keeps both gradients).
TEST(Tape, GradientsFlowThroughAliasedViewsAndSparseReshapeMovesTheCotangent) {
  Session s(contract::builtin_profile("cpu-checked"));
  EagerTensor x = s.leaf(values({2, 3}, {1, 2, 3, 4, 5, 6}));
  EagerTensor y =
      s.apply(ops::OpTag::reshape, std::vector{x}, ops::Attributes{{"shape", std::vector<std::int64_t>{3, 2}}});
  EagerTensor z = s.apply(ops::OpTag::transpose, std::vector{y},
                          ops::Attributes{{"dim0", std::int64_t{0}}, {"dim1", std::int64_t{1}}});
  EagerTensor c = s.constant(values({2, 3}, {10, 20, 30, 40, 50, 60}));
  EagerTensor m = s.apply(ops::OpTag::mul, std::vector{z, c});
  EagerTensor f =
      s.apply(ops::OpTag::reshape, std::vector{m}, ops::Attributes{{"shape", std::vector<std::int64_t>{6}}});
  EagerTensor l = s.apply(ops::OpTag::sum, std::vector{f});
  // z[i][j] = y[j][i] = x_flat[2 j + i], so dl/dx_flat[2 j + i] = c[i][j].
  const double want[] = {10, 40, 20, 50, 30, 60};
  AccountingRecorder dense_ledger;
  Gradients dense = s.backward(l);
  const std::size_t dense_allocations = dense_ledger.allocations().size();
  ASSERT_TRUE(dense.grad(f.node).has_value());
  ASSERT_TRUE(dense.grad(m.node).has_value());
  AccountingRecorder sparse_ledger;
  const int keep[] = {x.node};
  Gradients sparse = s.backward(l, keep);
  EXPECT_EQ(sparse_ledger.allocations().size() + 2, dense_allocations);  // f's and y's cotangents moved
  EXPECT_EQ(sparse.nodes(), std::vector<int>{x.node});
  for (const Gradients* g : {&dense, &sparse}) {
    const auto gx = g->grad(x.node);
    ASSERT_TRUE(gx.has_value());
    EXPECT_EQ(gx->shape(), (Dims{2, 3}));
    for (std::int64_t k = 0; k < 6; ++k) EXPECT_EQ(gx->get(Dims{k / 3, k % 3}).real, want[k]) << k;
  }
}

TEST(Tape, RetainsOnlyWhatTheVjpReadsAndNoGradRecordsNothing) {
  Session s(contract::builtin_profile("cpu-checked"));
  EagerTensor w = s.leaf(values({3, 2}, {1, 2, 3, 4, 5, 6}));
  EagerTensor x = s.constant(values({1, 2}, {1, 1}));
  EagerTensor y = s.apply(ops::OpTag::linear, std::vector{x, w});
  EagerTensor r = s.apply(ops::OpTag::relu, std::vector{y});
  EXPECT_EQ(s.tape().size(), 3u);  // leaf, linear, relu
  EXPECT_FALSE(s.tape().node(y.node).output) << "linear's VJP does not read its output";
  EXPECT_TRUE(s.tape().node(r.node).output) << "relu's VJP reads its output";
  EXPECT_EQ(s.tape().node(y.node).inputs.size(), 2u);
  s.set_grad_enabled(false);
  EagerTensor z = s.apply(ops::OpTag::relu, std::vector{y});
  EXPECT_FALSE(z.tracked());
  EXPECT_EQ(s.tape().size(), 3u);
}

TEST(Tape, DenseAndSparseBackwardAndShapeChecks) {
  Session s(contract::builtin_profile("cpu-checked"));
  EagerTensor w = s.leaf(values({2, 2}, {1, -2, 3, 4}));
  EagerTensor x = s.constant(values({1, 2}, {1, 2}));
  EagerTensor y = s.apply(ops::OpTag::matmul, std::vector{x, w});  // [1, 2] = [7, 6]
  EagerTensor r = s.apply(ops::OpTag::relu, std::vector{y});
  EagerTensor l = s.apply(ops::OpTag::sum, std::vector{r});
  EXPECT_EQ(l.view().get(Dims{}).real, 13.0);
  Gradients dense = s.backward(l);
  ASSERT_TRUE(dense.grad(w.node).has_value());
  EXPECT_TRUE(dense.grad(y.node).has_value());
  // d/dw sum(relu(x w)) = x^T * 1 (both outputs positive).
  EXPECT_EQ(dense.grad(w.node)->get(Dims{0, 0}).real, 1.0);
  EXPECT_EQ(dense.grad(w.node)->get(Dims{1, 1}).real, 2.0);
  const int keep[] = {w.node};
  Gradients sparse = s.backward(l, keep);
  EXPECT_EQ(sparse.nodes(), std::vector<int>{w.node});
  {
    // While a view of the bundle is alive, extraction fails with the bundle unchanged.
    const auto held = sparse.grad(w.node);
    auto refused = sparse.take_grad(w.node);
    ASSERT_FALSE(refused.has_value());
    EXPECT_EQ(refused.error().code(), ErrorCode::borrow_conflict);
  }
  ASSERT_TRUE(sparse.grad(w.node).has_value());
  auto taken = sparse.take_grad(w.node);
  ASSERT_TRUE(taken.has_value() && taken.value().has_value());  // the owner
  EXPECT_EQ(taken.value()->as_view().get(Dims{1, 1}).real, 2.0);
  EXPECT_FALSE(sparse.grad(w.node).has_value());
  auto none = sparse.take_grad(w.node);
  ASSERT_TRUE(none.has_value());
  EXPECT_FALSE(none.value().has_value());  // no gradient
  Tensor bad = Tensor::zeros(Dims{3}, DType::f32);
  EXPECT_EQ(code_of([&] { s.tape().backward(l.node, bad.as_view()); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([&] { s.tape().backward(99, bad.as_view()); }), ErrorCode::invalid_argument);
}

// In a sparse backward an add hands its contiguous cotangent to an operand of its own shape (no copy)
// and its VJP computes only the other operand's gradient; the values are the dense pass's.
TEST(Tape, SparseBackwardHandsAnAddsCotangentToAnOperandOfItsShape) {
  Session s(contract::builtin_profile("cpu-checked"));
  EagerTensor x = s.leaf(values({2, 3}, {1, 2, 3, 4, 5, 6}));
  EagerTensor b = s.leaf(values({3}, {0.5, -1, 2}));
  EagerTensor c = s.constant(values({2, 3}, {10, 20, 30, 40, 50, 60}));
  EagerTensor y = s.apply(ops::OpTag::add, std::vector{b, x});   // b broadcast: x is the operand of y's shape
  EagerTensor xx = s.apply(ops::OpTag::add, std::vector{y, y});  // both operands from one parent
  EagerTensor l = s.apply(ops::OpTag::sum, std::vector{s.apply(ops::OpTag::mul, std::vector{xx, c})});
  AccountingRecorder dense_ledger;
  const Gradients dense = s.backward(l);
  const std::size_t dense_allocations = dense_ledger.allocations().size();
  AccountingRecorder sparse_ledger;
  const int keep[] = {x.node, b.node};
  const Gradients sparse = s.backward(l, keep);
  EXPECT_EQ(sparse_ledger.allocations().size() + 2, dense_allocations);  // y's and x's copies of a cotangent
  for (const Gradients* g : {&dense, &sparse}) {
    const auto gx = g->grad(x.node), gb = g->grad(b.node);
    ASSERT_TRUE(gx.has_value() && gb.has_value());
    for (std::int64_t k = 0; k < 6; ++k) EXPECT_EQ(gx->get(Dims{k / 3, k % 3}).real, 20.0 * (k + 1)) << k;
    const double column_sums[] = {100, 140, 180};
    for (std::int64_t j = 0; j < 3; ++j) EXPECT_EQ(gb->get(Dims{j}).real, column_sums[j]) << j;
  }
}

// A fan-out's gradients are summed into the first one in place: no allocation beyond the VJPs' own.
TEST(Tape, GradientsAccumulateOverFanOut) {
  Session s(contract::builtin_profile("cpu-checked"));
  EagerTensor x = s.leaf(values({2}, {3, 4}));
  EagerTensor y = s.apply(ops::OpTag::mul, std::vector{x, x});  // x^2: gradient 2x through two paths
  EagerTensor l = s.apply(ops::OpTag::sum, std::vector{y});
  AccountingRecorder ledger;
  Gradients g = s.backward(l);
  EXPECT_EQ(g.grad(x.node)->get(Dims{0}).real, 6.0);
  EXPECT_EQ(g.grad(x.node)->get(Dims{1}).real, 8.0);
  EXPECT_EQ(ledger.allocations().size(), 4u);  // the seed, sum's VJP and mul's two gradients
  EagerTensor xd = s.leaf(Tensor::from_values<double>(Dims{2}, std::vector<double>{0.1, -2}));
  EagerTensor ld = s.apply(ops::OpTag::sum, std::vector{s.apply(ops::OpTag::add, std::vector{xd, xd})});
  const Gradients gds = s.backward(ld);
  const auto gd = gds.grad(xd.node);
  ASSERT_TRUE(gd.has_value());
  EXPECT_EQ(gd->get(Dims{0}).real, 2.0);
  EXPECT_EQ(gd->dtype(), DType::f64);
}

TEST(Retention, HandlesShareRecordsAndIntoValueNeedsUniqueness) {
  AccountingRecorder ledger;
  Tensor t = values({2}, {1, 2});
  const auto id = t.span_identity().allocation_id;
  ValueRef r = retain(std::move(t));
  EXPECT_TRUE(ledger.copies().empty());
  EXPECT_EQ(ledger.allocations().size(), 1u);  // the from_values allocation only: retention allocates nothing
  EXPECT_EQ(r->view().span_identity().allocation_id, id);
  ValueRef sibling = r;
  auto refused = into_value(std::move(r));
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().first, IntoValueFailure::NotUnique);
  ValueRef back = std::move(refused.error().second);  // the usable handle comes back
  EXPECT_EQ(back->view().get(Dims{1}).real, 2.0);
  sibling.reset();
  auto owner = into_value(std::move(back));
  ASSERT_TRUE(owner.has_value());
  EXPECT_EQ(owner->span_identity().allocation_id, id);  // the same allocation, moved out
  EXPECT_TRUE(ledger.copies().empty());
}

// Issue 21 item 7: a handle is read-only. At 67b41fb any ValueRef reached container()->group_mut(), so a
// probe overwrote the tape's retained value (backward then used the wrong number) and extracted the
// owner while another handle shared it. Now a record hands out only a const container, the container
// has no public mutable path, and the group comes out only through a uniqueness check.
template <class C>
concept HasMutableGroup = requires(C& c) {
  c.group_mut();
};
template <class C>
concept ViewsMutably = requires(C& c, DescriptorSlot s) {
  c.view_mut(s);
};

TEST(Retention, AHandleCannotWriteOrExtractWhatItShares) {
  static_assert(!HasMutableGroup<RetentionContainer>, "a retention container exposes no mutable group");
  using Container = std::remove_reference_t<decltype(*std::declval<const AdValueRecord&>().container())>;
  static_assert(std::is_const_v<Container>, "a record hands out its container read-only");
  using Group = std::remove_reference_t<decltype(std::declval<Container&>().group())>;
  static_assert(std::is_const_v<Group> && !ViewsMutably<Group>, "the shared group grants no mutable view");

  Session s(contract::builtin_profile("cpu-checked"));
  EagerTensor w = s.leaf(values({2}, {1, 2}));
  EagerTensor y = s.apply(ops::OpTag::mul, std::vector{w, w});  // the tape retains w
  ValueRef probe = w.value;
  EXPECT_EQ(probe->view().get(Dims{1}).real, 2.0);
  // The only way to the group is consuming the container's last reference; the tape holds another.
  std::shared_ptr<RetentionContainer> container = std::const_pointer_cast<RetentionContainer>(probe->container());
  EXPECT_EQ(code_of([&] { (void)RetentionContainer::into_group(std::move(container)); }), ErrorCode::borrow_conflict);
  ASSERT_NE(container, nullptr);  // refused: the reference is kept
  container.reset();
  auto refused = into_value(std::move(probe));
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().first, IntoValueFailure::NotUnique);
  Gradients g = s.backward(y);
  const auto grad = g.grad(w.node);
  ASSERT_TRUE(grad.has_value());
  EXPECT_EQ(grad->get(Dims{1}).real, 4.0);  // d(w*w)/dw = 2w, from the untouched retained value
}

TEST(Retention, TapeKeepsValuesAliveUntilCleared) {
  Session s(contract::builtin_profile("cpu-checked"));
  EagerTensor w = s.leaf(values({2}, {1, 2}));
  EagerTensor y = s.apply(ops::OpTag::mul, std::vector{w, w});
  (void)y;
  auto refused = into_value(std::move(w.value));
  ASSERT_FALSE(refused.has_value());  // the tape still retains w as mul's input
  w.value = std::move(refused.error().second);
  s.tape().clear();
  y = EagerTensor{};
  EXPECT_TRUE(into_value(std::move(w.value)).has_value());
}

TEST(Executor, OneGraphThroughEveryPathGivesIdenticalResults) {
  // Note [One interpreter]: the eager API applied node by node (model code), the planned interpreter with
  // a session (training), the same with a checkpoint region (recompute in backward) and without a
  // session (imported-model runs, submission) compute the same loss, bitwise, and the recording paths the
  // same gradients.
  ir::GraphBuilder b;
  b.input("x", Dims{4, 8});
  b.parameter("w1", Dims{16, 8});
  b.parameter("w2", Dims{2, 16});
  b.op("h", ops::OpTag::linear, {"x", "w1"});
  b.op("a", ops::OpTag::gelu, {"h"});
  b.op("t", ops::OpTag::transpose, {"a"}, {{"dim0", std::int64_t{0}}, {"dim1", std::int64_t{1}}});
  b.op("u", ops::OpTag::transpose, {"t"}, {{"dim0", std::int64_t{0}}, {"dim1", std::int64_t{1}}});
  b.op("y", ops::OpTag::linear, {"u", "w2"});
  b.op("s", ops::OpTag::sum, {"y"});
  b.output("s");
  const ir::Graph g = b.build();
  auto plan = plan::plan_graph(g, contract::builtin_profile("cpu-checked"), contract::DefaultEvidenceResolver{},
                               contract::VjpMode::with_vjp);
  ASSERT_TRUE(plan.has_value());
  std::vector<float> xv(32), w1v(128), w2v(32);
  for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = 0.1f * static_cast<float>(i % 7) - 0.2f;
  for (std::size_t i = 0; i < w1v.size(); ++i) w1v[i] = 0.05f * static_cast<float>(i % 11) - 0.25f;
  for (std::size_t i = 0; i < w2v.size(); ++i) w2v[i] = 0.03f * static_cast<float>(i % 5) - 0.06f;

  enum class Path { eager_api, planned, planned_checkpointed };
  auto run = [&](Path path) {
    Session s(contract::builtin_profile("cpu-checked"));
    std::map<std::string, EagerTensor> bind{{"x", s.constant(values({4, 8}, xv))},
                                            {"w1", s.leaf(values({16, 8}, w1v))},
                                            {"w2", s.leaf(values({2, 16}, w2v))}};
    EagerTensor out;
    if (path == Path::eager_api) {
      std::map<std::string, EagerTensor> v = bind;
      for (const auto& n : g.nodes) {
        if (ops::op_info(n.op).role != ops::OpRole::kernel && ops::op_info(n.op).role != ops::OpRole::view) continue;
        std::vector<EagerTensor> in;
        for (const auto& id : n.inputs) in.push_back(v.at(id));
        v.emplace(n.id, s.apply(n.op, in, n.attrs, n.id));
      }
      out = v.at("s");
    } else {
      ExecutionOptions options;
      options.session = &s;
      if (path == Path::planned_checkpointed) options.checkpoint_regions = {{"h", "a", "t", "u"}};
      out = execute(*plan, bind, options).outputs.at("s");
    }
    Gradients grads = s.backward(out);
    return std::tuple{out.view().get(Dims{}).real, grads.grad(bind.at("w1").node)->duplicate(),
                      grads.grad(bind.at("w2").node)->duplicate()};
  };
  const auto reference = run(Path::eager_api);
  for (Path path : {Path::planned, Path::planned_checkpointed}) {
    const auto [loss, g1, g2] = run(path);
    EXPECT_EQ(loss, std::get<0>(reference));
    for (std::int64_t i = 0; i < 16; ++i)
      for (std::int64_t j = 0; j < 8; ++j)
        EXPECT_EQ(g1.get(Dims{i, j}).real, std::get<1>(reference).get(Dims{i, j}).real);
    for (std::int64_t i = 0; i < 2; ++i)
      for (std::int64_t j = 0; j < 16; ++j)
        EXPECT_EQ(g2.get(Dims{i, j}).real, std::get<2>(reference).get(Dims{i, j}).real);
  }

  // Without a session: forward only, the same loss; liveness holds less than the sum of every value.
  Session s(contract::builtin_profile("cpu-checked"));
  std::map<std::string, EagerTensor> bind{{"x", s.constant(values({4, 8}, xv))},
                                          {"w1", s.constant(values({16, 8}, w1v))},
                                          {"w2", s.constant(values({2, 16}, w2v))}};
  ExecutionResult r = execute(*plan, bind);
  EXPECT_EQ(r.outputs.at("s").view().get(Dims{}).real, std::get<0>(reference));
  const std::uint64_t all = (32 + 128 + 32 + 64 + 64 + 64 + 64 + 8 + 1) * 4;
  EXPECT_GT(r.peak_bytes, 0u);
  EXPECT_LT(r.peak_bytes, all);
  EXPECT_EQ(code_of([&] { execute(*plan, std::map<std::string, EagerTensor>{}); }), ErrorCode::invalid_argument);
  // Checkpoint regions need a session to record them.
  ExecutionOptions no_session;
  no_session.checkpoint_regions = {{"h", "a"}};
  EXPECT_EQ(code_of([&] { execute(*plan, bind, no_session); }), ErrorCode::invalid_argument);
}

}  // namespace
}  // namespace pact::runtime

namespace pact::runtime {
namespace {

// Note [Donated operands]: index_copy writes into operand 0 when the caller moved in its only handle and
// nothing else reads it; a caller that keeps a handle gets a new value and its own is untouched. Both give
// the same values, under every provider that serves index_copy (native, reference, half).
TEST(Executor, ADonatedOperandIsUpdatedInPlaceAndAKeptOneIsNot) {
  for (const char* profile : {"cpu-checked", "cpu-deterministic"}) {
    for (DType dtype : {DType::f32, DType::bf16}) {
      if (dtype == DType::bf16 && std::string(profile) == "cpu-deterministic") continue;  // no reference bf16
      ir::GraphBuilder b;
      b.input("cache", Dims{2, 5, 3}, dtype);
      b.input("at", Dims{2}, DType::i64);
      b.input("rows", Dims{2, 2, 3}, dtype);
      b.op("next", ops::OpTag::index_copy, {"cache", "at", "rows"}, {{"dim", std::int64_t{1}}});
      b.output("next");
      auto plan = plan::plan_graph(b.build(), contract::builtin_profile(profile), contract::DefaultEvidenceResolver{});
      ASSERT_TRUE(plan.has_value()) << profile;
      auto bindings = [&](EagerTensor cache) {
        std::vector<float> rows(12);
        for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<float>(i + 1);
        const std::vector<std::int64_t> at{3, 0};
        return std::map<std::string, EagerTensor>{
            {"cache", std::move(cache)},
            {"at", EagerTensor{retain(Tensor::from_values<std::int64_t>({2}, at))}},
            {"rows", EagerTensor{retain(Tensor::from_values<float>({2, 2, 3}, rows).as_view().convert(dtype))}}};
      };
      auto fresh = [&] { return EagerTensor{retain(Tensor::full({2, 5, 3}, dtype, -1.0))}; };

      EagerTensor kept = fresh();
      const auto kept_id = kept.view().span_identity();
      ExecutionResult copied = execute(*plan, bindings(kept));
      const TensorView out_copied = copied.outputs.at("next").view();
      EXPECT_NE(out_copied.span_identity(), kept_id) << profile;
      EXPECT_EQ(kept.view().to_doubles(), std::vector<double>(30, -1.0)) << "the kept cache was written";

      EagerTensor donated = fresh();
      const auto donated_id = donated.view().span_identity();
      ExecutionResult in_place = execute(*plan, bindings(std::move(donated)));
      const TensorView out = in_place.outputs.at("next").view();
      EXPECT_EQ(out.span_identity(), donated_id) << profile << ": the donated cache was copied";
      EXPECT_EQ(out.to_doubles(), out_copied.to_doubles());
      EXPECT_EQ(out.get(Dims{0, 3, 0}).real, 1.0);
      EXPECT_EQ(out.get(Dims{1, 0, 2}).real, 12.0);
      EXPECT_EQ(out.get(Dims{1, 1, 0}).real, -1.0);
    }
  }
}

}  // namespace
}  // namespace pact::runtime
