// Data-parallel training over MPI (issue 25), run as two ranks: ctest starts this binary under
// `mpirun -np 2` (tests/dist/CMakeLists.txt), so every test below runs on both ranks at once.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <thread>

#include "pact/core/json.hpp"
#include "pact/dist/mpi.hpp"
#include "pact/ir/safetensors.hpp"
#include "pact/train/trainer.hpp"

namespace pact::dist {
namespace {

using ::testing::HasSubstr;

MpiCommunicator& world(bool fixed_order = false) {
  static MpiCommunicator engine(MpiOptions{60, false});
  static MpiCommunicator fixed(MpiOptions{60, true});
  return fixed_order ? fixed : engine;
}

// One global batch of `rows` digits-shaped rows (features in [0, 1), classes 0..9), the same on every rank.
std::pair<std::vector<float>, std::vector<std::int64_t>> global_batch(std::int64_t rows, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<float> x(static_cast<std::size_t>(rows * 64));
  for (auto& v : x) v = u(rng);
  std::vector<std::int64_t> y(static_cast<std::size_t>(rows));
  for (auto& v : y) v = static_cast<std::int64_t>(rng() % 10);
  return {x, y};
}

// Rows [first, first + n) of a global batch as the trainer's (x, target).
std::pair<Tensor, Tensor> rows_of(const std::pair<std::vector<float>, std::vector<std::int64_t>>& batch,
                                  std::int64_t first, std::int64_t n) {
  const auto& [x, y] = batch;
  return {
      Tensor::from_values<float>(Dims{n, 64}, std::span<const float>(x).subspan(static_cast<std::size_t>(first * 64),
                                                                                static_cast<std::size_t>(n * 64))),
      Tensor::from_values<std::int64_t>(Dims{n}, std::span<const std::int64_t>(y).subspan(
                                                     static_cast<std::size_t>(first), static_cast<std::size_t>(n)))};
}

std::vector<float> values_of(const Tensor& t) {
  std::vector<std::byte> bytes;
  ir::append_tensor_bytes(t.as_view(), bytes);
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

train::Objective mlp_objective(const std::string& profile, std::int64_t hidden = 128) {
  train::Objective o;
  o.graph = [hidden](std::int64_t b) { return train::digits_mlp(b, hidden); };
  o.options.optimizer = "adam";
  o.options.lr = 0.01;
  o.options.seed = 5;
  o.options.profile = profile;
  return o;
}

// How a data-parallel session followed one process at twice the batch.
struct Followed {
  float worst = 0;            ///< the largest parameter difference (running statistics included)
  std::string where;          ///< its entry
  double worst_loss_gap = 0;  ///< the largest step-loss difference
  bool ranks_agree = false;   ///< every rank holds the same values, bit for bit
};

// Three steps of objective `o`: 2 ranks of `per_rank` rows (`parallel`, made data-parallel by the caller)
// against one process of 2 x per_rank rows on the same global batches.
Followed follow_one_process(const train::Objective& o, train::TrainingSession& parallel, std::int64_t per_rank,
                            std::uint64_t init_seed, std::uint64_t data_seed) {
  MpiCommunicator& comm = world();
  train::TrainingSession single(o, train::init_parameters(o.graph(2 * per_rank), init_seed));
  train::OptimizerState ps, ss;
  Followed f;
  for (int step = 0; step < 3; ++step) {
    const auto batch = global_batch(2 * per_rank, data_seed + static_cast<std::uint64_t>(step));
    auto [x, y] = rows_of(batch, comm.rank() * per_rank, per_rank);
    auto p = parallel.step_batch(std::move(x), std::move(y), std::move(ps));
    ps = std::move(p.state);
    EXPECT_TRUE(p.reduction.has_value());
    auto [gx, gy] = rows_of(batch, 0, 2 * per_rank);
    auto s = single.step_batch(std::move(gx), std::move(gy), std::move(ss));
    ss = std::move(s.state);
    f.worst_loss_gap = std::max(f.worst_loss_gap, std::abs(p.loss - s.loss));  // the loss: the mean over the ranks
  }
  const auto& a = parallel.parameters();
  const auto& b = single.parameters();
  std::vector<std::byte> bytes;
  for (std::size_t i = 0; i < a.values.size(); ++i) {
    const auto pa = values_of(a.values[i]), pb = values_of(b.values[i]);
    EXPECT_EQ(pa.size(), pb.size()) << a.names[i];
    for (std::size_t k = 0; k < std::min(pa.size(), pb.size()); ++k) {
      if (std::abs(pa[k] - pb[k]) <= f.worst) continue;
      f.worst = std::abs(pa[k] - pb[k]);
      f.where = a.names[i];
    }
    ir::append_tensor_bytes(a.values[i].as_view(), bytes);
  }
  const auto digests = comm.gather_all(sha256_digest(bytes));
  f.ranks_agree = digests[0] == digests[1];
  return f;
}

TEST(DataParallel, TwoRanksFollowOneProcessAtTwiceTheBatch) {
  MpiCommunicator& comm = world();
  ASSERT_EQ(comm.size(), 2) << "run under mpirun -np 2";
  const auto objective = mlp_objective("cpu-checked-mpi");
  train::TrainingSession parallel(objective, train::init_parameters(objective.graph(24), 5));
  parallel.set_data_parallel(comm);
  const Followed f = follow_one_process(objective, parallel, 24, 5, 100);
  EXPECT_LT(f.worst, 2e-5f) << f.where;
  EXPECT_LT(f.worst_loss_gap, 1e-5);
  EXPECT_TRUE(f.ranks_agree) << "the ranks' parameters differ";
}

// The CNN (conv, batch norm, relu, pool, linear), 2 ranks of 12 rows, their batch norms synchronised or not.
Followed cnn_against_one_process(bool sync_batch_norm) {
  MpiCommunicator& comm = world();
  constexpr std::int64_t per_rank = 12;
  train::Objective o;
  o.graph = [](std::int64_t b) { return train::digits_cnn(b); };
  o.options.optimizer = "sgd";
  o.options.momentum = 0.9;
  o.options.lr = 0.05;
  o.options.seed = 9;
  o.options.profile = "cpu-checked-mpi";
  train::TrainingSession parallel(o, train::init_parameters(o.graph(per_rank), 9));
  parallel.set_data_parallel(comm, std::size_t{25} << 20, sync_batch_norm);
  EXPECT_EQ(parallel.syncs_batch_norm(), sync_batch_norm);
  // The statistics' sums cross the mpi.allreduce boundary too: the plan admits them as a kernel of their own.
  const plan::PlanAudit& audit = parallel.audit(per_rank);
  const auto row = std::find_if(audit.kernels.begin(), audit.kernels.end(),
                                [](const auto& k) { return k.node == "allreduce:batch_norm"; });
  EXPECT_EQ(row != audit.kernels.end(), sync_batch_norm);
  if (row != audit.kernels.end()) {
    EXPECT_EQ(row->purpose, plan::KernelPurpose::allreduce);
    EXPECT_EQ(row->capsule != nullptr ? row->capsule->name : "(none)", "mpi.allreduce_mean");
  }
  return follow_one_process(o, parallel, per_rank, 9, 300);
}

TEST(DataParallel, SynchronisedBatchNormFollowsOneProcessAtTwiceTheBatch) {
  // Batch statistics over both ranks' rows (forward, backward and the running statistics), so the CNN's
  // parameters and running statistics after 3 steps are one process's at 24 rows, on both ranks alike.
  const Followed f = cnn_against_one_process(true);
  EXPECT_LT(f.worst, 2e-5f) << f.where;
  EXPECT_LT(f.worst_loss_gap, 1e-5);
  EXPECT_TRUE(f.ranks_agree) << "the ranks' parameters or running statistics differ";
}

TEST(DataParallel, BatchNormOfEachRanksShardAloneDrifts) {
  // The comparison above can fail: each rank normalising its own 12 rows trains another model (and its
  // ranks' running statistics part ways).
  const Followed f = cnn_against_one_process(false);
  EXPECT_GT(f.worst, 1e-3f);
  EXPECT_FALSE(f.ranks_agree);
}

TEST(DataParallel, AWrongAverageIsCaught) {
  // The comparison above can fail: a rank that trains on its shard alone (no reduction) drifts from the
  // one-process run well past the tolerance.
  MpiCommunicator& comm = world();
  constexpr std::int64_t per_rank = 24;
  const auto objective = mlp_objective("cpu-checked-mpi");
  train::TrainingSession alone(objective, train::init_parameters(objective.graph(per_rank), 5));
  train::TrainingSession single(objective, train::init_parameters(objective.graph(2 * per_rank), 5));
  train::OptimizerState as, ss;
  for (int step = 0; step < 3; ++step) {
    const auto batch = global_batch(2 * per_rank, 100 + static_cast<std::uint64_t>(step));
    auto [x, y] = rows_of(batch, comm.rank() * per_rank, per_rank);
    as = alone.step_batch(std::move(x), std::move(y), std::move(as)).state;
    auto [gx, gy] = rows_of(batch, 0, 2 * per_rank);
    ss = single.step_batch(std::move(gx), std::move(gy), std::move(ss)).state;
  }
  float worst = 0;
  const auto pa = values_of(alone.parameters().values[0]), pb = values_of(single.parameters().values[0]);
  for (std::size_t k = 0; k < pa.size(); ++k) worst = std::max(worst, std::abs(pa[k] - pb[k]));
  EXPECT_GT(worst, 1e-3f);
}

TEST(DataParallel, BucketsStartWhileBackwardIsStillRunning) {
  MpiCommunicator& comm = world();
  // The char transformer under a 64 KB cap: the head's gradients are final early in backward, so the
  // first bucket's reduction starts while other gradients are still to come.
  constexpr std::int64_t per_rank = 2, t = 16, vocab = 40, d = 64;
  train::Objective o;
  o.graph = [&](std::int64_t b) { return train::char_transformer(b, t, vocab, d, 4); };
  o.options.seed = 3;
  o.options.profile = "cpu-checked-mpi";
  train::TrainingSession session(o, train::init_parameters(o.graph(per_rank), 3));
  session.set_data_parallel(comm, std::size_t{64} << 10);
  const auto buckets = session.gradient_buckets();
  ASSERT_GE(buckets.size(), 3u);
  // Reverse parameter order: the first bucket holds the last parameters of the pack.
  EXPECT_EQ(buckets.front().front(), session.parameters().names.size() - 1);
  std::mt19937_64 rng(7 + static_cast<std::uint64_t>(comm.rank()));
  std::vector<std::int64_t> x(per_rank * t), y(per_rank * t);
  for (auto& v : x) v = static_cast<std::int64_t>(rng() % vocab);
  for (auto& v : y) v = static_cast<std::int64_t>(rng() % vocab);
  auto r = session.step_batch(Tensor::from_values<std::int64_t>(Dims{per_rank, t}, x),
                              Tensor::from_values<std::int64_t>(Dims{per_rank * t}, y), {});
  ASSERT_TRUE(r.reduction.has_value());
  EXPECT_EQ(r.reduction->buckets, static_cast<int>(buckets.size()));
  EXPECT_GT(r.reduction->gradients_after_first_start, 0) << "the first reduction started only after backward";
  EXPECT_GE(r.reduction->started_in_backward, 2);
}

TEST(DataParallel, TheReductionIsAnAdmittedKernelOfTheMpiProvider) {
  MpiCommunicator& comm = world();
  const auto objective = mlp_objective("cpu-checked-mpi");
  train::TrainingSession session(objective, train::init_parameters(objective.graph(8), 5));
  session.set_data_parallel(comm);
  const plan::PlanAudit& audit = session.audit(8);
  const auto row = std::find_if(audit.kernels.begin(), audit.kernels.end(),
                                [](const auto& k) { return k.purpose == plan::KernelPurpose::allreduce; });
  ASSERT_NE(row, audit.kernels.end());
  EXPECT_EQ(row->node, "allreduce:f32");
  ASSERT_NE(row->capsule, nullptr);
  EXPECT_EQ(row->capsule->name, "mpi.allreduce_mean");
  EXPECT_EQ(row->capsule->provider, "mpi");
  EXPECT_EQ(row->capsule->descriptors[2].evidence.id, "mpi.allreduce");
  EXPECT_TRUE(audit.check.accepted);
  // A profile that does not admit the boundary refuses data-parallel training, naming the one that does.
  auto checked = mlp_objective("cpu-checked");
  train::TrainingSession refused(checked, train::init_parameters(checked.graph(8), 5));
  try {
    refused.set_data_parallel(comm);
    FAIL() << "cpu-checked admitted the mpi.allreduce boundary";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("cpu-checked-mpi"));
  }
  // A communicator other than the admitted capsule describes (rank-ordered under cpu-checked-mpi, whose
  // capsule is Open MPI's order) is refused.
  train::TrainingSession mismatched(objective, train::init_parameters(objective.graph(8), 5));
  EXPECT_THROW(mismatched.set_data_parallel(world(true)), Error);
}

TEST(DataParallel, RanksThatDisagreeAreRefusedBeforeTheFirstStep) {
  MpiCommunicator& comm = world();
  const auto objective = mlp_objective("cpu-checked-mpi");
  // Rank 1 starts from other parameters (another seed): both ranks refuse, naming rank 1.
  train::TrainingSession session(objective, train::init_parameters(objective.graph(8), comm.rank() == 1 ? 6 : 5));
  try {
    session.set_data_parallel(comm);
    FAIL() << "parameters that differ between ranks were accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_THAT(e.what(), HasSubstr("rank 1's parameters"));
  }
  // Another option (the learning rate) is refused the same way.
  auto other = mlp_objective("cpu-checked-mpi");
  other.options.lr = comm.rank() == 1 ? 0.02 : 0.01;
  train::TrainingSession lr(other, train::init_parameters(other.graph(8), 5));
  EXPECT_THROW(lr.set_data_parallel(comm), Error);
}

TEST(DataParallel, FixedOrderReductionIsBitwiseRepeatable) {
  MpiCommunicator& comm = world(true);
  constexpr std::int64_t per_rank = 16;
  auto run = [&] {
    const auto objective = mlp_objective("cpu-deterministic-mpi");
    train::TrainingSession session(objective, train::init_parameters(objective.graph(per_rank), 5));
    session.set_data_parallel(comm);
    train::OptimizerState state;
    for (int step = 0; step < 3; ++step) {
      const auto batch = global_batch(2 * per_rank, 200 + static_cast<std::uint64_t>(step));
      auto [x, y] = rows_of(batch, comm.rank() * per_rank, per_rank);
      state = session.step_batch(std::move(x), std::move(y), std::move(state)).state;
    }
    std::vector<std::byte> bytes;
    for (const auto& v : session.parameters().values) ir::append_tensor_bytes(v.as_view(), bytes);
    return sha256_digest(bytes);
  };
  EXPECT_EQ(run(), run());
}

// Run alone (ctest DataParallelFault.AHungRankEndsTheJob): rank 1 stops taking part; rank 0's collective times out and
// the job ends, instead of hanging, with a message naming rank 1 as the one that never reached it.
TEST(DataParallelFault, AHungRankEndsTheJob) {
  MpiCommunicator comm(MpiOptions{2, false});
  const auto objective = mlp_objective("cpu-checked-mpi");
  train::TrainingSession session(objective, train::init_parameters(objective.graph(8), 5));
  session.set_data_parallel(comm);
  if (comm.rank() == 1) std::this_thread::sleep_for(std::chrono::seconds(60));  // hangs
  const auto batch = global_batch(16, 1);
  auto [x, y] = rows_of(batch, comm.rank() * 8, 8);
  session.step_batch(std::move(x), std::move(y), {});
  FAIL() << "the step finished without rank 1";
}

}  // namespace
}  // namespace pact::dist
