// The CUDA provider on a real device (label gpu; issue 26): device storage (transfers both ways, strided
// views, duplicates, zeros, the copy ledger, no host access), and every CUDA handler held to the reference
// provider on the op sweep's samples (forward, forward on strided inputs, every VJP input), with a wrong
// kernel shown failing the same comparison. Without a driver, a device or the kernels the test says so and
// skips; under PACT_REQUIRE_GPU=1 that is a failure.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "pact/contract/check.hpp"
#include "pact/core/accounting.hpp"
#include "pact/core/cuda_device.hpp"
#include "pact/ir/graph.hpp"
#include "pact/kernels/cublas.hpp"
#include "pact/kernels/cublaslt.hpp"
#include "pact/kernels/cudnn.hpp"
#include "pact/kernels/kernel.hpp"
#include "pact/plan/planner.hpp"
#include "pact/runtime/executor.hpp"
#include "pact/runtime/session.hpp"
#include "pact/runtime/submit.hpp"
#include "pact/runtime/torch_run.hpp"
#include "pact/train/optim.hpp"
#include "pact/train/trainer.hpp"
#include "pact/verify/oracle.hpp"
#include "pact/verify/samples.hpp"
#if defined(PACT_CUDA_EMULATED)
#include "tests/gpu/emulator/emulator.hpp"
#endif

namespace pact {
namespace {

// The checkout, or where scripts/gpu-check.sh's bundle keeps the files the tests read.
const char* const kSource =
    std::getenv("PACT_SOURCE_DIR") != nullptr ? std::getenv("PACT_SOURCE_DIR") : PACT_SOURCE_DIR;

bool gpu_required() {
  const char* v = std::getenv("PACT_REQUIRE_GPU");
  return v != nullptr && std::string(v) == "1";
}

#define PACT_GPU_OR_SKIP()                                                           \
  do {                                                                               \
    if (cuda_provider()->name() != "cuda") {                                         \
      const std::string why = "no CUDA device: " + CudaDevice::unavailable_reason(); \
      if (gpu_required()) FAIL() << "PACT_REQUIRE_GPU=1 but " << why;                \
      GTEST_SKIP() << why;                                                           \
    }                                                                                \
    if (!kernels::cuda_kernels_built()) {                                            \
      const std::string why = "this build has no CUDA kernels (PACT_WITH_CUDA=OFF)"; \
      if (gpu_required()) FAIL() << "PACT_REQUIRE_GPU=1 but " << why;                \
      GTEST_SKIP() << why;                                                           \
    }                                                                                \
  } while (false)

// cuBLAS, for the cublas provider's tests: on a GPU machine it is part of the CUDA installation (a failure
// under PACT_REQUIRE_GPU=1 when absent); the emulator has none.
#define PACT_CUBLAS_OR_SKIP()                                                       \
  do {                                                                              \
    if (kernels::cublas() == nullptr) {                                             \
      const std::string why = "no cuBLAS: " + kernels::cublas_unavailable_reason(); \
      if (gpu_required()) FAIL() << "PACT_REQUIRE_GPU=1 but " << why;               \
      GTEST_SKIP() << why;                                                          \
    }                                                                               \
  } while (false)

Tensor host_values(const Dims& shape, float start) {
  std::vector<float> v;
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  for (std::int64_t i = 0; i < n; ++i) v.push_back(start + static_cast<float>(i) * 0.25f);
  return Tensor::from_values<float>(shape, std::span<const float>(v));
}

TEST(CudaStorage, TransfersRoundTripThroughTheDevice) {
  PACT_GPU_OR_SKIP();
  std::printf("device: %s\n", CudaDevice::get()->description().c_str());
  const Tensor h = host_values(Dims{37, 53}, -3.0f);
  AccountingRecorder rec;
  const Tensor d = h.transfer_to(cuda_provider());
  EXPECT_EQ(d.as_view().provider_name(), "cuda");
  // Device storage offers no host access.
  auto mapped = d.prepare_host<float>();
  ASSERT_FALSE(mapped);
  EXPECT_EQ(std::move(mapped).error().error.code(), ErrorCode::not_host_accessible);
  const Tensor back = d.transfer_to(cpu_provider());
  EXPECT_EQ(back.to_doubles(), h.to_doubles());
  ASSERT_EQ(rec.copies().size(), 2u);
  EXPECT_EQ(rec.copies()[0].reason, CopyReason::Transfer);
  EXPECT_EQ(rec.copies()[0].bytes, 37u * 53u * 4u);

  // A strided device view (transposed) copied to the host, and to a new device tensor, in logical order.
  const TensorView t = d.transpose(0, 1);
  const Tensor t_host = t.transfer_to(cpu_provider());
  EXPECT_EQ(t_host.to_doubles(), h.transpose(0, 1).duplicate().to_doubles());
  const Tensor t_dev = t.duplicate();
  EXPECT_EQ(t_dev.transfer_to(cpu_provider()).to_doubles(), t_host.to_doubles());
  // A host strided view to the device.
  const Tensor from_strided = h.transpose(0, 1).transfer_to(cuda_provider());
  EXPECT_EQ(from_strided.transfer_to(cpu_provider()).to_doubles(), t_host.to_doubles());
  // zeros on the device are zero.
  const Tensor z = Tensor::zeros(Dims{1000}, DType::f32, cuda_provider());
  for (double v : z.transfer_to(cpu_provider()).to_doubles()) ASSERT_EQ(v, 0.0);
  // Completion of the work so far is provable.
  Completion c = CudaDevice::get()->fence();
  c.wait();
  EXPECT_TRUE(c.done());
  EXPECT_FALSE(CudaDevice::get()->poisoned());
}

TEST(CudaStorage, ReleasedBlocksAreReusedByThePool) {
  PACT_GPU_OR_SKIP();
  // A training step frees and re-allocates the same sizes: the stream-ordered pool serves them again.
  for (int i = 0; i < 200; ++i) {
    Tensor t = Tensor::empty(Dims{1 << 20}, DType::f32, cuda_provider());
    EXPECT_EQ(t.numel(), 1 << 20);
  }
  CudaDevice::get()->synchronize();
  EXPECT_EQ(CudaDevice::get()->retained_blocks(), 0u);
}

const kernels::Handler& reference_of(ops::OpTag op) {
  const kernels::Handler* h = kernels::find_handler(kernels::reference_handlers(), op);
  if (h == nullptr) throw std::runtime_error("no reference handler");
  return *h;
}

TEST(CudaOps, MatchReferenceOnTheSweepSamples) {
  PACT_GPU_OR_SKIP();
  std::mt19937 rng(2026);
  const auto samples = verify::provider_samples();
  // The cuda provider's kernels, and the cublas provider's (the same code, the products through cuBLAS)
  // where cuBLAS is present (CublasOps.* says when it is not).
  std::vector<kernels::Handler> handlers(kernels::cuda_handlers().begin(), kernels::cuda_handlers().end());
  if (kernels::cublas() != nullptr)
    handlers.insert(handlers.end(), kernels::cublas_handlers().begin(), kernels::cublas_handlers().end());
  if (kernels::cublaslt() != nullptr)
    handlers.insert(handlers.end(), kernels::cublaslt_handlers().begin(), kernels::cublaslt_handlers().end());
  if (kernels::cudnn() != nullptr)
    handlers.insert(handlers.end(), kernels::cudnn_handlers().begin(), kernels::cudnn_handlers().end());
  for (const auto& h : handlers) {
    int ran = 0;
    for (const auto& s : samples) {
      if (s.op != h.op) continue;
      ++ran;
      std::vector<std::string> problems;
      try {
        problems = verify::sweep_problems(h, reference_of(h.op), s, rng);
      } catch (const Error& e) {
        problems.push_back(std::string("threw ") + e.what());
      }
      for (const auto& p : problems) ADD_FAILURE() << verify::describe(s) << ": " << p;
    }
    EXPECT_GT(ran, 0) << ops::op_kind(h.op) << " has no sample";
    std::printf("%s.%s: %d samples\n", std::string(h.provider).c_str(), std::string(ops::op_kind(h.op)).c_str(), ran);
  }
#if defined(PACT_CUDA_EMULATED)
  EXPECT_EQ(emu::cudnn_descriptors_alive(), 0) << "the cudnn provider left descriptors behind";
  EXPECT_EQ(emu::cublaslt_descriptors_alive(), 0) << "the cublaslt provider left descriptors behind";
#endif
}

// The cublas provider's handlers are in the sweep above only where cuBLAS loads: this says so (and fails under
// PACT_REQUIRE_GPU=1 on a GPU machine without it).
TEST(CublasOps, CublasLoadsOnTheDevice) {
  PACT_GPU_OR_SKIP();
  PACT_CUBLAS_OR_SKIP();
  EXPECT_TRUE(kernels::cublas_unavailable_reason().empty());
}

// Likewise cuBLASLt for the cublaslt provider; it ships with cuBLAS (which loads it), so a GPU machine has it.
TEST(CublasLtOps, CublasLtLoadsOnTheDevice) {
  PACT_GPU_OR_SKIP();
  if (kernels::cublaslt() == nullptr) {
    const std::string why = "no cuBLASLt: " + kernels::cublaslt_unavailable_reason();
    if (gpu_required()) FAIL() << "PACT_REQUIRE_GPU=1 but " << why;
    GTEST_SKIP() << why;
  }
  EXPECT_TRUE(kernels::cublaslt_unavailable_reason().empty());
}

// Likewise cuDNN for the cudnn provider. cuDNN is not part of every CUDA installation (PyTorch's wheels carry
// their own), so its absence skips with the reason even under PACT_REQUIRE_GPU=1.
TEST(CudnnOps, CudnnLoadsOnTheDevice) {
  PACT_GPU_OR_SKIP();
  if (kernels::cudnn() == nullptr) GTEST_SKIP() << "no cuDNN: " << kernels::cudnn_unavailable_reason();
  EXPECT_TRUE(kernels::cudnn_unavailable_reason().empty());
}

TEST(CudaOps, EveryGemmKernelMatchesTheReference) {
  PACT_GPU_OR_SKIP();
  using verify::sampling::N;
  // Shapes across the 128 x 128 tile edges, k not a multiple of the stage, batches with a broadcast operand,
  // and the strided kernel's (k and n not multiples of 4).
  const std::vector<verify::Sample> shapes{
      {ops::OpTag::matmul, {N(Dims{130, 68}), N(Dims{68, 260})}, {}},
      {ops::OpTag::matmul, {N(Dims{3, 64, 36}), N(Dims{36, 20})}, {}},
      {ops::OpTag::matmul, {N(Dims{2, 1, 17, 40}), N(Dims{3, 40, 12})}, {}},
      {ops::OpTag::matmul, {N(Dims{5, 7}), N(Dims{7, 9})}, {}},
      {ops::OpTag::matmul, {N(Dims{64}), N(Dims{64, 256})}, {}},
      {ops::OpTag::linear, {N(Dims{33, 96}), N(Dims{40, 96}), N(Dims{40})}, {}},
  };
  for (const char* kernel : {"pact_gemm_f32", "pact_gemm_f32_vec8", "pact_gemm_f32_vec8_b1", "pact_gemm_f32_vec16",
                             "pact_gemm_f32_vec16_b1"}) {
    ::setenv("PACT_CUDA_GEMM", kernel, 1);
    std::mt19937 rng(11);
    for (const auto& s : shapes) {
      const kernels::Handler* h = kernels::find_handler(kernels::cuda_handlers(), s.op);
      for (const auto& p : verify::sweep_problems(*h, reference_of(s.op), s, rng))
        ADD_FAILURE() << kernel << ": " << verify::describe(s) << ": " << p;
    }
  }
  ::unsetenv("PACT_CUDA_GEMM");
}

TEST(CudaOps, AttentionMatchesTheReferenceFusedAndThroughProbabilities) {
  PACT_GPU_OR_SKIP();
  using verify::sampling::M;
  using verify::sampling::N;
  const auto sdpa = ops::OpTag::scaled_dot_product_attention;
  const std::vector<verify::Sample> cases{
      // The fused kernel's three value widths (up to 32, 64, 128 columns); query rows past one 64-row tile,
      // keys past one 32-key tile; causal with L < S and L > S; head widths whose float4 count is odd, even
      // and not whole (13: zero-padded).
      {sdpa, {N(Dims{2, 45, 24}), N(Dims{2, 70, 24}), N(Dims{2, 70, 40})}, {{"is_causal", true}}},
      {sdpa, {N(Dims{2, 3, 33, 16}), N(Dims{2, 3, 33, 16}), N(Dims{2, 3, 33, 16})}, {{"scale", 0.3}}},
      {sdpa, {N(Dims{1, 130, 20}), N(Dims{1, 75, 20}), N(Dims{1, 75, 100})}, {{"is_causal", true}}},
      {sdpa, {N(Dims{2, 70, 13}), N(Dims{2, 50, 13}), N(Dims{2, 50, 7})}, {}},
      // a boolean mask broadcast over the batch, and an additive one
      {sdpa, {N(Dims{2, 40, 8}), N(Dims{2, 36, 8}), N(Dims{2, 36, 8}), M(Dims{40, 36})}, {}},
      {sdpa, {N(Dims{2, 40, 8}), N(Dims{2, 36, 8}), N(Dims{2, 36, 8}), N(Dims{2, 1, 36})}, {}},
      // through the probabilities: values wider than 128, and a head whose tiles pass the shared-memory limit
      {sdpa, {N(Dims{20, 264}), N(Dims{12, 264}), N(Dims{12, 260})}, {}},
      {sdpa, {N(Dims{9, 420}), N(Dims{11, 420}), N(Dims{11, 8})}, {}},
  };
  std::mt19937 rng(5);
  const kernels::Handler* h = kernels::find_handler(kernels::cuda_handlers(), sdpa);
  ASSERT_NE(h, nullptr);
  for (const auto& s : cases) {
    for (const auto& p : verify::sweep_problems(*h, reference_of(sdpa), s, rng))
      ADD_FAILURE() << verify::describe(s) << ": " << p;
  }
  // Through the probabilities, P is made a chunk of query rows at a time (Note [Attention in chunks]): whole
  // batch entries per chunk by default. Forced small: 16 KiB holds three of the 33 x 33 heads' six entries;
  // 1 KiB holds 3 rows of the causal case's 45 and 7 of the masked cases' 40 (the last chunk of an entry
  // shorter); 256 bytes 5 rows of the wide heads' 20 and 9.
  const std::pair<const char*, std::vector<std::size_t>> chunked[] = {
      {"16384", {1}}, {"1024", {0, 4, 5}}, {"256", {6, 7}}};
  for (const auto& [chunk_bytes, which] : chunked) {
    ::setenv("PACT_CUDA_ATTENTION_CHUNK_BYTES", chunk_bytes, 1);
    for (std::size_t i : which) {
      for (const auto& p : verify::sweep_problems(*h, reference_of(sdpa), cases[i], rng))
        ADD_FAILURE() << "chunks of " << chunk_bytes << " bytes, " << verify::describe(cases[i]) << ": " << p;
    }
  }
  // A bound that is not a positive whole number of bytes is refused, naming it.
  for (const char* bad : {"0", "-5", "64k", "lots"}) {
    ::setenv("PACT_CUDA_ATTENTION_CHUNK_BYTES", bad, 1);
    const Tensor q = host_values(Dims{1, 4, 3}, 0.0f).transfer_to(cuda_provider());
    const Tensor big_v = host_values(Dims{1, 4, 300}, 0.0f).transfer_to(cuda_provider());  // through P
    const std::vector<TensorView> in{q.as_view(), q.as_view(), big_v.as_view()};
    try {
      (void)kernels::run_forward(*h, in, {});
      ADD_FAILURE() << "PACT_CUDA_ATTENTION_CHUNK_BYTES=" << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::string("PACT_CUDA_ATTENTION_CHUNK_BYTES=") + bad), std::string::npos)
          << e.what();
    }
  }
  ::unsetenv("PACT_CUDA_ATTENTION_CHUNK_BYTES");
}

// The op table's saves column on the device (as tests/kernels/saves_test.cpp on the CPU): the tape hands a
// VJP geometry-only placeholders for what its op does not save, so each cuda VJP must give the same
// gradients with only the saved operands real.
TEST(CudaOps, EveryVjpReadsOnlyWhatItsOpSaves) {
  PACT_GPU_OR_SKIP();
  std::mt19937 rng(17);
  for (const auto& s : verify::samples()) {
    const kernels::Handler* h = kernels::find_handler(kernels::cuda_handlers(), s.op);
    if (h == nullptr || h->vjp == nullptr) continue;
    SCOPED_TRACE(verify::describe(s));
    const ops::OpInfo& info = ops::op_info(s.op);
    std::vector<Tensor> ins;
    for (const auto& in : s.inputs) ins.push_back(verify::make_input(in, DType::f32, rng).transfer_to(cuda_provider()));
    const kernels::KernelContext ctx{s.training, 41};
    const Tensor y = kernels::run_forward(*h, verify::views_of(ins), s.attrs, ctx);
    std::vector<double> gv(static_cast<std::size_t>(y.numel()), 0.5);
    const Tensor g = Tensor::from_values<double>(y.shape(), std::span<const double>(gv))
                         .convert(DType::f32)
                         .transfer_to(cuda_provider());
    std::vector<Tensor> placeholders;
    placeholders.reserve(ins.size() + 1);
    std::vector<TensorView> saved;
    for (std::size_t k = 0; k < ins.size(); ++k) {
      if (info.saves_input(k)) {
        saved.push_back(ins[k].as_view());
      } else {
        placeholders.push_back(Tensor::empty(ins[k].shape(), ins[k].dtype(), meta_provider()));
        saved.push_back(placeholders.back().as_view());
      }
    }
    const Tensor y_placeholder = Tensor::empty(y.shape(), y.dtype(), meta_provider());
    const auto full = kernels::run_vjp(*h, verify::views_of(ins), y.as_view(), g.as_view(), s.attrs, ctx);
    std::vector<std::optional<Tensor>> only;
    try {
      only = kernels::run_vjp(*h, saved, info.saves_output() ? y.as_view() : y_placeholder.as_view(), g.as_view(),
                              s.attrs, ctx);
    } catch (const Error& e) {
      ADD_FAILURE() << "the VJP reads an operand its op does not save: " << e.what();
      continue;
    }
    ASSERT_EQ(only.size(), full.size());
    for (std::size_t k = 0; k < full.size(); ++k) {
      ASSERT_EQ(only[k].has_value(), full[k].has_value());
      if (full[k]) {
        EXPECT_EQ(only[k]->transfer_to(cpu_provider()).to_doubles(), full[k]->transfer_to(cpu_provider()).to_doubles());
      }
    }
  }
}

// The digits MLP planned under cuda-checked and run through the one interpreter with a recording session, then
// updated by Adam through the profile's admitted update kernels, three steps: the plan and the updates admit
// only cuda capsules, and the first loss, the first gradients and the parameters after the steps match the
// cpu-checked run.
struct MlpRun {
  double loss = 0;
  std::vector<std::vector<double>> grads, params;
  std::vector<std::string> capsules;
};

std::vector<double> host_values_of(const TensorView& v) {
  return v.device() == DeviceKind::cpu ? v.to_doubles() : v.transfer_to(cpu_provider()).to_doubles();
}

MlpRun run_digits_mlp(const char* profile_name, int steps) {
  const ir::Graph g = ir::load_graph(std::string(kSource) + "/examples/models/digits_mlp.json");
  const contract::BackendProfile profile = contract::builtin_profile(profile_name);
  const bool device = std::string(profile_name).starts_with("cuda");
  auto place = [&](Tensor t) { return device ? t.transfer_to(cuda_provider()) : std::move(t); };
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 0.3f);
  auto values = [&](const Dims& shape) {
    std::vector<float> v(static_cast<std::size_t>(ops::numel(shape)));
    for (auto& x : v) x = nd(rng);
    return Tensor::from_values<float>(shape, std::span<const float>(v));
  };
  std::map<std::string, Tensor> data;
  std::vector<std::string> names;
  std::vector<Tensor> params;
  for (const auto& n : g.nodes) {
    if (n.op == ops::OpTag::input && n.type.dtype == DType::i64) {
      std::vector<std::int64_t> t;
      for (std::int64_t i = 0; i < n.type.shape[0]; ++i) t.push_back((i * 7) % 10);
      data.emplace(n.id, place(Tensor::from_values<std::int64_t>(n.type.shape, std::span<const std::int64_t>(t))));
    } else if (n.op == ops::OpTag::input) {
      data.emplace(n.id, place(values(n.type.shape)));
    } else if (n.op == ops::OpTag::parameter) {
      names.push_back(n.id);
      params.push_back(place(values(n.type.shape)));
    }
  }
  auto planned = plan::plan_graph(g, profile, contract::DefaultEvidenceResolver{}, contract::VjpMode::with_vjp);
  if (!planned) throw std::runtime_error(plan::render_audit_table(planned.error().audit));
  MlpRun r;
  for (const auto& k : planned->audit().kernels)
    r.capsules.push_back(k.capsule != nullptr ? k.capsule->name : "(none)");
  const std::vector<contract::BoundKernel> updates = train::admit_updates(ops::OpTag::adam, params, false, profile);
  std::vector<const contract::BoundKernel*> update_ptrs;
  for (const auto& u : updates) {
    update_ptrs.push_back(&u);
    r.capsules.push_back(u.capsule()->name);
  }
  train::AdamState state;
  for (int step = 0; step < steps; ++step) {
    runtime::Session s(profile, 7);
    std::map<std::string, runtime::EagerTensor> bind;
    for (const auto& [id, t] : data) bind.emplace(id, s.constant(t.duplicate()));
    for (std::size_t p = 0; p < params.size(); ++p) bind.emplace(names[p], s.leaf(params[p].duplicate()));
    runtime::ExecutionOptions options;
    options.session = &s;
    const auto out = runtime::execute(*planned, bind, options).outputs;
    const runtime::EagerTensor& loss = out.at(g.outputs.back());
    runtime::Gradients grads = s.backward(loss);
    std::vector<Tensor> owned;
    std::vector<std::optional<TensorView>> views;
    for (const auto& name : names) {
      auto t = grads.take_grad(bind.at(name).node);
      if (!t || !t.value()) throw std::runtime_error("no gradient for " + name);
      owned.push_back(std::move(*t.value()));
    }
    for (const auto& t : owned) views.emplace_back(t.as_view());
    if (step == 0) {
      r.loss = host_values_of(loss.view())[0];
      for (const auto& t : owned) r.grads.push_back(host_values_of(t.as_view()));
    }
    state = train::adam_step(update_ptrs, params, views, train::AdamOptions{.lr = 1e-2}, std::move(state));
  }
  for (const auto& p : params) r.params.push_back(host_values_of(p.as_view()));
  return r;
}

void expect_close(const std::vector<std::vector<double>>& got, const std::vector<std::vector<double>>& want, double rel,
                  const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t p = 0; p < want.size(); ++p) {
    ASSERT_EQ(got[p].size(), want[p].size()) << what;
    double scale = 1e-6;
    for (double v : want[p]) scale = std::max(scale, std::abs(v));
    for (std::size_t i = 0; i < want[p].size(); ++i)
      ASSERT_NEAR(got[p][i], want[p][i], rel * scale) << what << " of parameter " << p << ", element " << i;
  }
}

TEST(CudaPlan, TheDigitsMlpTrainsThroughTheCudaPlanAsOnTheCpu) {
  PACT_GPU_OR_SKIP();
  const MlpRun cpu = run_digits_mlp("cpu-checked", 3);
  const MlpRun gpu = run_digits_mlp("cuda-checked", 3);
  ASSERT_FALSE(gpu.capsules.empty());
  for (const auto& c : gpu.capsules) EXPECT_TRUE(c.starts_with("cuda.")) << c;
  EXPECT_NE(std::find(gpu.capsules.begin(), gpu.capsules.end(), "cuda.adam"), gpu.capsules.end());
  EXPECT_NEAR(gpu.loss, cpu.loss, 1e-5 * std::max(1.0, std::abs(cpu.loss)));
  expect_close(gpu.grads, cpu.grads, 1e-4, "the first step's gradient");
  expect_close(gpu.params, cpu.params, 1e-4, "the value after three Adam steps");
}

// `pact train --profile cuda-checked`: the TrainingSession places its parameters and each batch on the device,
// and the char transformer (embedding, causal attention, views, layer norms, GELU MLP, cross entropy) and the
// digits MLP follow the CPU's run step for step; predictions and the loss come back to the host.
struct DeviceTraining {
  std::vector<double> losses;
  std::vector<std::vector<double>> params;
  std::vector<double> logits;
  std::string logits_provider;
};

DeviceTraining train_steps(const train::Objective& base, const char* profile, std::int64_t batch,
                           const std::function<std::pair<Tensor, Tensor>(int)>& batch_of, int steps) {
  train::Objective o = base;
  o.options.profile = profile;
  train::TrainingSession session(o, train::init_parameters(o.graph(batch), 11));
  DeviceTraining r;
  train::OptimizerState state;
  for (int i = 0; i < steps; ++i) {
    auto [x, y] = batch_of(i);
    train::StepResult step = session.step_batch(std::move(x), std::move(y), std::move(state));
    state = std::move(step.state);
    r.losses.push_back(step.loss);
  }
  for (const auto& v : session.parameters().values) r.params.push_back(host_values_of(v.as_view()));
  const Tensor logits = session.predict(batch_of(steps).first);
  r.logits = host_values_of(logits.as_view());
  r.logits_provider = std::string(logits.provider_name());
  return r;
}

void expect_same_training(const DeviceTraining& gpu, const DeviceTraining& cpu) {
  ASSERT_EQ(gpu.losses.size(), cpu.losses.size());
  for (std::size_t i = 0; i < cpu.losses.size(); ++i)
    EXPECT_NEAR(gpu.losses[i], cpu.losses[i], 1e-4 * std::max(1.0, std::abs(cpu.losses[i]))) << "step " << i;
  expect_close(gpu.params, cpu.params, 5e-3, "the parameters after the steps");
  EXPECT_EQ(gpu.logits_provider, "cpu");  // predictions come back to host memory
  expect_close({gpu.logits}, {cpu.logits}, 1e-3, "the logits");
}

TEST(CudaTrain, TheCharTransformerTrainsOnTheDeviceAsOnTheCpu) {
  PACT_GPU_OR_SKIP();
  constexpr std::int64_t batch = 4, t = 16, vocab = 29;
  train::Objective o;
  o.graph = [](std::int64_t b) { return train::char_transformer(b, t, vocab, 32, 4); };
  o.options.lr = 3e-3;
  std::mt19937_64 rng(5);
  std::vector<std::vector<std::int64_t>> tokens;
  for (int i = 0; i < 5; ++i) {
    std::vector<std::int64_t> w(static_cast<std::size_t>(batch * (t + 1)));
    for (auto& v : w) v = static_cast<std::int64_t>(rng() % vocab);
    tokens.push_back(std::move(w));
  }
  auto batch_of = [&](int i) {
    std::vector<std::int64_t> x, y;
    const auto& w = tokens[static_cast<std::size_t>(i)];
    for (std::int64_t b = 0; b < batch; ++b) {
      x.insert(x.end(), w.begin() + b * (t + 1), w.begin() + b * (t + 1) + t);
      y.insert(y.end(), w.begin() + b * (t + 1) + 1, w.begin() + (b + 1) * (t + 1));
    }
    return std::pair{Tensor::from_values<std::int64_t>(Dims{batch, t}, x),
                     Tensor::from_values<std::int64_t>(Dims{batch * t}, y)};
  };
  const DeviceTraining cpu = train_steps(o, "cpu-checked", batch, batch_of, 4);
  const DeviceTraining gpu = train_steps(o, "cuda-checked", batch, batch_of, 4);
  expect_same_training(gpu, cpu);
  // Every kernel of the device plan is a cuda capsule.
  o.options.profile = "cuda-checked";
  train::TrainingSession device(o, train::init_parameters(o.graph(batch), 11));
  for (const auto& k : device.audit(batch).kernels) EXPECT_EQ(k.capsule->provider, "cuda") << k.node;
}

// Batch `seed` of 16 random 8 x 8 images (pixel levels 0..16, scaled to [0, 1]) and their digit labels.
std::pair<Tensor, Tensor> digits_batch(std::uint64_t seed) {
  std::vector<float> x(16 * 64);
  std::vector<std::int64_t> y(16);
  std::mt19937_64 r(seed);
  for (auto& v : x) v = static_cast<float>(r() % 17) / 16.0f;
  for (auto& v : y) v = static_cast<std::int64_t>(r() % 10);
  return std::pair{Tensor::from_values<float>(Dims{16, 64}, x), Tensor::from_values<std::int64_t>(Dims{16}, y)};
}

TEST(CudaTrain, TheDigitsMlpTrainsThroughTheSessionAsOnTheCpu) {
  PACT_GPU_OR_SKIP();
  train::Objective o;
  o.graph = [](std::int64_t b) { return train::digits_mlp(b, 32); };
  auto batch_of = [](int i) { return digits_batch(static_cast<std::uint64_t>(i) + 100); };
  expect_same_training(train_steps(o, "cuda-checked", 16, batch_of, 3), train_steps(o, "cpu-checked", 16, batch_of, 3));
}

// The digits CNN: conv2d (im2col and the GEMM kernels, col2im for its input's gradient), batch norm in
// training mode with its running statistics (batch_norm_stats), max pooling, flatten and linear on the device.
TEST(CudaTrain, TheDigitsCnnTrainsThroughTheSessionAsOnTheCpu) {
  PACT_GPU_OR_SKIP();
  // SGD: the convolution's bias feeds a batch norm, so its gradient is zero up to rounding, and Adam would
  // turn that rounding into full steps of opposite signs on the two devices.
  train::Objective o;
  o.graph = [](std::int64_t b) { return train::digits_cnn(b); };
  o.options.optimizer = "sgd";
  auto batch_of = [](int i) { return digits_batch(static_cast<std::uint64_t>(i) + 300); };
  expect_same_training(train_steps(o, "cuda-checked", 16, batch_of, 3), train_steps(o, "cpu-checked", 16, batch_of, 3));
  o.options.profile = "cuda-checked";
  train::TrainingSession device(o, train::init_parameters(o.graph(16), 11));
  for (const auto& k : device.audit(16).kernels) EXPECT_EQ(k.capsule->provider, "cuda") << k.node;
}

// Detached submission on the device (seed 001 G3): a cuda-checked program over a package in device memory
// completes, its completion proven by the CUDA event recorded after its work, and its retirement record is
// released exactly once; a host package is refused before admission.
TEST(CudaSubmit, ADevicePlanCompletesThroughItsEventAndReleasesItsRecordOnce) {
  PACT_GPU_OR_SKIP();
  ir::GraphBuilder b;
  b.input("x", Dims{3, 5});
  b.input("y", Dims{3, 5});
  b.op("s", ops::OpTag::add, {"x", "y"});
  b.op("r", ops::OpTag::relu, {"s"});
  b.output("r");
  auto planned = plan::plan_graph(b.build(), contract::builtin_profile("cuda-checked"),
                                  contract::DefaultEvidenceResolver{}, contract::VjpMode::forward_only);
  ASSERT_TRUE(planned.has_value()) << plan::render_audit_table(planned.error().audit);
  const auto program = runtime::Program::make(std::move(planned).value());
  auto package = [](std::shared_ptr<Provider> where) {
    std::vector<Storage> owners;
    std::vector<DescriptorSpec> specs;
    for (std::uint32_t i = 0; i < 2; ++i) {
      Tensor t = host_values(Dims{3, 5}, i == 0 ? -2.0f : 0.5f).transfer_to(where);
      const CheckedLayout l = t.layout();
      specs.push_back({AllocationSlot{i}, LayoutRequest{l.dtype(), l.shape(), l.strides(), l.byte_offset()}});
      owners.push_back(std::move(t).into_storage());
    }
    auto g = AllocationGroup::make(std::move(owners), specs);
    runtime::ExecutionInputs in{std::move(g).value(), {}};
    for (std::uint32_t i = 0; i < 2; ++i) in.bindings.push_back(in.group.slot(i));
    return in;
  };
  auto provider = runtime::cuda_execution_provider();
  auto host = runtime::submit(*provider, program, package(cpu_provider()));
  ASSERT_FALSE(host.has_value());
  EXPECT_EQ(host.error().cause.kind, runtime::SubmitErrorKind::invalid_binding);
  const std::uint64_t released = provider->counters().records_released.load();
  auto handle = runtime::submit(*provider, program, package(cuda_provider()));
  ASSERT_TRUE(handle.has_value()) << handle.error().cause.detail;
  runtime::ExecutionOutcome outcome = std::move(handle).value().wait();
  ASSERT_TRUE(std::holds_alternative<runtime::Completed>(outcome));
  provider->drain();
  EXPECT_EQ(provider->counters().records_released.load(), released + 1);
  const TensorView r = std::get<TensorView>(std::get<runtime::Completed>(outcome).bundle.output(0));
  const std::vector<double> got = host_values_of(r);
  const std::vector<double> x = host_values_of(host_values(Dims{3, 5}, -2.0f).as_view());
  const std::vector<double> y = host_values_of(host_values(Dims{3, 5}, 0.5f).as_view());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], std::max(0.0, x[i] + y[i])) << i;
}

// `pact run DIR --profile cuda-external`: an imported capture's weights move to the device once, its inputs
// as they arrive, and run_imported brings the outputs back; they agree with PyTorch's as on the CPU.
TEST(CudaRun, AnImportedMlpRunsUnderCudaExternalAsOnTheCpu) {
  PACT_GPU_OR_SKIP();
  const std::string dir = std::string(kSource) + "/tests/fixtures/torch/mlp";
  auto run_under = [&](const char* profile) {
    const contract::DefaultEvidenceResolver resolver;
    return runtime::run_imported(ir::load_torch_export(dir), ir::read_safetensors(dir + "/example_input.safetensors"),
                                 contract::builtin_profile(profile), resolver);
  };
  PACT_CUBLAS_OR_SKIP();  // cuda-external's GEMMs are the cublas and cublaslt providers'
  const runtime::TorchRunResult gpu = run_under("cuda-external"), cpu = run_under("cpu-checked");
  ASSERT_TRUE(gpu.accepted) << plan::render_audit_table(gpu.audit);
  for (const auto& k : gpu.audit.kernels)
    EXPECT_EQ(k.capsule->provider, k.op == ops::OpTag::linear ? "cublaslt" : "cuda") << k.node;
  const ir::SafetensorsFile expected = ir::read_safetensors(dir + "/expected_output.safetensors");
  ASSERT_FALSE(gpu.outputs.empty());
  for (const auto& [name, value] : gpu.outputs) {
    EXPECT_EQ(value.provider_name(), "cpu") << name;  // brought back to host memory
    const auto agreement = runtime::compare_outputs(name, value.as_view(), expected.find(name)->as_view());
    EXPECT_LT(agreement.relative_error, 1e-4) << name;
    const auto same = runtime::compare_outputs(name, value.as_view(), cpu.outputs.at(name).as_view());
    EXPECT_LT(same.relative_error, 1e-5) << name;
  }
}

// A wrong kernel on the device: add computing a + a. The same comparison must refute it.
Tensor wrong_add(std::span<const TensorView> in, const ops::Attributes& a, const kernels::KernelContext& ctx) {
  const kernels::Handler* add = kernels::find_handler(kernels::cuda_handlers(), ops::OpTag::add);
  std::vector<TensorView> twice{in[0], in[0]};
  if (!(in[0].shape() == in[1].shape())) twice[1] = in[1];
  return add->forward(twice, a, ctx);
}

TEST(CudaOps, AWrongKernelFailsTheComparison) {
  PACT_GPU_OR_SKIP();
  const kernels::Handler* add = kernels::find_handler(kernels::cuda_handlers(), ops::OpTag::add);
  ASSERT_NE(add, nullptr);
  kernels::Handler mutant = *add;
  mutant.forward = &wrong_add;
  std::mt19937 rng(7);
  verify::Sample s{ops::OpTag::add, {verify::sampling::N(Dims{5, 7}), verify::sampling::N(Dims{5, 7})}, {}};
  EXPECT_FALSE(verify::sweep_problems(mutant, reference_of(ops::OpTag::add), s, rng).empty());
}

TEST(CudaOps, BadInputIsATypedError) {
  PACT_GPU_OR_SKIP();
  const kernels::Handler* ce = kernels::find_handler(kernels::cuda_handlers(), ops::OpTag::cross_entropy);
  ASSERT_NE(ce, nullptr);
  const Tensor x = host_values(Dims{3, 5}, 0.0f).transfer_to(cuda_provider());
  const std::vector<std::int64_t> bad{1, 7, 2};
  const Tensor t =
      Tensor::from_values<std::int64_t>(Dims{3}, std::span<const std::int64_t>(bad)).transfer_to(cuda_provider());
  std::vector<TensorView> in{x.as_view(), t.as_view()};
  // The target's range is checked on the device and the verdict read with the next wait (Note [Deferred
  // checks]): the op returns without waiting, reading its result raises, and the check is then spent.
  const Tensor loss = kernels::run_forward(*ce, in, {});
  EXPECT_EQ(CudaDevice::get()->pending_checks(), 1u);
  try {
    (void)loss.to_host();
    FAIL() << "a target outside the classes was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::index_out_of_range);
    EXPECT_NE(std::string(e.what()).find("[cross_entropy]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'target'[1]"), std::string::npos) << e.what();
  }
  EXPECT_EQ(CudaDevice::get()->pending_checks(), 0u);
  EXPECT_EQ(x.to_host().to_doubles(), host_values(Dims{3, 5}, 0.0f).to_doubles());  // spent: the next read is clean
  // In range, the same op's result reads back.
  const std::vector<std::int64_t> good{1, 4, 0};
  const Tensor tg =
      Tensor::from_values<std::int64_t>(Dims{3}, std::span<const std::int64_t>(good)).transfer_to(cuda_provider());
  const Tensor uniform = Tensor::zeros(Dims{3, 5}, DType::f32).transfer_to(cuda_provider());
  std::vector<TensorView> fine{uniform.as_view(), tg.as_view()};
  EXPECT_NEAR(kernels::run_forward(*ce, fine, {}).to_host().get(Dims{}).real, std::log(5.0), 1e-6);  // uniform logits
  // A host operand never reaches a device kernel.
  const Tensor hx = host_values(Dims{3, 5}, 0.0f);
  std::vector<TensorView> mixed{hx.as_view(), hx.as_view()};
  const kernels::Handler* add = kernels::find_handler(kernels::cuda_handlers(), ops::OpTag::add);
  try {
    (void)kernels::run_forward(*add, mixed, {});
    FAIL() << "host operands reached the cuda add";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::provider_mismatch);
  }
  EXPECT_FALSE(CudaDevice::get()->poisoned());
}

#if defined(PACT_CUDA_EMULATED)
// A library call that fails after the handler has bound its result is a typed error naming the call, and the
// process goes on: the result is owned by the handler's Operands (Operands::output), so its binding ends
// before it dies. (Owned by a local declared after them, the unwinding destroyed the result first and seed
// 001's check stopped the process.) The descriptors are destroyed on that path too.
TEST(CudnnOps, AFailedCallIsATypedErrorAndTheNextOneRuns) {
  const kernels::Handler& h = kernels::cudnn_handlers()[0];
  const Tensor x = host_values(Dims{1, 2, 5, 5}, -1.0f).transfer_to(cuda_provider());
  const Tensor w = host_values(Dims{3, 2, 3, 3}, 0.5f).transfer_to(cuda_provider());
  const std::vector<TensorView> in{x.as_view(), w.as_view()};
  emu::fail_next_cudnn_call(3000);  // CUDNN_STATUS_NOT_SUPPORTED
  try {
    (void)kernels::run_forward(h, in, {});
    FAIL() << "a failed cuDNN call was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::internal);
    EXPECT_NE(std::string(e.what()).find("cudnnConvolutionForward failed (cuDNN status 3000)"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(CudaDevice::get()->poisoned());
  EXPECT_EQ(emu::cudnn_descriptors_alive(), 0);
  const kernels::Handler* own = kernels::find_handler(kernels::cuda_handlers(), ops::OpTag::conv2d);
  EXPECT_EQ(host_values_of(kernels::run_forward(h, in, {}).as_view()),
            host_values_of(kernels::run_forward(*own, in, {}).as_view()));
}
#endif

#if defined(PACT_CUDA_EMULATED)
// The same for a VJP whose second product fails after its first gradient is made: the gradients are owned by
// a list declared before the Operands, so the unwinding ends the bindings first. (Declared after them, the
// list died first and seed 001's check stopped the process.)
TEST(CublasOps, AProductFailingMidwayThroughAVjpIsATypedError) {
  const kernels::Handler* linear = kernels::find_handler(kernels::cublas_handlers(), ops::OpTag::linear);
  ASSERT_NE(linear, nullptr);
  const Tensor x = host_values(Dims{4, 6}, -1.0f).transfer_to(cuda_provider());
  const Tensor w = host_values(Dims{3, 6}, 0.5f).transfer_to(cuda_provider());
  const std::vector<TensorView> in{x.as_view(), w.as_view()};
  const Tensor y = kernels::run_forward(*linear, in, {});
  const Tensor g = host_values(Dims{4, 3}, 0.25f).transfer_to(cuda_provider());
  emu::fail_cublas_call(1, 7);  // the second SGEMM: CUBLAS_STATUS_INVALID_VALUE
  try {
    (void)kernels::run_vjp(*linear, in, y.as_view(), g.as_view(), {}, {});
    FAIL() << "a failed cuBLAS call was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::internal);
    EXPECT_NE(std::string(e.what()).find("cuBLAS SGEMM failed (status 7)"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(CudaDevice::get()->poisoned());
  EXPECT_EQ(kernels::run_vjp(*linear, in, y.as_view(), g.as_view(), {}, {}).size(), 2u);
}
#endif

#if defined(PACT_CUDA_EMULATED)
// linear through the cublaslt provider, its result and gradients against the cuda provider's, with the
// launches of Pact's own kernels it made.
struct LinearRun {
  std::vector<double> y, gx, gw, gb;
  std::uint64_t forward_launches = 0, vjp_launches = 0;
};
LinearRun run_linear(const kernels::Handler& h, const TensorView& x, const TensorView& w, const TensorView& b,
                     const TensorView& g) {
  const std::vector<TensorView> in{x, w, b};
  LinearRun r;
  const std::uint64_t start = emu::tally().launches;
  const Tensor y = kernels::run_forward(h, in, {});
  const std::uint64_t middle = emu::tally().launches;
  auto grads = kernels::run_vjp(h, in, y.as_view(), g, {}, {});
  r.forward_launches = middle - start;
  r.vjp_launches = emu::tally().launches - middle;
  r.y = host_values_of(y.as_view());
  r.gx = host_values_of(grads.at(0)->as_view());
  r.gw = host_values_of(grads.at(1)->as_view());
  r.gb = host_values_of(grads.at(2)->as_view());
  return r;
}

void expect_near(const std::vector<double>& got, const std::vector<double>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-4 * (1 + std::abs(want[i]))) << what << i;
}

// The bias is added in the product's epilogue and its gradient reduced in the weight gradient's (BGRADB): no
// kernel of Pact's runs for either. Where cuBLASLt offers no algorithm with an epilogue (it has none for some
// types and layouts), or refuses the one it offered, Pact's kernels add the bias and reduce its gradient
// instead, to the same values.
TEST(CublasLtOps, TheBiasAndItsGradientComeFromTheEpiloguesOrFromPactsKernels) {
  const kernels::Handler& lt = kernels::cublaslt_handlers()[0];
  const kernels::Handler* own = kernels::find_handler(kernels::cuda_handlers(), ops::OpTag::linear);
  ASSERT_NE(own, nullptr);
  const Tensor x = host_values(Dims{2, 5, 6}, -1.0f).transfer_to(cuda_provider());
  const Tensor w = host_values(Dims{3, 6}, -0.5f).transfer_to(cuda_provider());
  const Tensor b = host_values(Dims{3}, 2.0f).transfer_to(cuda_provider());
  const Tensor g = host_values(Dims{2, 5, 3}, 0.25f).transfer_to(cuda_provider());
  const LinearRun want = run_linear(*own, x.as_view(), w.as_view(), b.as_view(), g.as_view());
  const LinearRun fused = run_linear(lt, x.as_view(), w.as_view(), b.as_view(), g.as_view());
  struct Restore {
    ~Restore() { emu::cublaslt_refuse_epilogues(emu::EpilogueRefusal::none); }
  } restore;
  emu::cublaslt_refuse_epilogues(emu::EpilogueRefusal::heuristics);
  const LinearRun unoffered = run_linear(lt, x.as_view(), w.as_view(), b.as_view(), g.as_view());
  emu::cublaslt_refuse_epilogues(emu::EpilogueRefusal::matmul);
  const LinearRun refused = run_linear(lt, x.as_view(), w.as_view(), b.as_view(), g.as_view());
  for (const LinearRun* r : {&fused, &unoffered, &refused}) {
    expect_near(r->y, want.y, "y");
    expect_near(r->gx, want.gx, "gx");
    expect_near(r->gw, want.gw, "gw");
    expect_near(r->gb, want.gb, "gb");
  }
  EXPECT_EQ(fused.forward_launches, 0u);  // the bias in the epilogue
  EXPECT_EQ(fused.vjp_launches, 0u);      // the bias's gradient in the weight gradient's epilogue
  for (const LinearRun* r : {&unoffered, &refused}) {
    EXPECT_GT(r->forward_launches, 0u);
    EXPECT_GT(r->vjp_launches, 0u);
  }
  EXPECT_EQ(emu::cublaslt_descriptors_alive(), 0);
  EXPECT_FALSE(CudaDevice::get()->poisoned());
}

// cuBLASLt's heuristics may assume 256-byte aligned operands unless told otherwise; a view that starts inside
// its storage is not, and the provider says how aligned each operand is (the emulator holds it to that).
TEST(CublasLtOps, AViewInsideItsStorageIsProvidedForAsItIsAligned) {
  const kernels::Handler& lt = kernels::cublaslt_handlers()[0];
  const kernels::Handler* own = kernels::find_handler(kernels::cuda_handlers(), ops::OpTag::linear);
  ASSERT_NE(own, nullptr);
  const Tensor big = host_values(Dims{7, 6}, -1.0f).transfer_to(cuda_provider());
  const TensorView x = big.slice(0, 1, 6);  // 24 bytes into its storage
  const Tensor w = host_values(Dims{4, 6}, 0.5f).transfer_to(cuda_provider());
  const Tensor b = host_values(Dims{4}, 1.0f).transfer_to(cuda_provider());
  const Tensor g = host_values(Dims{5, 4}, -0.25f).transfer_to(cuda_provider());
  const LinearRun want = run_linear(*own, x, w.as_view(), b.as_view(), g.as_view());
  const LinearRun got = run_linear(lt, x, w.as_view(), b.as_view(), g.as_view());
  expect_near(got.y, want.y, "y");
  expect_near(got.gx, want.gx, "gx");
  expect_near(got.gw, want.gw, "gw");
  expect_near(got.gb, want.gb, "gb");
}

// A failed cuBLASLt call is a typed error naming it; its descriptors are destroyed and the next call runs.
TEST(CublasLtOps, AFailedMatmulIsATypedErrorAndLeavesNoDescriptors) {
  const kernels::Handler& lt = kernels::cublaslt_handlers()[0];
  const Tensor x = host_values(Dims{4, 6}, -1.0f).transfer_to(cuda_provider());
  const Tensor w = host_values(Dims{3, 6}, 0.5f).transfer_to(cuda_provider());
  const std::vector<TensorView> in{x.as_view(), w.as_view()};
  emu::fail_next_cublaslt_matmul(7);  // CUBLAS_STATUS_INVALID_VALUE
  try {
    (void)kernels::run_forward(lt, in, {});
    FAIL() << "a failed cuBLASLt call was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::internal);
    EXPECT_NE(std::string(e.what()).find("cublasLtMatmul failed (cuBLASLt status 7)"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(CudaDevice::get()->poisoned());
  EXPECT_EQ(emu::cublaslt_descriptors_alive(), 0);
  const kernels::Handler* own = kernels::find_handler(kernels::cuda_handlers(), ops::OpTag::linear);
  const std::vector<double> got = host_values_of(kernels::run_forward(lt, in, {}).as_view());
  const std::vector<double> want = host_values_of(kernels::run_forward(*own, in, {}).as_view());
  expect_near(got, want, "y");
}
#endif

// The char transformer of CudaTrain.TheCharTransformerTrainsOnTheDeviceAsOnTheCpu under cuda-checked, and
// a batch of its tokens (`bad_at` >= 0: that token is outside the vocabulary).
constexpr std::int64_t kCharBatch = 4, kCharT = 16, kCharVocab = 29;
train::Objective char_objective() {
  train::Objective o;
  o.graph = [](std::int64_t b) { return train::char_transformer(b, kCharT, kCharVocab, 32, 4); };
  o.options.profile = "cuda-checked";
  return o;
}
std::pair<Tensor, Tensor> char_batch(std::mt19937_64& rng, std::int64_t bad_at = -1) {
  std::vector<std::int64_t> x(kCharBatch * kCharT), y(kCharBatch * kCharT);
  for (auto& v : x) v = static_cast<std::int64_t>(rng() % kCharVocab);
  for (auto& v : y) v = static_cast<std::int64_t>(rng() % kCharVocab);
  if (bad_at >= 0) x[static_cast<std::size_t>(bad_at)] = kCharVocab;
  return std::pair{Tensor::from_values<std::int64_t>(Dims{kCharBatch, kCharT}, x),
                   Tensor::from_values<std::int64_t>(Dims{kCharBatch * kCharT}, y)};
}

// A token outside the vocabulary fails the step with a typed error when its loss is read (the embedding's
// index check travels with that read, Note [Deferred checks]), before the backward pass and the update: the
// parameters stay as they were, and the next batch trains.
TEST(CudaTrain, ABadTokenFailsTheStepAndKeepsTheParameters) {
  PACT_GPU_OR_SKIP();
  const train::Objective o = char_objective();
  train::TrainingSession session(o, train::init_parameters(o.graph(kCharBatch), 11));
  std::mt19937_64 rng(3);
  auto values = [&] {
    std::vector<std::vector<double>> v;
    for (const auto& p : session.parameters().values) v.push_back(host_values_of(p.as_view()));
    return v;
  };
  const auto before = values();
  auto [x, y] = char_batch(rng, 37);
  try {
    (void)session.step_batch(std::move(x), std::move(y), {});
    FAIL() << "a token outside the vocabulary was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::index_out_of_range);
    EXPECT_NE(std::string(e.what()).find("'indices'[37]"), std::string::npos) << e.what();
  }
  EXPECT_EQ(CudaDevice::get()->pending_checks(), 0u);
  ASSERT_EQ(values(), before);
  auto [gx, gy] = char_batch(rng);
  EXPECT_TRUE(std::isfinite(session.step_batch(std::move(gx), std::move(gy), {}).loss));
  EXPECT_NE(values(), before);
}

#if defined(PACT_CUDA_EMULATED)
// What a device training step asks of the driver, counted by the emulator's stand-in. The host waits for
// the device three times a step: the batch's two transfers and the loss, which brings the step's deferred
// index checks back in the same wait. (Before, each embedding and cross entropy waited for its own check,
// and the backward seed came from the host: seven waits a step.)
TEST(CudaTrain, AStepWaitsForTheDeviceOnlyForItsTransfersAndItsLoss) {
  const train::Objective o = char_objective();
  train::TrainingSession session(o, train::init_parameters(o.graph(kCharBatch), 11));
  train::OptimizerState state;
  std::mt19937_64 rng(5);
  std::vector<emu::Tally> steps;
  for (int i = 0; i < 4; ++i) {
    auto [x, y] = char_batch(rng);
    const emu::Tally before = emu::tally();
    train::StepResult step = session.step_batch(std::move(x), std::move(y), std::move(state));
    state = std::move(step.state);
    const emu::Tally after = emu::tally();
    steps.push_back(emu::Tally{after.launches - before.launches, after.waits - before.waits,
                               after.allocations - before.allocations, after.to_host - before.to_host,
                               after.to_device - before.to_device});
  }
  for (std::size_t i = 1; i < steps.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(steps[i].waits, 3u);
    EXPECT_EQ(steps[i].to_device, 2u);
    EXPECT_EQ(steps[i].to_host, 2u);  // the loss and the marks
    EXPECT_EQ(steps[i].launches, steps[1].launches);
    EXPECT_GT(steps[i].launches, 50u);
  }
}
#endif

}  // namespace
}  // namespace pact
