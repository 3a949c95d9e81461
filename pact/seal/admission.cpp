#include "pact/seal/admission.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "pact/core/cuda_device.hpp"
#include "pact/core/cuda_probe.hpp"
#include "pact/core/file.hpp"
#include "pact/ops/op_table.hpp"
#include "pact/seal/params.hpp"
#include "pact/seal/publication.hpp"
#include "pact/seal/specialize.hpp"

namespace pact::seal {

namespace {

[[noreturn]] void reject(const std::string& why) { throw_error(ErrorCode::invalid_argument, "seal.admit", why); }

constexpr std::size_t kMaxKernelParams = 1024;
constexpr unsigned kMaxModuleKernels = 4096;  // a module's inventory is read whole: bound it first

const AotExport* find_export(const Manifest& m, const std::string& name) {
  for (const auto& op : m.ops) {
    for (const auto& e : op.exports) {
      if (e.name == name) return &e;
    }
  }
  return nullptr;
}

}  // namespace

int cu_tensor_map_dtype(std::string_view dtype) {
  if (dtype == "u8") return 0;
  if (dtype == "i32") return 3;
  if (dtype == "f16") return 6;
  if (dtype == "f32") return 7;
  if (dtype == "f64") return 8;
  if (dtype == "bf16") return 9;
  throw_error(ErrorCode::invalid_argument, "seal.tma", fmt::format("'{}' is not a TMA element type", dtype));
}

int cu_tensor_map_swizzle(std::string_view swizzle) {
  if (swizzle == "none") return 0;
  if (swizzle == "32B") return 1;
  if (swizzle == "64B") return 2;
  if (swizzle == "128B") return 3;
  throw_error(ErrorCode::invalid_argument, "seal.tma", fmt::format("'{}' is not a TMA swizzle", swizzle));
}

SealedRuntime::SealedRuntime(const CudaDriver& driver, int device_ordinal) : driver_(driver), device_(device_ordinal) {
  int count = 0;
  if (driver_.init(0) != kCudaSuccess || driver_.device_get_count(&count) != kCudaSuccess || count <= device_ordinal ||
      device_ordinal < 0) {
    throw_error(ErrorCode::no_device, "seal.cuda",
                fmt::format("no CUDA device {} (the driver reports {})", device_ordinal, count));
  }
  int device = 0;
  if (driver_.device_get(&device, device_ordinal) != kCudaSuccess ||
      driver_.primary_ctx_retain(&context_, device) != kCudaSuccess) {
    throw_error(ErrorCode::no_device, "seal.cuda",
                fmt::format("cannot retain the primary context of CUDA device {}", device_ordinal));
  }
  device_ = device;
  if (driver_.ctx_set_current(context_) != kCudaSuccess) {
    driver_.primary_ctx_release(device_);
    throw_error(ErrorCode::no_device, "seal.cuda", "cannot make the primary context current");
  }
}

SealedRuntime::~SealedRuntime() { release_all(); }

// Note [Sealed completion]
// Storage may be freed, and a module unloaded, only after the work that used it is proven complete: a
// kernel still running would otherwise write memory the pool has handed to someone else. So the runtime
// frees call storage in synchronize() only after every stream it used was waited on, and on teardown it
// first waits for launches nobody synchronized. When no completion can be proven (a launch or a wait
// failed, the context cannot be made current: the runtime is poisoned), everything it holds is retained:
// no cuMemFree, no module unload, no context release. A launch over Pact tensors waits for its own
// completion before its bindings end, and an unproven one poisons the CUDA device that owns the tensors
// too (CudaDevice::poison), whose releases are then retained as well.
void SealedRuntime::release_all() noexcept {
  if (context_ == nullptr) return;
  if (driver_.ctx_set_current(context_) != kCudaSuccess) poisoned_ = true;
  if (!poisoned_) {
    std::set<void*> streams;
    for (const auto& p : pending_) streams.insert(p.streams.begin(), p.streams.end());
    for (void* stream : streams) {
      if (driver_.stream_synchronize(stream) != kCudaSuccess) poisoned_ = true;
    }
  }
  if (poisoned_) return;  // no proven completion: keep everything
  pending_.clear();
  for (auto& [key, pointer] : resources_) {
    if (driver_.mem_free(pointer) != kCudaSuccess) poisoned_ = true;
  }
  resources_.clear();
  for (auto& [name, a] : exports_) {
    if (a.module != nullptr && driver_.module_unload(a.module) != kCudaSuccess) poisoned_ = true;
    a.module = nullptr;
  }
  if (driver_.primary_ctx_release(device_) != kCudaSuccess) poisoned_ = true;
  context_ = nullptr;
}

void SealedRuntime::require_healthy() const {
  if (poisoned_)
    throw_error(ErrorCode::poisoned, "seal.cuda",
                "the provider context is poisoned by an earlier launch or cleanup failure; no result is authorized");
}

void SealedRuntime::make_current() const {
  if (const int r = driver_.ctx_set_current(context_); r != kCudaSuccess)
    throw_error(ErrorCode::no_device, "seal.cuda",
                fmt::format("cannot make the sealed runtime's context current on this thread (CUresult {})", r));
}

void SealedRuntime::poison(const std::string& what, int result) {
  poisoned_ = true;
  throw_error(ErrorCode::poisoned, "seal.cuda",
              fmt::format("{} failed (CUresult {}): the provider context is poisoned", what, result));
}

std::string SealedRuntime::artifact_key(const std::string& export_name) const { return authority_ + "/" + export_name; }

const DriverInventory& SealedRuntime::inventory(const std::string& export_name) const {
  auto it = exports_.find(export_name);
  if (it == exports_.end())
    throw_error(ErrorCode::invalid_argument, "seal.admit", fmt::format("export '{}' is not admitted", export_name));
  return it->second.inventory;
}

void SealedRuntime::admit(const std::string& publication_dir, const Manifest& manifest,
                          const CompileProfile& launch_profile) {
  require_healthy();
  make_current();
  const std::string identity = execution_identity(manifest);
  if (!authority_.empty()) {
    reject(authority_ == identity ? "this publication is already admitted"
                                  : "this runtime is bound to another direct-artifact authority");
  }
  // GPU-free first: inventory, digests, ELF, widths, exact declaration and profile equality.
  const Json index = reopen_publication(publication_dir, manifest, launch_profile);
  std::map<std::string, Admitted> admitted;
  auto unload_all = [&] {
    for (auto& [n, a] : admitted) {
      if (a.module != nullptr && driver_.module_unload(a.module) != kCudaSuccess) poisoned_ = true;
    }
  };
  try {
    for (const auto& entry : index["exports"]) {
      const std::string name = entry["export"], rel = entry["cubin"];
      const AotExport* declaration = find_export(manifest, name);  // reopen proved it exists
      const std::string bytes = read_file((std::filesystem::path(publication_dir) / rel).string(), "seal.admit");
      // The bytes handed to the driver are the ones the index binds (the file may not change after reopen).
      if (sha256_digest(std::as_bytes(std::span(bytes.data(), bytes.size()))) != entry["sha256"].get<std::string>()) {
        reject(fmt::format("'{}' changed after it was verified", rel));
      }
      Admitted a;
      a.declaration = declaration;
      if (const int r = driver_.module_load_data(&a.module, bytes.data()); r != kCudaSuccess) {
        reject(fmt::format("the driver refused to load '{}' (CUresult {})", rel, r));
      }
      Admitted& slot = admitted.emplace(name, std::move(a)).first->second;
      unsigned count = 0;
      if (driver_.module_get_function_count(&count, slot.module) != kCudaSuccess)
        reject(fmt::format("cannot count the kernels of '{}'", rel));
      const auto& plan = declaration->device_plan.kernels;
      if (count > kMaxModuleKernels) reject(fmt::format("the driver sees {} kernels in '{}'", count, rel));
      std::vector<void*> functions(count);
      if (count > 0 && driver_.module_enumerate_functions(functions.data(), count, slot.module) != kCudaSuccess) {
        reject(fmt::format("cannot enumerate the kernels of '{}'", rel));
      }
      // The driver's full physical inventory: each kernel's name and parameter layout.
      Json abi = Json::array();
      std::vector<CubinKernel> physical;
      physical.reserve(count);
      for (unsigned i = 0; i < count; ++i) {
        const char* name = nullptr;
        if (driver_.func_get_name(&name, functions[i]) != kCudaSuccess || name == nullptr)
          reject(fmt::format("kernel ordinal {} of '{}' has no name", i, rel));
        std::vector<std::pair<std::size_t, std::size_t>> params;
        for (std::size_t p = 0;; ++p) {
          if (p > kMaxKernelParams)
            reject(fmt::format("kernel '{}' of '{}' has more than {} parameters", name, rel, kMaxKernelParams));
          std::size_t offset = 0, size = 0;
          const int r = driver_.func_get_param_info(functions[i], p, &offset, &size);
          if (r == kCudaErrorInvalidValue) break;
          if (r != kCudaSuccess)
            reject(fmt::format("cannot read parameter {} of kernel '{}' (CUresult {})", p, name, r));
          params.emplace_back(offset, size);
        }
        CubinKernel k{name, {}};
        Json offsets = Json::array();
        for (const auto& [offset, size] : params) {
          k.param_widths.push_back(static_cast<std::uint32_t>(size));
          offsets.push_back({offset, size});
        }
        abi.push_back({{"ordinal", i}, {"name", k.symbol}, {"params", offsets}});
        slot.inventory.names.push_back(k.symbol);
        slot.inventory.params.push_back(std::move(params));
        physical.push_back(std::move(k));
      }
      // Each plan kernel binds the driver's kernel of the same extern "C" name (the check reopen made on
      // the CUBIN's own metadata, made again on what the driver loaded).
      std::vector<std::size_t> bound;
      try {
        bound = bind_kernels_by_name(plan, physical, rel);
      } catch (const Error& err) {
        reject("the driver's inventory: " + err.detail());
      }
      slot.functions.reserve(bound.size());
      for (const std::size_t i : bound) slot.functions.push_back(functions[i]);  // plan order
      slot.inventory.abi_digest = digest_json("pact.cuda-driver-abi.v1", abi);
    }
  } catch (...) {
    unload_all();  // a mismatch rejects and unloads
    throw;
  }
  authority_ = identity;
  manifest_ = manifest;
  // Rebind the declarations to this runtime's own copy of the manifest.
  for (auto& [name, a] : admitted) {
    a.declaration = find_export(*manifest_, name);
    evidence_.loaded(artifact_key(name));
  }
  exports_ = std::move(admitted);
}

std::string SealedRuntime::launch(const std::string& op_name, const CallData& call,
                                  const std::map<std::string, std::uint64_t, std::less<>>& pointers, Role role) {
  require_healthy();
  make_current();
  const ManifestOp* op = nullptr;
  const AotExport& e = select_export(op_name, call, role, op);
  Admitted& a = exports_.at(e.name);
  Pending pending{e.name, role, {}, {}};

  // Every binding resolves: tensors from the caller, artifact resources from the runtime's storage. All
  // of them are checked (and sized) before anything is allocated.
  std::map<std::string, std::uint64_t, std::less<>> bound;
  struct Need {
    std::string binding, key;
    std::uint64_t bytes;
  };
  std::vector<Need> needs;
  for (const auto& b : e.bindings) {
    const ArtifactResource* resource = nullptr;
    for (const auto& r : op->resources) {
      if (r.name == b) resource = &r;
    }
    if (resource == nullptr) {
      auto it = pointers.find(b);
      if (it == pointers.end() || it->second == 0) {
        throw_error(ErrorCode::invalid_argument, "seal.launch",
                    fmt::format("binding '{}' of export '{}' has no device pointer", b, e.name));
      }
      bound[b] = it->second;
      continue;
    }
    const std::string key = op_name + "/" + resource->name;
    pending.resources.emplace_back(key, resource->lifetime);
    if (resource->lifetime == Lifetime::prepared && role == Role::run && !produced_.count(key)) {
      throw_error(
          ErrorCode::invalid_argument, "seal.launch",
          fmt::format("export '{}' consumes '{}', which no completed prepare has produced", e.name, resource->name));
    }
    if (auto live = resources_.find(key); live != resources_.end()) {
      bound[b] = live->second;
      continue;
    }
    // The live size; each projection within its declared bound keeps it within the manifest's ceiling.
    const auto bytes = resource_bytes(*resource, [&](const ShapeFactor& f) {
      const std::int64_t v = !f.tensor.empty()
                                 ? Expr::parse(fmt::format("dim({}, {})", f.tensor, f.dim), "resource").eval(call)
                                 : Expr::parse(fmt::format("scalar({})", f.scalar), "resource").eval(call);
      if (v <= 0 || v > f.max) {
        throw_error(ErrorCode::invalid_argument, "seal.launch",
                    fmt::format("resource '{}': a factor is {} (bound {})", resource->name, v, f.max));
      }
      return v;
    });
    if (!bytes)
      throw_error(ErrorCode::layout_overflow, "seal.launch", fmt::format("resource '{}' overflows", resource->name));
    needs.push_back({b, key, *bytes});
  }
  // Storage this launch allocates is released again if the launch fails before it is submitted.
  std::vector<std::string> allocated;
  try {
    for (const auto& need : needs) {
      budget_.reserve(need.key, need.bytes);
      std::uint64_t pointer = 0;
      if (const int r = driver_.mem_alloc(&pointer, static_cast<std::size_t>(need.bytes)); r != kCudaSuccess) {
        budget_.release(need.key);
        throw_error(ErrorCode::allocation_failed, "seal.launch",
                    fmt::format("cuMemAlloc of {} bytes for '{}' failed (CUresult {})", need.bytes, need.key, r));
      }
      resources_.emplace(need.key, pointer);
      resource_bytes_.emplace(need.key, need.bytes);
      allocated.push_back(need.key);
      bound[need.binding] = pointer;
    }
    return submit(e, a, call, bound, std::move(pending));
  } catch (const Error& err) {
    if (err.code() != ErrorCode::poisoned) {
      for (const auto& key : allocated) free_resource(key);
    }
    throw;
  }
}

std::string SealedRuntime::submit(const AotExport& e, Admitted& a, const CallData& call,
                                  const std::map<std::string, std::uint64_t, std::less<>>& bound, Pending pending) {
  // Materialize every launch of the plan before anything launches, then launch them in order.
  struct Prepared {
    CuLaunchConfig config{};
    ParameterFrame frame;
    std::array<CuLaunchAttribute, 4> attributes{};
    std::size_t ordinal = 0;
  };
  const auto& plan = e.device_plan;
  // Tensor maps are encoded by the driver (cuTensorMapEncodeTiled) into an aligned map, then copied into
  // the frame; an encoding the driver refuses is an argument error before anything launches.
  const TmaEncoder tma = [&](const TmaRequest& r, std::byte* out) {
    struct alignas(128) Map {
      std::byte bytes[128];
    } map{};
    const std::vector<std::uint32_t> element_strides(r.dims.size(), 1);
    const int result = driver_.tensor_map_encode_tiled(
        &map, cu_tensor_map_dtype(r.dtype), static_cast<std::uint32_t>(r.dims.size()),
        reinterpret_cast<void*>(static_cast<std::uintptr_t>(r.address)), r.dims.data(), r.stride_bytes.data(),
        r.box.data(), element_strides.data(), 0, cu_tensor_map_swizzle(r.swizzle), 0, 0);
    if (result != kCudaSuccess) {
      throw_error(ErrorCode::invalid_argument, "seal.tma",
                  fmt::format("the driver refused to encode the tensor map (CUresult {})", result));
    }
    std::memcpy(out, map.bytes, sizeof map.bytes);
  };
  std::vector<Prepared> prepared;
  for (const auto& l : plan.launches) {
    const auto k = std::find_if(plan.kernels.begin(), plan.kernels.end(),
                                [&](const KernelContract& c) { return c.name == l.kernel; });
    auto dim = [&](const std::vector<Expr>& v, const char* what) {
      std::array<std::uint32_t, 3> out{};
      for (std::size_t i = 0; i < 3; ++i) {
        const std::int64_t x = v[i].eval(call);
        if (x < 1 || x > 0x7fffffff)
          throw_error(ErrorCode::invalid_argument, "seal.launch", fmt::format("{}[{}] evaluates to {}", what, i, x));
        out[i] = static_cast<std::uint32_t>(x);
      }
      return out;
    };
    const auto grid = dim(l.grid, "grid"), block = dim(l.block, "block");
    const std::int64_t smem = l.dynamic_smem.eval(call);
    if (smem < 0 || smem > kMaxDynamicSharedMemory) {
      throw_error(ErrorCode::invalid_argument, "seal.launch",
                  fmt::format("dynamic shared memory evaluates to {} bytes; at most 1 MiB", smem));
    }
    Prepared p;
    p.ordinal = static_cast<std::size_t>(k - plan.kernels.begin());
    p.frame = materialize(l.params, k->param_widths, call, bound, &tma);
    // The declared stream: a captured handle from the call's bindings, or the default stream.
    void* const stream =
        l.stream == "default" ? nullptr : reinterpret_cast<void*>(static_cast<std::uintptr_t>(bound.at(l.stream)));
    p.config = CuLaunchConfig{grid[0], grid[1], grid[2], block[0], block[1], block[2], static_cast<std::uint32_t>(smem),
                              stream,  nullptr, 0};
    auto attribute = [&](std::uint32_t id) -> CuLaunchAttribute& {
      CuLaunchAttribute& at = p.attributes[p.config.num_attrs++];
      at.id = id;
      return at;
    };
    if (l.cluster) {
      const auto cluster = dim(*l.cluster, "cluster");
      attribute(kCuLaunchAttributeClusterDimension).value.cluster_dim = {cluster[0], cluster[1], cluster[2]};
    }
    for (const auto& name : l.attributes) {  // the manifest's allow-list, each once
      if (name == "cooperative")
        attribute(kCuLaunchAttributeCooperative).value.scalar = 1;
      else if (name == "cluster_scheduling_policy_spread")
        attribute(kCuLaunchAttributeClusterSchedulingPolicyPreference).value.scalar = kCuClusterSchedulingPolicySpread;
      else if (name == "programmatic_stream_serialization")
        attribute(kCuLaunchAttributeProgrammaticStreamSerialization).value.scalar = 1;
      else
        throw_error(ErrorCode::unsupported, "seal.launch",
                    fmt::format("launch attribute '{}' has no CUDA encoding here", name));
    }
    pending.streams.insert(stream);
    prepared.push_back(std::move(p));
  }
  // Prelaunch: the only operation is a bounded fill of an authorized target, over exactly the target's
  // allocated extent. Only artifact storage has an extent the runtime knows; a tensor target fails closed.
  for (const auto& p : e.prelaunch) {
    std::optional<std::uint64_t> extent;
    for (const auto& [key, lifetime] : pending.resources) {
      if (key.ends_with("/" + p.target)) extent = resource_bytes_.at(key);
    }
    if (!extent) {
      throw_error(
          ErrorCode::unsupported, "seal.launch",
          fmt::format("prelaunch fill of '{}': only artifact storage has an extent the runtime knows", p.target));
    }
    if (const int r = driver_.memset_d8(bound.at(p.target), static_cast<unsigned char>(p.value),
                                        static_cast<std::size_t>(*extent));
        r != kCudaSuccess) {
      poison("prelaunch fill", r);
    }
  }
  for (std::size_t i = 0; i < prepared.size(); ++i) {
    Prepared& p = prepared[i];
    std::vector<void*> params;
    for (auto offset : p.frame.offsets) params.push_back(p.frame.bytes.data() + offset);
    if (p.config.num_attrs > 0) p.config.attrs = p.attributes.data();
    if (const int r = driver_.launch_kernel_ex(&p.config, a.functions[p.ordinal], params.data(), nullptr);
        r != kCudaSuccess) {
      poison(fmt::format("cuLaunchKernelEx of '{}' launch {}", e.name, i), r);
    }
  }
  evidence_.invoked(artifact_key(e.name));
  pending_.push_back(std::move(pending));
  return e.name;
}

const AotExport& SealedRuntime::select_export(const std::string& op_name, const CallData& call, Role role,
                                              const ManifestOp*& op) const {
  if (!manifest_)
    throw_error(ErrorCode::invalid_argument, "seal.launch",
                "nothing is admitted: an invocation without a load is invalid");
  op = nullptr;
  for (const auto& o : manifest_->ops) {
    if (o.name == op_name) op = &o;
  }
  if (op == nullptr)
    throw_error(ErrorCode::invalid_argument, "seal.launch", fmt::format("no admitted op '{}'", op_name));
  // The unique most-specific export of this role for the call.
  std::vector<Specialization> variants;
  std::map<std::string, const AotExport*> by_variant;
  for (const auto& e : op->exports) {
    if (e.role != role) continue;
    variants.push_back({e.plan + "/" + e.name, e.specializes});
    by_variant[e.plan + "/" + e.name] = &e;
  }
  if (variants.empty()) {
    throw_error(ErrorCode::invalid_argument, "seal.launch",
                fmt::format("op '{}' has no {} export", op_name, role_name(role)));
  }
  return *by_variant.at(select_specialization(variants, call).plan);
}

std::string SealedRuntime::launch(const std::string& op_name, SealedCall call, Role role) {
  require_healthy();
  // The call data is the tensors' own geometry: no shape is supplied beside a tensor.
  CallData data;
  data.scalars = call.scalars;
  auto check = [&](const std::string& name, const auto& tensor, const ops::TensorType& admitted) {
    if (tensor.device() != DeviceKind::cuda) {
      throw_error(ErrorCode::provider_mismatch, "seal.launch",
                  fmt::format("tensor '{}' is in {} storage; a sealed kernel reads device memory", printable(name),
                              tensor.provider_name()));
    }
    if (tensor.dtype() != admitted.dtype) {
      throw_error(ErrorCode::dtype_mismatch, "seal.launch",
                  fmt::format("tensor '{}' is {}; the plan admitted {} for it", printable(name),
                              dtype_name(tensor.dtype()), dtype_name(admitted.dtype)));
    }
    if (tensor.shape() != admitted.shape) {
      throw_error(ErrorCode::invalid_argument, "seal.launch",
                  fmt::format("tensor '{}' has shape {}; the plan admitted {} for it", printable(name),
                              tensor.shape().to_string(), admitted.shape.to_string()));
    }
    if (!tensor.is_contiguous()) {
      throw_error(ErrorCode::invalid_argument, "seal.launch",
                  fmt::format("tensor '{}' is strided (strides {}); a sealed kernel is bound to contiguous tensors",
                              printable(name), tensor.strides().to_string()));
    }
    data.tensors[name] = TensorGeometry{tensor.shape(), tensor.strides()};
  };
  for (const auto& [name, r] : call.reads) {
    if (call.writes.count(name) != 0) {
      throw_error(ErrorCode::invalid_argument, "seal.launch",
                  fmt::format("binding '{}' is given as both a read and a write", printable(name)));
    }
    check(name, r.tensor, r.admitted);
  }
  for (const auto& [name, w] : call.writes) check(name, w.tensor, w.admitted);

  const ManifestOp* op = nullptr;
  const AotExport& e = select_export(op_name, data, role, op);
  // Every tensor binding of the export is given, and nothing else: artifact resources are the runtime's.
  for (const auto& l : e.device_plan.launches) {
    if (l.stream != "default" && std::find(e.bindings.begin(), e.bindings.end(), l.stream) != e.bindings.end()) {
      throw_error(ErrorCode::invalid_argument, "seal.launch",
                  fmt::format("export '{}' launches on its declared stream '{}'; a launch over Pact tensors runs on "
                              "the default stream, ordered after Pact's own",
                              e.name, l.stream));
    }
  }
  const std::set<std::string, std::less<>> expected = tensor_bindings(*op, e);
  for (const auto& b : expected) {
    if (data.tensors.count(b) == 0) {
      throw_error(ErrorCode::invalid_argument, "seal.launch",
                  fmt::format("export '{}' binds tensor '{}', which the call does not give", e.name, b));
    }
  }
  for (const auto& [name, geometry] : data.tensors) {
    if (expected.count(name) == 0) {
      throw_error(ErrorCode::invalid_argument, "seal.launch",
                  fmt::format("export '{}' has no binding '{}' (its bindings: {})", e.name, printable(name),
                              fmt::join(e.bindings, ", ")));
    }
  }

  // Device access: shared for reads, exclusive for writes (the borrow rules refuse a write that aliases
  // another operand). The bindings live until the launch's completion is proven.
  std::vector<DeviceBinding> bindings;
  std::map<std::string, std::uint64_t, std::less<>> pointers;
  bool pact_device = false;
  auto bind = [&](const std::string& name, auto prepared) {
    if (!prepared) throw std::move(prepared).error().error;
    auto bound = DeviceBinding::bind(std::move(prepared).value());
    if (!bound) throw std::move(bound).error().error;
    bindings.push_back(std::move(bound).value());
    pact_device = pact_device || bindings.back().provider_name() == "cuda";
    pointers[name] = bindings.back().unsafe_device_address();
  };
  for (auto& [name, r] : call.reads) bind(name, TensorView(r.tensor).prepare_device());
  for (auto& [name, w] : call.writes) bind(name, std::move(w.tensor).prepare_device_mut());

  // Note [Sealed completion]: Pact's own device work on these tensors finishes first (it runs on Pact's
  // stream, which does not order against the default stream), and the launch is waited for before the
  // bindings end.
  CudaDevice* device = pact_device ? CudaDevice::get() : nullptr;
  if (pact_device && device == nullptr)
    throw_error(ErrorCode::no_device, "seal.launch", CudaDevice::unavailable_reason());
  if (device != nullptr) device->synchronize();
  std::string launched;
  try {
    launched = launch(op_name, data, pointers, role);
    synchronize();
  } catch (const Error& err) {
    if (err.code() == ErrorCode::poisoned && device != nullptr) device->poison();
    throw;
  }
  for (const auto& b : bindings) b.dispatch();
  return launched;
}

void SealedRuntime::free_resource(const std::string& key) {
  auto it = resources_.find(key);
  if (it == resources_.end()) return;
  const std::uint64_t pointer = it->second;
  resources_.erase(it);
  resource_bytes_.erase(key);
  budget_.release(key);
  produced_.erase(key);
  if (const int r = driver_.mem_free(pointer); r != kCudaSuccess) poison(fmt::format("cuMemFree of '{}'", key), r);
}

std::vector<std::string> SealedRuntime::live_resources() const {
  std::vector<std::string> keys;
  for (const auto& [key, pointer] : resources_) keys.push_back(key);
  return keys;
}

void SealedRuntime::synchronize() {
  require_healthy();
  make_current();
  std::set<void*> streams;
  for (const auto& p : pending_) streams.insert(p.streams.begin(), p.streams.end());
  for (void* stream : streams) {
    if (const int r = driver_.stream_synchronize(stream); r != kCudaSuccess) poison("cuStreamSynchronize", r);
  }
  std::vector<Pending> done;
  done.swap(pending_);
  for (const auto& p : done) {
    evidence_.completed(artifact_key(p.export_name));
    for (const auto& [key, lifetime] : p.resources) {
      if (lifetime == Lifetime::call || p.role == Role::destroy)
        free_resource(key);  // call storage ends with the call
      else if (lifetime == Lifetime::prepared && p.role == Role::prepare)
        produced_.insert(key);
    }
  }
}

contract::Capsule sealed_capsule(const ManifestOp& op, const AotExport& e, const std::string& execution_identity) {
  ops::OpTag tag{};
  try {
    tag = ops::parse_op_kind(op.name);
  } catch (const Error&) {
    throw_error(ErrorCode::unsupported, "seal.capsule",
                fmt::format("op '{}' is not in the op table: a sealed artifact cannot add an op", op.name));
  }
  const contract::Evidence boundary{contract::EvidenceKind::trustedBoundary,
                                    "sealed:" + execution_identity + "/" + e.name};
  contract::Capsule c;
  c.name = "sealed." + e.name;
  c.op = tag;
  c.provider = "sealed";
  c.device = DeviceKind::cuda;
  c.trust = contract::Trust::trustedExternal;
  c.forward = true;
  c.vjp = false;
  c.descriptors = {
      contract::ContractDescriptor{contract::DescriptorKind::shape,
                                   "the device plan's launch geometry over the admitted bindings", boundary},
      contract::ContractDescriptor{contract::DescriptorKind::layout, "contiguous tensors bound by pointer", boundary},
      contract::ContractDescriptor{contract::DescriptorKind::forward_value, "the sealed CUBIN's result", boundary},
      contract::ContractDescriptor{contract::DescriptorKind::vjp, "no VJP", contract::Evidence{}}};
  c.numerical_policy = contract::NumericalPolicy::implementationDefined;
  c.provenance = {"sealed publication", e.name};
  return c;
}

contract::EvidenceStatus SealedEvidenceResolver::resolve(const contract::Capsule& capsule,
                                                         const contract::ContractDescriptor& descriptor) const {
  const auto& e = descriptor.evidence;
  if (e.kind != contract::EvidenceKind::trustedBoundary || e.id.rfind("sealed:", 0) != 0)
    return base_.resolve(capsule, descriptor);
  const std::string key = e.id.substr(7);
  if (runtime_.poisoned()) return {false, "the sealed provider context is poisoned"};
  if (!runtime_.evidence().is_loaded(key))
    return {false, fmt::format("no aot_loaded receipt for sealed artifact '{}'", key)};
  return {true, ""};
}

}  // namespace pact::seal
