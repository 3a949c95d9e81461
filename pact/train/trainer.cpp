#include "pact/train/trainer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>

#include "pact/core/json.hpp"
#include "pact/ir/safetensors.hpp"

namespace pact::train {

std::int64_t ParameterPack::count() const {
  std::int64_t n = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (differentiable[i]) n += values[i].numel();
  }
  return n;
}

ParameterPack init_parameters(const ir::Graph& graph, std::uint64_t seed) {
  ParameterPack pack;
  std::mt19937_64 rng(seed);
  for (const auto& p : graph.nodes) {
    if (p.op != ops::OpTag::parameter) continue;
    // The first consumer decides the initialisation.
    const ir::Node* consumer = nullptr;
    std::size_t slot = 0;
    for (const auto& n : graph.nodes) {
      auto it = std::find(n.inputs.begin(), n.inputs.end(), p.id);
      if (it != n.inputs.end()) {
        consumer = &n;
        slot = static_cast<std::size_t>(it - n.inputs.begin());
        break;
      }
    }
    const Dims shape = p.type.shape;
    const std::int64_t count = ops::numel(shape);
    // Drawn in double; rounded once to the parameter's dtype (f32: as static_cast<float> of each draw).
    std::vector<double> v(static_cast<std::size_t>(count), 0.0);
    auto fan_in_of = [&](const Dims& w) {
      return w.size() >= 2 && w[0] > 0 ? ops::numel(w) / w[0] : std::max<std::int64_t>(ops::numel(w), 1);
    };
    auto uniform = [&](std::int64_t fan_in) {
      const double b = 1.0 / std::sqrt(static_cast<double>(std::max<std::int64_t>(fan_in, 1)));
      std::uniform_real_distribution<double> u(-b, b);
      for (auto& x : v) x = u(rng);
    };
    const bool norm = consumer && (consumer->op == ops::OpTag::layer_norm || consumer->op == ops::OpTag::rms_norm ||
                                   consumer->op == ops::OpTag::batch_norm);
    if (norm) {
      const bool ones = slot == 1 || (consumer->op == ops::OpTag::batch_norm && slot == 4);
      std::fill(v.begin(), v.end(), ones ? 1.0 : 0.0);
    } else if (consumer && consumer->op == ops::OpTag::embedding) {
      std::normal_distribution<double> nd;
      for (auto& x : v) x = nd(rng);
    } else if (shape.size() >= 2) {
      uniform(fan_in_of(shape));
    } else if (consumer && consumer->inputs.size() > 1) {
      const ir::Node* w = graph.find(consumer->inputs[1]);
      uniform(w ? fan_in_of(w->type.shape) : count);
    } else {
      uniform(count);
    }
    pack.names.push_back(p.id);
    Tensor value = Tensor::from_values<double>(shape, v);
    pack.values.push_back(p.type.dtype == DType::f64 ? std::move(value) : value.convert(p.type.dtype));
    pack.differentiable.push_back(p.differentiable);
    pack.buffer.push_back(p.buffer);
  }
  return pack;
}

TrainingSession::TrainingSession(Objective objective, ParameterPack parameters)
    : objective_(std::move(objective)),
      params_(std::move(parameters)),
      session_(contract::builtin_profile(objective_.options.profile), objective_.options.seed) {
  const auto& o = objective_.options;
  if (o.optimizer != "sgd" && o.optimizer != "adam" && o.optimizer != "adamw") {
    throw_error(ErrorCode::invalid_argument, "train",
                fmt::format("unknown optimizer '{}' (sgd, adam, adamw)", o.optimizer));
  }
  if (!(o.lr > 0) || !std::isfinite(o.lr))
    throw_error(ErrorCode::invalid_argument, "train", fmt::format("learning rate {} must be positive", o.lr));
  for (auto& v : params_.values) v = placed(std::move(v));
}

Tensor TrainingSession::placed(Tensor t) const { return placed_on(std::move(t), session_.profile().policy.device); }

void TrainingSession::require_objective_nodes(const ir::Graph& graph) const {
  // The loss program's interface, checked before anything is planned (a missing name was a bare map::at).
  for (const std::string* source : {&objective_.input, &objective_.target}) {
    const ir::Node* n = graph.find(*source);
    if (n == nullptr || n->op != ops::OpTag::input) {
      throw_error(ErrorCode::invalid_argument, "train",
                  fmt::format("the loss program has no input '{}' (it needs '{}' for the features and '{}' for the "
                              "labels)",
                              printable(*source), printable(objective_.input), printable(objective_.target)));
    }
  }
  for (const std::string* output : {&objective_.logits, &objective_.loss}) {
    if (std::find(graph.outputs.begin(), graph.outputs.end(), *output) == graph.outputs.end()) {
      std::string have;
      for (const auto& o : graph.outputs) have += (have.empty() ? "" : ", ") + printable(o);
      throw_error(ErrorCode::invalid_argument, "train",
                  fmt::format("the loss program has no output '{}' (its outputs: {}); training reads the outputs "
                              "'{}' (the predictions) and '{}' (a scalar loss, e.g. a cross_entropy node)",
                              printable(*output), have.empty() ? "none" : have, printable(objective_.logits),
                              printable(objective_.loss)));
    }
  }
}

const plan::AcceptedGraphPlan& TrainingSession::plan_for(std::int64_t batch) {
  auto it = plans_.find(batch);
  if (it != plans_.end()) return it->second;
  auto g = graphs_.find(batch);
  if (g == graphs_.end()) {
    ir::Graph graph = objective_.graph(batch);
    require_objective_nodes(graph);
    g = graphs_.emplace(batch, std::move(graph)).first;
  }
  const contract::DefaultEvidenceResolver resolver;
  const auto& o = objective_.options;
  const plan::TrainingUpdates updates{o.optimizer == "sgd" ? ops::OpTag::sgd : ops::OpTag::adam,
                                      o.optimizer == "sgd" && o.momentum != 0.0, comm_ != nullptr,
                                      batch_norm_ranks_ != nullptr};
  auto planned = plan::plan_graph(g->second, session_.profile(), resolver, contract::VjpMode::with_vjp, updates);
  if (!planned) {
    throw_error(ErrorCode::unsupported, "train",
                fmt::format("the training program's plan was rejected under {}:\n{}", session_.profile().name,
                            plan::render_audit_table(planned.error().audit)));
  }
  const plan::AcceptedGraphPlan& accepted = plans_.emplace(batch, std::move(planned).value()).first->second;
  StepKernels& k = step_kernels_[batch];
  for (std::size_t i = 0; i < accepted.audit().kernels.size(); ++i) {
    if (accepted.audit().kernels[i].purpose == plan::KernelPurpose::accumulate)
      k.accumulate.push_back(&accepted.bound()[i]);
  }
  for (const auto& name : params_.names)
    k.updates.push_back(accepted.training_kernel(plan::KernelPurpose::update, name));
  return accepted;
}

const plan::PlanAudit& TrainingSession::audit(std::int64_t batch) { return plan_for(batch).audit(); }

TrainingSession::Outputs TrainingSession::run(Tensor x, Tensor target, bool training,
                                              std::vector<runtime::EagerTensor>& leaves) {
  const std::int64_t batch = x.rank() > 0 ? x.shape()[0] : 1;
  const plan::AcceptedGraphPlan& plan = plan_for(batch);  // admission of the whole program, once per batch size
  session_.set_training(training);
  session_.set_grad_enabled(training);
  std::map<std::string, runtime::EagerTensor> bindings;
  for (std::size_t i = 0; i < params_.values.size(); ++i) {
    // The owner moves into a retention record (no copy); take_back() recovers it after the step.
    leaves.push_back(training ? session_.leaf(std::move(params_.values[i]), params_.differentiable[i])
                              : session_.constant(std::move(params_.values[i])));
    bindings.emplace(params_.names[i], leaves.back());
  }
  // Features arrive as the data set stores them (f32); a program declared in another floating dtype
  // (an all-f64 model) reads them converted once, here.
  if (const ir::Node* in = plan.graph().find(objective_.input);
      in != nullptr && in->type.dtype != x.dtype() && is_floating(in->type.dtype) && is_floating(x.dtype())) {
    x = x.convert(in->type.dtype);
  }
  // Rows arrive flattened ([batch, features]); a program whose input has more axes (images: [batch, C, H,
  // W]) reads each row in its own shape, when the element counts agree.
  if (const ir::Node* in = plan.graph().find(objective_.input);
      in != nullptr && in->type.shape != x.shape() && ops::numel(in->type.shape) == x.numel() && x.rank() > 0 &&
      in->type.shape.size() > 0 && in->type.shape[0] == x.shape()[0]) {
    Tensor rows = x.as_view().reshape(in->type.shape).duplicate();  // the views end before x is replaced
    x = std::move(rows);
  }
  bindings.emplace(objective_.input, session_.constant(placed(std::move(x))));
  bindings.emplace(objective_.target, session_.constant(placed(std::move(target))));
  // The plan's own kernels, through the one interpreter (Note [One interpreter]), recorded on the session's
  // tape in training mode.
  runtime::ExecutionOptions run_options;
  run_options.session = &session_;
  run_options.checkpoint_regions = objective_.checkpoint_regions;
  auto result = runtime::execute(plan, bindings, run_options);
  return {result.outputs.at(objective_.logits), result.outputs.at(objective_.loss), std::move(result.running_stats)};
}

TrainingSession::Lent::~Lent() {
  if (leaves.empty()) return;  // returned already
  try {
    session.take_back(leaves);
  } catch (const Error&) {  // a parameter still shared: the error that ended the run is the one reported
  }
}

void TrainingSession::take_back(std::vector<runtime::EagerTensor>& leaves) {
  session_.tape().clear();
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    auto owner = runtime::into_value(std::move(leaves[i].value));
    if (!owner) {
      throw_error(
          ErrorCode::invalid_argument, "train",
          fmt::format("parameter '{}' is still shared after the step; cannot update it in place", params_.names[i]));
    }
    params_.values[i] = std::move(owner).value();
  }
  leaves.clear();
}

namespace {
double scalar_of(const runtime::EagerTensor& t) {
  const double v = t.view().to_host().get(Dims{}).real;  // a loss on the device is read through one transfer
  if (!std::isfinite(v)) throw_error(ErrorCode::non_finite, "train", fmt::format("the loss is {}", v));
  return v;
}
}  // namespace

namespace {
// Refuses unless every rank's `text` is the same as rank 0's (compared by digest).
void require_agreement(Communicator& comm, std::string_view what, const std::string& text) {
  const auto digests = comm.gather_all(sha256_hex(text));
  for (std::size_t r = 1; r < digests.size(); ++r) {
    if (digests[r] != digests[0])
      throw_error(ErrorCode::invalid_argument, "train.data_parallel",
                  fmt::format("rank {}'s {} differs from rank 0's: every rank must train the same model with the "
                              "same configuration",
                              r, what));
  }
}

// Sync batch norm's sums (pact/kernels/ranks.hpp) over the session's communicator: blocking reductions of
// f64 values, in the communicator's order (rank order under cpu-deterministic-mpi, so repeatable too).
class CommunicatorSum final : public kernels::RankSum {
 public:
  explicit CommunicatorSum(Communicator& comm) : comm_(comm) {}
  void sum(std::span<double> values) override { comm_.sum(values); }

 private:
  Communicator& comm_;
};
}  // namespace

void TrainingSession::set_data_parallel(Communicator& comm, std::size_t bucket_bytes, bool sync_batch_norm) {
  if (bucket_bytes == 0)
    throw_error(ErrorCode::invalid_argument, "train.data_parallel", "the gradient bucket cap must be positive");
  // The reduction is a kernel like any other (Note [Training kernels]): the profile must admit a capsule
  // of the collective allreduce_mean, and the communicator must be what that capsule describes.
  const contract::BackendProfile& profile = session_.profile();
  const std::array<ops::TensorType, 1> bucket{ops::TensorType{DType::f32, Dims{}}};
  const contract::Selection selected =
      contract::select_capsule(profile, ops::OpTag::allreduce_mean, bucket, contract::VjpMode::forward_only);
  if (selected.capsule == nullptr)
    throw_error(ErrorCode::invalid_argument, "train.data_parallel",
                fmt::format("profile '{}' does not admit the trusted boundary {} that data-parallel training crosses: "
                            "use --profile cpu-checked-mpi (or cpu-deterministic-mpi for bitwise-repeatable runs)",
                            profile.name, comm.boundary()));
  const contract::Capsule& capsule = *selected.capsule;
  const bool ordered = capsule.numerical_policy == contract::NumericalPolicy::fixedLeft;
  if (capsule.descriptors[2].evidence.id != comm.boundary() || ordered != comm.rank_ordered())
    throw_error(ErrorCode::invalid_argument, "train.data_parallel",
                fmt::format("the admitted capsule {} ({}, boundary {}) does not describe this communicator ({}, "
                            "boundary {})",
                            capsule.name, contract::numerical_policy_name(capsule.numerical_policy),
                            capsule.descriptors[2].evidence.id, comm.reduction_order(), comm.boundary()));
  // Parameters and the options that shape an update; their values, bytes and all.
  std::vector<std::byte> bytes;
  std::string text = fmt::format("{} lr {} momentum {} decay {} seed {} profile {} schedule {} {} {} sync bn {}\n",
                                 objective_.options.optimizer, objective_.options.lr, objective_.options.momentum,
                                 objective_.options.weight_decay, objective_.options.seed, objective_.options.profile,
                                 static_cast<int>(objective_.options.schedule.kind), objective_.options.schedule.total,
                                 objective_.options.schedule.warmup, sync_batch_norm);
  std::vector<std::optional<ops::TensorType>> entries;
  for (std::size_t i = 0; i < params_.names.size(); ++i) {
    const Tensor& v = params_.values[i];
    text += fmt::format("{} {}{} {}\n", params_.names[i], dtype_name(v.dtype()), v.shape().to_string(),
                        params_.differentiable[i]);
    bytes.clear();
    ir::append_tensor_bytes(v.as_view(), bytes);
    text += sha256_digest(bytes) + "\n";
    entries.push_back(params_.differentiable[i] ? std::optional<ops::TensorType>(ops::TensorType{v.dtype(), v.shape()})
                                                : std::nullopt);
  }
  require_agreement(comm, "parameters or training options", text);
  reducer_ = std::make_unique<GradientReducer>(comm, entries, bucket_bytes);
  reducer_->calibrate();
  comm_ = &comm;
  batch_norm_ranks_ = sync_batch_norm ? std::make_unique<CommunicatorSum>(comm) : nullptr;
  agreed_batches_.clear();
  plans_.clear();  // re-planned with the allreduce kernels
  step_kernels_.clear();
}

std::vector<std::vector<std::size_t>> TrainingSession::gradient_buckets() const {
  return reducer_ ? reducer_->buckets() : std::vector<std::vector<std::size_t>>{};
}

StepResult TrainingSession::step_batch(Tensor x, Tensor target, OptimizerState state) {
  const std::int64_t batch = x.rank() > 0 ? x.shape()[0] : 1;
  plan_for(batch);
  if (comm_ != nullptr && agreed_batches_.insert(batch).second)
    require_agreement(*comm_, fmt::format("training plan at batch {}", batch),
                      plan::render_audit_json(plans_.at(batch).audit()).dump());
  const StepKernels& kernels = step_kernels_.at(batch);
  Lent lent(*this);
  std::vector<runtime::EagerTensor>& leaves = lent.leaves;
  StepResult result;
  std::map<std::string, Tensor> running;  // new running statistics, by source id (the plan's kernels)
  {
    const kernels::BatchNormRanks synchronised(batch_norm_ranks_.get());  // forward, running stats and backward
    Outputs out = run(std::move(x), std::move(target), true, leaves);
    result.loss = scalar_of(out.loss);
    result.retained_bytes = session_.tape().retained_bytes();
    // Sparse backward: only the parameters' gradients survive the pass, so every intermediate one is
    // freed as soon as it has been used (and a reshape's cotangent moves to its input without a copy).
    std::vector<int> keep;
    for (const auto& leaf : leaves)
      if (leaf.tracked()) keep.push_back(leaf.node);
    // Gradients that meet are summed by the plan's accumulation kernels (Note [Training kernels]); a
    // data-parallel step hands each final gradient to the reducer as backward finishes it.
    runtime::Tape::OnFinal on_final;
    std::map<int, std::size_t> entry_of;  // tape node -> pack index
    if (reducer_) {
      for (std::size_t i = 0; i < leaves.size(); ++i)
        if (leaves[i].tracked()) entry_of.emplace(leaves[i].node, i);
      reducer_->begin();
      on_final = [&](int node, Tensor& gradient) {
        if (auto it = entry_of.find(node); it != entry_of.end())
          reducer_->gradient_final(it->second, gradient.as_view());
      };
    }
    runtime::Gradients grads = session_.backward(out.loss, keep, kernels.accumulate, on_final);
    for (const auto& leaf : leaves) {
      auto g = grads.take_grad(leaf.node);
      if (!g) throw std::move(g).error();  // no view of the bundle is alive here
      result.gradients.push_back(std::move(g).value());
    }
    if (reducer_) {
      result.reduction = reducer_->finish(result.gradients);
      // One small sum after the gradients': the loss over the ranks, and each rank's exposed wait in its
      // own slot (the least of them is the skew-free exposed communication, ReductionTiming).
      std::vector<double> shared(1 + static_cast<std::size_t>(comm_->size()), 0.0);
      shared[0] = result.loss;
      shared[1 + static_cast<std::size_t>(comm_->rank())] = result.reduction->wait_seconds;
      comm_->sum(shared);
      result.loss = shared[0] / comm_->size();
      result.reduction->least_wait_seconds = *std::min_element(shared.begin() + 1, shared.end());
    }
    running = std::move(out.running_stats);
  }  // outputs and the tape's records go out of scope / are cleared before the parameters come back
  take_back(leaves);
  for (std::size_t i = 0; i < params_.names.size(); ++i) {
    if (auto it = running.find(params_.names[i]); it != running.end()) params_.values[i] = std::move(it->second);
  }
  std::vector<std::optional<TensorView>> views;
  for (std::size_t i = 0; i < result.gradients.size(); ++i) {
    const bool trained = result.gradients[i] && params_.differentiable[i];
    views.push_back(trained ? std::optional<TensorView>(result.gradients[i]->as_view()) : std::nullopt);
  }
  // Optimizer state resumed from a checkpoint arrives in host memory: it joins its parameter first.
  for (auto* slots : {&state.sgd.velocity, &state.adam.m, &state.adam.v}) {
    for (auto& t : *slots) {
      if (t) t = placed(std::move(*t));
    }
  }
  const auto& updates = kernels.updates;
  const auto& o = objective_.options;
  const double lr = learning_rate(o.schedule, o.lr, steps_);
  if (o.optimizer == "sgd") {
    state.sgd =
        sgd_step(updates, params_.values, views, SgdOptions{lr, o.momentum, o.weight_decay}, std::move(state.sgd));
  } else {
    state.adam =
        adam_step(updates, params_.values, views,
                  AdamOptions{lr, 0.9, 0.999, 1e-8, o.weight_decay, o.optimizer == "adamw"}, std::move(state.adam));
  }
  views.clear();
  ++steps_;
  result.state = std::move(state);
  return result;
}

StepResult TrainingSession::step(const BatchSource& next, OptimizerState state) {
  if (!next) throw_error(ErrorCode::invalid_argument, "train.step", "no batch source");
  auto [x, target] = next(steps_);
  return step_batch(std::move(x), std::move(target), std::move(state));
}

StepsResult TrainingSession::steps(std::int64_t n, const BatchSource& next, OptimizerState state) {
  if (n < 0) throw_error(ErrorCode::invalid_argument, "train.steps", fmt::format("{} steps; at least zero", n));
  StepsResult out;
  out.losses.reserve(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    StepResult r = step(next, std::move(state));
    out.losses.push_back(r.loss);
    out.retained_bytes_peak = std::max(out.retained_bytes_peak, r.retained_bytes);
    state = std::move(r.state);
  }
  out.state = std::move(state);
  return out;
}

double TrainingSession::loss(Tensor x, Tensor target) {
  Lent lent(*this);
  std::vector<runtime::EagerTensor>& leaves = lent.leaves;
  double l = 0;
  {
    Outputs out = run(std::move(x), std::move(target), false, leaves);
    l = scalar_of(out.loss);
  }
  take_back(leaves);
  return l;
}

Tensor TrainingSession::predict(Tensor x) {
  const std::int64_t batch = x.rank() > 0 ? x.shape()[0] : 1;
  // A placeholder target of the graph's own target type (class 0 everywhere); only the logits are read.
  const ir::Node* target_node = plan_for(batch).graph().find(objective_.target);
  if (target_node == nullptr) {
    throw_error(ErrorCode::invalid_argument, "train",
                fmt::format("the loss program has no '{}' input", objective_.target));
  }
  Tensor target = Tensor::zeros(target_node->type.shape, target_node->type.dtype);
  Lent lent(*this);
  std::vector<runtime::EagerTensor>& leaves = lent.leaves;
  std::optional<Tensor> logits;
  {
    Outputs out = run(std::move(x), std::move(target), false, leaves);
    logits.emplace(out.logits.view().to_host());
  }
  take_back(leaves);
  return std::move(*logits);
}

void TrainingSession::resume(std::int64_t steps, std::uint64_t kernel_calls) {
  if (steps < 0) throw_error(ErrorCode::invalid_argument, "train.resume", fmt::format("{} updates", steps));
  steps_ = steps;
  session_.resume_kernel_calls(kernel_calls);
}

ParameterPack TrainingSession::finish() && { return std::move(params_); }

ir::Graph digits_mlp(std::int64_t batch, std::int64_t hidden) {
  ir::GraphBuilder b;
  b.input("x", Dims{batch, 64});
  b.input("target", Dims{batch}, DType::i64);
  b.parameter("w1", Dims{hidden, 64});
  b.parameter("b1", Dims{hidden});
  b.parameter("w2", Dims{10, hidden});
  b.parameter("b2", Dims{10});
  b.op("fc1", ops::OpTag::linear, {"x", "w1", "b1"});
  b.op("act", ops::OpTag::relu, {"fc1"});
  b.op("logits", ops::OpTag::linear, {"act", "w2", "b2"});
  b.op("loss", ops::OpTag::cross_entropy, {"logits", "target"});
  b.output("logits");
  b.output("loss");
  return b.build();
}

ir::Graph char_transformer(std::int64_t batch, std::int64_t t, std::int64_t vocab, std::int64_t d, std::int64_t heads) {
  const std::int64_t dh = d / heads;
  ir::GraphBuilder b;
  b.input("x", Dims{batch, t}, DType::i64);
  b.input("target", Dims{batch * t}, DType::i64);
  b.parameter("tok", Dims{vocab, d});
  b.parameter("pos", Dims{t, d});
  b.parameter("ln1_w", Dims{d});
  b.parameter("ln1_b", Dims{d});
  for (const char* w : {"wq", "wk", "wv", "wo"}) b.parameter(w, Dims{d, d});
  b.parameter("ln2_w", Dims{d});
  b.parameter("ln2_b", Dims{d});
  b.parameter("up_w", Dims{4 * d, d});
  b.parameter("up_b", Dims{4 * d});
  b.parameter("down_w", Dims{d, 4 * d});
  b.parameter("down_b", Dims{d});
  b.parameter("lnf_w", Dims{d});
  b.parameter("lnf_b", Dims{d});
  b.parameter("head", Dims{vocab, d});
  const ops::Attributes norm{{"normalized_shape", std::vector<std::int64_t>{d}}};
  b.op("emb", ops::OpTag::embedding, {"tok", "x"});
  b.op("h0", ops::OpTag::add, {"emb", "pos"});
  b.op("ln1", ops::OpTag::layer_norm, {"h0", "ln1_w", "ln1_b"}, norm);
  for (const char* p : {"q", "k", "v"}) {
    const std::string w = fmt::format("w{}", p);
    b.op(p, ops::OpTag::linear, {"ln1", w});
    b.op(fmt::format("{}4", p), ops::OpTag::reshape, {p},
         ops::Attributes{{"shape", std::vector<std::int64_t>{batch, t, heads, dh}}});
    b.op(fmt::format("{}h", p), ops::OpTag::permute, {fmt::format("{}4", p)},
         ops::Attributes{{"dims", std::vector<std::int64_t>{0, 2, 1, 3}}});
  }
  b.op("att", ops::OpTag::scaled_dot_product_attention, {"qh", "kh", "vh"}, ops::Attributes{{"is_causal", true}});
  b.op("att_t", ops::OpTag::permute, {"att"}, ops::Attributes{{"dims", std::vector<std::int64_t>{0, 2, 1, 3}}});
  b.op("att_m", ops::OpTag::reshape, {"att_t"}, ops::Attributes{{"shape", std::vector<std::int64_t>{batch, t, d}}});
  b.op("proj", ops::OpTag::linear, {"att_m", "wo"});
  b.op("h1", ops::OpTag::add, {"h0", "proj"});
  b.op("ln2", ops::OpTag::layer_norm, {"h1", "ln2_w", "ln2_b"}, norm);
  b.op("up", ops::OpTag::linear, {"ln2", "up_w", "up_b"});
  b.op("act", ops::OpTag::gelu, {"up"});
  b.op("down", ops::OpTag::linear, {"act", "down_w", "down_b"});
  b.op("h2", ops::OpTag::add, {"h1", "down"});
  b.op("lnf", ops::OpTag::layer_norm, {"h2", "lnf_w", "lnf_b"}, norm);
  b.op("logits3", ops::OpTag::linear, {"lnf", "head"});
  b.op("logits", ops::OpTag::reshape, {"logits3"},
       ops::Attributes{{"shape", std::vector<std::int64_t>{batch * t, vocab}}});
  b.op("loss", ops::OpTag::cross_entropy, {"logits", "target"});
  b.output("logits");
  b.output("loss");
  return b.build();
}

ir::Graph digits_cnn(std::int64_t batch) {
  ir::GraphBuilder b;
  b.input("x", Dims{batch, 64});
  b.input("target", Dims{batch}, DType::i64);
  b.parameter("conv_w", Dims{16, 1, 3, 3});
  b.parameter("conv_b", Dims{16});
  b.parameter("bn_w", Dims{16});
  b.parameter("bn_b", Dims{16});
  b.buffer("bn_mean", Dims{16});
  b.buffer("bn_var", Dims{16});
  b.parameter("fc_w", Dims{10, 16 * 4 * 4});
  b.parameter("fc_b", Dims{10});
  b.op("image", ops::OpTag::reshape, {"x"}, ops::Attributes{{"shape", std::vector<std::int64_t>{batch, 1, 8, 8}}});
  b.op("conv", ops::OpTag::conv2d, {"image", "conv_w", "conv_b"},
       ops::Attributes{{"padding", std::vector<std::int64_t>{1}}});
  b.op("bn", ops::OpTag::batch_norm, {"conv", "bn_w", "bn_b", "bn_mean", "bn_var"});
  b.op("act", ops::OpTag::relu, {"bn"});
  b.op("pool", ops::OpTag::max_pool2d, {"act"}, ops::Attributes{{"kernel_size", std::vector<std::int64_t>{2}}});
  b.op("flat", ops::OpTag::flatten, {"pool"}, ops::Attributes{{"start_dim", std::int64_t{1}}});
  b.op("logits", ops::OpTag::linear, {"flat", "fc_w", "fc_b"});
  b.op("loss", ops::OpTag::cross_entropy, {"logits", "target"});
  b.output("logits");
  b.output("loss");
  return b.build();
}

}  // namespace pact::train
