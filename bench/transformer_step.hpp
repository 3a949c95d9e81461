#pragma once
// The char transformer at TransformerEncoderLayer size (issue 5): d_model 128, 4 heads, ffn 512, seq 64,
// batch 16, vocabulary 96; inputs and next-character targets are fixed random tokens. One training step of
// it is a benchmark on the CPU (bench/train_step_bench.cpp) and on the GPU (bench/gpu/train_step.cpp), each
// against PyTorch eager's step of the same model.

#include <random>
#include <string>
#include <vector>

#include "pact/train/trainer.hpp"

namespace pact::bench {

class TransformerStep {
 public:
  static constexpr std::int64_t kBatch = 16, kSeq = 64, kVocab = 96, kModel = 128, kHeads = 4;

  explicit TransformerStep(const std::string& profile) : session_(objective(profile), parameters(profile)) {
    std::mt19937 rng(0);
    for (auto& v : x_) v = static_cast<std::int64_t>(rng() % kVocab);
    for (auto& v : y_) v = static_cast<std::int64_t>(rng() % kVocab);
  }
  /// One update on the fixed batch; returns its loss.
  double step() {
    auto r = session_.step_batch(Tensor::from_values<std::int64_t>(Dims{kBatch, kSeq}, x_),
                                 Tensor::from_values<std::int64_t>(Dims{kBatch * kSeq}, y_), std::move(optimizer_));
    optimizer_ = std::move(r.state);
    return r.loss;
  }

 private:
  static train::Objective objective(const std::string& profile) {
    train::Objective o;
    o.graph = [](std::int64_t b) { return train::char_transformer(b, kSeq, kVocab, kModel, kHeads); };
    o.options.lr = 1e-3;
    o.options.profile = profile;
    return o;
  }
  static train::ParameterPack parameters(const std::string& profile) {
    return train::init_parameters(objective(profile).graph(kBatch), 0);
  }
  train::TrainingSession session_;
  std::vector<std::int64_t> x_ = std::vector<std::int64_t>(kBatch * kSeq),
                            y_ = std::vector<std::int64_t>(kBatch * kSeq);
  train::OptimizerState optimizer_;
};

}  // namespace pact::bench
