// `pact train --model char-transformer`: a tiny causal transformer (one block, 4 heads) trained on a text
// file (default /usr/share/common-licenses/GPL-3) to predict the next character; prints the loss in
// nats per character and a generated sample.

#include <fmt/format.h>
#include <omp.h>

#include <chrono>
#include <random>
#include <set>

#include "pact/core/file.hpp"
#include "pact/picture/picture.hpp"
#include "pact/plan/planner.hpp"
#include "pact/train/trainer.hpp"
#include "tools/pact/commands.hpp"

namespace pact::cli {

int run_char_transformer(const TrainArgs& args, train::Communicator* comm) {
  const std::string path = args.data == "data/digits.csv.gz" ? "/usr/share/common-licenses/GPL-3" : args.data;
  const std::string text = read_file(path, "train");
  const std::int64_t t = 64, d = 64, heads = 4, batch = args.batch_size;
  if (static_cast<std::int64_t>(text.size()) < 2 * (t + 1))
    throw_error(ErrorCode::invalid_argument, "train", fmt::format("'{}' is too short", path));
  std::set<unsigned char> chars(text.begin(), text.end());
  std::vector<unsigned char> alphabet(chars.begin(), chars.end());
  std::vector<std::int64_t> id(256, -1);
  for (std::size_t i = 0; i < alphabet.size(); ++i) id[alphabet[i]] = static_cast<std::int64_t>(i);
  const auto vocab = static_cast<std::int64_t>(alphabet.size());
  std::vector<std::int64_t> tokens;
  for (unsigned char c : text) tokens.push_back(id[c]);

  train::Objective objective;
  objective.graph = [=](std::int64_t b) { return train::char_transformer(b, t, vocab, d, heads); };
  objective.options.optimizer = args.optimizer;
  objective.options.lr = args.lr;
  objective.options.seed = args.seed;
  objective.options.profile = args.profile;
  if (args.checkpoint) {
    objective.checkpoint_regions = {
        {"ln1", "q", "q4", "qh", "k", "k4", "kh", "v", "v4", "vh", "att", "att_t", "att_m", "proj", "h1"},
        {"ln2", "up", "act", "down", "h2"}};
  }
  const std::int64_t steps = args.steps;
  if (steps <= 0) throw_error(ErrorCode::invalid_argument, "train", fmt::format("--steps {} must be positive", steps));
  objective.options.schedule.kind = train::Schedule::cosine;
  objective.options.schedule.total = steps;
  objective.options.schedule.warmup = std::min<std::int64_t>(50, steps / 10);
  train::TrainingSession session(objective, train::init_parameters(objective.graph(batch), args.seed));
  const std::int64_t ranks = comm != nullptr ? comm->size() : 1, rank = comm != nullptr ? comm->rank() : 0;
  if (comm != nullptr)
    session.set_data_parallel(*comm, static_cast<std::size_t>(args.bucket_mb * (1 << 20)), !args.local_batch_norm);
  const auto& audit = session.audit(batch);
  std::set<std::string> capsules;
  for (const auto& k : audit.kernels) {
    if (k.capsule) capsules.insert(k.capsule->name);
  }
  fmt::print(
      "pact train: char-transformer (1 block, {} heads, d {}, context {}), vocabulary {} from {} ({} chars), {} "
      "updates, batch {}{}\n",
      heads, d, t, vocab, path, text.size(), steps, batch, args.checkpoint ? ", sublayers checkpointed" : "");
  fmt::print("plan audit ({}): {} kernels, {} capsules admitted, verdict {}\n", audit.profile, audit.kernels.size(),
             capsules.size(), audit.check.accepted ? "accepted" : "rejected");
  std::mt19937_64 rng(args.seed);
  std::uniform_int_distribution<std::size_t> start(0, tokens.size() - static_cast<std::size_t>(t) - 1);
  // `batch` random windows: inputs [batch, t] and next-character targets [batch * t]. Data-parallel, every
  // rank draws the same global batch of ranks * batch windows and trains on its own rows of it.
  auto sample_batch = [&] {
    std::vector<std::int64_t> x, y;
    for (std::int64_t b = 0; b < batch * ranks; ++b) {
      const std::size_t o = start(rng);
      if (b / batch != rank) continue;
      x.insert(x.end(), tokens.begin() + static_cast<long>(o), tokens.begin() + static_cast<long>(o) + t);
      y.insert(y.end(), tokens.begin() + static_cast<long>(o) + 1, tokens.begin() + static_cast<long>(o) + t + 1);
    }
    return std::pair{Tensor::from_values<std::int64_t>(Dims{batch, t}, x),
                     Tensor::from_values<std::int64_t>(Dims{batch * t}, y)};
  };
  if (!args.run_dir.empty()) require_writable_destination(args.run_dir, "pact train --run-dir");
  const auto t0 = std::chrono::steady_clock::now();
  double recent = 0;
  std::vector<double> step_loss;
  std::vector<train::ReductionTiming> reductions;
  std::uint64_t retained_peak = 0;  // bytes retained for backward, largest over the steps
  train::OptimizerState optimizer;
  for (std::int64_t s = 0; s < steps; ++s) {
    auto [x, y] = sample_batch();
    train::StepResult r = session.step_batch(std::move(x), std::move(y), std::move(optimizer));
    optimizer = std::move(r.state);
    const double loss = r.loss;
    step_loss.push_back(loss);
    if (r.reduction) reductions.push_back(*r.reduction);
    retained_peak = std::max(retained_peak, r.retained_bytes);
    recent = s == 0 ? loss : 0.95 * recent + 0.05 * loss;
    if ((s + 1) % 50 == 0 || s + 1 == steps) {
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      fmt::print("step {:>5}/{}  loss {:.3f} nats/char (smoothed {:.3f})  {:.1f} ms/step, {:.0f} samples/s\n", s + 1,
                 steps, loss, recent, 1e3 * secs / static_cast<double>(s + 1),
                 static_cast<double>((s + 1) * batch * ranks) / secs);
    }
  }
  // Held-out style estimate: mean loss over fresh random windows in evaluation mode (data-parallel: every
  // rank's rows of 8 global batches, averaged over the ranks, as one process over the same windows).
  double eval = 0;
  for (int k = 0; k < 8; ++k) {
    auto [x, y] = sample_batch();
    eval += session.loss(std::move(x), std::move(y));
  }
  if (comm != nullptr) eval = comm->mean(eval);
  const double seconds_training = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("evaluation loss: {:.3f} nats/char\n", eval / 8);
  fmt::print("retained for backward: {} bytes (largest over the steps)\n", retained_peak);
  // Sample 240 characters, temperature 0.8, from a prompt.
  std::string prompt = "The GNU General Public License ";
  std::vector<std::int64_t> context;
  for (unsigned char c : prompt) context.push_back(id[c] >= 0 ? id[c] : 0);
  std::string sample = prompt;
  for (int n = 0; n < 240; ++n) {
    std::vector<std::int64_t> window(static_cast<std::size_t>(t), id[' '] >= 0 ? id[' '] : 0);
    const std::size_t have = std::min<std::size_t>(context.size(), static_cast<std::size_t>(t));
    std::copy(context.end() - static_cast<long>(have), context.end(), window.end() - static_cast<long>(have));
    Tensor logits = session.predict(Tensor::from_values<std::int64_t>(Dims{1, t}, window));
    std::vector<double> p(static_cast<std::size_t>(vocab));
    double mx = -1e30, sum = 0;
    for (std::int64_t v = 0; v < vocab; ++v) mx = std::max(mx, logits.get(Dims{t - 1, v}).real);
    for (std::int64_t v = 0; v < vocab; ++v)
      sum += p[static_cast<std::size_t>(v)] = std::exp((logits.get(Dims{t - 1, v}).real - mx) / 0.8);
    std::uniform_real_distribution<double> u(0, sum);
    double r = u(rng);
    std::int64_t pick = vocab - 1;
    for (std::int64_t v = 0; v < vocab; ++v) {
      r -= p[static_cast<std::size_t>(v)];
      if (r <= 0) {
        pick = v;
        break;
      }
    }
    context.push_back(pick);
    sample.push_back(static_cast<char>(alphabet[static_cast<std::size_t>(pick)]));
  }
  fmt::print("sample:\n{}\n", sample);

  // The run report, as for the digits models: no epochs, the evaluation loss as the final metric. Rank 0
  // writes it.
  if (rank != 0) return 0;
  const std::filesystem::path dir = make_run_dir(args);
  const std::string final_metric = fmt::format("evaluation loss {:.3f} nats/char", eval / 8);
  Json report{{"schema", "pact.train-report.v1"},
              {"config", Json{{"model", args.model},
                              {"steps", steps},
                              {"batch_size", batch},
                              {"context", t},
                              {"d_model", d},
                              {"heads", heads},
                              {"lr", args.lr},
                              {"optimizer", args.optimizer},
                              {"seed", args.seed},
                              {"profile", args.profile},
                              {"schedule", "cosine"},
                              {"checkpointed_sublayers", args.checkpoint},
                              {"threads", omp_get_max_threads()}}},
              {"data", Json{{"path", path}, {"characters", text.size()}, {"vocabulary", vocab}}},
              {"plan_audit", plan::render_audit_json(audit)},
              {"epochs", Json::array()},
              {"evaluation_loss", eval / 8},
              {"updates", session.step_count()},
              {"backward_retained_bytes_peak", retained_peak},
              {"seconds_total", seconds_training}};
  report["step_loss"] = step_loss;
  if (comm != nullptr)
    report["data_parallel"] =
        data_parallel_summary(*comm, session, batch, static_cast<std::size_t>(args.bucket_mb * (1 << 20)), reductions);
  write_run_files(dir, report,
                  picture::render_svg(picture::to_dot(
                      picture::from_graph(objective.graph(batch), args.model + " under " + args.profile, &audit), {})),
                  final_metric);
  return 0;
}

}  // namespace pact::cli
