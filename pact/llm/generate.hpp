#pragma once
/// Decoding a checkpoint (issue 23): a Generator plans the step graph (pact/llm/decoder.hpp) under a
/// backend profile, once per number of new tokens (the prompt's prefill, then 1 for every decode step),
/// keeps the KV caches between steps (updated in place: Note [Decoder step graph]) and returns each step's
/// logits; generate() runs a prompt and samples new tokens greedily or with temperature and top-k.

#include <functional>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "pact/contract/check.hpp"
#include "pact/llm/decoder.hpp"
#include "pact/plan/planner.hpp"
#include "pact/runtime/tape.hpp"

namespace pact::llm {

class Generator {
 public:
  /// Plans the decode step for caches of `capacity` positions (0: the configuration's context) over
  /// `weights` (load_weights' result, moved in). A rejected plan returns its audit; a capacity past the
  /// context, or weights the graph does not bind, are typed errors.
  static Expected<Generator, plan::PlanRejection> plan(const DecoderConfig& config,
                                                       std::map<std::string, Tensor> weights, Precision precision,
                                                       std::int64_t capacity, const contract::BackendProfile& profile,
                                                       std::shared_ptr<const contract::EvidenceResolver> resolver);

  /// Runs `ids` as the next tokens (positions position() ...): every layer's keys and values enter the
  /// caches, and the last token's logits (f32, vocab entries) come back. Each distinct count of tokens
  /// is planned once, on first use (a rejected plan is a typed error carrying its audit table). Token
  /// ids outside the vocabulary, or more tokens than the caches have room for, are invalid_argument and
  /// nothing runs. After a failure inside a step the caches are gone: the next call is refused until
  /// reset().
  std::vector<float> forward(std::span<const std::int64_t> ids);
  /// Empties the caches (position 0).
  void reset();
  std::int64_t position() const noexcept { return position_; }
  std::int64_t capacity() const noexcept { return capacity_; }
  const DecoderConfig& config() const noexcept { return config_; }
  Precision precision() const noexcept { return precision_; }
  /// The decode step's plan audit (every kernel a step runs; prefill plans choose the same capsules).
  const plan::PlanAudit& audit() const noexcept { return plans_.at(1).audit(); }

 private:
  Generator(DecoderConfig config, Precision precision, std::int64_t capacity, const contract::BackendProfile& profile,
            std::shared_ptr<const contract::EvidenceResolver> resolver);
  const plan::AcceptedGraphPlan& plan_for(std::int64_t tokens);

  DecoderConfig config_;
  Precision precision_;
  std::int64_t capacity_;
  contract::BackendProfile profile_;
  std::shared_ptr<const contract::EvidenceResolver> resolver_;
  std::map<std::int64_t, plan::AcceptedGraphPlan> plans_;
  std::map<std::string, runtime::EagerTensor> weights_;  // parameters and buffers, by graph source id
  std::map<std::string, runtime::EagerTensor> caches_;   // by cache input id; empty after a failed step
  std::int64_t position_ = 0;
  bool broken_ = false;
};

/// How new tokens are chosen: temperature 0 is greedy (the first largest logit); above 0 the logits are
/// divided by it, kept to the top_k largest (0: all), and one token is drawn from their softmax with a
/// generator seeded by `seed` (the same seed gives the same tokens).
struct SamplingOptions {
  double temperature = 0;
  std::int64_t top_k = 0;
  std::uint64_t seed = 0;
};

/// Chooses tokens from logits (SamplingOptions). Non-finite logits are invalid_argument.
class Sampler {
 public:
  explicit Sampler(const SamplingOptions& options);
  std::int64_t next(std::span<const float> logits);

 private:
  SamplingOptions options_;
  std::mt19937_64 rng_;
};

struct GenerationResult {
  std::vector<std::int64_t> tokens;        ///< the new tokens
  std::vector<std::vector<float>> logits;  ///< with keep_logits: the logits each new token was drawn from
  double prefill_seconds = 0;              ///< the prompt's step
  double decode_seconds = 0;               ///< every later step
  /// New tokens per second over the whole generation (prefill included).
  double tokens_per_second() const noexcept;
};

/// Runs `prompt` from position 0 and draws `max_new_tokens` tokens, calling `on_token` after each. An
/// empty prompt, a negative count, an id outside the vocabulary, or a prompt and new tokens that do not
/// fit the caches are refused before any work (invalid_argument).
GenerationResult generate(Generator& generator, std::span<const std::int64_t> prompt, std::int64_t max_new_tokens,
                          const SamplingOptions& sampling, bool keep_logits = false,
                          const std::function<void(std::int64_t token, const GenerationResult& so_far)>& on_token = {});

}  // namespace pact::llm
