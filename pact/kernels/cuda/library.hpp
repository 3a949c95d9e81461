#pragma once
// A CUDA library opened at run time (cuBLAS, cuBLASLt, cuDNN: pact/kernels/cublas.hpp, cublaslt.hpp and
// cudnn.hpp): the first of its sonames that dlopen finds, and its entry points by name, so nothing links the
// toolkit.

#include <dlfcn.h>
#include <fmt/format.h>

#include <atomic>
#include <initializer_list>
#include <memory>
#include <string>

#include "pact/core/cuda_device.hpp"
#include "pact/core/error.hpp"

namespace pact::kernels::cuda {

/// The first of `names` that dlopen opens (RTLD_NOW | RTLD_LOCAL); null, with `failure` listing what each
/// attempt said, when none does.
inline void* open_library(std::initializer_list<const char*> names, std::string& failure) {
  std::string tried;
  for (const char* name : names) {
    // unsafe boundary: a C library reached through dlsym'd entry points.
    if (void* library = ::dlopen(name, RTLD_NOW | RTLD_LOCAL)) return library;
    const char* why = ::dlerror();
    tried += fmt::format("{}dlopen({}): {}", tried.empty() ? "" : "; ", name, why != nullptr ? why : "unknown");
  }
  failure = tried;
  return nullptr;
}

/// Binds entry point `name` of `library` to `f`; false when the library lacks it.
template <class F>
bool bind_symbol(void* library, const char* name, F& f) {
  f = reinterpret_cast<F>(::dlsym(library, name));  // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast)
  return f != nullptr;
}

/// What a library's loader made: the table (null when unavailable, `failure` says why).
template <class Table>
struct LoadedLibrary {
  std::unique_ptr<Table> owned;
  const Table* table = nullptr;
  std::string failure;
};

/// Loads a library whose table has `library`, `handle` and `create` (cuBLAS's, cuBLASLt's, cuDNN's): the
/// first of `names` that opens, its entry points (`bind(table, library)`: the name of the first one missing,
/// or null), then one handle on the CUDA device's primary context, bound to its one stream where the table
/// has `set_stream`. `what` names the library in the failure ("cuBLAS"). Only once a device exists: without
/// one nothing is opened.
template <class Table, class Bind>
LoadedLibrary<Table> load_library(const char* what, std::initializer_list<const char*> names, Bind&& bind) {
  LoadedLibrary<Table> r;
  CudaDevice* device = CudaDevice::get();
  if (device == nullptr) {
    r.failure = fmt::format("no CUDA device: {}", CudaDevice::unavailable_reason());
    return r;
  }
  auto t = std::make_unique<Table>();
  std::string tried;
  t->library = open_library(names, tried);
  if (t->library == nullptr) {
    r.failure = fmt::format("{} not found ({})", what, tried);
    return r;
  }
  if (const char* missing = bind(*t, t->library)) {
    r.failure = fmt::format("{} lacks {}", what, missing);
    return r;
  }
  device->make_current();
  if (const int rc = t->create(&t->handle); rc != 0) {
    r.failure = fmt::format("{}'s handle could not be made (status {}) on {}", what, rc, device->description());
    return r;
  }
  if constexpr (requires { t->set_stream; }) {  // a cuBLASLt handle has no stream: each call names it
    if (const int rc = t->set_stream(t->handle, device->stream()); rc != 0) {
      r.failure = fmt::format("{}'s handle could not be bound to Pact's stream (status {})", what, rc);
      return r;
    }
  }
  r.owned = std::move(t);
  r.table = r.owned.get();
  return r;
}

/// The process's table of one library: a stand-in a test installed first (use(), the CUDA emulator's), else
/// what `load` makes, looked for once and kept for the process (its handle lives as long as the device's
/// primary context).
template <class Table>
class LibraryTable {
 public:
  const LoadedLibrary<Table>& get(LoadedLibrary<Table> (*load)()) {
    static const LoadedLibrary<Table> loaded = [&] {
      looked_up_.store(true);
      if (const Table* table = override_.load()) {
        LoadedLibrary<Table> r;
        r.table = table;
        return r;
      }
      return load();
    }();
    return loaded;
  }
  /// Only before the first get(): `internal` afterwards. `table` lives for the process.
  void use(const Table& table, const char* what) {
    if (looked_up_.load()) throw_error(ErrorCode::internal, what, "a stand-in table after the library was looked for");
    override_.store(&table);
  }

 private:
  std::atomic<const Table*> override_{nullptr};
  std::atomic<bool> looked_up_{false};
};

}  // namespace pact::kernels::cuda
