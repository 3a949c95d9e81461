#include "pact/dist/mpi.hpp"

#include <fmt/format.h>
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

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

// Waits for `request`, driving MPI's progress, for at most the timeout; past it the job ends.
void wait_bounded(const MpiCommunicator& comm, MPI_Request& request, std::string_view what) {
  const auto start = std::chrono::steady_clock::now();
  const auto limit = std::chrono::duration<double>(comm.options().timeout_seconds);
  for (int spins = 0;; ++spins) {
    int done = 0;
    if (const int rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE); rc != MPI_SUCCESS)
      comm.abort(fmt::format("{} failed: {}", what, mpi_error(rc)));
    if (done != 0) return;
    if (std::chrono::steady_clock::now() - start > limit)
      comm.abort(fmt::format("{} did not complete within {} s: another rank died or hangs (--comm-timeout)", what,
                             comm.options().timeout_seconds));
    if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
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
    wait_bounded(comm_, request_, what_);
    request_ = MPI_REQUEST_NULL;
    done();
  }

 protected:
  InFlight(const MpiCommunicator& comm, std::string_view what) : comm_(comm), what_(what) {}
  // Aborts the job when starting the request failed.
  void started(int rc, std::size_t bytes) const {
    if (rc != MPI_SUCCESS) comm_.abort(fmt::format("{} of {} bytes failed to start: {}", what_, bytes, mpi_error(rc)));
  }
  /// What completes the result once the request has.
  virtual void done() {}
  const MpiCommunicator& comm_;
  MPI_Request request_ = MPI_REQUEST_NULL;

 private:
  std::string_view what_;
};

// MPI_Iallreduce in place.
class EngineSum final : public InFlight {
 public:
  EngineSum(const MpiCommunicator& comm, std::span<std::byte> data, DType dtype)
      : InFlight(comm, "the gradient allreduce") {
    const auto count = static_cast<int>(data.size() / dtype_size(dtype));
    started(MPI_Iallreduce(MPI_IN_PLACE, data.data(), count, mpi_type(dtype), MPI_SUM, MPI_COMM_WORLD, &request_),
            data.size());
  }
};

// Every rank's buffer gathered (MPI_Iallgather), then folded left to right in rank order on wait.
class FixedOrderSum final : public InFlight {
 public:
  FixedOrderSum(const MpiCommunicator& comm, std::span<std::byte> data, DType dtype)
      : InFlight(comm, "the gradient allgather"),
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

MpiCommunicator::MpiCommunicator(MpiOptions options) : options_(options) {
  if (!(options_.timeout_seconds > 0))
    throw_error(ErrorCode::invalid_argument, "dist.mpi",
                fmt::format("the collective timeout {} s must be positive", options_.timeout_seconds));
  world();
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
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
  MPI_Iallgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD, &request);
  wait_bounded(*this, request, "the agreement check (lengths)");
  std::vector<int> offsets(static_cast<std::size_t>(size_), 0);
  int total = 0;
  for (int r = 0; r < size_; ++r) {
    offsets[static_cast<std::size_t>(r)] = total;
    total += lengths[static_cast<std::size_t>(r)];
  }
  std::string all(static_cast<std::size_t>(total), '\0');
  MPI_Iallgatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, MPI_COMM_WORLD,
                  &request);
  wait_bounded(*this, request, "the agreement check");
  std::vector<std::string> out;
  out.reserve(static_cast<std::size_t>(size_));
  for (int r = 0; r < size_; ++r)
    out.push_back(all.substr(static_cast<std::size_t>(offsets[static_cast<std::size_t>(r)]),
                             static_cast<std::size_t>(lengths[static_cast<std::size_t>(r)])));
  return out;
}

void MpiCommunicator::progress() {
  int flag = 0;
  MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
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
