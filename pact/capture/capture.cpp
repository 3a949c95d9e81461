#include "pact/capture/capture.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <unordered_map>

#include "pact/contract/check.hpp"
#include "pact/core/checked_math.hpp"
#include "pact/kernels/kernel.hpp"

namespace pact::capture {

using runtime::EagerTensor;
using runtime::SourceKind;

std::string_view row_state_name(RowState s) noexcept {
  switch (s) {
    case RowState::hypothesis:
      return "hypothesis";
    case RowState::corroborated:
      return "corroborated";
    case RowState::refuted:
      return "refuted";
  }
  return "hypothesis";
}

namespace {

std::string_view kind_name(SourceKind k) {
  switch (k) {
    case SourceKind::input:
      return "input";
    case SourceKind::parameter:
      return "parameter";
    case SourceKind::buffer:
      return "buffer";
  }
  return "input";
}

SourceKind parse_kind(const std::string& s, std::string_view where) {
  if (s == "input") return SourceKind::input;
  if (s == "parameter") return SourceKind::parameter;
  if (s == "buffer") return SourceKind::buffer;
  throw_error(ErrorCode::parse_error, "capture.load", fmt::format("{}: unknown source kind '{}'", where, s));
}

Json type_json(const ops::TensorType& t) {
  return Json{{"dtype", std::string(dtype_name(t.dtype))},
              {"shape", std::vector<std::int64_t>(t.shape.begin(), t.shape.end())}};
}

// A type read from an artifact: every extent a non-negative int64, the element and byte counts within int64
// (the memory estimate and the discharge multiply them).
ops::TensorType type_from_json(const Json& j) {
  ops::TensorType t{parse_dtype(j.at("dtype").get<std::string>()), {}};
  const Json& shape = j.at("shape");
  if (!shape.is_array() || shape.size() > static_cast<std::size_t>(kMaxRank))
    throw_error(ErrorCode::parse_error, "capture.load", "a shape is not a list of at most 8 extents");
  for (const Json& e : shape) {
    const auto x = json_int64(e);
    if (!x || *x < 0) throw_error(ErrorCode::parse_error, "capture.load", "a shape extent is not a non-negative int64");
    t.shape.push_back(*x);
  }
  const auto n = ops::checked_numel(t.shape);
  if (!n || !core::checked_mul(*n, static_cast<std::int64_t>(dtype_size(t.dtype))))
    throw_error(ErrorCode::parse_error, "capture.load",
                fmt::format("shape {} has more elements or bytes than int64 holds", t.shape.to_string()));
  return t;
}

std::string type_text(const ops::TensorType& t) {
  return fmt::format("{}{}", dtype_name(t.dtype), t.shape.to_string());
}

std::int64_t bytes_of(const ops::TensorType& t) {
  return ops::numel(t.shape) * static_cast<std::int64_t>(dtype_size(t.dtype));
}

std::string parent_module(std::string_view name) {
  const auto dot = name.rfind('.');
  return dot == std::string_view::npos ? std::string{} : std::string(name.substr(0, dot));
}

// The entry gate: every request the table refuses, in the table's order.
void entry_gate(const CaptureOptions& o) {
  if (!o.structure_only) {
    // A real capture records structure and measured times; it offers none of these either.
    if (o.values || o.previews || o.nonfinite_halt || o.runnable_save || o.runnable_ready || o.replay || o.validate ||
        o.backward || o.episode || o.distributed || o.fake_tensor || o.symbolic_shapes) {
      throw_error(
          ErrorCode::unsupported, "capture",
          "pact captures record structure (and, when real, measured times): values, previews, halts, runnable "
          "artifacts, replay, validation, backward, episodes, distributed, fake-tensor and symbolic captures are "
          "not offered");
    }
    return;
  }
  if (o.values) require_structure_only_capability("value_payloads", "CaptureOptions::values");
  if (o.previews) require_structure_only_capability("previews", "CaptureOptions::previews");
  if (o.nonfinite_halt) require_structure_only_capability("nonfinite_predicates", "CaptureOptions::nonfinite_halt");
  if (o.runnable_ready)
    require_structure_only_capability("runnable_ready_composition", "CaptureOptions::runnable_ready");
  if (o.runnable_save) require_structure_only_capability("save_runnable", "CaptureOptions::runnable_save");
  if (o.replay) require_structure_only_capability("live_replay", "CaptureOptions::replay");
  if (o.validate) require_structure_only_capability("validation_entry", "CaptureOptions::validate");
  if (o.backward) require_structure_only_capability("backward_grads", "CaptureOptions::backward");
  if (o.episode) require_structure_only_capability("episode_composition", "CaptureOptions::episode");
  if (o.distributed) require_structure_only_capability("distributed", "CaptureOptions::distributed");
  if (o.fake_tensor) require_structure_only_capability("fake_tensor_substrate", "CaptureOptions::fake_tensor");
  if (o.symbolic_shapes) require_structure_only_capability("symbolic_shapes", "CaptureOptions::symbolic_shapes");
  if (o.optimizer != "sgd" && o.optimizer != "sgd-momentum" && o.optimizer != "adam" && o.optimizer != "adamw") {
    throw_error(ErrorCode::invalid_argument, "capture",
                fmt::format("unknown optimizer '{}' (sgd, sgd-momentum, adam, adamw)", o.optimizer));
  }
}

// Records sources and ops as the session runs them.
class Recorder : public runtime::StructureObserver {
 public:
  Recorder(StructureCapture& c, bool structure_only) : c_(c), structure_only_(structure_only) {}

  void on_source(const EagerTensor& value, const std::string& name, SourceKind kind, bool persistent, bool trainable,
                 const std::string& module) override {
    const void* key = value.value.get();
    if (auto it = id_of_.find(key); it != id_of_.end()) {  // tied: the same object under another name
      for (auto& s : c_.sources) {
        if (s.name == it->second) s.tied.push_back(name);
      }
      return;
    }
    check_substrate(value, name, kind);
    if (c_.find_source(name) != nullptr || ids_.count(name)) {
      throw_error(ErrorCode::invalid_argument, "capture", fmt::format("source name '{}' is registered twice", name));
    }
    c_.sources.push_back(CapturedSource{name, kind, {value.dtype(), value.shape()}, persistent, trainable, {}, module});
    if (!structure_only_ && kind == SourceKind::parameter) {
      c_.measured_parameter_bytes = std::max<std::int64_t>(c_.measured_parameter_bytes, 0) +
                                    value.view().numel() * static_cast<std::int64_t>(dtype_size(value.dtype()));
    }
    id_of_[key] = name;
    ids_.insert(name);
    keep_.push_back(value);
    last_ = std::chrono::steady_clock::now();
    macs_at_ = kernels::macs_performed();
  }

  void on_op(ops::OpTag op, std::span<const EagerTensor> inputs, const ops::Attributes& attrs,
             const EagerTensor& output, std::string_view name, const std::string& module) override {
    const auto now = std::chrono::steady_clock::now();
    CapturedOp rec;
    rec.op = op;
    rec.attrs = attrs;
    rec.module = !module.empty() ? module : parent_module(name);
    std::vector<ops::TensorType> in_types;
    for (const auto& in : inputs) {
      rec.inputs.push_back(id_for(in));
      in_types.push_back({in.dtype(), in.shape()});
    }
    rec.type = {output.dtype(), output.shape()};
    rec.flops = ops::estimate_flops(op, in_types, rec.type, attrs);
    std::string base =
        !name.empty() ? std::string(name)
                      : (module.empty() ? std::string(ops::op_kind(op)) : module + "." + std::string(ops::op_kind(op)));
    rec.id = base;
    for (int i = 1; ids_.count(rec.id); ++i) rec.id = fmt::format("{}_{}", base, i);
    ids_.insert(rec.id);
    if (!structure_only_) {
      rec.measured_us = std::chrono::duration<double, std::micro>(now - last_).count();
      rec.measured_macs = static_cast<std::int64_t>(kernels::macs_performed() - macs_at_);
    }
    id_of_[output.value.get()] = rec.id;
    keep_.push_back(output);
    c_.ops.push_back(std::move(rec));
    last_ = std::chrono::steady_clock::now();
    macs_at_ = kernels::macs_performed();
  }

  /// True when `v` is the record of a named source or an unnamed constant.
  bool is_source(const void* v) const {
    auto it = id_of_.find(v);
    return it != id_of_.end() && c_.find_source(it->second) != nullptr;
  }

  std::string id_for(const EagerTensor& t) {
    const void* key = t.value.get();
    if (auto it = id_of_.find(key); it != id_of_.end()) return it->second;
    // An unnamed constant made by model code (a mask, a scale): recorded as a non-persistent buffer.
    std::string name = fmt::format("_const{}", anonymous_++);
    check_substrate(t, name, SourceKind::buffer);
    c_.sources.push_back(CapturedSource{name, SourceKind::buffer, {t.dtype(), t.shape()}, false, false, {}, ""});
    id_of_[key] = name;
    ids_.insert(name);
    keep_.push_back(t);
    return name;
  }

 private:
  void check_substrate(const EagerTensor& v, const std::string& name, SourceKind kind) {
    const bool meta = v.view().provider_name() == "meta";
    if (meta == structure_only_) {
      if (meta)
        first_meta_ = first_meta_.empty() ? name : first_meta_;
      else
        first_real_ = first_real_.empty() ? name : first_real_;
      return;
    }
    if (structure_only_) require_structure_only_capability("substrate_uniformity");
    const std::string other = structure_only_ ? first_meta_ : first_real_;
    refuse_structure_only(kSubstrateMismatch, "capture",
                          fmt::format("{} '{}' is {} ({}) but {}{}", kind_name(kind), name, meta ? "meta" : "real",
                                      v.view().provider_name(),
                                      structure_only_ ? "a structure-only capture needs every input and parameter meta"
                                                      : "a real capture needs every input and parameter real",
                                      other.empty() ? "" : fmt::format(" (as '{}' is)", other)));
  }

  StructureCapture& c_;
  bool structure_only_;
  std::unordered_map<const void*, std::string> id_of_;
  std::set<std::string> ids_;
  std::vector<EagerTensor> keep_;  // keeps recorded values alive so their identities stay unique
  std::string first_meta_, first_real_;
  int anonymous_ = 0;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
  std::uint64_t macs_at_ = kernels::macs_performed();
};

Json graph_shape_json(const StructureCapture& c) {
  Json sources = Json::array();
  for (const auto& s : c.sources) {
    sources.push_back(Json{{"name", s.name},
                           {"kind", std::string(kind_name(s.kind))},
                           {"type", type_json(s.type)},
                           {"persistent", s.persistent},
                           {"trainable", s.trainable},
                           {"tied", s.tied},
                           {"module", s.module}});
  }
  Json ops_json = Json::array();
  for (const auto& o : c.ops) {
    ops_json.push_back(Json{{"id", o.id},
                            {"op", std::string(ops::op_kind(o.op))},
                            {"inputs", o.inputs},
                            {"attrs", ir::attributes_to_json(o.attrs)},
                            {"module", o.module}});
  }
  return Json{{"sources", sources}, {"ops", ops_json}, {"outputs", c.outputs}};
}

// The graph without source geometry: what a discharge requires to agree (source types are hypotheses it
// checks against the loaded tensors).
Json structure_json(const StructureCapture& c) {
  Json g = graph_shape_json(c);
  for (auto& s : g["sources"]) s.erase("type");
  return g;
}

std::string meta_content_digest(const StructureCapture& c) {
  Json hyp = Json::array();
  for (const auto& o : c.ops) hyp.push_back(type_json(o.type));
  return digest_json(kMetaContentDomain,
                     Json{{"graph_shape", c.graph_shape_digest}, {"hypotheses", hyp}, {"values", "absent"}});
}

}  // namespace

// ---- substrate --------------------------------------------------------------------------------------

Tensor Substrate::parameter(const Dims& shape, double scale, DType dtype) {
  if (meta_) return Tensor::empty(shape, dtype, meta_provider());
  std::normal_distribution<double> nd(0.0, scale);
  std::vector<double> v(static_cast<std::size_t>(ops::numel(shape)));
  for (auto& x : v) x = nd(rng_);
  Tensor t = Tensor::from_values<double>(shape, v);
  return dtype == DType::f64 ? std::move(t) : t.convert(dtype);
}

Tensor Substrate::filled(const Dims& shape, double value, DType dtype) {
  return meta_ ? Tensor::empty(shape, dtype, meta_provider()) : Tensor::full(shape, dtype, value);
}

Tensor Substrate::input(const Dims& shape, DType dtype, std::int64_t bound) {
  if (meta_) return Tensor::empty(shape, dtype, meta_provider());
  std::vector<double> v(static_cast<std::size_t>(ops::numel(shape)));
  if (is_floating(dtype)) {
    std::normal_distribution<double> nd;
    for (auto& x : v) x = nd(rng_);
  } else {
    std::uniform_int_distribution<std::int64_t> ud(0, std::max<std::int64_t>(bound, 1) - 1);
    for (auto& x : v) x = static_cast<double>(ud(rng_));
  }
  Tensor t = Tensor::from_values<double>(shape, v);
  return dtype == DType::f64 ? std::move(t) : t.convert(dtype);
}

// ---- capture ----------------------------------------------------------------------------------------

StructureCapture capture(const ModelFn& model, const CaptureOptions& options) {
  entry_gate(options);
  StructureCapture c;
  c.structure_only = options.structure_only;
  runtime::Session session(contract::builtin_profile("cpu-checked"), options.seed);
  session.set_structure_only(options.structure_only);
  // A real capture records its tape, so the discharge can compare the bytes it retains for backward with
  // the estimate; nothing runs backward.
  session.set_grad_enabled(!options.structure_only);
  Recorder recorder(c, options.structure_only);
  session.set_observer(&recorder);
  Substrate substrate(options.structure_only, options.seed);
  std::vector<EagerTensor> outs;
  const auto start = std::chrono::steady_clock::now();
  try {
    outs = model(session, substrate);
  } catch (const Refusal&) {
    throw;
  } catch (const Error& e) {
    if (!options.structure_only) throw;
    // The typed backstop: a failure of the meta mechanism that no enumerated refusal names.
    refuse_structure_only(kBackstop, "capture", fmt::format("under meta: {}", e.what()));
  }
  if (!options.structure_only) {
    c.measured_total_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    c.measured_saved_bytes = static_cast<std::int64_t>(
        session.tape().retained_bytes([&](const runtime::AdValueRecord* v) { return recorder.is_source(v); }));
  }
  for (const auto& o : outs) c.outputs.push_back(recorder.id_for(o));
  if (c.outputs.empty()) throw_error(ErrorCode::invalid_argument, "capture", "the model returned no outputs");
  c.graph_shape_digest = digest_json(kGraphShapeDomain, graph_shape_json(c));
  if (options.structure_only) {
    c.content_domain = std::string(kMetaContentDomain);
    c.content_digest = meta_content_digest(c);
  } else {
    Json observed = Json::array();
    for (const auto& o : c.ops) observed.push_back(type_json(o.type));
    Json values = Json::array();
    for (const auto& o : outs) {
      Tensor d = o.view().convert(DType::f64);
      auto p = d.prepare_host<double>();
      values.push_back(to_hex(sha256(std::as_bytes(std::get<PreparedContiguousRead<double>>(p.value()).as_span()))));
    }
    c.content_domain = std::string(kValueContentDomain);
    c.content_digest = digest_json(kValueContentDomain, Json{{"graph_shape", c.graph_shape_digest},
                                                             {"observed", observed},
                                                             {"output_values_sha256", values},
                                                             {"seed", options.seed}});
  }
  return c;
}

ModelFn graph_model(const ir::Graph& graph, const std::map<std::string, TensorView>* weights) {
  return [&graph, weights](runtime::Session& s, Substrate& sub) {
    std::map<std::string, EagerTensor> bindings;
    for (const auto& n : graph.nodes) {
      if (ops::op_info(n.op).role != ops::OpRole::source) continue;
      auto value = [&](double scale) -> Tensor {
        if (weights != nullptr && !sub.meta()) {
          auto it = weights->find(n.id);
          if (it != weights->end()) return it->second.duplicate();
        }
        // Integer inputs (class targets, token ids) draw from {0, 1}: valid for any class count or vocabulary.
        if (n.op == ops::OpTag::input) return sub.input(n.type.shape, n.type.dtype, 2);
        if (n.buffer && n.id.find("var") != std::string::npos) return sub.filled(n.type.shape, 1.0, n.type.dtype);
        return sub.parameter(n.type.shape, scale, n.type.dtype);
      };
      if (n.op == ops::OpTag::input) {
        bindings.emplace(n.id, s.input(n.id, value(1.0)));
      } else if (n.op == ops::OpTag::parameter && n.buffer) {
        bindings.emplace(n.id, s.buffer(n.id, value(0.1)));
      } else if (n.op == ops::OpTag::parameter) {
        bindings.emplace(n.id, s.parameter(n.id, value(0.1), n.differentiable));
      } else {
        bindings.emplace(n.id, s.buffer(n.id, value(0.1), false));
      }
    }
    // The graph as model code: each op through the eager API, as a C++ model applies it, so the capture
    // (structure-only or real) sees exactly what model code would run. Not a second interpreter: no
    // admission of its own, no recording of its own (Session::apply does both).
    std::map<std::string, EagerTensor> values = bindings;
    for (const auto& n : graph.nodes) {
      const auto role = ops::op_info(n.op).role;
      if (role == ops::OpRole::source) continue;
      std::vector<EagerTensor> in;
      for (const auto& id : n.inputs) in.push_back(values.at(id));
      values.emplace(n.id, role == ops::OpRole::sink ? in[0] : s.apply(n.op, in, n.attrs, n.id));
    }
    std::vector<EagerTensor> result;
    for (const auto& o : graph.outputs) result.push_back(values.at(o));
    return result;
  };
}

// ---- queries ----------------------------------------------------------------------------------------

const CapturedSource* StructureCapture::find_source(std::string_view name) const noexcept {
  for (const auto& s : sources) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

const CapturedOp* StructureCapture::find_op(std::string_view id) const noexcept {
  for (const auto& o : ops) {
    if (o.id == id) return &o;
  }
  return nullptr;
}

std::int64_t StructureCapture::parameter_bytes() const noexcept {
  std::int64_t n = 0;
  for (const auto& s : sources) n += s.kind == SourceKind::parameter ? bytes_of(s.type) : 0;
  return n;
}

std::int64_t StructureCapture::parameter_count() const noexcept {
  std::int64_t n = 0;
  for (const auto& s : sources) {
    if (s.kind == SourceKind::parameter) n += ops::numel(s.type.shape);
  }
  return n;
}

std::int64_t StructureCapture::flops() const noexcept {
  std::int64_t n = 0;
  for (const auto& o : ops) n += o.flops;
  return n;
}

std::int64_t StructureCapture::macs() const noexcept {
  std::int64_t n = 0;
  for (const auto& o : ops) {
    if (ops::op_info(o.op).tolerance_class == ops::ToleranceClass::contraction) n += o.flops / 2;
  }
  return n;
}

namespace {
void refuse_refuted(const StructureCapture& c, std::string_view consumer) {
  for (const auto& o : c.ops) {
    if (o.state() == RowState::refuted) {
      require_structure_only_capability("refuted_rows");
      refuse_structure_only(kRefutedRow, std::string(consumer),
                            fmt::format("op '{}' was refuted by discharge (hypothesis {}, observed {})", o.id,
                                        type_text(o.type), type_text(*o.observed())));
    }
  }
}
}  // namespace

std::int64_t StructureCapture::saved_for_backward_bytes() const {
  std::set<std::string> tracked;  // values that derive from a trainable parameter
  for (const auto& s : sources) {
    if (s.kind == SourceKind::parameter && s.trainable) tracked.insert(s.name);
  }
  std::map<std::string, std::int64_t> op_bytes;
  std::set<std::string> saved;
  for (const auto& o : ops) {
    op_bytes[o.id] = bytes_of(o.type);
    const bool recorded =
        std::any_of(o.inputs.begin(), o.inputs.end(), [&](const std::string& in) { return tracked.count(in) > 0; });
    if (!recorded) continue;
    tracked.insert(o.id);
    const ops::OpInfo& info = ops::op_info(o.op);
    for (std::size_t k = 0; k < o.inputs.size(); ++k) {
      if (info.saves_input(k) && op_bytes.count(o.inputs[k])) saved.insert(o.inputs[k]);  // op outputs only
    }
    if (info.saves_output()) saved.insert(o.id);
  }
  std::int64_t bytes = 0;
  for (const auto& id : saved) bytes += op_bytes.at(id);
  return bytes;
}

MemoryEstimate StructureCapture::memory(const std::string& optimizer) const {
  refuse_refuted(*this, "capture.memory");
  MemoryEstimate m;
  m.optimizer = optimizer;
  std::map<std::string, std::int64_t> live;  // value id -> bytes
  std::map<std::string, int> uses;
  for (const auto& o : ops) {
    for (const auto& in : o.inputs) ++uses[in];
  }
  for (const auto& o : outputs) ++uses[o];
  std::int64_t current = 0;
  m.parameters = parameter_bytes();
  for (const auto& s : sources) {
    const std::int64_t b = bytes_of(s.type);
    if (s.kind == SourceKind::buffer) {
      m.buffers += b;
    } else if (s.kind != SourceKind::parameter) {
      live[s.name] = b;
      current += b;
    }
  }
  m.activations_peak = current;
  m.activations_saved = saved_for_backward_bytes();
  for (const auto& o : ops) {
    const bool view = ops::op_info(o.op).role == ops::OpRole::view;
    const std::int64_t b = view ? 0 : bytes_of(o.type);
    live[o.id] = b;
    current += b;
    m.activations_peak = std::max(m.activations_peak, current);
    for (const auto& in : o.inputs) {
      auto it = live.find(in);
      if (it != live.end() && --uses[in] == 0) {
        current -= it->second;
        live.erase(it);
      }
    }
  }
  m.gradients = m.parameters;  // one gradient element per parameter element
  if (optimizer == "adam" || optimizer == "adamw")
    m.optimizer_state = 2 * m.parameters;
  else if (optimizer == "sgd-momentum")
    m.optimizer_state = m.parameters;
  else if (optimizer != "sgd")
    throw_error(ErrorCode::invalid_argument, "capture.memory", fmt::format("unknown optimizer '{}'", optimizer));
  return m;
}

std::vector<std::pair<std::string, std::int64_t>> StructureCapture::module_tree() const {
  std::map<std::string, std::int64_t> per;
  for (const auto& s : sources) {
    if (s.kind != SourceKind::parameter) continue;
    const std::int64_t n = ops::numel(s.type.shape);
    per[""] += n;
    std::string path = parent_module(s.name);
    while (!path.empty()) {
      per[path] += n;
      path = parent_module(path);
    }
  }
  return {per.begin(), per.end()};
}

// ---- discharge --------------------------------------------------------------------------------------

struct DischargeAuthority {
  static void set(CapturedOp& o, RowState s, const ops::TensorType& observed) {
    o.state_ = s;
    o.observed_ = observed;
  }
};

DischargeReport discharge(StructureCapture& h, const StructureCapture& real) {
  require_structure_only_capability("discharge");
  if (!h.structure_only) {
    throw_error(ErrorCode::invalid_argument, "capture.discharge",
                "only a structure-only capture holds hypotheses to discharge");
  }
  if (real.structure_only) {
    throw_error(ErrorCode::invalid_argument, "capture.discharge",
                "discharge needs a real capture (values computed), not another structure-only one");
  }
  if (h.ops.size() != real.ops.size() || h.sources.size() != real.sources.size() ||
      structure_json(h) != structure_json(real)) {
    refuse_structure_only(kGraphMismatch, "capture.discharge",
                          fmt::format("the graphs differ in ops, edges, attributes or source names (graph-shape "
                                      "digests {} vs {}): the real capture is of another graph",
                                      h.graph_shape_digest, real.graph_shape_digest));
  }
  DischargeReport r;
  r.against = real.content_digest;
  for (std::size_t i = 0; i < h.ops.size(); ++i) {
    const bool ok = h.ops[i].type == real.ops[i].type;
    DischargeAuthority::set(h.ops[i], ok ? RowState::corroborated : RowState::refuted, real.ops[i].type);
    if (ok) {
      ++r.corroborated;
    } else {
      ++r.refuted;
      r.refuted_ops.push_back(h.ops[i].id);
      r.refuted_rows.push_back(fmt::format("op {}: hypothesis {}, observed {}", h.ops[i].id, type_text(h.ops[i].type),
                                           type_text(real.ops[i].type)));
    }
  }
  auto check = [&](DischargeCheck c) {
    (c.ok ? r.corroborated : r.refuted) += 1;
    if (!c.ok)
      r.refuted_rows.push_back(
          fmt::format("{}: estimate {}, measured {} ({})", c.row, c.estimate, c.measured, c.margin));
    r.checks.push_back(std::move(c));
  };
  // Sources: the declared dtype and geometry against the tensors the real run loaded.
  for (std::size_t i = 0; i < h.sources.size(); ++i) {
    const auto& hs = h.sources[i];
    const auto& rs = real.sources[i];
    check({fmt::format("{} {}", kind_name(hs.kind), hs.name), type_text(hs.type), type_text(rs.type), "exact",
           hs.type == rs.type});
  }
  // Parameter bytes: the estimate (tied parameters once) against the bytes loaded.
  const std::int64_t estimated_bytes = h.parameter_bytes();
  check({"parameter bytes", std::to_string(estimated_bytes), std::to_string(real.measured_parameter_bytes), "exact",
         estimated_bytes == std::max<std::int64_t>(real.measured_parameter_bytes, 0)});
  // Saved for backward: the estimate against what the real run's tape retained, beyond its sources.
  const std::int64_t estimated_saved = h.saved_for_backward_bytes();
  check({"bytes saved for backward", std::to_string(estimated_saved), std::to_string(real.measured_saved_bytes),
         "exact", estimated_saved == real.measured_saved_bytes});
  // Work: each op's estimated multiply-accumulates against the kernels' count.
  for (std::size_t i = 0; i < h.ops.size(); ++i) {
    const auto& o = h.ops[i];
    const bool contraction = ops::op_info(o.op).tolerance_class == ops::ToleranceClass::contraction;
    const std::int64_t estimate = contraction ? o.flops / 2 : 0;
    const std::int64_t measured = real.ops[i].measured_macs;
    const bool ok = measured >= 0 && static_cast<double>(measured) >= kMacsMarginLow * static_cast<double>(estimate) &&
                    static_cast<double>(measured) <= kMacsMarginHigh * static_cast<double>(estimate);
    check({fmt::format("multiply-accumulates of {}", o.id), std::to_string(estimate), std::to_string(measured),
           estimate == 0 ? std::string("none")
                         : fmt::format("within [{}, {}] x the estimate", kMacsMarginLow, kMacsMarginHigh),
           ok});
  }
  h.discharged_against = real.content_digest;
  return r;
}

// ---- plan check -------------------------------------------------------------------------------------

bool PlanCheckReport::consistent() const noexcept {
  for (const auto& r : rows) {
    if (!r.multiplicity_ok || !r.disagreements.empty() || r.matched.empty()) return false;
  }
  return true;
}

PlanCheckReport check_plan(const StructureCapture& c, const std::vector<PlanEntry>& plan) {
  require_structure_only_capability("plan_shape_check");
  PlanCheckReport report;
  for (const auto& e : plan) {
    const auto colon = e.selector.find(':');
    const std::string kind = colon == std::string::npos ? "" : e.selector.substr(0, colon);
    const std::string arg = colon == std::string::npos ? "" : e.selector.substr(colon + 1);
    if (kind == "fn" || kind == "value") {
      refuse_structure_only(
          kPlanCheckUnsupported, "capture.check_plan",
          fmt::format("selector '{}': callables and value-derived selection cannot be resolved without values",
                      e.selector));
    }
    if (kind != "node" && kind != "op" && kind != "module") {
      throw_error(ErrorCode::invalid_argument, "capture.check_plan",
                  fmt::format("selector '{}' is not node:<id>, op:<kind> or module:<path>", e.selector));
    }
    PlanCheckRow row;
    row.selector = e.selector;
    for (const auto& o : c.ops) {
      const bool hit = kind == "node" ? o.id == arg
                       : kind == "op" ? ops::op_kind(o.op) == arg
                                      : (o.module == arg || o.module.rfind(arg + ".", 0) == 0);
      if (!hit) continue;
      if (o.state() == RowState::refuted) {
        refuse_structure_only(
            kRefutedRow, "capture.check_plan",
            fmt::format("selector '{}' resolves to op '{}', which discharge refuted", e.selector, o.id));
      }
      row.matched.push_back(o.id);
      if (!(o.type == e.declared)) {
        row.disagreements.push_back(
            fmt::format("{}: hypothesis {} vs declared {}", o.id, type_text(o.type), type_text(e.declared)));
      }
    }
    if (e.multiplicity) row.multiplicity_ok = row.matched.size() == *e.multiplicity;
    report.rows.push_back(std::move(row));
  }
  return report;
}

#include "pact/capture/capture_artifacts.inc"

}  // namespace pact::capture
