#include "pact/spec/spec.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>

#include "pact/core/file.hpp"

namespace pact::spec {

namespace {

// A YAML node with its place in the file, for errors that say file, line and field.
struct At {
  std::string_view file;
  std::string field;
  YAML::Node node;

  int line() const { return node.IsDefined() ? node.Mark().line + 1 : 0; }
  [[noreturn]] void bad(const std::string& why) const {
    throw_error(ErrorCode::parse_error, "contracts", fmt::format("{}:{}: {}: {}", file, line(), field, why));
  }
  At child(const std::string& key) const {
    if (!node.IsMap()) bad("is not a mapping");
    YAML::Node c = node[key];
    if (!c.IsDefined() || c.IsNull()) bad(fmt::format("missing field '{}'", key));
    return At{file, field.empty() ? key : field + "." + key, c};
  }
  bool has(const std::string& key) const { return node.IsMap() && node[key].IsDefined() && !node[key].IsNull(); }
  void only(std::initializer_list<const char*> keys) const {
    if (!node.IsMap()) bad("is not a mapping");
    for (const auto& kv : node) {
      const std::string k = kv.first.as<std::string>();
      if (std::find_if(keys.begin(), keys.end(), [&](const char* x) { return k == x; }) == keys.end()) {
        At{file, field.empty() ? k : field + "." + k, kv.first}.bad("unknown field");
      }
    }
  }
  std::string str() const {
    if (!node.IsScalar()) bad("is not a string");
    const std::string s = node.as<std::string>();
    if (s.empty()) bad("is empty");
    return s;
  }
  double number() const {
    if (!node.IsScalar()) bad("is not a number");
    try {
      return node.as<double>();
    } catch (const YAML::Exception&) {
      bad(fmt::format("'{}' is not a number", node.as<std::string>()));
    }
  }
  int integer() const {
    if (!node.IsScalar()) bad("is not an integer");
    try {
      return node.as<int>();
    } catch (const YAML::Exception&) {
      bad(fmt::format("'{}' is not an integer", node.as<std::string>()));
    }
  }
  std::vector<At> items() const {
    if (!node.IsSequence()) bad("is not a list");
    std::vector<At> out;
    for (std::size_t i = 0; i < node.size(); ++i) out.push_back(At{file, fmt::format("{}[{}]", field, i), node[i]});
    return out;
  }
  std::vector<std::string> strings() const {
    std::vector<std::string> out;
    for (const auto& i : items()) out.push_back(i.str());
    return out;
  }
};

// yaml-cpp recurses once per nesting level: bound the nesting (flow brackets and block indentation) and the
// size before handing it the text, so a hostile document cannot exhaust the stack.
constexpr std::size_t kMaxDocument = 1 << 20;
constexpr int kMaxFlowDepth = 64;
constexpr int kMaxIndent = 256;

void check_shape(std::string_view text, std::string_view file) {
  if (text.size() > kMaxDocument) {
    throw_error(ErrorCode::parse_error, "contracts",
                fmt::format("{}: {} bytes exceed the {}-byte limit", file, text.size(), kMaxDocument));
  }
  int depth = 0, line = 1, indent = 0;
  bool at_line_start = true;
  char quote = 0;
  for (char c : text) {
    if (c == '\n') {
      ++line;
      at_line_start = true;
      indent = 0;
      continue;
    }
    if (at_line_start && (c == ' ' || c == '-')) {
      if (++indent > kMaxIndent) {
        throw_error(ErrorCode::parse_error, "contracts",
                    fmt::format("{}:{}: nesting deeper than {} columns", file, line, kMaxIndent));
      }
      continue;
    }
    at_line_start = false;
    if (quote != 0) {
      if (c == quote) quote = 0;
      continue;
    }
    if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxFlowDepth) {
        throw_error(ErrorCode::parse_error, "contracts",
                    fmt::format("{}:{}: flow nesting deeper than {}", file, line, kMaxFlowDepth));
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

YAML::Node load_yaml(std::string_view text, std::string_view file) {
  check_shape(text, file);
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    throw_error(ErrorCode::parse_error, "contracts",
                fmt::format("{}:{}: malformed YAML: {}", file, e.mark.line + 1, e.msg));
  }
}

}  // namespace

namespace {
Contract parse_contract_document(std::string_view text, std::string_view file) {
  const At root{file, "", load_yaml(text, file)};
  if (!root.node.IsMap()) root.bad("the document is not a mapping");
  root.only({"metadata", "equations", "proof_obligations", "falsification_tests", "qa_gate"});
  Contract c;
  c.file = std::string(file);
  const At meta = root.child("metadata");
  meta.only({"id", "version", "description", "references"});
  c.id = meta.child("id").str();
  c.version = meta.child("version").integer();
  c.description = meta.child("description").str();
  if (meta.has("references")) c.references = meta.child("references").strings();

  const At eqs = root.child("equations");
  if (!eqs.node.IsMap() || eqs.node.size() == 0) eqs.bad("needs at least one equation");
  for (const auto& kv : eqs.node) {
    const std::string name = kv.first.as<std::string>();
    const At e{file, "equations." + name, kv.second};
    e.only({"op", "formula", "kernel_functions"});
    Equation eq{name, e.child("op").str(), e.child("formula").str(), {}, e.line()};
    if (e.has("kernel_functions")) eq.kernel_functions = e.child("kernel_functions").strings();
    c.equations.push_back(std::move(eq));
  }
  auto has_equation = [&](const std::string& n) {
    return std::any_of(c.equations.begin(), c.equations.end(), [&](const Equation& e) { return e.name == n; });
  };

  std::set<std::string> ids;
  const At obls = root.child("proof_obligations");
  for (const auto& o : obls.items()) {
    o.only({"id", "kind", "equation", "property", "check", "tolerance", "unless_attributes"});
    ProofObligation p;
    p.id = o.child("id").str();
    p.kind = o.child("kind").str();
    p.equation = o.child("equation").str();
    p.property = o.child("property").str();
    p.check = o.child("check").str();
    p.line = o.line();
    if (o.has("unless_attributes")) p.unless_attributes = o.child("unless_attributes").strings();
    if (o.has("tolerance")) {
      p.tolerance = o.child("tolerance").number();
      if (p.tolerance < 0) o.child("tolerance").bad("is negative");
    }
    if (p.kind != "invariant" && p.kind != "bound" && p.kind != "equivariance" && p.kind != "equivalence") {
      o.child("kind").bad(fmt::format("'{}' is not invariant, bound, equivariance or equivalence", p.kind));
    }
    if (!has_equation(p.equation))
      o.child("equation").bad(fmt::format("'{}' is not an equation of this contract", p.equation));
    if (!ids.insert(p.id).second) o.child("id").bad(fmt::format("duplicate id '{}'", p.id));
    c.obligations.push_back(std::move(p));
  }
  if (c.obligations.empty()) obls.bad("needs at least one obligation");
  auto has_obligation = [&](const std::string& id) {
    return std::any_of(c.obligations.begin(), c.obligations.end(),
                       [&](const ProofObligation& o) { return o.id == id; });
  };

  for (const auto& f : root.child("falsification_tests").items()) {
    f.only({"id", "obligation", "mutant", "description"});
    FalsificationTest t{f.child("id").str(), f.child("obligation").str(), f.child("mutant").str(),
                        f.child("description").str(), f.line()};
    if (!has_obligation(t.obligation))
      f.child("obligation").bad(fmt::format("'{}' is not an obligation of this contract", t.obligation));
    if (!ids.insert(t.id).second) f.child("id").bad(fmt::format("duplicate id '{}'", t.id));
    c.falsification.push_back(std::move(t));
  }

  const At gate = root.child("qa_gate");
  gate.only({"id", "checks", "pass_criteria", "must_catch"});
  c.gate.id = gate.child("id").str();
  c.gate.line = gate.line();
  c.gate.checks = gate.child("checks").strings();
  c.gate.pass_criteria = gate.child("pass_criteria").str();
  c.gate.must_catch = gate.child("must_catch").strings();
  for (std::size_t i = 0; i < c.gate.checks.size(); ++i) {
    if (!has_obligation(c.gate.checks[i])) {
      gate.child("checks").items()[i].bad(fmt::format("'{}' is not an obligation of this contract", c.gate.checks[i]));
    }
  }
  if (c.gate.must_catch.empty()) gate.child("must_catch").bad("a gate must name at least one mutant it catches");
  for (std::size_t i = 0; i < c.gate.must_catch.size(); ++i) {
    const auto& m = c.gate.must_catch[i];
    if (std::none_of(c.falsification.begin(), c.falsification.end(),
                     [&](const FalsificationTest& t) { return t.mutant == m; })) {
      gate.child("must_catch").items()[i].bad(fmt::format("mutant '{}' has no falsification test", m));
    }
  }
  return c;
}

// yaml-cpp throws its own exceptions for conversions it cannot make (a mapping used as a key, ...).
template <class F>
auto typed_yaml_errors(std::string_view file, F&& f) {
  try {
    return f();
  } catch (const YAML::Exception& e) {
    throw_error(ErrorCode::parse_error, "contracts", fmt::format("{}:{}: {}", file, e.mark.line + 1, e.msg));
  }
}
}  // namespace

Contract parse_contract(std::string_view text, std::string_view file) {
  return typed_yaml_errors(file, [&] { return parse_contract_document(text, file); });
}

std::string read_text_file(const std::string& path) { return read_file(path, "contracts"); }

std::vector<Contract> load_contracts(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const auto name = e.path().filename();
    if (e.path().extension() == ".yaml" && name != "binding.yaml" && name != "performance.yaml")
      files.push_back(e.path().string());
  }
  if (ec) throw_error(ErrorCode::io_error, "contracts", fmt::format("cannot list {}: {}", dir, ec.message()));
  std::sort(files.begin(), files.end());
  std::vector<Contract> out;
  for (const auto& f : files) {
    Contract c = parse_contract(read_text_file(f), f);
    for (const auto& prev : out) {
      if (prev.id == c.id)
        throw_error(ErrorCode::parse_error, "contracts",
                    fmt::format("{}: contract id '{}' repeats {}", f, c.id, prev.file));
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::string_view binding_status_name(BindingStatus s) noexcept {
  switch (s) {
    case BindingStatus::implemented:
      return "implemented";
    case BindingStatus::partial:
      return "partial";
    case BindingStatus::not_implemented:
      return "not_implemented";
  }
  return "implemented";
}

bool BindingFile::admits(std::string_view contract, std::string_view equation) const noexcept {
  for (const auto& b : bindings) {
    if (b.contract == contract && b.equation == equation && b.status == BindingStatus::implemented) return true;
  }
  for (const auto& g : allowed_gaps) {
    if (g.contract == contract && g.equation == equation) return true;
  }
  return false;
}

namespace {
// Contract and equation names reach generated C++ (tools/contract_bindgen): letters, digits, '-', '_', '.'.
void require_plain_names(const At& where, std::initializer_list<const std::string*> names) {
  for (const auto* name : names) {
    if (!std::all_of(name->begin(), name->end(), [](char ch) {
          return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.';
        })) {
      where.bad(fmt::format("'{}' may hold only letters, digits, '-', '_' and '.'", *name));
    }
  }
}

BindingFile parse_bindings_document(std::string_view text, std::string_view file) {
  const At root{file, "", load_yaml(text, file)};
  if (!root.node.IsMap()) root.bad("the document is not a mapping");
  root.only({"policy", "allowed_gaps", "bindings"});
  BindingFile out;
  out.file = std::string(file);
  out.policy = root.child("policy").str();
  if (out.policy != "AllImplemented") root.child("policy").bad(fmt::format("'{}' is not AllImplemented", out.policy));
  if (root.has("allowed_gaps")) {
    for (const auto& g : root.child("allowed_gaps").items()) {
      g.only({"contract", "equation"});
      GapEntry gap{g.child("contract").str(), g.child("equation").str(), g.line()};
      require_plain_names(g, {&gap.contract, &gap.equation});
      out.allowed_gaps.push_back(std::move(gap));
    }
  }
  std::set<std::string> seen;
  for (const auto& b : root.child("bindings").items()) {
    b.only({"contract", "equation", "capsule", "symbol", "status"});
    Binding x;
    x.contract = b.child("contract").str();
    x.equation = b.child("equation").str();
    x.capsule = b.child("capsule").str();
    x.symbol = b.child("symbol").str();
    x.line = b.line();
    require_plain_names(b, {&x.contract, &x.equation});
    const std::string status = b.child("status").str();
    if (status == "implemented")
      x.status = BindingStatus::implemented;
    else if (status == "partial")
      x.status = BindingStatus::partial;
    else if (status == "not_implemented")
      x.status = BindingStatus::not_implemented;
    else
      b.child("status").bad(fmt::format("'{}' is not implemented, partial or not_implemented", status));
    if (!seen.insert(x.contract + "/" + x.equation + "/" + x.capsule).second) {
      b.bad(fmt::format("duplicate binding of {}/{} to {}", x.contract, x.equation, x.capsule));
    }
    out.bindings.push_back(std::move(x));
  }
  return out;
}

PerformanceContract parse_performance_document(std::string_view text, std::string_view file) {
  const At root{file, "", load_yaml(text, file)};
  if (!root.node.IsMap()) root.bad("the document is not a mapping");
  root.only({"metadata", "obligations"});
  PerformanceContract out;
  out.file = std::string(file);
  const At meta = root.child("metadata");
  meta.only({"id", "description"});
  out.id = meta.child("id").str();
  meta.child("description").str();
  std::set<std::string> ids;
  for (const auto& o : root.child("obligations").items()) {
    o.only({"id", "benchmark", "shape", "model", "contender", "baseline", "min_ratio", "threads", "repetitions"});
    PerformanceObligation p;
    p.id = o.child("id").str();
    p.benchmark = o.child("benchmark").str();
    // A peer benchmark times Pact against PyTorch or ONNX Runtime by a script of bench/ (verify/perf.hpp).
    const bool peer = p.benchmark == "infer" || p.benchmark == "train_step";
    if (!peer || o.has("shape")) {
      for (const auto& e : o.child("shape").items()) {
        const int v = e.integer();
        if (v <= 0 || v > 16384) e.bad(fmt::format("extent {} is outside 1..16384", v));
        p.shape.push_back(v);
      }
      if (p.shape.empty() || p.shape.size() > 4) o.child("shape").bad("needs 1 to 4 extents");
    }
    p.contender = o.child("contender").str();
    p.baseline = o.child("baseline").str();
    if (peer) {
      // The model is passed to the script as one argument: letters, digits and _ (infer: a torchvision
      // architecture), also - / . for train_step's case names ("784-256-256-10/256").
      p.model = o.child("model").str();
      const bool names_ok =
          !p.model.empty() && p.model.size() <= 64 && std::all_of(p.model.begin(), p.model.end(), [&](char ch) {
            return std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == '_' ||
                   (p.benchmark == "train_step" && (ch == '-' || ch == '/' || ch == '.'));
          });
      if (!names_ok) o.child("model").bad(fmt::format("'{}' is not a model name for {}", p.model, p.benchmark));
      if (p.contender != "pact") o.child("contender").bad(fmt::format("a {} contender is pact", p.benchmark));
      if (p.baseline != "torch" && (p.baseline != "ort" || p.benchmark != "infer"))
        o.child("baseline")
            .bad(fmt::format("'{}' is not a {} peer (torch{})", p.baseline, p.benchmark,
                             p.benchmark == "infer" ? " or ort" : ""));
      if (p.benchmark == "infer" && !p.shape.empty() && p.shape.size() != 4)
        o.child("shape").bad("infer takes an NCHW input shape of four extents");
      if (p.benchmark == "train_step" && !p.shape.empty()) o.child("shape").bad("train_step takes no shape");
    } else if (o.has("model")) {
      o.child("model").bad(fmt::format("{} takes no model", p.benchmark));
    }
    p.min_ratio = o.child("min_ratio").number();
    if (!(p.min_ratio > 0)) o.child("min_ratio").bad("must be positive");
    if (o.has("threads")) p.threads = o.child("threads").integer();
    if (o.has("repetitions")) p.repetitions = o.child("repetitions").integer();
    if (p.threads < 1 || p.threads > 256) o.child("threads").bad("must be 1..256");
    if (p.repetitions < 1 || p.repetitions > 100) o.child("repetitions").bad("must be 1..100");
    if (p.benchmark == "train_step" && p.threads != 1) o.child("threads").bad("train_step runs one thread");
    auto provider = [&](const std::string& v, const char* field) {
      if (v != "native" && v != "reference" && v != "blas" && v != "openblas")
        o.child(field).bad(fmt::format("'{}' is not native, reference, blas or openblas", v));
    };
    if (!peer) {
      provider(p.contender, "contender");
      provider(p.baseline, "baseline");
    }
    if (p.benchmark == "gemm" && p.shape.size() != 1) o.child("shape").bad("gemm takes one extent (n for n x n x n)");
    if (!ids.insert(p.id).second) o.child("id").bad(fmt::format("duplicate id '{}'", p.id));
    p.line = o.line();
    out.obligations.push_back(std::move(p));
  }
  if (out.obligations.empty()) root.child("obligations").bad("needs at least one obligation");
  return out;
}

}  // namespace

PerformanceContract parse_performance(std::string_view text, std::string_view file) {
  return typed_yaml_errors(file, [&] { return parse_performance_document(text, file); });
}

BindingFile parse_bindings(std::string_view text, std::string_view file) {
  return typed_yaml_errors(file, [&] { return parse_bindings_document(text, file); });
}

}  // namespace pact::spec
