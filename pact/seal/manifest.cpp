#include "pact/seal/manifest.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>

#include "pact/core/file.hpp"
#include "pact/core/toml_table.hpp"
#include "pact/seal/registry.hpp"

namespace pact::seal {

std::string_view role_name(Role r) noexcept {
  switch (r) {
    case Role::init:
      return "init";
    case Role::prepare:
      return "prepare";
    case Role::reset:
      return "reset";
    case Role::run:
      return "run";
    case Role::destroy:
      return "destroy";
  }
  return "?";
}

namespace {

[[noreturn]] void fail(ErrorCode code, const std::string& where, const std::string& why) {
  throw_error(code, "seal.manifest", fmt::format("{}: {}", where, why));
}

// Schema faults of the shared TOML reader: the first one throws, naming the field path.
TomlFaults& seal_faults() {
  static ThrowingTomlFaults faults("seal.manifest");
  return faults;
}

// Required-value accessors over the shared reader (pact/core/toml_table.hpp); every fault throws.
class Tbl {
 public:
  explicit Tbl(TomlTable t) : t_(std::move(t)) {}
  Tbl(const toml::table& t, std::string path) : t_(t, std::move(path), seal_faults()) {}
  const std::string& path() const { return t_.path(); }
  std::string at(std::string_view key) const { return t_.at(key); }
  void keys(std::initializer_list<std::string_view> required,
            std::initializer_list<std::string_view> optional = {}) const {
    t_.keys(required, optional);
  }
  bool has(std::string_view key) const { return t_.has(key); }
  std::string str(std::string_view key) const { return present(t_.str(key), key); }
  std::string str_or(std::string_view key, std::string fallback) const { return has(key) ? str(key) : fallback; }
  std::int64_t integer(std::string_view key) const { return present(t_.integer(key), key); }
  const toml::array& array(std::string_view key, std::size_t max) const {
    const toml::array* a = t_.array(key, max);
    if (a == nullptr) t_.faults().missing_field(t_.path(), key);
    return *a;
  }
  std::vector<std::string> strings(std::string_view key, std::size_t max) const {
    return present(t_.strings(key, false, max), key);
  }
  std::vector<Tbl> tables(std::string_view key, std::size_t max) const {
    std::vector<Tbl> out;
    for (auto& t : t_.tables(key, false, max)) out.emplace_back(std::move(t));
    return out;
  }
  Tbl table(std::string_view key) const { return Tbl(present(t_.table(key), key)); }
  // An expression given as a string or an integer literal.
  Expr expr(std::string_view key) const {
    const toml::node* n = t_.node(key);
    if (n != nullptr && n->is_integer()) return Expr::parse(std::to_string(n->as_integer()->get()), at(key));
    if (n == nullptr || !n->is_string())
      fail(ErrorCode::parse_error, at(key), "expected an expression (string or integer)");
    return Expr::parse(n->as_string()->get(), at(key));
  }
  std::vector<Expr> exprs(std::string_view key, std::size_t count) const {
    const auto& a = array(key, count);
    if (a.size() != count) fail(ErrorCode::parse_error, at(key), fmt::format("expected {} expressions", count));
    std::vector<Expr> out;
    for (std::size_t i = 0; i < a.size(); ++i) {
      const std::string where = fmt::format("{}[{}]", at(key), i);
      if (a[i].is_integer()) {
        out.push_back(Expr::parse(std::to_string(a[i].as_integer()->get()), where));
      } else if (a[i].is_string()) {
        out.push_back(Expr::parse(a[i].as_string()->get(), where));
      } else {
        fail(ErrorCode::parse_error, where, "expected an expression");
      }
    }
    return out;
  }

 private:
  template <class T>
  T present(std::optional<T> v, std::string_view key) const {
    if (!v) t_.faults().missing_field(t_.path(), key);  // throws
    return std::move(*v);
  }
  TomlTable t_;
};

Role parse_role(const std::string& s, const std::string& where) {
  for (auto r : {Role::init, Role::prepare, Role::reset, Role::run, Role::destroy}) {
    if (role_name(r) == s) return r;
  }
  fail(ErrorCode::parse_error, where, fmt::format("role '{}' is not init, prepare, reset, run or destroy", s));
}

constexpr std::string_view kLaunchAttributes[] = {"cooperative", "cluster_scheduling_policy_spread",
                                                  "programmatic_stream_serialization"};

ParamSpec parse_param(const Tbl& p) {
  const std::string kind = p.str("kind");
  if (kind == "pointer") {
    p.keys({"kind", "binding"});
    return PointerParam{p.str("binding")};
  }
  if (kind == "scalar") {
    p.keys({"kind", "type", "value"});
    return ScalarParam{parse_scalar_type(p.str("type")), p.expr("value")};
  }
  if (kind == "packed_struct") {
    p.keys({"kind", "size", "alignment", "fields"});
    PackedStructParam s{static_cast<std::uint32_t>(std::clamp<std::int64_t>(p.integer("size"), 0, 1 << 20)),
                        static_cast<std::uint32_t>(std::clamp<std::int64_t>(p.integer("alignment"), 0, 1 << 20)),
                        {}};
    for (const auto& f : p.tables("fields", 256)) {
      f.keys({"offset", "type", "value"});
      s.fields.push_back({static_cast<std::uint32_t>(std::clamp<std::int64_t>(f.integer("offset"), 0, 1 << 20)),
                          parse_scalar_type(f.str("type")), f.expr("value")});
    }
    try {
      check_packed_struct(s);
    } catch (const Error& e) {
      fail(ErrorCode::invalid_argument, p.path(), e.detail());
    }
    return s;
  }
  if (kind == "fast_divmod_u32") {
    p.keys({"kind", "divisor"});
    return FastDivmodParam{p.expr("divisor")};
  }
  if (kind == "tma_descriptor") {
    p.keys({"kind", "binding", "dtype", "box"}, {"swizzle"});
    TmaDescriptorParam t{p.str("binding"), p.str("dtype"), {}, p.str_or("swizzle", "none")};
    try {
      (void)tma_element_size(t.dtype);
      require_tma_swizzle(t.swizzle);
    } catch (const Error& err) {
      fail(err.code(), p.path(), err.detail());
    }
    const auto& box = p.array("box", 5);
    if (box.empty()) fail(ErrorCode::invalid_argument, p.at("box"), "a box has one extent per tensor dimension (1-5)");
    t.box = p.exprs("box", box.size());
    return t;
  }
  if (kind == "group_handle") {
    p.keys({"kind", "group"});
    return GroupHandleParam{p.str("group")};
  }
  fail(ErrorCode::parse_error, p.at("kind"), fmt::format("'{}' is not a parameter primitive", kind));
}

DevicePlan parse_device_plan(const Tbl& t, const std::vector<std::string>& bindings) {
  t.keys({"schema", "kernels", "launches"});
  if (t.str("schema") != kDevicePlanSchema)
    fail(ErrorCode::parse_error, t.at("schema"), fmt::format("expected {}", kDevicePlanSchema));
  DevicePlan plan;
  for (const auto& k : t.tables("kernels", kMaxKernels)) {
    k.keys({"name", "param_widths"});
    KernelContract c{k.str("name"), {}};
    for (const auto& w : k.array("param_widths", 4096)) {
      const auto* i = w.as_integer();
      if (i == nullptr || i->get() <= 0 || i->get() > 4096)
        fail(ErrorCode::parse_error, k.at("param_widths"), "widths are integers in [1, 4096]");
      c.param_widths.push_back(static_cast<std::uint32_t>(i->get()));
    }
    if (!plan.kernels.empty() && !(plan.kernels.back().name < c.name)) {
      fail(ErrorCode::invalid_argument, k.at("name"),
           fmt::format("kernels are sorted and unique; '{}' follows '{}'", c.name, plan.kernels.back().name));
    }
    plan.kernels.push_back(std::move(c));
  }
  if (plan.kernels.empty()) fail(ErrorCode::parse_error, t.at("kernels"), "a device plan has at least one kernel");
  const auto launches = t.tables("launches", kMaxLaunches);
  if (launches.empty()) fail(ErrorCode::parse_error, t.at("launches"), "a device plan has at least one launch");
  for (const auto& l : launches) {
    l.keys({"kernel", "grid", "block", "dynamic_smem", "params"}, {"cluster", "stream", "attributes"});
    Launch launch{l.str("kernel"),
                  l.exprs("grid", 3),
                  l.exprs("block", 3),
                  std::nullopt,
                  l.expr("dynamic_smem"),
                  {},
                  l.str_or("stream", "default"),
                  {}};
    if (l.has("cluster")) launch.cluster = l.exprs("cluster", 3);
    if (l.has("attributes")) launch.attributes = l.strings("attributes", std::size(kLaunchAttributes));
    for (std::size_t i = 0; i < launch.attributes.size(); ++i) {
      const auto& a = launch.attributes[i];
      if (std::find(std::begin(kLaunchAttributes), std::end(kLaunchAttributes), a) == std::end(kLaunchAttributes)) {
        fail(ErrorCode::unsupported, l.at("attributes"), fmt::format("launch attribute '{}' is not allow-listed", a));
      }
      if (std::find(launch.attributes.begin(), launch.attributes.begin() + static_cast<std::ptrdiff_t>(i), a) !=
          launch.attributes.begin() + static_cast<std::ptrdiff_t>(i)) {
        fail(ErrorCode::invalid_argument, l.at("attributes"), fmt::format("launch attribute '{}' appears twice", a));
      }
    }
    if (launch.stream != "default" && std::find(bindings.begin(), bindings.end(), launch.stream) == bindings.end()) {
      fail(ErrorCode::invalid_argument, l.at("stream"),
           fmt::format("'{}' is neither 'default' nor a binding of the export", launch.stream));
    }
    auto kernel = std::find_if(plan.kernels.begin(), plan.kernels.end(),
                               [&](const KernelContract& k) { return k.name == launch.kernel; });
    if (kernel == plan.kernels.end())
      fail(ErrorCode::invalid_argument, l.at("kernel"), fmt::format("no kernel '{}' in the plan", launch.kernel));
    for (const auto& p : l.tables("params", 4096)) launch.params.push_back(parse_param(p));
    if (launch.params.size() != kernel->param_widths.size()) {
      fail(ErrorCode::invalid_argument, l.at("params"),
           fmt::format("{} parameters; kernel '{}' declares {}", launch.params.size(), kernel->name,
                       kernel->param_widths.size()));
    }
    for (std::size_t i = 0; i < launch.params.size(); ++i) {
      if (param_width(launch.params[i]) != kernel->param_widths[i]) {
        fail(ErrorCode::invalid_argument, fmt::format("{}[{}]", l.at("params"), i),
             fmt::format("{} bytes; kernel '{}' declares {}", param_width(launch.params[i]), kernel->name,
                         kernel->param_widths[i]));
      }
      const std::string* named = nullptr;
      if (const auto* ptr = std::get_if<PointerParam>(&launch.params[i])) named = &ptr->binding;
      if (const auto* tma = std::get_if<TmaDescriptorParam>(&launch.params[i])) named = &tma->binding;
      if (named != nullptr && std::find(bindings.begin(), bindings.end(), *named) == bindings.end()) {
        fail(ErrorCode::invalid_argument, fmt::format("{}[{}]", l.at("params"), i),
             fmt::format("'{}' is not a binding of the export", *named));
      }
    }
    plan.launches.push_back(std::move(launch));
  }
  return plan;
}

Lifetime lifetime_of(const std::string& name, const std::string& where) {
  if (name.rfind("workspace.", 0) == 0 && name.size() > 10) return Lifetime::call;
  if (name.rfind("prepared.", 0) == 0 && name.size() > 9) return Lifetime::prepared;
  if (name.rfind("state.", 0) == 0 && name.size() > 6) return Lifetime::engine;
  fail(ErrorCode::invalid_argument, where,
       fmt::format("'{}' has no lifetime prefix (workspace., prepared., state.)", name));
}

ArtifactResource parse_resource(const Tbl& r) {
  r.keys({"name", "dtype", "alignment", "shape"}, {"scope"});
  ArtifactResource res;
  res.name = r.str("name");
  res.lifetime = lifetime_of(res.name, r.at("name"));
  try {
    res.dtype = parse_dtype(r.str("dtype"));
  } catch (const Error& e) {
    fail(ErrorCode::parse_error, r.at("dtype"), e.detail());
  }
  const std::int64_t alignment = r.integer("alignment");
  if (alignment <= 0 || static_cast<std::uint64_t>(alignment) > kMaxAlignment || (alignment & (alignment - 1)) != 0) {
    fail(ErrorCode::invalid_argument, r.at("alignment"),
         fmt::format("{} is not a power of two up to 1 MiB", alignment));
  }
  res.alignment = static_cast<std::uint64_t>(alignment);
  const std::string scope = r.str_or("scope", "rank_local");
  if (scope == "rank_local") {
    res.scope = Scope::rank_local;
  } else if (scope == "group_ipc") {
    if (res.lifetime == Lifetime::call)
      fail(ErrorCode::invalid_argument, r.at("scope"), "call-local (workspace) storage cannot be group_ipc");
    res.scope = Scope::group_ipc;
  } else {
    fail(ErrorCode::parse_error, r.at("scope"), fmt::format("'{}' is not rank_local or group_ipc", scope));
  }
  const auto dims = r.tables("shape", 16);
  if (dims.empty()) fail(ErrorCode::invalid_argument, r.at("shape"), "rank must be 1-16");
  for (const auto& d : dims) {
    d.keys({"factors"}, {"divisor"});
    ResourceDim dim;
    dim.divisor = d.has("divisor") ? d.integer("divisor") : 1;
    if (dim.divisor <= 0) fail(ErrorCode::invalid_argument, d.at("divisor"), "the divisor is positive");
    const auto factors = d.tables("factors", 8);
    if (factors.empty()) fail(ErrorCode::invalid_argument, d.at("factors"), "at least one factor");
    for (const auto& f : factors) {
      ShapeFactor sf;
      if (f.has("constant")) {
        f.keys({"constant"});
        sf.constant = f.integer("constant");
        if (sf.constant <= 0) fail(ErrorCode::invalid_argument, f.at("constant"), "constant factors are positive");
      } else {
        if (f.has("tensor")) {
          f.keys({"tensor", "dim", "max"});
          sf.tensor = f.str("tensor");
          sf.dim = f.integer("dim");
        } else {
          f.keys({"scalar", "max"});
          sf.scalar = f.str("scalar");
        }
        sf.max = f.integer("max");
        if (sf.max <= 0 || sf.max > (std::int64_t{1} << 40))
          fail(ErrorCode::invalid_argument, f.at("max"), "a projection's bound is in [1, 2^40]");
      }
      dim.factors.push_back(std::move(sf));
    }
    res.shape.push_back(std::move(dim));
  }
  // The size at the factors' bounds (anything past 2^64 is past 64 GiB anyway).
  const auto bytes = resource_bytes(res, [](const ShapeFactor& f) { return f.max; });
  if (!bytes || *bytes > kMaxBufferBytes)
    fail(ErrorCode::invalid_argument, r.at("shape"), "the buffer can exceed 64 GiB at its bounds");
  res.max_bytes = *bytes;
  return res;
}

void check_lifecycle(const ManifestOp& op, const std::string& where) {
  std::map<std::string, const ArtifactResource*> resources;
  for (const auto& r : op.resources) resources.emplace(r.name, &r);
  std::set<std::string> produced, consumed;
  for (std::size_t i = 0; i < op.exports.size(); ++i) {
    const AotExport& e = op.exports[i];
    const std::string at = fmt::format("{}.aot_exports[{}]", where, i);
    std::set<std::pair<Lifetime, Scope>> classes;
    for (const auto& b : e.bindings) {
      auto it = resources.find(b);
      if (it == resources.end()) continue;  // a semantic binding, not artifact storage
      const ArtifactResource& r = *it->second;
      if (r.lifetime == Lifetime::call && (e.role == Role::init || e.role == Role::destroy)) {
        fail(ErrorCode::invalid_argument, at,
             fmt::format("workspace '{}' cannot be used by a {} export", r.name, role_name(e.role)));
      }
      if (r.lifetime == Lifetime::prepared) {
        if (e.role == Role::prepare)
          produced.insert(r.name);
        else if (e.role == Role::run)
          consumed.insert(r.name);
        else if (e.role != Role::destroy)
          fail(ErrorCode::invalid_argument, at,
               fmt::format("prepared '{}' is produced in prepare and consumed in run, not used in {}", r.name,
                           role_name(e.role)));
      }
      classes.emplace(r.lifetime, r.scope);
    }
    if (e.role == Role::destroy && classes.size() > 1)
      fail(ErrorCode::invalid_argument, at, "one destroy export mixes lifetime/scope classes");
  }
  for (const auto& name : consumed) {
    if (!produced.count(name))
      fail(ErrorCode::invalid_argument, where,
           fmt::format("prepared '{}' is consumed in run but no prepare export produces it", name));
  }
  for (const auto& name : produced) {
    if (!consumed.count(name))
      fail(ErrorCode::invalid_argument, where,
           fmt::format("prepared '{}' is produced but no run export consumes it", name));
  }
}

}  // namespace

namespace {

// Runs one checked part of the parse. Without a sink a fault propagates (parse_manifest); with one it is
// recorded and the parse goes on with the next part (scan_manifest reports every problem at once).
template <class F>
bool checked(std::vector<Error>* sink, F&& part) {
  if (sink == nullptr) {
    part();
    return true;
  }
  try {
    part();
    return true;
  } catch (const Error& e) {
    sink->push_back(e);
    return false;
  }
}

// Export names become publication file names: [A-Za-z0-9_.-], 1-128 characters, not starting with '.'.
void require_export_name(const std::string& name, const std::string& where) {
  const bool ok =
      !name.empty() && name.size() <= 128 && name[0] != '.' && std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
      });
  if (!ok)
    fail(ErrorCode::invalid_argument, where,
         fmt::format("export name '{}' is not 1-128 of [A-Za-z0-9_.-] (not starting with '.')", name));
}

AotExport parse_export(const Tbl& x) {
  x.keys({"provider", "name", "factory", "profile_inputs", "bindings", "device_plan"},
         {"role", "plan", "step", "specializes", "prelaunch"});
  AotExport e;
  e.provider = x.str("provider");
  try {
    const ArtifactProvider& p = require_provider(e.provider);
    e.profile_inputs = x.strings("profile_inputs", p.profile_inputs.size());
    require_profile_inputs(p, e.profile_inputs);
  } catch (const Error& err) {
    fail(err.code(), x.at("provider"), err.detail());
  }
  e.name = x.str("name");
  require_export_name(e.name, x.at("name"));
  e.factory = x.str("factory");
  e.bindings = x.strings("bindings", kMaxBindings);
  if (std::set<std::string>(e.bindings.begin(), e.bindings.end()).size() != e.bindings.size()) {
    fail(ErrorCode::invalid_argument, x.at("bindings"), "a binding appears twice");
  }
  e.role = parse_role(x.str_or("role", "run"), x.at("role"));
  e.plan = x.str_or("plan", "default");
  e.step = x.has("step") ? x.integer("step") : 0;
  if (e.step < 0 || e.step > 255) fail(ErrorCode::invalid_argument, x.at("step"), "steps are in [0, 255]");
  for (const auto& s : x.tables("specializes", 32)) {
    s.keys({"expr", "equals"});
    e.specializes.push_back({s.expr("expr"), s.integer("equals")});
  }
  for (const auto& p : x.tables("prelaunch", 8)) {
    p.keys({"op", "target", "value"});
    if (p.str("op") != "fill")
      fail(ErrorCode::unsupported, p.at("op"), "the only prelaunch operation is a bounded fill");
    Prelaunch pl{p.str("target"), p.integer("value")};
    if (pl.value < 0 || pl.value > 255) fail(ErrorCode::invalid_argument, p.at("value"), "a fill value is a byte");
    if (std::find(e.bindings.begin(), e.bindings.end(), pl.target) == e.bindings.end()) {
      fail(ErrorCode::invalid_argument, p.at("target"),
           fmt::format("'{}' is not a binding this export is authorized to write", pl.target));
    }
    e.prelaunch.push_back(std::move(pl));
  }
  e.device_plan = parse_device_plan(x.table("device_plan"), e.bindings);
  return e;
}

std::optional<Manifest> parse_checked(std::string_view toml_text, std::string_view where_view, std::vector<Error>* sink,
                                      Manifest* partial = nullptr) {
  const std::string where(where_view);
  toml::table doc;
  const bool syntax = checked(sink, [&] {
    try {
      doc = toml::parse(toml_text, where_view);
    } catch (const toml::parse_error& e) {
      fail(ErrorCode::parse_error, fmt::format("{}:{}:{}", where, e.source().begin.line, e.source().begin.column),
           std::string(e.description()));
    }
  });
  if (!syntax) return std::nullopt;
  const Tbl top(doc, where);
  bool clean = checked(sink, [&] { top.keys({"ops"}); });
  std::vector<Tbl> ops;
  clean = checked(sink, [&] { ops = top.tables("ops", 64); }) && clean;
  Manifest m;
  std::uint64_t aggregate = 0;
  std::size_t resource_count = 0;
  std::set<std::string> op_names, export_names;
  for (const auto& o : ops) {
    ManifestOp op;
    std::vector<Tbl> resources, exports;
    bool op_clean = checked(sink, [&] {
      o.keys({"name", "entry", "aot_exports"}, {"artifact_resources"});
      op.name = o.str("name");
      op.entry = o.str("entry");
      if (!op_names.insert(op.name).second)
        fail(ErrorCode::invalid_argument, o.at("name"), fmt::format("op '{}' appears twice", op.name));
    });
    op_clean = checked(sink, [&] { resources = o.tables("artifact_resources", kMaxResources); }) && op_clean;
    std::set<std::string> resource_names;
    for (const auto& r : resources) {
      op_clean =
          checked(sink,
                  [&] {
                    op.resources.push_back(parse_resource(r));
                    if (!resource_names.insert(op.resources.back().name).second)
                      fail(ErrorCode::invalid_argument, r.at("name"), "resource declared twice");
                    aggregate += op.resources.back().max_bytes;
                    if (++resource_count > kMaxResources)
                      fail(ErrorCode::invalid_argument, r.path(), fmt::format("more than {} resources", kMaxResources));
                    if (aggregate > kMaxAggregateBytes)
                      fail(ErrorCode::invalid_argument, r.path(),
                           "resources can exceed 128 GiB in all at their bounds");
                  }) &&
          op_clean;
    }
    op_clean = checked(sink,
                       [&] {
                         exports = o.tables("aot_exports", 64);
                         if (exports.empty())
                           fail(ErrorCode::parse_error, o.at("aot_exports"), "an op declares at least one export");
                       }) &&
               op_clean;
    for (const auto& x : exports) {
      op_clean =
          checked(sink,
                  [&] {
                    AotExport e = parse_export(x);
                    if (!export_names.insert(e.name).second)
                      fail(ErrorCode::invalid_argument, x.at("name"), fmt::format("export '{}' appears twice", e.name));
                    op.exports.push_back(std::move(e));
                  }) &&
          op_clean;
    }
    // The checks across an op's exports run only over a complete op (a partial one would report noise).
    if (op_clean) {
      op_clean = checked(sink, [&] {
        // Specialization: among the run exports, the variants of the op's plans form a strict fallback chain.
        std::vector<Specialization> variants;
        for (const auto& e : op.exports) {
          if (e.role == Role::run) variants.push_back({e.plan + "/" + e.name, e.specializes});
        }
        try {
          check_specializations(variants);
        } catch (const Error& err) {
          fail(ErrorCode::invalid_argument, o.at("aot_exports"), err.detail());
        }
        check_lifecycle(op, o.path());
      });
    }
    clean = clean && op_clean;
    m.ops.push_back(std::move(op));
  }
  clean = checked(sink,
                  [&] {
                    if (ops.empty())
                      fail(ErrorCode::parse_error, where + ".ops", "a manifest declares at least one op");
                  }) &&
          clean;
  if (!clean) {
    if (partial != nullptr) *partial = std::move(m);
    return std::nullopt;
  }
  m.capability_requirements = derive_capability_requirements(m);
  return m;
}

}  // namespace

std::optional<std::uint64_t> resource_bytes(const ArtifactResource& r,
                                            const std::function<std::int64_t(const ShapeFactor&)>& value) {
  std::uint64_t elements = 1;
  for (const auto& d : r.shape) {
    std::uint64_t product = 1;
    for (const auto& f : d.factors) {
      const std::int64_t v = f.constant > 0 ? f.constant : value(f);
      if (v <= 0 || __builtin_mul_overflow(product, static_cast<std::uint64_t>(v), &product)) return std::nullopt;
    }
    const auto divisor = static_cast<std::uint64_t>(d.divisor);
    if (__builtin_mul_overflow(elements, product / divisor + (product % divisor != 0 ? 1 : 0), &elements))
      return std::nullopt;
  }
  std::uint64_t bytes = 0;
  if (__builtin_mul_overflow(elements, static_cast<std::uint64_t>(dtype_size(r.dtype)), &bytes)) return std::nullopt;
  return bytes;
}

Manifest parse_manifest(std::string_view toml_text, std::string_view where) {
  return *parse_checked(toml_text, where, nullptr);
}

ManifestScan scan_manifest(std::string_view toml_text, std::string_view where) {
  ManifestScan scan;
  scan.manifest = parse_checked(toml_text, where, &scan.problems, &scan.partial);
  return scan;
}

Json derive_capability_requirements(const Manifest& m) {
  std::set<std::string> provider, specialization;
  for (const auto& op : m.ops) {
    for (const auto& e : op.exports) {
      const ArtifactProvider& p = require_provider(e.provider);
      provider.insert(p.aot_feature());
      provider.insert(std::string(p.rebuild_feature));
      for (const auto& in : e.profile_inputs) provider.insert("profile_input:" + in);
      for (const auto& s : e.specializes) specialization.insert(s.key());
    }
  }
  return {{"provider_capability_requirements", Json(std::vector<std::string>(provider.begin(), provider.end()))},
          {"specialization_capability_requirements",
           Json(std::vector<std::string>(specialization.begin(), specialization.end()))}};
}

void require_capability_requirements(const Manifest& m, const Json& recorded) {
  const Json derived = derive_capability_requirements(m);
  if (!(derived == recorded)) {
    throw_error(
        ErrorCode::invalid_argument, "seal.manifest",
        fmt::format("recorded capability requirements {} differ from the derived {}", recorded.dump(), derived.dump()));
  }
}

std::set<std::string, std::less<>> tensor_bindings(const ManifestOp& op, const AotExport& e) {
  std::set<std::string, std::less<>> names(e.bindings.begin(), e.bindings.end());
  for (const auto& r : op.resources) names.erase(r.name);
  for (const auto& l : e.device_plan.launches) names.erase(l.stream);
  return names;
}

}  // namespace pact::seal

#include "pact/seal/manifest_checks.inc"
