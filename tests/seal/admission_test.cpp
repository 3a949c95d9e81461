// Sealed artifacts, runtime admission (issue 8, items 9 and 10), GPU-free: a stand-in driver table
// serves each committed CUBIN's kernel inventory so every admission, launch, poisoning and evidence rule
// runs without a GPU. The inventory is the CUDA toolkit's, never Pact's: the kernels and parameter widths
// that nvcc's PTX of the same source declares (tests/fixtures/seal/ptx), found by the loaded image's
// SHA-256, so a mistake in Pact's CUBIN parser cannot agree with itself here. The real driver is
// exercised by gpu_test.cpp (label gpu).

#include "pact/seal/admission.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <thread>
#include <tuple>

#include "../support/expect_error.hpp"
#include "pact/core/file.hpp"
#include "pact/core/json.hpp"
#include "pact/ir/graph.hpp"
#include "pact/plan/planner.hpp"
#include "pact/runtime/executor.hpp"
#include "pact/seal/publication.hpp"
#include "pact/seal/sealed_kernels.hpp"
#include "seal_support.hpp"

namespace pact::seal {
namespace {

using ::pact::test::code_of;
using ::pact::test::mentions;
using ::pact::test::message_of;

const std::string kSource = PACT_SOURCE_DIR;

// ---- the stand-in driver ----------------------------------------------------------------------------

struct FakeFunction {
  std::string name;
  std::vector<std::uint32_t> widths;
};
struct FakeModule {
  std::vector<FakeFunction> functions;
};
struct Launched {
  std::string function;  ///< the launched kernel's name
  CuLaunchConfig config;
  std::vector<std::uint32_t> cluster;
  std::vector<std::pair<std::uint32_t, std::int32_t>> attributes;  ///< id, scalar value
  std::vector<std::vector<std::byte>> params;
};
struct FakeDriver {
  int devices = 1;
  int loads = 0, unloads = 0, releases = 0;
  bool widen_fourth = false, hide_kernels = false;
  std::string rename_first;  ///< when set, the driver reports its first kernel under this name
  int launch_result = 0, sync_result = 0;
  std::vector<void*> synced;
  std::vector<Launched> launches;
  std::vector<std::pair<std::uint64_t, std::size_t>> allocations;
  std::vector<std::tuple<std::uint64_t, unsigned, std::size_t>> fills;
  int ctx_result = 0;                  ///< what cuCtxSetCurrent returns
  std::vector<void*> launch_contexts;  ///< the context current on the launching thread, per launch
  std::vector<std::uint64_t> frees;
  std::vector<std::string> calls;  ///< "sync", "free", "unload" in the order they were made
  /// The loaded modules, owned here: a poisoned runtime never unloads its modules (Note [Sealed
  /// completion]), and the stand-in driver still owns them, as the real one would.
  std::vector<std::unique_ptr<FakeModule>> modules;
};
FakeDriver g;
thread_local void* current_context = nullptr;  // the driver's per-thread current context

// The image's extent from its own ELF header (the section and program header tables end it), as the
// driver reads it.
std::span<const std::byte> elf_image(const void* image) {
  std::uint64_t shoff = 0, phoff = 0;
  std::uint16_t shnum = 0, phnum = 0;
  std::memcpy(&phoff, static_cast<const char*>(image) + 0x20, 8);
  std::memcpy(&shoff, static_cast<const char*>(image) + 0x28, 8);
  std::memcpy(&phnum, static_cast<const char*>(image) + 0x38, 2);
  std::memcpy(&shnum, static_cast<const char*>(image) + 0x3c, 2);
  const std::uint64_t extent = std::max(shoff + std::uint64_t{shnum} * 64, phoff + std::uint64_t{phnum} * 56);
  return std::span(static_cast<const std::byte*>(image), extent);
}

// Each committed CUBIN's digest -> the kernels nvcc's PTX of its source declares.
const std::map<std::string, std::vector<FakeFunction>>& toolkit_inventory() {
  static const auto inventory = [] {
    std::map<std::string, std::vector<FakeFunction>> out;
    const std::pair<const char*, const char*> pairs[] = {
        {"vector_add/nvcc_cubin/vadd_run.cubin", "ptx/vadd.ptx"},
        {"three_kernels/three.cubin", "ptx/three.ptx"},
    };
    for (const auto& [cubin, ptx] : pairs) {
      const std::string dir = kSource + "/tests/fixtures/seal/";
      const std::string bytes = read_file(dir + cubin, "test");
      std::vector<FakeFunction> functions;
      for (const auto& k : test::ptx_kernels(dir + ptx)) functions.push_back({k.name, k.widths});
      out[sha256_digest(elf_image(bytes.data()))] = std::move(functions);
    }
    return out;
  }();
  return inventory;
}

std::size_t param_offset(const FakeFunction& f, std::size_t index) {
  std::size_t at = 0;
  for (std::size_t i = 0; i <= index; ++i) {
    const std::size_t align = std::min<std::size_t>(f.widths[i] >= 8 ? 8 : f.widths[i], 8);
    at = (at + align - 1) / align * align;
    if (i == index) return at;
    at += f.widths[i];
  }
  return at;
}

CudaDriver fake_driver() {
  CudaDriver d;
  d.init = [](unsigned) { return 0; };
  d.device_get_count = [](int* n) {
    *n = g.devices;
    return 0;
  };
  d.device_get = [](int* dev, int ordinal) {
    *dev = ordinal;
    return 0;
  };
  d.primary_ctx_retain = [](void** ctx, int) {
    static int context;
    *ctx = &context;
    return 0;
  };
  d.primary_ctx_release = [](int) {
    ++g.releases;
    return 0;
  };
  d.ctx_set_current = [](void* ctx) {
    if (g.ctx_result != 0) return g.ctx_result;
    current_context = ctx;
    return 0;
  };
  d.module_load_data = [](void** module, const void* image) {
    const auto known = toolkit_inventory().find(sha256_digest(elf_image(image)));
    if (known == toolkit_inventory().end()) return 200;  // CUDA_ERROR_INVALID_IMAGE: no fixture has this image
    auto m = std::make_unique<FakeModule>();
    m->functions = known->second;
    if (g.widen_fourth) m->functions[0].widths[3] = 8;
    if (g.hide_kernels) m->functions.clear();
    if (!g.rename_first.empty()) m->functions[0].name = g.rename_first;
    ++g.loads;
    *module = m.get();
    g.modules.push_back(std::move(m));
    return 0;
  };
  d.module_unload = [](void* module) {
    std::erase_if(g.modules, [&](const auto& m) { return m.get() == module; });
    ++g.unloads;
    g.calls.emplace_back("unload");
    return 0;
  };
  d.module_get_function_count = [](unsigned* n, void* module) {
    *n = static_cast<unsigned>(static_cast<FakeModule*>(module)->functions.size());
    return 0;
  };
  d.module_enumerate_functions = [](void** out, unsigned n, void* module) {
    for (unsigned i = 0; i < n; ++i) out[i] = &static_cast<FakeModule*>(module)->functions[i];
    return 0;
  };
  d.func_get_name = [](const char** name, void* f) {
    *name = static_cast<FakeFunction*>(f)->name.c_str();
    return 0;
  };
  d.func_get_param_info = [](void* fp, std::size_t index, std::size_t* offset, std::size_t* size) {
    const auto& f = *static_cast<FakeFunction*>(fp);
    if (index >= f.widths.size()) return kCudaErrorInvalidValue;
    *offset = param_offset(f, index);
    *size = f.widths[index];
    return 0;
  };
  d.launch_kernel_ex = [](const CuLaunchConfig* config, void* fp, void** params, void**) {
    const auto& f = *static_cast<FakeFunction*>(fp);
    Launched l{f.name, *config, {}, {}, {}};
    for (std::size_t i = 0; i < f.widths.size(); ++i) {
      const auto* p = static_cast<const std::byte*>(params[i]);
      l.params.emplace_back(p, p + f.widths[i]);
    }
    for (std::uint32_t i = 0; i < config->num_attrs; ++i) {
      l.attributes.emplace_back(config->attrs[i].id, config->attrs[i].value.scalar);
      if (config->attrs[i].id == kCuLaunchAttributeClusterDimension) {
        const auto& c = config->attrs[i].value.cluster_dim;
        l.cluster = {c.x, c.y, c.z};
      }
    }
    g.launches.push_back(std::move(l));
    g.launch_contexts.push_back(current_context);
    return g.launch_result;
  };
  d.stream_synchronize = [](void* stream) {
    g.synced.push_back(stream);
    g.calls.emplace_back("sync");
    return g.sync_result;
  };
  d.mem_alloc = [](std::uint64_t* p, std::size_t bytes) {
    *p = 0x100000 * (g.allocations.size() + 1);
    g.allocations.emplace_back(*p, bytes);
    return 0;
  };
  d.mem_free = [](std::uint64_t p) {
    g.frees.push_back(p);
    g.calls.emplace_back("free");
    return 0;
  };
  d.memcpy_htod = [](std::uint64_t, const void*, std::size_t) { return 0; };
  d.memcpy_dtoh = [](void*, std::uint64_t, std::size_t) { return 0; };
  d.memset_d8 = [](std::uint64_t p, unsigned char v, std::size_t n) {
    g.fills.emplace_back(p, v, n);
    return 0;
  };
  return d;
}

// ---- fixtures ---------------------------------------------------------------------------------------

struct Admission : ::testing::Test {
  CudaDriver driver = fake_driver();
  std::string publication = kSource + "/tests/fixtures/seal/vector_add";
  Manifest manifest =
      parse_manifest(read_file(kSource + "/examples/seal/vector_add/manifest.toml", "test"), "manifest.toml");
  CompileProfile profile =
      parse_compile_profile(read_file(kSource + "/examples/seal/profiles/h100-sm90a.json", "test"), "profile");
  void SetUp() override {
    g = FakeDriver{};
    current_context = nullptr;
  }
  static CallData call(std::int64_t n) {
    CallData c;
    for (const char* t : {"a", "b", "out"}) c.tensors[t] = {Dims{n}, Dims{1}};
    c.scalars["rows"] = 64;
    return c;
  }
  static std::map<std::string, std::uint64_t, std::less<>> pointers() {
    return {{"a", 0xa000}, {"b", 0xb000}, {"out", 0xc000}};
  }
};

template <class T>
T read_as(const std::vector<std::byte>& bytes) {
  T v{};
  EXPECT_EQ(bytes.size(), sizeof v);
  std::memcpy(&v, bytes.data(), std::min(sizeof v, bytes.size()));
  return v;
}

TEST_F(Admission, BindsOrdinalsByWidthAndLaunchesTheExactFrame) {
  SealedRuntime rt(driver);
  rt.admit(publication, manifest, profile);
  const auto& inv = rt.inventory("vadd_run");
  EXPECT_EQ(inv.names, std::vector<std::string>{"vadd"});
  ASSERT_EQ(inv.params.size(), 1u);
  EXPECT_EQ(inv.params[0].size(), 5u);
  EXPECT_EQ(inv.abi_digest.rfind("sha256:", 0), 0u);
  const std::string key = rt.artifact_key("vadd_run");
  EXPECT_EQ(key, execution_identity(manifest) + "/vadd_run");
  EXPECT_TRUE(rt.evidence().is_loaded(key));
  EXPECT_FALSE(rt.evidence().gate({key}).passed);  // loaded, never ran: does not qualify

  EXPECT_EQ(rt.launch("add", call(1000), pointers()), "vadd_run");
  ASSERT_EQ(g.launches.size(), 1u);
  const auto& l = g.launches[0];
  EXPECT_EQ(l.config.grid_x, 4u);  // ceil_div(numel(a), 256)
  EXPECT_EQ(l.config.grid_y, 1u);
  EXPECT_EQ(l.config.block_x, 256u);
  EXPECT_EQ(l.config.shared_mem_bytes, 0u);
  EXPECT_EQ(l.config.num_attrs, 0u);
  EXPECT_EQ(l.config.stream, nullptr);  // the plan declares the default stream
  ASSERT_EQ(l.params.size(), 5u);
  EXPECT_EQ(read_as<std::uint64_t>(l.params[0]), 0xa000u);
  EXPECT_EQ(read_as<std::uint64_t>(l.params[1]), 0xb000u);
  EXPECT_EQ(read_as<std::uint64_t>(l.params[2]), 0xc000u);
  EXPECT_EQ(read_as<std::int32_t>(l.params[3]), 1000);
  const FastDivmod expected = make_fast_divmod(256);
  const auto divmod = read_as<std::array<std::uint32_t, 3>>(l.params[4]);
  EXPECT_EQ(divmod[0], expected.divisor);
  EXPECT_EQ(divmod[1], expected.multiplier);
  EXPECT_EQ(divmod[2], expected.shift);
  // The call-local workspace was allocated by the runtime at its evaluated size: ceil(1000 / 256) f32.
  ASSERT_EQ(g.allocations.size(), 1u);
  EXPECT_EQ(g.allocations[0].second, 4u * 4u);
  EXPECT_FALSE(rt.evidence().gate({key}).passed);  // invoked, not yet completed
  rt.synchronize();
  EXPECT_TRUE(rt.evidence().gate({key}).passed);
  // Evidence never transfers to another artifact.
  EXPECT_FALSE(rt.evidence().gate({execution_identity(manifest) + "/other"}).passed);
}

TEST_F(Admission, ADriverObservedWidthMismatchRejectsAndUnloads) {
  g.widen_fourth = true;
  SealedRuntime rt(driver);
  const std::string msg = message_of([&] { rt.admit(publication, manifest, profile); });
  EXPECT_TRUE(mentions(msg, "kernel 'vadd' of 'nvcc_cubin/vadd_run.cubin' has parameter widths [8,8,8,8,12]")) << msg;
  EXPECT_EQ(g.loads, 1);
  EXPECT_EQ(g.unloads, 1);
  EXPECT_FALSE(rt.evidence().is_loaded(execution_identity(manifest) + "/vadd_run"));
  // Nothing is admitted, so nothing launches: an invocation without a load is invalid.
  EXPECT_EQ(code_of([&] { rt.launch("add", call(8), pointers()); }), ErrorCode::invalid_argument);
  EXPECT_TRUE(g.launches.empty());
}

TEST_F(Admission, AMissingKernelOrdinalRejectsAndUnloads) {
  g.hide_kernels = true;
  SealedRuntime rt(driver);
  const std::string msg = message_of([&] { rt.admit(publication, manifest, profile); });
  EXPECT_TRUE(mentions(msg, "the device plan's kernel 'vadd' is not in")) << msg;
  EXPECT_EQ(g.unloads, g.loads);
}

// Issue 21 item 3: the driver's inventory binds by name too. The three-kernel CUBIN is stored zeta, alpha,
// mid and the plan lists alpha, mid, zeta; the plan launches alpha, and the driver must run alpha, not
// the kernel at alpha's position. A plan name the driver does not report rejects and unloads.
TEST_F(Admission, KernelsBindByNameNeverByPosition) {
  char tmpl[] = "/tmp/pact-names-XXXXXX";
  const std::string root = ::mkdtemp(tmpl);
  const std::string cubin = read_file(kSource + "/tests/fixtures/seal/three_kernels/three.cubin", "test");
  const auto bytes = std::as_bytes(std::span(cubin.data(), cubin.size()));
  const Manifest m = parse_manifest(test::three_kernel_manifest({"alpha", "mid", "zeta"}, "alpha"), "manifest.toml");
  write_publication(root + "/three", m, profile, {{"vadd_run", {bytes.begin(), bytes.end()}}}, Json::object());
  {
    SealedRuntime rt(driver);
    rt.admit(root + "/three", m, profile);
    EXPECT_NE(rt.inventory("vadd_run").names, (std::vector<std::string>{"alpha", "mid", "zeta"}));  // not sorted
    rt.launch("add", call(64), pointers());
    ASSERT_EQ(g.launches.size(), 1U);
    EXPECT_EQ(g.launches[0].function, "alpha");
  }
  // The driver reports a name the verified CUBIN did not (a swapped image): rejected and unloaded.
  g = FakeDriver{};
  g.rename_first = "beta";
  SealedRuntime rt(driver);
  const std::string msg = message_of([&] { rt.admit(root + "/three", m, profile); });
  EXPECT_TRUE(mentions(msg, "the driver's inventory")) << msg;
  EXPECT_EQ(g.unloads, g.loads);
  std::filesystem::remove_all(root);
}

TEST_F(Admission, AnotherProfileOrDeclarationIsRefusedBeforeAnythingLoads) {
  SealedRuntime rt(driver);
  CompileProfile other = profile;
  other.constants["max_active_clusters.cluster_size_1"] = 66;
  EXPECT_EQ(code_of([&] { rt.admit(publication, manifest, other); }), ErrorCode::invalid_argument);
  Manifest changed = parse_manifest(read_file(kSource + "/examples/seal/vector_add/manifest.toml", "test") + "\n", "m");
  changed.ops[0].exports[0].device_plan.launches[0].block[0] = Expr::parse("128", "b");
  EXPECT_EQ(code_of([&] { rt.admit(publication, changed, profile); }), ErrorCode::invalid_argument);
  EXPECT_EQ(g.loads, 0);
  // A runtime, once bound, is never rebound to another authority.
  rt.admit(publication, manifest, profile);
  EXPECT_TRUE(mentions(message_of([&] { rt.admit(publication, manifest, profile); }), "already admitted"));
}

TEST_F(Admission, LaunchUncertaintyPoisonsTheContextWithoutAborting) {
  SealedRuntime rt(driver);
  rt.admit(publication, manifest, profile);
  g.launch_result = 719;  // CUDA_ERROR_LAUNCH_FAILED
  EXPECT_EQ(code_of([&] { rt.launch("add", call(64), pointers()); }), ErrorCode::poisoned);
  EXPECT_TRUE(rt.poisoned());
  g.launch_result = 0;
  EXPECT_EQ(code_of([&] { rt.launch("add", call(64), pointers()); }), ErrorCode::poisoned);
  EXPECT_EQ(code_of([&] { rt.synchronize(); }), ErrorCode::poisoned);
  EXPECT_EQ(g.launches.size(), 1u);
  EXPECT_FALSE(rt.evidence().gate({rt.artifact_key("vadd_run")}).passed);
}

TEST_F(Admission, SynchronizeFailurePoisonsAndNothingCompletes) {
  SealedRuntime rt(driver);
  rt.admit(publication, manifest, profile);
  rt.launch("add", call(64), pointers());
  g.sync_result = 700;  // CUDA_ERROR_ILLEGAL_ADDRESS
  EXPECT_EQ(code_of([&] { rt.synchronize(); }), ErrorCode::poisoned);
  const auto verdict = rt.evidence().gate({rt.artifact_key("vadd_run")});
  EXPECT_FALSE(verdict.passed);
}

TEST_F(Admission, BadCallsFailTypedBeforeAnyLaunch) {
  SealedRuntime rt(driver);
  rt.admit(publication, manifest, profile);
  auto missing = pointers();
  missing.erase("b");
  EXPECT_TRUE(mentions(message_of([&] { rt.launch("add", call(64), missing); }), "binding 'b'"));
  EXPECT_EQ(code_of([&] { rt.launch("mul", call(64), pointers()); }), ErrorCode::invalid_argument);
  // numel(a) past the workspace factor's bound (16,777,216).
  EXPECT_EQ(code_of([&] { rt.launch("add", call(std::int64_t{1} << 25), pointers()); }), ErrorCode::invalid_argument);
  EXPECT_TRUE(g.launches.empty());
  EXPECT_EQ(code_of([&] { SealedRuntime none(driver, 3); }), ErrorCode::no_device);
}

// Dynamic shared memory is bounded at 1 MiB where the launch is materialized: exactly 1 MiB launches, one
// byte more is refused, typed, before anything reaches the driver.
TEST_F(Admission, DynamicSharedMemoryIsBoundedAtOneMebibyte) {
  const std::string base = read_file(kSource + "/examples/seal/vector_add/manifest.toml", "test");
  ASSERT_NE(base.find("dynamic_smem = 0"), std::string::npos);
  char tmpl[] = "/tmp/pact-smem-XXXXXX";
  const std::string root = ::mkdtemp(tmpl);
  const std::string cubin = read_file(publication + "/nvcc_cubin/vadd_run.cubin", "test");
  const auto bytes = std::as_bytes(std::span(cubin.data(), cubin.size()));
  // The manifest with `smem` bytes of dynamic shared memory, published with the committed CUBIN.
  auto published = [&](const std::string& smem) {
    std::string text = base;
    text.replace(text.find("dynamic_smem = 0"), std::string("dynamic_smem = 0").size(), "dynamic_smem = " + smem);
    Manifest m = parse_manifest(text, "manifest.toml");
    const std::string dir = root + "/" + smem;
    write_publication(dir, m, profile, {{"vadd_run", {bytes.begin(), bytes.end()}}}, Json::object());
    return std::pair{dir, std::move(m)};
  };
  {
    const auto [dir, m] = published("1048576");
    SealedRuntime rt(driver);
    rt.admit(dir, m, profile);
    rt.launch("add", call(64), pointers());
    ASSERT_EQ(g.launches.size(), 1u);
  }
  g = FakeDriver{};
  {
    const auto [dir, m] = published("1048577");
    SealedRuntime rt(driver);
    rt.admit(dir, m, profile);
    EXPECT_TRUE(mentions(message_of([&] { rt.launch("add", call(64), pointers()); }), "at most 1 MiB"));
    EXPECT_EQ(code_of([&] { rt.launch("add", call(64), pointers()); }), ErrorCode::invalid_argument);
    EXPECT_TRUE(g.launches.empty());
  }
  std::filesystem::remove_all(root);
}

// A manifest with a prepare, a run and a destroy export over one prepared resource and the call-local
// workspace, published with the committed CUBIN for each export.
TEST_F(Admission, ResourcesFollowTheirLifetimesAcrossRoles) {
  const std::string base = read_file(kSource + "/examples/seal/vector_add/manifest.toml", "test");
  const auto at = base.find("[[ops.aot_exports]]");
  const std::string head = base.substr(0, at), exported = base.substr(at);
  auto variant = [&](const std::string& name, const std::string& role, const std::string& bindings,
                     const std::string& extra = "") {
    std::string e = exported;
    const std::string old_name = "name = \"vadd_run\"", old_role = "role = \"run\"";
    e.replace(e.find(old_name), old_name.size(), "name = \"" + name + "\"");
    e.replace(e.find(old_role), old_role.size(), "role = \"" + role + "\"" + extra);
    const auto b = e.find("bindings = [");
    e.replace(b, e.find('\n', b) - b, "bindings = " + bindings);
    return e + "\n";
  };
  const std::string text =
      head +
      "[[ops.artifact_resources]]\nname = \"prepared.table\"\ndtype = \"f32\"\nalignment = 256\n"
      "shape = [ { factors = [ { scalar = \"rows\", max = 64 } ] } ]\n\n" +  // sized by the call's scalar
      variant("vadd_prepare", "prepare", R"(["a", "b", "out", "prepared.table"])",
              "\nprelaunch = [ { op = \"fill\", target = \"prepared.table\", value = 7 } ]") +
      variant("vadd_run", "run", R"(["a", "b", "out", "workspace.partials", "prepared.table"])") +
      variant("vadd_destroy", "destroy", R"(["a", "b", "out", "prepared.table"])");
  const Manifest m = parse_manifest(text, "lifecycle.toml");
  char tmpl[] = "/tmp/pact-admit-XXXXXX";
  const std::string dir = std::string(::mkdtemp(tmpl)) + "/pub";
  const std::string cubin = read_file(publication + "/nvcc_cubin/vadd_run.cubin", "test");
  const auto bytes = std::as_bytes(std::span(cubin.data(), cubin.size()));
  std::map<std::string, std::vector<std::byte>> cubins;
  for (const char* name : {"vadd_prepare", "vadd_run", "vadd_destroy"}) cubins[name] = {bytes.begin(), bytes.end()};
  write_publication(dir, m, profile, cubins, Json::object());

  SealedRuntime rt(driver);
  rt.admit(dir, m, profile);
  using Keys = std::vector<std::string>;
  // A run before any prepare completed consumes nothing produced: refused, nothing launched.
  EXPECT_TRUE(mentions(message_of([&] { rt.launch("add", call(512), pointers()); }), "no completed prepare"));
  EXPECT_EQ(rt.launch("add", call(512), pointers(), Role::prepare), "vadd_prepare");
  EXPECT_EQ(code_of([&] { rt.launch("add", call(512), pointers()); }),
            ErrorCode::invalid_argument);  // not yet completed
  rt.synchronize();
  EXPECT_EQ(rt.live_resources(), (Keys{"add/prepared.table"}));
  // The prepare's prelaunch filled exactly the prepared table (scalar(rows) = 64 f32) with its byte.
  ASSERT_EQ(g.fills.size(), 1u);
  EXPECT_EQ(std::get<1>(g.fills[0]), 7u);
  EXPECT_EQ(std::get<2>(g.fills[0]), 256u);
  EXPECT_EQ(rt.launch("add", call(512), pointers()), "vadd_run");
  EXPECT_EQ(rt.live_resources(), (Keys{"add/prepared.table", "add/workspace.partials"}));
  rt.synchronize();
  EXPECT_EQ(rt.live_resources(), (Keys{"add/prepared.table"}));  // the workspace ended with its call
  EXPECT_EQ(rt.launch("add", call(512), pointers(), Role::destroy), "vadd_destroy");
  rt.synchronize();
  EXPECT_TRUE(rt.live_resources().empty());
  EXPECT_EQ(code_of([&] { rt.launch("add", call(512), pointers()); }), ErrorCode::invalid_argument);  // destroyed
  EXPECT_EQ(code_of([&] { rt.launch("add", call(512), pointers(), Role::init); }),
            ErrorCode::invalid_argument);  // none declared
  EXPECT_EQ(g.launches.size(), 3u);
  EXPECT_TRUE(rt.evidence()
                  .gate({rt.artifact_key("vadd_prepare"), rt.artifact_key("vadd_run"), rt.artifact_key("vadd_destroy")})
                  .passed);
  std::filesystem::remove_all(std::filesystem::path(dir).parent_path());
}

// A launch declaring a captured stream binding and every allow-listed attribute, plus a cluster.
TEST_F(Admission, DeclaredStreamsAttributesAndClustersReachTheLaunch) {
  std::string text = read_file(kSource + "/examples/seal/vector_add/manifest.toml", "test");
  const std::string old_bindings = R"(bindings = ["a", "b", "out", "workspace.partials"])";
  text.replace(text.find(old_bindings), old_bindings.size(),
               R"(bindings = ["a", "b", "out", "workspace.partials", "s"])");
  const std::string old_smem = "dynamic_smem = 0";
  text.replace(
      text.find(old_smem), old_smem.size(),
      "dynamic_smem = 0\nstream = \"s\"\ncluster = [2, 1, 1]\n"
      "attributes = [\"cooperative\", \"cluster_scheduling_policy_spread\", \"programmatic_stream_serialization\"]");
  const Manifest m = parse_manifest(text, "streams.toml");
  char tmpl[] = "/tmp/pact-admit-XXXXXX";
  const std::string dir = std::string(::mkdtemp(tmpl)) + "/pub";
  const std::string cubin = read_file(publication + "/nvcc_cubin/vadd_run.cubin", "test");
  const auto bytes = std::as_bytes(std::span(cubin.data(), cubin.size()));
  write_publication(dir, m, profile, {{"vadd_run", {bytes.begin(), bytes.end()}}}, Json::object());
  SealedRuntime rt(driver);
  rt.admit(dir, m, profile);
  auto ptrs = pointers();
  EXPECT_TRUE(mentions(message_of([&] { rt.launch("add", call(100), ptrs); }), "binding 's'"));  // no stream captured
  {  // Over Pact tensors only the default stream is ordered against Pact's own: a declared one is refused.
    const auto dev = make_fake_device_provider();
    Tensor a = Tensor::zeros(Dims{100}, DType::f32, dev), b = Tensor::zeros(Dims{100}, DType::f32, dev);
    Tensor out = Tensor::zeros(Dims{100}, DType::f32, dev);
    const ops::TensorType type{DType::f32, Dims{100}};
    SealedCall c;
    c.reads.emplace("a", SealedRead{a.as_view(), type});
    c.reads.emplace("b", SealedRead{b.as_view(), type});
    c.writes.emplace("out", SealedWrite{out.as_view_mut(), type});
    const std::string msg = message_of([&] { rt.launch("add", std::move(c)); });
    EXPECT_TRUE(mentions(msg, "declared stream 's'")) << msg;
    EXPECT_TRUE(g.launches.empty());
  }
  ptrs["s"] = 0x5000;
  rt.launch("add", call(100), ptrs);
  ASSERT_EQ(g.launches.size(), 1u);
  const auto& l = g.launches[0];
  EXPECT_EQ(l.config.stream, reinterpret_cast<void*>(std::uintptr_t{0x5000}));
  EXPECT_EQ(l.cluster, (std::vector<std::uint32_t>{2, 1, 1}));
  ASSERT_EQ(l.attributes.size(), 4u);
  EXPECT_EQ(l.attributes[1], (std::pair<std::uint32_t, std::int32_t>{kCuLaunchAttributeCooperative, 1}));
  EXPECT_EQ(l.attributes[2],
            (std::pair<std::uint32_t, std::int32_t>{kCuLaunchAttributeClusterSchedulingPolicyPreference,
                                                    kCuClusterSchedulingPolicySpread}));
  EXPECT_EQ(l.attributes[3],
            (std::pair<std::uint32_t, std::int32_t>{kCuLaunchAttributeProgrammaticStreamSerialization, 1}));
  rt.synchronize();
  EXPECT_EQ(g.synced, (std::vector<void*>{reinterpret_cast<void*>(std::uintptr_t{0x5000})}));  // the stream it ran on
  // An attribute twice is refused at parse.
  std::string twice = text;
  twice.replace(twice.find("\"cooperative\""), 13, "\"cooperative\", \"cooperative\"");
  EXPECT_EQ(code_of([&] { parse_manifest(twice, "twice.toml"); }), ErrorCode::invalid_argument);
  std::filesystem::remove_all(std::filesystem::path(dir).parent_path());
}

// ---- launches over Pact tensors (issue 26 item 5) -------------------------------------------------------

// Device tensors without a GPU: the fake device provider's storage is placed on cuda and bound by address.
struct TensorLaunch : Admission {
  std::shared_ptr<Provider> dev = make_fake_device_provider();
  ops::TensorType f32(std::int64_t n) const { return {DType::f32, Dims{n}}; }
  Tensor device_tensor(std::int64_t n, DType dtype = DType::f32) { return Tensor::zeros(Dims{n}, dtype, dev); }
  // The device address a fresh binding of `t` reports (the address a launch must have passed).
  static std::uint64_t address_of(const Tensor& t) {
    auto prepared = t.prepare_device();
    auto bound = DeviceBinding::bind(std::move(prepared).value());
    return bound.value().unsafe_device_address();
  }
  // The vector add's call over a, b (read) and out (written), each f32[n] as admitted.
  SealedCall vadd_call(const Tensor& a, const Tensor& b, Tensor& out) const {
    const std::int64_t n = a.numel();
    SealedCall c;
    c.reads.emplace("a", SealedRead{a.as_view(), f32(n)});
    c.reads.emplace("b", SealedRead{b.as_view(), f32(n)});
    c.writes.emplace("out", SealedWrite{out.as_view_mut(), f32(n)});
    return c;
  }
};

TEST_F(TensorLaunch, TheCallIsTheTensorsOwnGeometryAndTheLaunchCompletes) {
  SealedRuntime rt(driver);
  rt.admit(publication, manifest, profile);
  Tensor a = device_tensor(1000), b = device_tensor(1000), out = device_tensor(1000);
  {
    SealedCall c = vadd_call(a, b, out);
    EXPECT_EQ(rt.launch("add", std::move(c)), "vadd_run");
  }
  ASSERT_EQ(g.launches.size(), 1u);
  const auto& l = g.launches[0];
  EXPECT_EQ(l.config.grid_x, 4u);  // ceil_div(numel(a), 256), numel from the tensor itself
  EXPECT_EQ(read_as<std::uint64_t>(l.params[0]), address_of(a));
  EXPECT_EQ(read_as<std::uint64_t>(l.params[1]), address_of(b));
  EXPECT_EQ(read_as<std::uint64_t>(l.params[2]), address_of(out));
  EXPECT_EQ(read_as<std::int32_t>(l.params[3]), 1000);
  // It returned completed: waited for, its evidence complete, its call storage freed after the wait.
  EXPECT_TRUE(rt.evidence().gate({rt.artifact_key("vadd_run")}).passed);
  EXPECT_TRUE(rt.live_resources().empty());
  EXPECT_EQ(g.calls, (std::vector<std::string>{"sync", "free"}));
  // The bindings ended with the launch: the output is writable again.
  EXPECT_NO_THROW(out.as_view_mut());
}

TEST_F(TensorLaunch, WhatThePlanDidNotAdmitIsRefusedBeforeAnythingLaunches) {
  SealedRuntime rt(driver);
  rt.admit(publication, manifest, profile);
  Tensor a = device_tensor(64), b = device_tensor(64), out = device_tensor(64);
  Tensor wide = device_tensor(64, DType::f64), host = Tensor::zeros(Dims{64}, DType::f32);
  Tensor square = Tensor::zeros(Dims{8, 8}, DType::f32, dev);
  // The vector add's call, with one entry changed.
  auto refused = [&](const std::function<void(SealedCall&)>& change) {
    SealedCall c;
    c.reads.emplace("a", SealedRead{a.as_view(), f32(64)});
    c.reads.emplace("b", SealedRead{b.as_view(), f32(64)});
    change(c);
    if (c.writes.empty() && c.reads.count("out") == 0) c.writes.emplace("out", SealedWrite{out.as_view_mut(), f32(64)});
    Error e(ErrorCode::internal, "", "");
    try {
      rt.launch("add", std::move(c));
      ADD_FAILURE() << "launched";
    } catch (const Error& err) {
      e = err;
    }
    return e;
  };
  auto expect = [&](const Error& e, ErrorCode code, const std::string& words) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_TRUE(mentions(e.what(), words)) << e.what();
  };
  expect(refused([&](SealedCall& c) {
           c.reads.at("b").admitted = {DType::f64, Dims{64}};
         }),
         ErrorCode::dtype_mismatch, "tensor 'b' is f32; the plan admitted f64");
  expect(refused([&](SealedCall& c) {
           c.reads.at("b") = SealedRead{wide.as_view(), f32(64)};
         }),
         ErrorCode::dtype_mismatch, "tensor 'b' is f64");
  expect(refused([&](SealedCall& c) { c.reads.at("a").admitted = f32(65); }), ErrorCode::invalid_argument,
         "tensor 'a' has shape [64]; the plan admitted [65]");
  expect(refused([&](SealedCall& c) {
           c.reads.at("a") = SealedRead{host.as_view(), f32(64)};
         }),
         ErrorCode::provider_mismatch, "tensor 'a' is in cpu storage");
  expect(refused([&](SealedCall& c) {
           c.reads.at("a") = SealedRead{square.transpose(0, 1), {DType::f32, Dims{8, 8}}};
         }),
         ErrorCode::invalid_argument, "tensor 'a' is strided");
  expect(refused([&](SealedCall& c) { c.reads.erase("b"); }), ErrorCode::invalid_argument,
         "binds tensor 'b', which the call does not give");
  expect(refused([&](SealedCall& c) {
           c.reads.emplace("c", SealedRead{wide.as_view(), {DType::f64, Dims{64}}});
         }),
         ErrorCode::invalid_argument, "has no binding 'c'");
  expect(refused([&](SealedCall& c) {
           c.reads.emplace("out", SealedRead{wide.as_view(), {DType::f64, Dims{64}}});
           c.writes.emplace("out", SealedWrite{out.as_view_mut(), f32(64)});
         }),
         ErrorCode::invalid_argument, "'out' is given as both a read and a write");
  // The runtime's own storage cannot be bound from outside.
  expect(refused([&](SealedCall& c) {
           c.reads.emplace("workspace.partials", SealedRead{wide.as_view(), {DType::f64, Dims{64}}});
         }),
         ErrorCode::invalid_argument, "has no binding 'workspace.partials'");
  EXPECT_TRUE(g.launches.empty());
  EXPECT_TRUE(g.allocations.empty());
  // A write is exclusive: an output aliasing an input cannot even be bound alongside it.
  EXPECT_EQ(code_of([&] {
              const TensorView read = a.as_view();
              TensorViewMut write = a.as_view_mut();
            }),
            ErrorCode::borrow_conflict);
}

// Every driver call is made with the runtime's context current on the calling thread: a launch and a wait
// from a thread that never saw the context (a submission worker) make it current first.
TEST_F(TensorLaunch, DriverCallsMakeTheContextCurrentOnTheCallingThread) {
  SealedRuntime rt(driver);
  rt.admit(publication, manifest, profile);
  void* const admitted_context = current_context;
  ASSERT_NE(admitted_context, nullptr);
  Tensor a = device_tensor(64), b = device_tensor(64), out = device_tensor(64);
  std::thread worker([&] {
    EXPECT_EQ(current_context, nullptr);  // a new thread has no current context
    rt.launch("add", call(64), pointers());
    rt.synchronize();
    SealedCall c = vadd_call(a, b, out);
    rt.launch("add", std::move(c));
  });
  worker.join();
  EXPECT_EQ(g.launch_contexts, (std::vector<void*>{admitted_context, admitted_context}));
  // A driver that cannot make the context current refuses typed, and nothing launches.
  g.ctx_result = 201;  // CUDA_ERROR_INVALID_CONTEXT
  std::thread refused(
      [&] { EXPECT_EQ(code_of([&] { rt.launch("add", call(64), pointers()); }), ErrorCode::no_device); });
  refused.join();
  EXPECT_EQ(g.launches.size(), 2u);
  g.ctx_result = 0;
}

// Note [Sealed completion]: storage whose last use has no proven completion is retained, never freed.
TEST_F(TensorLaunch, AnUnprovenCompletionRetainsAndNeverFrees) {
  {
    SealedRuntime rt(driver);
    rt.admit(publication, manifest, profile);
    Tensor a = device_tensor(64), b = device_tensor(64), out = device_tensor(64);
    SealedCall c = vadd_call(a, b, out);
    g.sync_result = 700;  // CUDA_ERROR_ILLEGAL_ADDRESS: the wait cannot prove the launch finished
    EXPECT_EQ(code_of([&] { rt.launch("add", std::move(c)); }), ErrorCode::poisoned);
    EXPECT_TRUE(rt.poisoned());
    EXPECT_FALSE(rt.evidence().gate({rt.artifact_key("vadd_run")}).passed);
  }                              // teardown of a poisoned runtime
  EXPECT_TRUE(g.frees.empty());  // the workspace the launch used is kept
  EXPECT_EQ(g.unloads, 0);       // and the module its kernel may still be running from
  EXPECT_EQ(g.releases, 0);
  // A launch nobody waited for is waited for at teardown before its storage is freed ...
  g = FakeDriver{};
  {
    SealedRuntime rt(driver);
    rt.admit(publication, manifest, profile);
    rt.launch("add", call(1000), pointers());
  }
  EXPECT_EQ(g.calls, (std::vector<std::string>{"sync", "free", "unload"}));
  // ... and kept when that wait fails.
  g = FakeDriver{};
  {
    SealedRuntime rt(driver);
    rt.admit(publication, manifest, profile);
    rt.launch("add", call(1000), pointers());
    g.sync_result = 700;
  }
  EXPECT_EQ(g.calls, (std::vector<std::string>{"sync"}));
}

// ---- sealed kernels in plans (issue 26 item 5) ----------------------------------------------------------

const std::string kBindings = R"(schema = "pact.sealed-bindings.v1"
[[bind]]
op = "add"
inputs = ["a", "b"]
output = "out"
dtype = "f32"
)";

TEST_F(Admission, ABindingFileMapsOpsOntoTheManifestsExports) {
  const auto bindings = parse_sealed_bindings(kBindings, "bindings.toml", manifest);
  ASSERT_EQ(bindings.size(), 1u);
  EXPECT_EQ(bindings[0].op, ops::OpTag::add);
  EXPECT_EQ(bindings[0].inputs, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(bindings[0].output, "out");
  EXPECT_EQ(bindings[0].dtype, DType::f32);
  // Each fault is typed and names the entry and field.
  auto fault = [&](const std::string& from, const std::string& to, ErrorCode code, const std::string& words) {
    std::string text = kBindings;
    const auto at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    Error e(ErrorCode::internal, "", "");
    try {
      parse_sealed_bindings(text, "bindings.toml", manifest);
      ADD_FAILURE() << "accepted: " << text;
      return;
    } catch (const Error& err) {
      e = err;
    }
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_TRUE(mentions(e.what(), words)) << e.what();
  };
  fault("v1\"", "v2\"", ErrorCode::unsupported, "'pact.sealed-bindings.v2' is not pact.sealed-bindings.v1");
  fault("dtype = \"f32\"", "dtype = \"f32\"\nalpha = 1", ErrorCode::parse_error, "bind[0].alpha: unknown field");
  fault("output = \"out\"\n", "", ErrorCode::parse_error, "bind[0].output: missing");
  fault("inputs = [\"a\", \"b\"]", "inputs = \"a\"", ErrorCode::parse_error, "bind[0].inputs: expected");
  fault("op = \"add\"", "op = \"vector_add\"", ErrorCode::unsupported, "'vector_add' is not an op of the op table");
  fault("op = \"add\"", "op = \"reshape\"", ErrorCode::unsupported, "'reshape' is not a kernel op");
  fault("op = \"add\"", "op = \"mul\"", ErrorCode::invalid_argument, "the manifest has no op 'mul'");
  fault("op = \"add\"", "op = \"embedding\"", ErrorCode::unsupported, "operand 1 of 'embedding' is an index");
  fault("[\"a\", \"b\"]", "[\"a\", \"b\", \"c\"]", ErrorCode::invalid_argument, "3 operands; 'add' takes 2");
  fault("[\"a\", \"b\"]", "[\"a\", \"a\"]", ErrorCode::invalid_argument, "named twice");
  fault("[\"a\", \"b\"]", "[\"b\", \"c\"]", ErrorCode::invalid_argument,
        "run export 'vadd_run' binds the tensors [a, b, out]; the entry names [b, c, out]");
  fault("output = \"out\"", "output = \"workspace.partials\"", ErrorCode::invalid_argument, "binds the tensors");
  fault("dtype = \"f32\"", "dtype = \"float\"", ErrorCode::invalid_argument, "'float' is not a dtype");
  fault("dtype = \"f32\"\n", "dtype = \"f32\"\n" + kBindings.substr(kBindings.find("[[bind]]")),
        ErrorCode::invalid_argument, "'add' bound twice");
  fault("[[bind]]", "[[bind", ErrorCode::parse_error, "bindings.toml:2");
}

// A one-node graph (x + y) planned under cuda-external with the sealed kernels: the sealed capsule is
// selected, admitted on the runtime's load receipt, and its handler launches the export over the plan's
// device tensors (the fake device provider: no GPU here).
struct SealedPlan : TensorLaunch {
  ir::Graph graph(DType dtype = DType::f32) const {
    ir::GraphBuilder b;
    b.input("x", Dims{1000}, dtype);
    b.input("y", Dims{1000}, dtype);
    b.op("sum", ops::OpTag::add, {"x", "y"});
    b.output("sum");
    return b.build();
  }
  std::shared_ptr<SealedKernels> sealed(const std::shared_ptr<SealedRuntime>& rt) const {
    return std::make_shared<SealedKernels>(rt, manifest, parse_sealed_bindings(kBindings, "bindings.toml", manifest),
                                           dev);
  }
  contract::BackendProfile external(const SealedKernels& k) const {
    contract::BackendProfile p = k.profile(contract::builtin_profile("cuda-external"));
    p.allow_cuda_stub = true;  // no GPU here: the cuda module's capsules plan, and fail their own evidence
    return p;
  }
};

TEST_F(SealedPlan, APlanSelectsTheSealedKernelAndRunsItOverDeviceTensors) {
  auto rt = std::make_shared<SealedRuntime>(driver);
  rt->admit(publication, manifest, profile);
  const auto kernels = sealed(rt);
  const contract::DefaultEvidenceResolver base;
  const SealedEvidenceResolver resolver = kernels->resolver(base);
  auto planned = plan::plan_graph(graph(), external(*kernels), resolver);
  ASSERT_TRUE(planned.has_value()) << plan::render_audit_table(planned.error().audit);
  ASSERT_EQ(planned->audit().kernels.size(), 1u);
  EXPECT_EQ(planned->audit().kernels[0].capsule->name, "sealed.vadd_run");
  EXPECT_EQ(planned->audit().kernels[0].capsule->trust, contract::Trust::trustedExternal);

  Tensor x = device_tensor(1000), y = device_tensor(1000);
  std::map<std::string, runtime::EagerTensor> bindings;
  bindings.emplace("x", runtime::EagerTensor{runtime::retain(x.duplicate()), -1});
  bindings.emplace("y", runtime::EagerTensor{runtime::retain(y.duplicate()), -1});
  // Without the launcher installed the handler refuses typed, naming what is missing.
  EXPECT_TRUE(mentions(message_of([&] { runtime::execute(*planned, bindings); }), "no sealed publication"));
  EXPECT_TRUE(g.launches.empty());
  const InstalledSealedKernels installed(kernels);
  const runtime::ExecutionResult result = runtime::execute(*planned, bindings);
  ASSERT_EQ(g.launches.size(), 1u);
  const runtime::EagerTensor& sum = result.outputs.at("sum");
  EXPECT_EQ(sum.view().provider_name(), "fake-device");
  EXPECT_EQ(sum.view().shape(), Dims{1000});
  // The launch read the two bound inputs and wrote the node's result: their device addresses, in the
  // binding file's order (a, b, out), and the element count from the tensors.
  const auto& l = g.launches[0];
  const TensorView xv = bindings.at("x").view(), yv = bindings.at("y").view();
  auto address = [](const TensorView& v) {
    auto bound = DeviceBinding::bind(std::move(TensorView(v).prepare_device()).value());
    return bound.value().unsafe_device_address();
  };
  EXPECT_EQ(read_as<std::uint64_t>(l.params[0]), address(xv));
  EXPECT_EQ(read_as<std::uint64_t>(l.params[1]), address(yv));
  EXPECT_EQ(read_as<std::uint64_t>(l.params[2]), address(sum.view()));
  EXPECT_EQ(read_as<std::int32_t>(l.params[3]), 1000);
  EXPECT_TRUE(rt->evidence().gate({rt->artifact_key("vadd_run")}).passed);  // launched and completed
}

TEST_F(SealedPlan, TheSealedCapsuleServesOnlyWhatItsBindingAndProfileAdmit) {
  auto rt = std::make_shared<SealedRuntime>(driver);
  const auto kernels = sealed(rt);
  const contract::DefaultEvidenceResolver base;
  const SealedEvidenceResolver resolver = kernels->resolver(base);
  auto sealed_failure = [&](const Expected<plan::AcceptedGraphPlan, plan::PlanRejection>& r) {
    std::string why;
    if (r.has_value()) return why;
    for (const auto& f : r.error().audit.check.failures())
      if (f.capsule == "sealed.vadd_run") why += f.reason + "; ";
    return why;
  };
  // Not admitted yet: no load receipt, so the plan is refused at the sealed capsule's boundary.
  auto before = plan::plan_graph(graph(), external(*kernels), resolver);
  ASSERT_FALSE(before.has_value());
  EXPECT_TRUE(mentions(sealed_failure(before), "no aot_loaded receipt")) << sealed_failure(before);
  rt->admit(publication, manifest, profile);
  // A checked profile never accepts the trusted boundary.
  contract::BackendProfile checked = kernels->profile(contract::builtin_profile("cuda-checked"));
  checked.allow_cuda_stub = true;
  auto refused = plan::plan_graph(graph(), checked, resolver);
  ASSERT_FALSE(refused.has_value());
  EXPECT_FALSE(sealed_failure(refused).empty());
  // f64 operands are not the binding's dtype: the sealed capsule is not selected for them.
  auto wide = plan::plan_graph(graph(DType::f64), external(*kernels), resolver);
  const plan::PlanAudit& audit = wide.has_value() ? wide->audit() : wide.error().audit;
  ASSERT_EQ(audit.kernels.size(), 1u);
  EXPECT_TRUE(audit.kernels[0].capsule == nullptr || audit.kernels[0].capsule->provider != "sealed");
  // An op the publication does not bind has no sealed capsule, and the launcher refuses it typed.
  EXPECT_EQ(kernels->module().capsules.size(), 1u);
  Tensor a = device_tensor(4);
  const std::vector<TensorView> in{a.as_view(), a.as_view()};
  EXPECT_EQ(code_of([&] { kernels->forward(ops::OpTag::mul, in, {}); }), ErrorCode::unsupported);
  EXPECT_EQ(code_of([&] {
              kernels->forward(ops::OpTag::add, in, ops::Attributes{{"alpha", 2.0}});
            }),
            ErrorCode::unsupported);
  EXPECT_TRUE(g.launches.empty());
}

// `pact run --sealed FILE`: the example binding file names its publication, manifest and launch profile
// relative to itself; loading it admits the publication (here on the stand-in driver).
TEST_F(Admission, TheExampleBindingFileLoadsItsDeployment) {
  const std::string file = kSource + "/examples/seal/vector_add/bindings.toml";
  const SealedDeployment d =
      parse_sealed_deployment(read_file(file, "test"), file, kSource + "/examples/seal/vector_add");
  EXPECT_EQ(d.publication, kSource + "/tests/fixtures/seal/vector_add");
  EXPECT_EQ(d.manifest, kSource + "/examples/seal/vector_add/manifest.toml");
  EXPECT_EQ(d.launch_profile, kSource + "/examples/seal/profiles/h100-sm90a.json");
  const auto kernels = load_sealed_kernels(file, make_fake_device_provider(), &driver);
  ASSERT_EQ(kernels->module().capsules.size(), 1u);
  EXPECT_EQ(kernels->module().capsules[0].name, "sealed.vadd_run");
  EXPECT_TRUE(kernels->runtime().evidence().is_loaded(kernels->runtime().artifact_key("vadd_run")));
  // A binding file without its deployment serves a manifest in code, not `pact run --sealed`.
  EXPECT_TRUE(
      mentions(message_of([&] { parse_sealed_deployment(kBindings, "b.toml", "/x"); }), "b.toml.publication: missing"));
  // Files are read and checked before any driver is touched: a broken manifest path is io_error, no load.
  test::ScratchBundle scratch;
  std::string text = read_file(file, "test");
  text.replace(text.find("manifest = \"manifest.toml\""), 26, "manifest = \"absent.toml\"");
  scratch.write("bindings.toml", text);
  EXPECT_EQ(
      code_of([&] { load_sealed_kernels((scratch.dir / "bindings.toml").string(), make_fake_device_provider()); }),
      ErrorCode::io_error);
  EXPECT_EQ(g.loads, 1);
}

TEST_F(Admission, TheSealedCapsuleIsTrustedExternalAndNeedsTheLoadReceipt) {
  SealedRuntime rt(driver);
  const std::string identity = execution_identity(manifest);
  const contract::Capsule capsule = sealed_capsule(manifest.ops[0], manifest.ops[0].exports[0], identity);
  EXPECT_EQ(capsule.trust, contract::Trust::trustedExternal);
  EXPECT_EQ(capsule.op, ops::parse_op_kind("add"));
  const contract::DefaultEvidenceResolver base;
  const SealedEvidenceResolver resolver(rt, base);
  auto check = [&](const char* profile_name) {
    contract::BackendProfile p = contract::builtin_profile(profile_name);
    p.providers.push_back("sealed");
    std::vector<contract::ObligationReport> reports;
    contract::check_kernel("n0", capsule.op, capsule, p, resolver, reports);
    return std::all_of(reports.begin(), reports.end(), [](const auto& r) { return r.accepted; });
  };
  EXPECT_FALSE(check("cuda-external"));  // not admitted yet: no aot_loaded receipt
  rt.admit(publication, manifest, profile);
  EXPECT_TRUE(check("cuda-external"));
  EXPECT_FALSE(check("cuda-checked"));  // a checked profile never accepts trusted external evidence
  // An op outside the op table cannot be offered.
  ManifestOp renamed = manifest.ops[0];
  renamed.name = "vector_add";
  EXPECT_EQ(code_of([&] { sealed_capsule(renamed, renamed.exports[0], identity); }), ErrorCode::unsupported);
}

}  // namespace
}  // namespace pact::seal
