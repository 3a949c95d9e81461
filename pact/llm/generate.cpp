#include "pact/llm/generate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "pact/core/error.hpp"
#include "pact/runtime/executor.hpp"

namespace pact::llm {

namespace {

runtime::EagerTensor value(Tensor t) { return runtime::EagerTensor{runtime::retain(std::move(t))}; }

}  // namespace

Generator::Generator(DecoderConfig config, Precision precision, std::int64_t capacity,
                     const contract::BackendProfile& profile,
                     std::shared_ptr<const contract::EvidenceResolver> resolver)
    : config_(std::move(config)),
      precision_(precision),
      capacity_(capacity),
      profile_(profile),
      resolver_(resolver ? std::move(resolver) : std::make_shared<contract::DefaultEvidenceResolver>()) {}

Expected<Generator, plan::PlanRejection> Generator::plan(const DecoderConfig& config,
                                                         std::map<std::string, Tensor> weights, Precision precision,
                                                         std::int64_t capacity, const contract::BackendProfile& profile,
                                                         std::shared_ptr<const contract::EvidenceResolver> resolver) {
  if (capacity == 0) capacity = config.context;
  if (capacity < 1 || capacity > config.context) {
    throw_error(ErrorCode::invalid_argument, "pact generate",
                fmt::format("--context {} must be in [1, {}] (the configuration's context)", capacity, config.context));
  }
  Generator g(config, precision, capacity, profile, std::move(resolver));
  ir::Graph graph = step_graph(config, precision, 1, capacity);
  auto planned = plan::plan_graph(graph, g.profile_, *g.resolver_);
  if (!planned) return Unexpected(std::move(planned).error());
  if (config.family == Family::llama) {
    auto [cos, sin] = rotary_tables(config, capacity);
    weights.emplace(step::kRopeCos, std::move(cos));
    weights.emplace(step::kRopeSin, std::move(sin));
  }
  // Every parameter and buffer of the graph is bound, and nothing else is: a mismatch is a typed error
  // naming the tensor (load_weights makes them agree; a caller's own map may not).
  for (const ir::Node& n : graph.nodes) {
    if (n.op != ops::OpTag::parameter) continue;
    auto it = weights.find(n.id);
    if (it == weights.end())
      throw_error(ErrorCode::invalid_argument, "pact generate", fmt::format("no weight for '{}'", n.id));
    if (auto why = ir::Graph::binding_mismatch(n, it->second.dtype(), it->second.shape()))
      throw_error(ErrorCode::invalid_argument, "pact generate", *why);
    g.weights_.emplace(n.id, value(std::move(it->second)));
    weights.erase(it);
  }
  if (!weights.empty()) {
    throw_error(ErrorCode::invalid_argument, "pact generate",
                fmt::format("weight '{}' is not a parameter of the step graph", weights.begin()->first));
  }
  g.plans_.emplace(1, std::move(planned).value());
  g.reset();
  return g;
}

void Generator::reset() {
  caches_.clear();
  const Dims shape{1, config_.kv_heads, capacity_, config_.head_dim};
  for (std::int64_t l = 0; l < config_.layers; ++l) {
    // Zeros, not garbage: a kernel that reads the masked tail (the reference provider's) multiplies it by 0.
    caches_.emplace(step::cache_input(l, false), value(Tensor::zeros(shape, DType::f32)));
    caches_.emplace(step::cache_input(l, true), value(Tensor::zeros(shape, DType::f32)));
  }
  position_ = 0;
  broken_ = false;
}

const plan::AcceptedGraphPlan& Generator::plan_for(std::int64_t tokens) {
  if (auto it = plans_.find(tokens); it != plans_.end()) return it->second;
  auto planned = plan::plan_graph(step_graph(config_, precision_, tokens, capacity_), profile_, *resolver_);
  if (!planned) {
    throw_error(
        ErrorCode::unsupported, "pact generate",
        fmt::format("the {}-token step was rejected:\n{}", tokens, plan::render_audit_table(planned.error().audit)));
  }
  return plans_.emplace(tokens, std::move(planned).value()).first->second;
}

std::vector<float> Generator::forward(std::span<const std::int64_t> ids) {
  constexpr const char* op = "pact generate";
  if (broken_)
    throw_error(ErrorCode::invalid_argument, op, "a previous step failed and took the caches; reset() first");
  const auto t = static_cast<std::int64_t>(ids.size());
  if (t == 0) throw_error(ErrorCode::invalid_argument, op, "no tokens to run");
  if (t > capacity_ - position_) {
    throw_error(ErrorCode::invalid_argument, op,
                fmt::format("{} tokens at position {} do not fit a context of {}", t, position_, capacity_));
  }
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= config_.vocab) {
      throw_error(ErrorCode::invalid_argument, op,
                  fmt::format("token {} (id {}) is outside the vocabulary [0, {})", i, ids[i], config_.vocab));
    }
  }
  const plan::AcceptedGraphPlan& plan = plan_for(t);
  std::vector<std::int64_t> positions(ids.size());
  for (std::int64_t k = 0; k < t; ++k) positions[static_cast<std::size_t>(k)] = position_ + k;
  // Row i * T + k (head i of a group, new token k) attends to positions [0, position_ + k].
  const std::int64_t groups = config_.groups();
  const auto cells = static_cast<std::size_t>(groups * t * capacity_);
  std::unique_ptr<bool[]> mask(new bool[cells]());
  for (std::int64_t i = 0; i < groups; ++i)
    for (std::int64_t k = 0; k < t; ++k) std::fill_n(mask.get() + (i * t + k) * capacity_, position_ + k + 1, true);
  std::map<std::string, runtime::EagerTensor> bindings = weights_;
  bindings.emplace(step::kTokens, value(Tensor::from_values<std::int64_t>({1, t}, ids)));
  bindings.emplace(step::kPositions, value(Tensor::from_values<std::int64_t>({t}, positions)));
  bindings.emplace(step::kMask,
                   value(Tensor::from_values<bool>({groups * t, capacity_}, std::span<const bool>(mask.get(), cells))));
  // The caches move in with their only handle, so index_copy writes them in place (Note [Donated operands]).
  broken_ = true;
  for (auto& [name, cache] : caches_) bindings.emplace(name, std::move(cache));
  caches_.clear();
  runtime::ExecutionResult result = runtime::execute(plan, std::move(bindings));
  for (std::int64_t l = 0; l < config_.layers; ++l) {
    for (bool v : {false, true}) {
      caches_.emplace(step::cache_input(l, v), std::move(result.outputs.at(step::cache_output(l, v))));
    }
  }
  // The logits as f32 (a bf16 graph's widen exactly), read once: through doubles they cost two large
  // allocations a step, which this VM pays for in page faults.
  const Tensor logits = result.outputs.at(step::kLogits).view().convert(DType::f32);
  auto prepared = logits.prepare_host<float>();
  if (!prepared) throw std::move(prepared).error().error;
  const auto values = std::get<PreparedContiguousRead<float>>(prepared.value()).as_span();
  position_ += t;
  broken_ = false;
  return std::vector<float>(values.begin(), values.end());
}

// ---- sampling and the generation loop ------------------------------------------------------------------

Sampler::Sampler(const SamplingOptions& options) : options_(options), rng_(options.seed) {
  if (!(options.temperature >= 0) || !std::isfinite(options.temperature)) {
    throw_error(ErrorCode::invalid_argument, "pact generate",
                fmt::format("--temperature {} must be a finite number >= 0", options.temperature));
  }
  if (options.top_k < 0)
    throw_error(ErrorCode::invalid_argument, "pact generate", fmt::format("--top-k {} must be >= 0", options.top_k));
}

std::int64_t Sampler::next(std::span<const float> logits) {
  if (logits.empty()) throw_error(ErrorCode::invalid_argument, "pact generate", "no logits to sample from");
  for (std::size_t i = 0; i < logits.size(); ++i) {
    if (!std::isfinite(logits[i])) {
      throw_error(ErrorCode::non_finite, "pact generate", fmt::format("logit {} is {}", i, logits[i]));
    }
  }
  const auto first_max = [&] {
    return static_cast<std::int64_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  };
  if (options_.temperature == 0) return first_max();
  std::vector<std::int64_t> order(logits.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int64_t>(i);
  std::size_t keep = order.size();
  if (options_.top_k > 0) keep = std::min(keep, static_cast<std::size_t>(options_.top_k));
  // Largest first; equal logits by index, so the draw does not depend on the sort's stability.
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(),
                    [&](std::int64_t a, std::int64_t b) {
                      const float la = logits[static_cast<std::size_t>(a)], lb = logits[static_cast<std::size_t>(b)];
                      return la != lb ? la > lb : a < b;
                    });
  const double top = logits[static_cast<std::size_t>(order[0])];
  std::vector<double> weights(keep);
  double total = 0;
  for (std::size_t i = 0; i < keep; ++i) {
    weights[i] = std::exp((logits[static_cast<std::size_t>(order[i])] - top) / options_.temperature);
    total += weights[i];
  }
  // One uniform draw in [0, total): the same seed gives the same tokens on every machine (the
  // generator's bits are specified; std::uniform_real_distribution's mapping is not).
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53 * total;
  double acc = 0;
  for (std::size_t i = 0; i < keep; ++i) {
    acc += weights[i];
    if (u < acc) return order[i];
  }
  return order[keep - 1];
}

double GenerationResult::tokens_per_second() const noexcept {
  const double s = prefill_seconds + decode_seconds;
  return s > 0 ? static_cast<double>(tokens.size()) / s : 0.0;
}

GenerationResult generate(Generator& generator, std::span<const std::int64_t> prompt, std::int64_t max_new_tokens,
                          const SamplingOptions& sampling, bool keep_logits,
                          const std::function<void(std::int64_t, const GenerationResult&)>& on_token) {
  constexpr const char* op = "pact generate";
  if (prompt.empty()) throw_error(ErrorCode::invalid_argument, op, "the prompt is empty");
  if (max_new_tokens < 0)
    throw_error(ErrorCode::invalid_argument, op, fmt::format("--max-new-tokens {} is negative", max_new_tokens));
  const auto p = static_cast<std::int64_t>(prompt.size());
  // The last new token is not run, so a prompt of P tokens and N new ones needs P + N - 1 positions.
  if (p > generator.capacity() || max_new_tokens - 1 > generator.capacity() - p) {
    throw_error(ErrorCode::invalid_argument, op,
                fmt::format("a prompt of {} tokens and {} new tokens exceed the context of {}", p, max_new_tokens,
                            generator.capacity()));
  }
  for (std::size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0 || prompt[i] >= generator.config().vocab) {
      throw_error(ErrorCode::invalid_argument, op,
                  fmt::format("prompt token {} (id {}) is outside the vocabulary [0, {})", i, prompt[i],
                              generator.config().vocab));
    }
  }
  Sampler sampler(sampling);
  GenerationResult result;
  if (max_new_tokens == 0) return result;
  generator.reset();
  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  std::vector<float> logits = generator.forward(prompt);
  result.prefill_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  start = Clock::now();
  for (std::int64_t n = 0; n < max_new_tokens; ++n) {
    if (n > 0) {
      const std::int64_t last = result.tokens.back();
      logits = generator.forward(std::span<const std::int64_t>(&last, 1));
    }
    result.tokens.push_back(sampler.next(logits));
    if (keep_logits) result.logits.push_back(logits);
    if (n > 0) result.decode_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (on_token) on_token(result.tokens.back(), result);
  }
  return result;
}

}  // namespace pact::llm
