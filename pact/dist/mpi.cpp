#include "pact/dist/mpi.hpp"

#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "pact/core/error.hpp"

namespace pact::dist {

namespace {

// MPI for the life of the process: started on first use, finalised at exit (static destruction).
struct World {
  World() {
    int started = 0;
    MPI_Initialized(&started);
    if (started == 0) {
      int provided = 0;
      // Only the thread that made the communicator calls MPI; OpenMP's threads compute.
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
      owned = true;
    }
    // Errors come back as codes (checked below), not as Open MPI's own abort without a word.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  }
  ~World() {
    int finished = 0;
    MPI_Finalized(&finished);
    if (owned && finished == 0) MPI_Finalize();
  }
  bool owned = false;
};

World& world() {
  static World w;
  return w;
}

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, static_cast<std::size_t>(length));
}

// Waits for `request` (collective `number` of the roll call), driving MPI's progress, for at most the
// timeout; past it the job ends, naming the ranks that never reached the collective.
void wait_bounded(const MpiCommunicator& comm, MPI_Request& request, std::string_view what, std::uint64_t number) {
  const auto start = std::chrono::steady_clock::now();
  const auto limit = std::chrono::duration<double>(comm.options().timeout_seconds);
  for (int spins = 0;; ++spins) {
    int done = 0;
    if (const int rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE); rc != MPI_SUCCESS)
      comm.abort(fmt::format("{} failed: {}", what, mpi_error(rc)));
    if (done != 0) return;
    if (std::chrono::steady_clock::now() - start > limit)
      comm.abort(fmt::format("{} did not complete within {} s: {} (--comm-timeout)", what,
                             comm.options().timeout_seconds, comm.absent(number)));
    if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// Ends the job when starting `what` (a non-blocking MPI call) returned `rc` other than success.
void require_started(const MpiCommunicator& comm, int rc, std::string_view what) {
  if (rc != MPI_SUCCESS) comm.abort(fmt::format("{} failed to start: {}", what, mpi_error(rc)));
}

MPI_Datatype mpi_type(DType dtype) {
  if (dtype == DType::f32) return MPI_FLOAT;
  if (dtype == DType::f64) return MPI_DOUBLE;
  throw_error(ErrorCode::unsupported, "dist.mpi", fmt::format("no MPI sum for {}", dtype_name(dtype)));
}

// A request in flight, waited for (bounded) once: by wait(), or by the destructor.
class InFlight : public train::PendingReduction {
 public:
  ~InFlight() override {
    if (request_ != MPI_REQUEST_NULL) wait();
  }
  void wait() override {
    if (request_ == MPI_REQUEST_NULL) return;
    wait_bounded(comm_, request_, what_, number_);
    request_ = MPI_REQUEST_NULL;
    done();
  }

 protected:
  InFlight(const MpiCommunicator& comm, std::string_view what) : comm_(comm), number_(comm.announce()), what_(what) {}
  // Aborts the job when starting the request failed.
  void started(int rc, std::size_t bytes) const {
    if (rc != MPI_SUCCESS) comm_.abort(fmt::format("{} of {} bytes failed to start: {}", what_, bytes, mpi_error(rc)));
  }
  /// What completes the result once the request has.
  virtual void done() {}
  const MpiCommunicator& comm_;
  MPI_Request request_ = MPI_REQUEST_NULL;

 private:
  std::uint64_t number_;  // in the roll call
  std::string_view what_;
};

// MPI_Iallreduce in place.
class EngineSum final : public InFlight {
 public:
  EngineSum(const MpiCommunicator& comm, std::span<std::byte> data, DType dtype)
      : InFlight(comm, "the allreduce") {  // gradients, batch-norm statistics or the loss
    const auto count = static_cast<int>(data.size() / dtype_size(dtype));
    started(MPI_Iallreduce(MPI_IN_PLACE, data.data(), count, mpi_type(dtype), MPI_SUM, MPI_COMM_WORLD, &request_),
            data.size());
  }
};

// Every rank's buffer gathered (MPI_Iallgather), then folded left to right in rank order on wait.
class FixedOrderSum final : public InFlight {
 public:
  FixedOrderSum(const MpiCommunicator& comm, std::span<std::byte> data, DType dtype)
      : InFlight(comm, "the allgather (rank order)"),
        data_(data),
        dtype_(dtype),
        all_(data.size() * static_cast<std::size_t>(comm.size())) {
    started(MPI_Iallgather(data.data(), static_cast<int>(data.size()), MPI_BYTE, all_.data(),
                           static_cast<int>(data.size()), MPI_BYTE, MPI_COMM_WORLD, &request_),
            data.size());
  }
  ~FixedOrderSum() override {
    if (request_ != MPI_REQUEST_NULL) wait();  // while this class's done() is still the one called
  }

 private:
  void done() override {
    if (dtype_ == DType::f32) {
      fold<float>();
    } else {
      fold<double>();
    }
  }
  template <class T>
  void fold() {
    const std::size_t n = data_.size() / sizeof(T);
    auto* out = reinterpret_cast<T*>(data_.data());
    const auto* all = reinterpret_cast<const T*>(all_.data());
    for (std::size_t i = 0; i < n; ++i) {
      T sum = all[i];
      for (int r = 1; r < comm_.size(); ++r) sum += all[static_cast<std::size_t>(r) * n + i];
      out[i] = sum;
    }
  }
  std::span<std::byte> data_;
  DType dtype_;
  std::vector<std::byte> all_;
};

}  // namespace

// Note [Roll call]
// ~~~~~~~~~~~~~~~~
// A collective that times out says only that some rank did not take part. To name it, every rank numbers
// the collectives it starts (1, 2, ...) and, as it starts each, sends that number to every other rank: an
// 8-byte message on a duplicate of MPI_COMM_WORLD (so it never matches anything else), which Open MPI
// sends eagerly, completing without the receiver. Each rank keeps a receive posted per peer and reads
// what has arrived whenever it drives progress, so at a timeout it knows the last collective every peer
// started: a peer behind this rank's number never reached the collective (it hangs, or died before it);
// when all have reached it, one failed inside it. A send still in flight to a peer that has stopped
// receiving is not repeated (its number is stale anyway). The cost: size - 1 small messages per collective.
struct MpiCommunicator::RollCall {
  static constexpr int kTag = 7;
  MPI_Comm comm = MPI_COMM_NULL;
  std::uint64_t started = 0;                            // collectives this rank has started
  std::vector<std::uint64_t> seen, outgoing, incoming;  // per rank
  std::vector<MPI_Request> sends, receives;             // per rank; this rank's own stay null

  // Reads every announcement that has arrived, reposting each peer's receive.
  void poll(int self) {
    for (int p = 0; p < static_cast<int>(seen.size()); ++p) {
      if (p == self) continue;
      const auto k = static_cast<std::size_t>(p);
      for (;;) {
        if (receives[k] == MPI_REQUEST_NULL &&
            MPI_Irecv(&incoming[k], 1, MPI_UINT64_T, p, kTag, comm, &receives[k]) != MPI_SUCCESS)
          break;
        int done = 0;
        if (MPI_Test(&receives[k], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || done == 0) break;
        seen[k] = std::max(seen[k], incoming[k]);  // MPI_Test has reset the request to null
      }
    }
  }
};

MpiCommunicator::MpiCommunicator(MpiOptions options) : options_(options) {
  if (!(options_.timeout_seconds > 0))
    throw_error(ErrorCode::invalid_argument, "dist.mpi",
                fmt::format("the collective timeout {} s must be positive", options_.timeout_seconds));
  world();
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  roll_ = std::make_unique<RollCall>();
  const auto n = static_cast<std::size_t>(size_);
  roll_->seen.assign(n, 0);
  roll_->outgoing.assign(n, 0);
  roll_->incoming.assign(n, 0);
  roll_->sends.assign(n, MPI_REQUEST_NULL);
  roll_->receives.assign(n, MPI_REQUEST_NULL);
  // The duplicate is itself a collective: bounded like the others (a rank that never starts is named).
  MPI_Request request = MPI_REQUEST_NULL;
  require_started(*this, MPI_Comm_idup(MPI_COMM_WORLD, &roll_->comm, &request),
                  "starting the communicator (MPI_Comm_idup)");
  wait_bounded(*this, request, "starting the communicator (MPI_Comm_idup)", 0);
}

MpiCommunicator::~MpiCommunicator() {
  int finished = 0;
  MPI_Finalized(&finished);
  if (finished != 0 || roll_ == nullptr || roll_->comm == MPI_COMM_NULL) return;
  for (auto& r : roll_->receives) {
    if (r == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);  // a cancelled receive completes at once
  }
  for (auto& s : roll_->sends)
    if (s != MPI_REQUEST_NULL) MPI_Request_free(&s);  // an eager send completes on its own
  MPI_Comm_free(&roll_->comm);
}

std::uint64_t MpiCommunicator::announce() const {
  RollCall& roll = *roll_;
  const std::uint64_t number = ++roll.started;
  roll.poll(rank_);
  for (int p = 0; p < size_; ++p) {
    const auto k = static_cast<std::size_t>(p);
    if (p == rank_) continue;
    int done = 1;
    if (roll.sends[k] != MPI_REQUEST_NULL) MPI_Test(&roll.sends[k], &done, MPI_STATUS_IGNORE);
    if (done == 0) continue;
    roll.outgoing[k] = number;
    MPI_Isend(&roll.outgoing[k], 1, MPI_UINT64_T, p, RollCall::kTag, roll.comm, &roll.sends[k]);
  }
  return number;
}

std::string MpiCommunicator::absent(std::uint64_t number) const {
  if (roll_ == nullptr || roll_->comm == MPI_COMM_NULL) return "a rank never started";
  roll_->poll(rank_);
  std::string behind;
  for (int p = 0; p < size_; ++p) {
    const std::uint64_t last = roll_->seen[static_cast<std::size_t>(p)];
    if (p == rank_ || last >= number) continue;
    behind += fmt::format("{}rank {} (its last collective started: #{})", behind.empty() ? "" : ", ", p, last);
  }
  if (behind.empty()) return fmt::format("every rank reached it (collective #{}); one died or hangs inside it", number);
  return fmt::format("never reached by {}; this rank is at collective #{}: it died or hangs", behind, number);
}

std::unique_ptr<train::PendingReduction> MpiCommunicator::start_sum(std::span<std::byte> data, DType dtype) {
  mpi_type(dtype);  // f32 or f64
  if (data.size() % dtype_size(dtype) != 0 || data.size() / dtype_size(dtype) > 0x7fffffffu)
    throw_error(ErrorCode::invalid_argument, "dist.mpi",
                fmt::format("a reduction of {} bytes is not a whole count of {} elements below 2^31", data.size(),
                            dtype_name(dtype)));
  if (options_.fixed_order) return std::make_unique<FixedOrderSum>(*this, data, dtype);
  return std::make_unique<EngineSum>(*this, data, dtype);
}

std::vector<std::string> MpiCommunicator::gather_all(const std::string& text) {
  // Lengths first, then the texts.
  int length = static_cast<int>(text.size());
  std::vector<int> lengths(static_cast<std::size_t>(size_));
  MPI_Request request = MPI_REQUEST_NULL;
  const std::uint64_t number = announce();
  require_started(*this, MPI_Iallgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD, &request),
                  "the agreement check (lengths)");
  wait_bounded(*this, request, "the agreement check (lengths)", number);
  std::vector<int> offsets(static_cast<std::size_t>(size_), 0);
  int total = 0;
  for (int r = 0; r < size_; ++r) {
    offsets[static_cast<std::size_t>(r)] = total;
    total += lengths[static_cast<std::size_t>(r)];
  }
  std::string all(static_cast<std::size_t>(total), '\0');
  require_started(*this,
                  MPI_Iallgatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR,
                                  MPI_COMM_WORLD, &request),
                  "the agreement check");
  wait_bounded(*this, request, "the agreement check", number);
  std::vector<std::string> out;
  out.reserve(static_cast<std::size_t>(size_));
  for (int r = 0; r < size_; ++r)
    out.push_back(all.substr(static_cast<std::size_t>(offsets[static_cast<std::size_t>(r)]),
                             static_cast<std::size_t>(lengths[static_cast<std::size_t>(r)])));
  return out;
}

void MpiCommunicator::progress() {
  roll_->poll(rank_);  // its tests drive Open MPI's progress engine, moving the reductions in flight on too
}

int MpiCommunicator::ranks_on_this_host() const noexcept {
  const char* text = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (text == nullptr) return size_;
  char* end = nullptr;
  const long n = std::strtol(text, &end, 10);
  return end != text && *end == '\0' && n >= 1 && n <= size_ ? static_cast<int>(n) : size_;
}

bool MpiCommunicator::launched_by_mpirun() noexcept {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr;
}

void MpiCommunicator::abort(const std::string& why) const {
  std::fprintf(stderr, "pact: rank %d of %d: %s; ending the job\n", rank_, size_, why.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 3);
  std::abort();  // MPI_Abort does not return
}

}  // namespace pact::dist
