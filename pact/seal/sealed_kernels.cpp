#include "pact/seal/sealed_kernels.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "pact/core/file.hpp"
#include "pact/core/toml_table.hpp"

namespace pact::seal {

namespace {

[[noreturn]] void refuse(ErrorCode code, const std::string& where, const std::string& why) {
  throw_error(code, "seal.bindings", fmt::format("{}: {}", where, why));
}

TomlFaults& binding_faults() {
  static ThrowingTomlFaults faults("seal.bindings");
  return faults;
}

// The binding file's TOML; a syntax error is parse_error naming the line and column.
toml::table parse_toml(std::string_view text, std::string_view where) {
  try {
    return toml::parse(text, where);
  } catch (const toml::parse_error& e) {
    refuse(ErrorCode::parse_error, fmt::format("{}:{}:{}", where, e.source().begin.line, e.source().begin.column),
           std::string(e.description()));
  }
}

}  // namespace

std::vector<SealedBinding> parse_sealed_bindings(std::string_view toml_text, std::string_view where,
                                                 const Manifest& manifest) {
  const toml::table doc = parse_toml(toml_text, where);
  const TomlTable top(doc, std::string(where), binding_faults());
  top.keys({"schema", "bind"}, {"publication", "manifest", "launch_profile"});
  if (*top.str("schema") != kSealedBindingsSchema)
    refuse(ErrorCode::unsupported, top.at("schema"),
           fmt::format("'{}' is not {}", printable(*top.str("schema")), kSealedBindingsSchema));
  std::vector<SealedBinding> out;
  std::set<ops::OpTag> bound;
  for (const TomlTable& t : top.tables("bind", true, kMaxSealedBindings)) {
    t.keys({"op", "inputs", "output", "dtype"});
    SealedBinding b;
    const std::string op_name = *t.str("op");
    try {
      b.op = ops::parse_op_kind(op_name);
    } catch (const Error&) {
      refuse(ErrorCode::unsupported, t.at("op"), fmt::format("'{}' is not an op of the op table", printable(op_name)));
    }
    const ops::OpInfo& info = ops::op_info(b.op);
    if (info.role != ops::OpRole::kernel)
      refuse(ErrorCode::unsupported, t.at("op"), fmt::format("'{}' is not a kernel op", op_name));
    if (!bound.insert(b.op).second)
      refuse(ErrorCode::invalid_argument, t.at("op"), fmt::format("'{}' bound twice", op_name));
    b.inputs = *t.strings("inputs", true, kMaxBindings);
    b.output = *t.str("output");
    try {
      b.dtype = parse_dtype(*t.str("dtype"));
    } catch (const Error&) {
      refuse(ErrorCode::invalid_argument, t.at("dtype"),
             fmt::format("'{}' is not a dtype", printable(*t.str("dtype"))));
    }
    const auto arity = static_cast<std::int64_t>(b.inputs.size());
    if (arity < info.min_arity || (info.max_arity >= 0 && arity > info.max_arity)) {
      refuse(ErrorCode::invalid_argument, t.at("inputs"),
             fmt::format("{} operands; '{}' takes {}{}", arity, op_name, info.min_arity,
                         info.max_arity == info.min_arity ? ""
                         : info.max_arity < 0             ? " or more"
                                                          : fmt::format(" to {}", info.max_arity)));
    }
    for (std::size_t k = 0; k < b.inputs.size(); ++k) {
      const ops::InputRole role = info.input_role(k);
      if (role == ops::InputRole::index || role == ops::InputRole::mask || role == ops::InputRole::any)
        refuse(ErrorCode::unsupported, t.at("inputs"),
               fmt::format("operand {} of '{}' is an index or mask: an entry has one dtype for every operand", k,
                           op_name));
    }
    std::set<std::string, std::less<>> named(b.inputs.begin(), b.inputs.end());
    if (named.size() != b.inputs.size() || !named.insert(b.output).second)
      refuse(ErrorCode::invalid_argument, t.path(), "an export binding is named twice");
    const ManifestOp* op = nullptr;
    for (const auto& o : manifest.ops) {
      if (o.name == op_name) op = &o;
    }
    if (op == nullptr)
      refuse(ErrorCode::invalid_argument, t.at("op"), fmt::format("the manifest has no op '{}'", op_name));
    bool any = false;
    for (const auto& e : op->exports) {
      if (e.role != Role::run) continue;
      any = true;
      const std::set<std::string, std::less<>> tensors = tensor_bindings(*op, e);
      if (tensors != named) {
        refuse(ErrorCode::invalid_argument, t.path(),
               fmt::format("run export '{}' binds the tensors [{}]; the entry names [{}]", e.name,
                           fmt::join(tensors, ", "), fmt::join(named, ", ")));
      }
    }
    if (!any) refuse(ErrorCode::invalid_argument, t.at("op"), fmt::format("op '{}' has no run export", op_name));
    out.push_back(std::move(b));
  }
  return out;
}

SealedDeployment parse_sealed_deployment(std::string_view toml_text, std::string_view where, const std::string& base) {
  const toml::table doc = parse_toml(toml_text, where);
  const TomlTable top(doc, std::string(where), binding_faults());
  top.keys({"schema", "bind", "publication", "manifest", "launch_profile"});
  auto path = [&](std::string_view key) {
    return (std::filesystem::path(base) / *top.str(key)).lexically_normal().string();
  };
  return {path("publication"), path("manifest"), path("launch_profile")};
}

std::shared_ptr<SealedKernels> load_sealed_kernels(const std::string& binding_file, std::shared_ptr<Provider> device,
                                                   const CudaDriver* driver) {
  const std::string text = read_file(binding_file, "seal.bindings");
  const SealedDeployment d =
      parse_sealed_deployment(text, binding_file, std::filesystem::path(binding_file).parent_path().string());
  const Manifest manifest = parse_manifest(read_file(d.manifest, "seal.bindings"), d.manifest);
  std::vector<SealedBinding> bindings = parse_sealed_bindings(text, binding_file, manifest);
  const CompileProfile profile = parse_compile_profile(read_file(d.launch_profile, "seal.bindings"), d.launch_profile);
  auto runtime = std::make_shared<SealedRuntime>(driver != nullptr ? *driver : load_cuda_driver());
  runtime->admit(d.publication, manifest, profile);
  return std::make_shared<SealedKernels>(std::move(runtime), manifest, std::move(bindings), std::move(device));
}

SealedKernels::SealedKernels(std::shared_ptr<SealedRuntime> runtime, const Manifest& manifest,
                             std::vector<SealedBinding> bindings, std::shared_ptr<Provider> device)
    : runtime_(std::move(runtime)), bindings_(std::move(bindings)), device_(std::move(device)) {
  module_.name = "sealed";
  const std::string identity = execution_identity(manifest);
  for (const auto& b : bindings_) {
    const std::string name(ops::op_kind(b.op));
    for (const auto& op : manifest.ops) {
      if (op.name != name) continue;
      // Admission loads a publication whole (one refused export admits none), so the receipt of the op's
      // first run export stands for the others the runtime may select by specialization.
      const auto first =
          std::find_if(op.exports.begin(), op.exports.end(), [](const AotExport& e) { return e.role == Role::run; });
      contract::Capsule c = sealed_capsule(op, *first, identity);
      c.dtypes = DTypeSet{b.dtype};
      module_.capsules.push_back(std::move(c));
    }
  }
}

contract::BackendProfile SealedKernels::profile(contract::BackendProfile base) const {
  base.modules.push_back(&module_);
  base.providers.emplace_back("sealed");
  if (std::find(base.devices.begin(), base.devices.end(), DeviceKind::cuda) == base.devices.end())
    base.devices.push_back(DeviceKind::cuda);
  auto& preference = base.policy.provider_preference;
  preference.insert(preference.begin(), "sealed");
  return base;
}

Tensor SealedKernels::forward(ops::OpTag op, std::span<const TensorView> inputs, const ops::Attributes& attrs) {
  const std::string name(ops::op_kind(op));
  const auto b = std::find_if(bindings_.begin(), bindings_.end(), [&](const SealedBinding& x) { return x.op == op; });
  if (b == bindings_.end())
    throw_error(ErrorCode::unsupported, "sealed", fmt::format("the sealed publication does not bind '{}'", name));
  if (!attrs.values().empty()) {
    throw_error(ErrorCode::unsupported, "sealed",
                fmt::format("this '{}' node has attributes; a sealed kernel takes none", name));
  }
  if (inputs.size() != b->inputs.size()) {
    throw_error(
        ErrorCode::invalid_argument, "sealed",
        fmt::format("'{}' has {} operands; the sealed binding names {}", name, inputs.size(), b->inputs.size()));
  }
  std::vector<ops::TensorType> types;
  for (const auto& v : inputs) types.push_back({v.dtype(), v.shape()});
  const ops::TensorType result = ops::infer_type(op, types, attrs);
  Tensor out = Tensor::empty(result.shape, result.dtype, device_);
  {
    SealedCall call;
    for (std::size_t i = 0; i < inputs.size(); ++i)
      call.reads.emplace(b->inputs[i], SealedRead{inputs[i], {b->dtype, inputs[i].shape()}});
    call.writes.emplace(b->output, SealedWrite{out.as_view_mut(), {b->dtype, result.shape}});
    runtime_->launch(name, std::move(call));
  }
  return out;
}

}  // namespace pact::seal
