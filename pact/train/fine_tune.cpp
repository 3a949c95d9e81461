#include "pact/train/fine_tune.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <variant>

#include "pact/ir/numpy.hpp"
#include "pact/runtime/torch_run.hpp"

namespace pact::train {

namespace {

[[noreturn]] void bad(const std::string& why) { throw_error(ErrorCode::invalid_argument, "fine-tune", why); }

// An id not yet in the graph: `base`, or `base_2`, `base_3`, ...
std::string fresh_id(const ir::Graph& g, const std::string& base) {
  std::string id = base;
  for (int k = 2; g.find(id) != nullptr; ++k) id = fmt::format("{}_{}", base, k);
  return id;
}

ops::Attributes source_attrs(const Dims& shape, DType dtype) {
  return ops::Attributes{{"shape", std::vector<std::int64_t>(shape.begin(), shape.end())},
                         {"dtype", std::string(dtype_name(dtype))}};
}

Dims without_batch(const Dims& shape) {
  Dims row;
  for (int d = 1; d < shape.size(); ++d) row.push_back(shape[d]);
  return row;
}

}  // namespace

LossSpec parse_loss_spec(std::string_view text) {
  const auto colon = text.find(':');
  const std::string_view kind = text.substr(0, colon);
  LossSpec s;
  if (colon == std::string_view::npos || colon + 1 == text.size() || (kind != "cross_entropy" && kind != "mse"))
    bad(fmt::format("--loss '{}' is not cross_entropy:OUTPUT or mse:OUTPUT", printable(text)));
  s.kind = kind == "mse" ? LossSpec::Kind::mse : LossSpec::Kind::cross_entropy;
  s.output = std::string(text.substr(colon + 1));
  return s;
}

FineTune fine_tune(ir::TorchBundle bundle, const LossSpec& loss, std::optional<std::int64_t> batch,
                   const TrainerOptions& options, std::string_view dir) {
  ir::require_weights(bundle.model, dir, "fine-tuning");
  std::vector<const ir::TorchSource*> inputs;
  for (const auto& s : bundle.model.sources)
    if (s.kind == ir::TorchSource::Kind::user_input) inputs.push_back(&s);
  if (inputs.size() != 1)
    bad(fmt::format("'{}' has {} inputs; fine-tuning feeds one (the data's features)", dir, inputs.size()));
  const ops::TensorType in_type = inputs[0]->type;
  const std::string input = inputs[0]->name;
  if (!is_floating(in_type.dtype) || in_type.shape.size() < 1)
    bad(fmt::format("'{}': its input '{}' is {}{}; fine-tuning feeds float rows", dir, input, dtype_name(in_type.dtype),
                    in_type.shape.to_string()));
  // The output the loss reads: by output name, or by the IR node that produces it.
  std::string node;
  std::string outputs;
  for (const auto& o : bundle.model.outputs) {
    if (o.name == loss.output || o.node == loss.output) node = o.node;
    outputs += (outputs.empty() ? "" : ", ") + o.name;
  }
  if (node.empty())
    bad(fmt::format("--loss names output '{}', which '{}' does not have (its outputs: {})", printable(loss.output), dir,
                    outputs));
  // Refit the capture to the batch size asked for (the graph's shapes and per-batch constants).
  if (batch && *batch != in_type.shape[0]) {
    if (*batch <= 0) bad(fmt::format("batch size {} must be positive", *batch));
    Dims shape = in_type.shape;
    shape[0] = *batch;
    ir::SafetensorsFile probe;
    probe.tensors.emplace_back(input, Tensor::zeros(shape, in_type.dtype));
    runtime::fit_inputs(bundle, probe, fmt::format("a batch of {}", *batch));
  }
  ir::Graph g = bundle.model.graph;
  const ir::Node* out = g.find(node);
  const ir::Node* x = g.find(input);
  if (out == nullptr || x == nullptr) bad(fmt::format("'{}': the graph lost node '{}'", dir, out ? input : node));
  const ops::TensorType out_type = out->type;
  if (!is_floating(out_type.dtype))
    bad(fmt::format("output '{}' is {}; a loss reads a float output", loss.output, dtype_name(out_type.dtype)));
  FineTune f;
  f.batch = x->type.shape[0];
  f.row_shape = without_batch(x->type.shape);
  f.output_shape = out_type.shape;
  // The target and the loss.
  const std::string target = fresh_id(g, "target"), loss_id = fresh_id(g, "loss");
  std::vector<ir::Node> nodes = g.nodes;
  if (loss.kind == LossSpec::Kind::cross_entropy) {
    if (out_type.shape.size() != 2 || out_type.shape[0] != f.batch)
      bad(fmt::format("cross_entropy reads [batch, classes] logits; output '{}' is {}{}", loss.output,
                      dtype_name(out_type.dtype), out_type.shape.to_string()));
    nodes.push_back(ir::Node{target, ops::OpTag::input, {}, source_attrs(Dims{f.batch}, DType::i64), {}});
    nodes.push_back(ir::Node{loss_id, ops::OpTag::cross_entropy, {node, target}, {}, {}});
  } else {
    nodes.push_back(ir::Node{target, ops::OpTag::input, {}, source_attrs(out_type.shape, out_type.dtype), {}});
    nodes.push_back(ir::Node{loss_id, ops::OpTag::mse_loss, {node, target}, {}, {}});
  }
  f.objective.graph = [g = ir::validate(std::move(nodes), {node, loss_id}), b = f.batch,
                       d = std::string(dir)](std::int64_t asked) {
    if (asked != b)
      throw_error(ErrorCode::invalid_argument, "fine-tune",
                  fmt::format("'{}' is planned for batches of {}; asked for {}", d, b, asked));
    return g;
  };
  f.objective.input = input;
  f.objective.target = target;
  f.objective.logits = node;
  f.objective.loss = loss_id;
  f.objective.options = options;
  // The weights: every parameter and constant source the graph keeps, in graph order.
  for (const auto& n : g.nodes) {
    if (n.op != ops::OpTag::parameter && n.op != ops::OpTag::constant) continue;
    std::optional<Tensor> value;
    if (const Tensor* w = bundle.weights.find(n.id)) {
      value = w->as_view().duplicate();
    } else if (auto it = bundle.model.synthesized.find(n.id); it != bundle.model.synthesized.end()) {
      value = it->second.as_view().duplicate();
    }
    if (!value) bad(fmt::format("'{}': no value for '{}' in weights.safetensors", dir, n.id));
    f.pack.names.push_back(n.id);
    f.pack.values.push_back(std::move(*value));
    f.pack.differentiable.push_back(n.op == ops::OpTag::parameter && n.differentiable);
    f.pack.buffer.push_back(n.op == ops::OpTag::constant || n.buffer || !n.differentiable);
  }
  return f;
}

namespace {

// The tensors of a data file, or of a directory's .safetensors files concatenated along the first axis.
std::map<std::string, Tensor> read_arrays(const std::string& path) {
  std::vector<std::string> files;
  if (std::filesystem::is_directory(path)) {
    for (const auto& e : std::filesystem::directory_iterator(path))
      if (e.path().extension() == ".safetensors") files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    if (files.empty()) bad(fmt::format("--data directory '{}' has no .safetensors files", path));
  } else {
    files.push_back(path);
  }
  std::map<std::string, std::vector<Tensor>> parts;
  for (const auto& f : files) {
    ir::SafetensorsFile st = ir::read_tensor_file(f);
    for (auto& [name, t] : st.tensors) parts[name].push_back(std::move(t));
  }
  std::map<std::string, Tensor> out;
  for (auto& [name, ts] : parts) {
    if (ts.size() == 1) {
      out.emplace(name, std::move(ts[0]));
      continue;
    }
    std::vector<double> all;
    Dims shape = ts[0].shape();
    std::int64_t rows = 0;
    for (const auto& t : ts) {
      if (t.rank() == 0 || t.dtype() != ts[0].dtype() || without_batch(t.shape()) != without_batch(shape))
        bad(fmt::format("'{}': array '{}' differs between files ({}{} and {}{})", path, name, dtype_name(ts[0].dtype()),
                        shape.to_string(), dtype_name(t.dtype()), t.shape().to_string()));
      const std::vector<double> v = t.to_doubles();
      all.insert(all.end(), v.begin(), v.end());
      rows += t.shape()[0];
    }
    shape[0] = rows;
    out.emplace(name, Tensor::from_values<double>(shape, all).convert(ts[0].dtype()));
  }
  return out;
}

}  // namespace

Dataset tensor_dataset(const std::string& path, const std::string& input, const std::string& target,
                       const Dims& row_shape, const LossSpec& loss, std::int64_t classes) {
  std::map<std::string, Tensor> arrays = read_arrays(path);
  std::string names;
  for (const auto& [n, t] : arrays) names += (names.empty() ? "" : ", ") + n;
  auto t_it = arrays.find(target);
  if (t_it == arrays.end())
    bad(fmt::format("'{}' has no target array '{}' (its arrays: {}; --target names it)", path, target, names));
  auto x_it = arrays.find(input);
  if (x_it == arrays.end() && arrays.size() == 2)
    x_it = arrays.begin()->first == target ? std::next(arrays.begin()) : arrays.begin();
  if (x_it == arrays.end())
    bad(fmt::format("'{}' has no array '{}' for the model's input (its arrays: {})", path, input, names));
  const Tensor& x = x_it->second;
  const Tensor& y = t_it->second;
  if (x.rank() == 0 || !is_floating(x.dtype()))
    bad(fmt::format("'{}': features '{}' are {}{}; expected float [rows, ...]", path, x_it->first,
                    dtype_name(x.dtype()), x.shape().to_string()));
  const std::int64_t rows = x.shape()[0];
  const std::int64_t features = ops::numel(row_shape);
  if (x.numel() != rows * features)
    bad(fmt::format("'{}': features '{}' are {}; each row must hold the model's row shape {} ({} values)", path,
                    x_it->first, x.shape().to_string(), row_shape.to_string(), features));
  if (y.rank() == 0 || y.shape()[0] != rows || y.numel() != rows)
    bad(fmt::format("'{}': target '{}' is {}; expected [{}] (or [{}, 1]), one per row of '{}'", path, target,
                    y.shape().to_string(), rows, rows, x_it->first));
  Dataset d;
  d.features = features;
  for (double v : x.to_doubles()) d.x.push_back(static_cast<float>(v));
  const std::vector<double> yv = y.to_doubles();
  d.y.assign(static_cast<std::size_t>(rows), 0);
  if (loss.kind == LossSpec::Kind::cross_entropy) {
    d.classes = classes;
    for (std::int64_t i = 0; i < rows; ++i) {
      const double c = yv[static_cast<std::size_t>(i)];
      if (!(c >= 0 && c < static_cast<double>(classes)) || c != std::floor(c))
        bad(fmt::format("'{}': target '{}' row {} is {}; class ids are integers in [0, {})", path, target, i, c,
                        classes));
      d.y[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(c);
    }
  } else {
    d.classes = 1;
    d.regression = true;
    for (std::int64_t i = 0; i < rows; ++i) d.values.push_back(static_cast<float>(yv[static_cast<std::size_t>(i)]));
  }
  return d;
}

Dataset table_fine_tune_dataset(const CsvTable& table, const std::string& target, const Dims& row_shape,
                                const LossSpec& loss, std::int64_t classes, std::string_view where) {
  const TableSchema schema = infer_schema(table, target, "regress", where);
  const std::int64_t features = ops::numel(row_shape);
  if (static_cast<std::int64_t>(schema.features.size()) != features)
    bad(fmt::format("'{}' has {} feature columns besides '{}'; the model's rows hold {} values ({})", where,
                    schema.features.size(), target, features, row_shape.to_string()));
  Dataset d = table_dataset(table, schema, true, where);
  if (loss.kind == LossSpec::Kind::mse) return d;
  d.regression = false;
  d.classes = classes;
  for (std::size_t i = 0; i < d.values.size(); ++i) {
    const double c = d.values[i];
    if (!(c >= 0 && c < static_cast<double>(classes)) || c != std::floor(c))
      bad(fmt::format("'{}' line {}: target '{}' is {}; class ids are integers in [0, {})", where, table.lines[i],
                      target, c, classes));
    d.y[i] = static_cast<std::int64_t>(c);
  }
  d.values.clear();
  return d;
}

}  // namespace pact::train
