#include "pact/plan/fusion.hpp"

#include <fmt/format.h>

#include <cmath>
#include <set>
#include <unordered_map>

namespace pact::plan {

namespace {

constexpr const char* kFoldEvidence = "Fusion.FoldedBatchNormKeepsTheModelsValues";
constexpr const char* kActivationEvidence = "OpOracle.NativeMatchesPyTorchFloat64";

// How many nodes read each node (graph outputs count as readers).
std::unordered_map<std::string, int> readers(const ir::Graph& g) {
  std::unordered_map<std::string, int> n;
  for (const auto& node : g.nodes)
    for (const auto& in : node.inputs) ++n[in];
  for (const auto& o : g.outputs) ++n[o];
  return n;
}

const ir::Node* node_of(const ir::Graph& g, const std::string& id) { return g.find(id); }

// The f32 values of a parameter node, or null when `id` is not a parameter with a bound f32 value.
const Tensor* parameter_value(const ir::Graph& g, const SourceValues& values, const std::string& id) {
  const ir::Node* n = node_of(g, id);
  if (n == nullptr || n->op != ops::OpTag::parameter) return nullptr;
  auto it = values.find(id);
  if (it == values.end() || it->second.dtype() != DType::f32) return nullptr;
  return &it->second;
}

// Rebuilds the graph without the dropped nodes and with the added ones first, revalidated.
void rebuild(ir::Graph& g, const std::set<std::string>& dropped, std::vector<ir::Node> added) {
  std::vector<ir::Node> nodes = std::move(added);
  for (auto& n : g.nodes)
    if (!dropped.contains(n.id)) nodes.push_back(std::move(n));
  g = ir::validate(std::move(nodes), g.outputs);
}

}  // namespace

std::vector<Rewrite> fold_batch_norms(ir::Graph& g, SourceValues& values) {
  std::vector<Rewrite> out;
  auto reads = readers(g);
  std::set<std::string> dropped;
  std::vector<ir::Node> added;
  for (auto& bn : g.nodes) {
    if (bn.op != ops::OpTag::batch_norm || bn.inputs.size() != 5) continue;
    const ir::Node* conv = node_of(g, bn.inputs[0]);
    if (conv == nullptr || conv->op != ops::OpTag::conv2d || reads[conv->id] != 1) continue;
    const Tensor* w = parameter_value(g, values, conv->inputs[1]);
    const Tensor* cb = conv->inputs.size() == 3 ? parameter_value(g, values, conv->inputs[2]) : nullptr;
    const Tensor* gamma = parameter_value(g, values, bn.inputs[1]);
    const Tensor* beta = parameter_value(g, values, bn.inputs[2]);
    const Tensor* mean = parameter_value(g, values, bn.inputs[3]);
    const Tensor* var = parameter_value(g, values, bn.inputs[4]);
    if (w == nullptr || (conv->inputs.size() == 3 && cb == nullptr) || !gamma || !beta || !mean || !var) continue;
    const std::int64_t channels = w->shape()[0];
    if (gamma->numel() != channels || beta->numel() != channels || mean->numel() != channels ||
        var->numel() != channels)
      continue;
    const double eps = bn.attrs.get_float("batch_norm", "eps", 1e-5);
    const auto wv = w->to_doubles(), gv = gamma->to_doubles(), bv = beta->to_doubles(), mv = mean->to_doubles(),
               vv = var->to_doubles();
    const std::vector<double> cbv = cb != nullptr ? cb->to_doubles() : std::vector<double>(gv.size(), 0.0);
    const std::size_t per_channel = wv.size() / static_cast<std::size_t>(channels);
    std::vector<float> folded_w(wv.size()), folded_b(static_cast<std::size_t>(channels));
    for (std::size_t o = 0; o < static_cast<std::size_t>(channels); ++o) {
      const double s = gv[o] / std::sqrt(vv[o] + eps);
      for (std::size_t k = 0; k < per_channel; ++k)
        folded_w[o * per_channel + k] = static_cast<float>(wv[o * per_channel + k] * s);
      folded_b[o] = static_cast<float>((cbv[o] - mv[o]) * s + bv[o]);
    }
    const std::string wid = bn.id + ".folded_weight", bid = bn.id + ".folded_bias";
    values.insert_or_assign(wid, Tensor::from_values<float>(w->shape(), folded_w));
    values.insert_or_assign(bid, Tensor::from_values<float>(Dims{channels}, folded_b));
    added.push_back(ir::parameter_node(wid, w->shape(), DType::f32, false));
    added.push_back(ir::parameter_node(bid, Dims{channels}, DType::f32, false));
    out.push_back(Rewrite{"fold_batch_norm", {conv->id, bn.id}, bn.id, kFoldEvidence});
    // The batch norm's node becomes the convolution (its id, so its readers are untouched).
    std::vector<std::string> operands = bn.inputs;
    for (std::size_t k = 1; k < operands.size(); ++k) --reads[operands[k]];
    for (std::size_t k = 1; k < conv->inputs.size(); ++k) --reads[conv->inputs[k]];
    dropped.insert(conv->id);
    bn.op = ops::OpTag::conv2d;
    bn.inputs = {conv->inputs[0], wid, bid};
    bn.attrs = conv->attrs;
    bn.type_declared = false;
  }
  if (out.empty()) return out;
  // Parameters nothing reads any more (the convolutions' weights, the batch norms' statistics).
  for (const auto& n : g.nodes) {
    if (n.op == ops::OpTag::parameter && reads[n.id] <= 0 && !dropped.contains(n.id)) {
      dropped.insert(n.id);
      values.erase(n.id);
    }
  }
  rebuild(g, dropped, std::move(added));
  return out;
}

namespace {

// The conv2d_activation name of the activation node `act` computes, or "" when it is not one of them.
std::string activation_kind(const ir::Node& act) {
  if (act.inputs.size() != 1) return "";
  if (act.op == ops::OpTag::relu) return "relu";
  if (act.op == ops::OpTag::silu) return "silu";
  if (act.op == ops::OpTag::hardswish) return "hardswish";
  if (act.op == ops::OpTag::clamp) {
    const auto lo = act.attrs.get_optional_float("clamp", "min"), hi = act.attrs.get_optional_float("clamp", "max");
    if (lo && hi && *lo == 0.0 && *hi == 6.0) return "relu6";
  }
  return "";
}

}  // namespace

std::vector<Rewrite> fuse_conv_residuals(ir::Graph& g) {
  std::vector<Rewrite> out;
  const auto reads = readers(g);
  std::unordered_map<std::string, const ir::Node*> sole_reader;  // the one node reading each node read once
  for (const auto& n : g.nodes)
    for (const auto& in : n.inputs)
      if (reads.at(in) == 1) sole_reader[in] = &n;
  std::set<std::string> dropped;
  std::map<std::string, ir::Node> replaced;  // the add's or the activation's id -> its fused node
  for (const auto& add : g.nodes) {
    if (add.op != ops::OpTag::add || add.inputs.size() != 2) continue;
    // Either operand may be the convolution: the one computed by a biased conv2d that nothing else reads,
    // whose output type the add keeps (no broadcast), and the other operand of that same type.
    for (int side = 0; side < 2; ++side) {
      const ir::Node* conv = node_of(g, add.inputs[side]);
      const ir::Node* other = node_of(g, add.inputs[1 - side]);
      if (conv == nullptr || other == nullptr || conv->op != ops::OpTag::conv2d || conv->inputs.size() != 3 ||
          reads.at(conv->id) != 1 || dropped.contains(conv->id) || dropped.contains(other->id) ||
          !(conv->type == add.type) || !(other->type == add.type) || add.inputs[0] == add.inputs[1])
        continue;
      // The add's activation joins when the add has no other reader.
      // (readers() counts a graph output as a reader, so an add the graph outputs has none sole.)
      auto it = sole_reader.find(add.id);
      const ir::Node* act = it != sole_reader.end() ? it->second : nullptr;
      const std::string kind = act != nullptr ? activation_kind(*act) : "";
      if (kind.empty()) act = nullptr;
      ir::Node fused = act != nullptr ? *act : add;
      fused.op = ops::OpTag::conv2d_activation;
      fused.inputs = {conv->inputs[0], conv->inputs[1], conv->inputs[2], add.inputs[1 - side]};
      fused.attrs = conv->attrs;
      fused.attrs.set("activation", kind.empty() ? std::string("none") : kind);
      fused.type_declared = false;
      std::vector<std::string> nodes = {conv->id, add.id};
      if (act != nullptr) nodes.push_back(act->id);
      out.push_back(Rewrite{"conv2d_residual", nodes, fused.id, kActivationEvidence});
      dropped.insert(conv->id);
      if (act != nullptr) dropped.insert(add.id);
      replaced.insert_or_assign(fused.id, std::move(fused));
      break;
    }
  }
  if (out.empty()) return out;
  for (auto& n : g.nodes) {
    auto it = replaced.find(n.id);
    if (it != replaced.end()) n = std::move(it->second);
  }
  rebuild(g, dropped, {});
  return out;
}

std::vector<Rewrite> fuse_conv_activations(ir::Graph& g) {
  std::vector<Rewrite> out;
  const auto reads = readers(g);
  std::set<std::string> dropped;
  for (auto& act : g.nodes) {
    const std::string kind = activation_kind(act);
    if (kind.empty()) continue;
    const ir::Node* conv = node_of(g, act.inputs[0]);
    if (conv == nullptr || conv->op != ops::OpTag::conv2d || reads.at(conv->id) != 1 || dropped.contains(conv->id))
      continue;
    out.push_back(Rewrite{"conv2d_activation", {conv->id, act.id}, act.id, kActivationEvidence});
    ops::Attributes attrs = conv->attrs;
    attrs.set("activation", kind);
    dropped.insert(conv->id);
    act.op = ops::OpTag::conv2d_activation;
    act.inputs = conv->inputs;
    act.attrs = std::move(attrs);
    act.type_declared = false;
  }
  if (!out.empty()) rebuild(g, dropped, {});
  return out;
}

}  // namespace pact::plan
