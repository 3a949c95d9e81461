#include "pact/train/fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <span>

namespace pact::train {

void predict_batches(TrainingSession& session, const Dataset& data, std::int64_t batch, bool fixed_batch,
                     const std::function<void(std::int64_t first, std::int64_t rows, std::span<const double> outputs,
                                              std::int64_t width)>& f) {
  if (batch <= 0) throw_error(ErrorCode::invalid_argument, "train.predict", fmt::format("batch {}", batch));
  for (std::int64_t start = 0; start < data.rows(); start += batch) {
    const std::int64_t real = std::min(batch, data.rows() - start);
    const std::int64_t n = fixed_batch ? batch : real;
    std::vector<std::int64_t> rows;
    for (std::int64_t i = 0; i < n; ++i) rows.push_back(std::min(start + i, data.rows() - 1));
    auto [x, y] = gather(data, rows);
    const Tensor out = session.predict(std::move(x));
    if (out.rank() != 2 || out.shape()[0] != n) {
      throw_error(ErrorCode::invalid_argument, "train.predict",
                  fmt::format("the model's outputs are {}; evaluation needs [batch, width] with batch {}",
                              out.shape().to_string(), n));
    }
    const Tensor values = out.convert(DType::f64);
    auto prepared = values.prepare_host<double>();
    if (!prepared) throw std::move(prepared).error().error;
    const auto v = std::get<PreparedContiguousRead<double>>(prepared.value()).as_span();
    const std::int64_t width = out.shape()[1];
    f(start, real, v.first(static_cast<std::size_t>(real * width)), width);
  }
}

double accuracy(TrainingSession& session, const Dataset& data, std::int64_t batch, bool fixed_batch) {
  if (data.rows() == 0) return 0.0;
  std::int64_t correct = 0;
  predict_batches(session, data, batch, fixed_batch,
                  [&](std::int64_t first, std::int64_t rows, std::span<const double> v, std::int64_t classes) {
                    for (std::int64_t i = 0; i < rows; ++i) {
                      const auto row =
                          v.subspan(static_cast<std::size_t>(i * classes), static_cast<std::size_t>(classes));
                      const auto best = std::max_element(row.begin(), row.end()) - row.begin();
                      correct += best == data.y[static_cast<std::size_t>(first + i)] ? 1 : 0;
                    }
                  });
  return static_cast<double>(correct) / static_cast<double>(data.rows());
}

double rmse(TrainingSession& session, const Dataset& data, std::int64_t batch, bool fixed_batch) {
  if (data.rows() == 0) return 0.0;
  double sq = 0;
  predict_batches(session, data, batch, fixed_batch,
                  [&](std::int64_t first, std::int64_t rows, std::span<const double> v, std::int64_t width) {
                    if (width != 1)
                      throw_error(ErrorCode::invalid_argument, "train.rmse",
                                  fmt::format("the model predicts {} values per row; a regression needs 1", width));
                    for (std::int64_t i = 0; i < rows; ++i) {
                      const double d =
                          v[static_cast<std::size_t>(i)] - data.values[static_cast<std::size_t>(first + i)];
                      sq += d * d;
                    }
                  });
  return std::sqrt(sq / static_cast<double>(data.rows()));
}

FitReport fit(TrainingSession& session, const Dataset& train, const Dataset& test, const FitOptions& options,
              OptimizerState state, const std::function<void(const StepProgress&)>& on_step,
              const std::function<void(int epoch, const EpochReport&, const OptimizerState&)>& on_epoch) {
  if (options.epochs <= 0) {
    throw_error(ErrorCode::invalid_argument, "train.fit", fmt::format("{} epochs; at least one", options.epochs));
  }
  if (options.start_epoch < 0 || options.start_epoch >= options.epochs) {
    throw_error(ErrorCode::invalid_argument, "train.fit",
                fmt::format("start epoch {} of {}: nothing left to train", options.start_epoch, options.epochs));
  }
  const std::int64_t batch = options.batch_size;
  const Communicator* comm = session.communicator();
  const std::int64_t rank = comm != nullptr ? comm->rank() : 0, ranks = comm != nullptr ? comm->size() : 1;
  const std::int64_t global = batch * ranks;  // rows one update reads over all the ranks
  if (batch <= 0 || global > train.rows()) {
    throw_error(ErrorCode::invalid_argument, "train.fit",
                fmt::format("batch size {} per rank on {} rank(s) for {} training rows; it must be in [1, {}]", batch,
                            ranks, train.rows(), train.rows() / ranks));
  }
  const std::int64_t steps_per_epoch = train.rows() / global;
  FitReport report;
  for (int epoch = options.start_epoch; epoch < options.epochs; ++epoch) {
    const auto e0 = std::chrono::steady_clock::now();
    const auto order = shuffled(train.rows(), options.seed * 1000003ULL + static_cast<std::uint64_t>(epoch));
    double sum = 0;
    for (std::int64_t s = 0; s < steps_per_epoch; ++s) {
      auto [x, y] =
          gather(train, std::span<const std::int64_t>(order).subspan(
                            static_cast<std::size_t>(s * global + rank * batch), static_cast<std::size_t>(batch)));
      StepResult r = session.step_batch(std::move(x), std::move(y), std::move(state));
      state = std::move(r.state);
      report.step_loss.push_back(r.loss);
      report.retained_bytes_peak = std::max(report.retained_bytes_peak, r.retained_bytes);
      if (r.reduction) report.reductions.push_back(*r.reduction);
      sum += r.loss;
      if (on_step) {
        on_step(StepProgress{epoch, s, steps_per_epoch, r.loss,
                             std::chrono::duration<double>(std::chrono::steady_clock::now() - e0).count()});
      }
    }
    EpochReport e;
    e.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - e0).count();
    e.loss = sum / static_cast<double>(steps_per_epoch);
    if (test.regression)
      e.rmse = rmse(session, test, batch, options.fixed_batch);
    else
      e.accuracy = accuracy(session, test, batch, options.fixed_batch);
    report.epochs.push_back(e);
    if (on_epoch) on_epoch(epoch, e, state);
  }
  report.state = std::move(state);
  return report;
}

}  // namespace pact::train
