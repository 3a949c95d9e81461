#include "pact/plan/fusion.hpp"

#include <fmt/format.h>

#include <cmath>
#include <set>
#include <unordered_map>

namespace pact::plan {

namespace {

constexpr const char* kFoldEvidence = "Fusion.FoldedBatchNormKeepsTheModelsValues";
constexpr const char* kActivationEvidence = "OpOracle.NativeMatchesPyTorchFloat64";
constexpr const char* kLayoutEvidence = "Fusion.ChannelsLastKeepsTheModelsValues";

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

std::string_view layout_name(Layout layout) noexcept {
  switch (layout) {
    case Layout::nchw:
      return "nchw";
    case Layout::nhwc:
      return "nhwc";
    case Layout::automatic:
      break;
  }
  return "auto";
}

std::optional<Layout> parse_layout(std::string_view name) noexcept {
  for (Layout l : {Layout::automatic, Layout::nchw, Layout::nhwc})
    if (layout_name(l) == name) return l;
  return std::nullopt;
}

namespace {

// Note [Where channels-last pays]
// Measured per node on mobilenet_v2, mnasnet, mobilenet_v3_small, resnet18 and efficientnet_b0 (Intel Xeon,
// one thread, every convolution forced channels-last against none; docs/performance.md):
//  - depthwise convolutions of 32 channels or more run 0.3-0.9 of their NCHW time channels-last at AVX-512
//    (Note [Depthwise channels-last]); at AVX2 the 3 x 3 ones 0.4-0.8, the 5 x 5 ones on planes of 28 or
//    less 1.1-1.8 (few pixels of such a row have every tap inside, and the kernel takes four at a time
//    only there); of 16 channels 1.2-2.2;
//  - 1 x 1 ones 0.45-0.9 with 24 output channels or more and 16 input channels or more, at both levels,
//    the 7 x 7 planes of the last layers about level (0.8-1.1); with 8 or 16 output channels 1.3-2.5
//    (the product's columns are the output channels: a 32-wide panel a quarter or half full);
//  - a dense 3 x 3 convolution 0.74-0.93 at 28 x 28 or stride 2 but 1.1-1.2 at 56 x 56, 14 x 14 and 7 x 7,
//    where NCHW reads its input in place (Note [Implicit convolution]) and the channels-last im2col copies
//    it nine times; a stem on three channels 1.6-4 (runs of three floats); grouped ones were not measured.
// And a change of layout is not free: a reader of the other layout gathers the permuted view, a pass over
// the tensor (efficientnet_b0 with every convolution moved took 25.9 ms against 16.6: its squeeze-and-
// excitation blocks read each depthwise output in NCHW twice, and their products feed the projections;
// excluding the 16 -> 96 expansion of mobilenet_v2 from its run cut it in two and the model went from
// 0.88 to 1.04 of NCHW). So the candidates are depthwise convolutions of 32 channels or more and 1 x 1
// ones of 24 outputs or more from 16 inputs or more, and a connected run of them (one reading another's
// output as its input or residual) moves only where it passes at least twice as many tensors inside the
// run as across its ends (each input from outside, each output read outside): mobilenet_v2's and mnasnet's
// inverted residual chains move; efficientnet_b0's blocks, cut by their squeeze-and-excitation, and
// resnet18's 1 x 1 downsamples, alone between 3 x 3 layers, stay NCHW. Whole models, interleaved, best
// warm time (auto / nchw): mobilenet_v2 0.87-0.89 at one thread, 0.82 / 0.93 at two (AVX-512 / AVX2);
// mnasnet1_0 and mnasnet0_5 0.95-1.04; mobilenet_v3_small 0.97-1.04.
bool channels_last_candidate(const ir::Graph& g, const ir::Node& conv) {
  const ir::Node* w = g.find(conv.inputs[1]);
  const ir::Node* x = g.find(conv.inputs[0]);
  if (w == nullptr || x == nullptr || w->type.shape.size() != 4 || x->type.shape.size() != 4) return false;
  const Dims& wd = w->type.shape;  // [O, C / groups, KH, KW]
  const std::int64_t groups = conv.attrs.get_int("conv2d", "groups", 1);
  const bool depthwise = wd[1] == 1 && groups == wd[0] && wd[0] >= 32;
  const bool pointwise = wd[2] == 1 && wd[3] == 1 && groups == 1 && wd[0] >= 24 && wd[1] >= 16;
  return depthwise || pointwise;
}

// The runs of candidates `layout` moves (automatic: Note [Where channels-last pays]).
std::set<std::string> channels_last_runs(const ir::Graph& g, const std::set<std::string>& candidates) {
  std::map<std::string, std::string> parent;
  for (const auto& id : candidates) parent[id] = id;
  auto root = [&](std::string id) {
    while (parent[id] != id) id = parent[id] = parent[parent[id]];
    return id;
  };
  auto linked = [&](const ir::Node& n, std::size_t k) {
    return n.inputs.size() > k && candidates.contains(n.inputs[k]) && (k == 0 || k == 3);
  };
  for (const auto& n : g.nodes) {
    if (!candidates.contains(n.id)) continue;
    for (std::size_t k : {std::size_t{0}, std::size_t{3}})
      if (linked(n, k)) parent[root(n.inputs[k])] = root(n.id);
  }
  std::map<std::string, int> inside, across;  // by run
  std::map<std::string, std::set<std::string>> entries;
  for (const auto& n : g.nodes) {
    if (candidates.contains(n.id)) {
      for (std::size_t k : {std::size_t{0}, std::size_t{3}}) {
        if (n.inputs.size() <= k) continue;
        if (linked(n, k)) {
          ++inside[root(n.id)];
        } else {
          entries[root(n.id)].insert(n.inputs[k]);
        }
      }
    }
  }
  for (const auto& [run, ins] : entries) across[run] += static_cast<int>(ins.size());
  std::set<std::string> read_outside;
  for (const auto& n : g.nodes)
    for (std::size_t k = 0; k < n.inputs.size(); ++k)
      if (candidates.contains(n.inputs[k]) && !(candidates.contains(n.id) && (k == 0 || k == 3)))
        read_outside.insert(n.inputs[k]);
  for (const auto& o : g.outputs)
    if (candidates.contains(o)) read_outside.insert(o);
  for (const auto& id : read_outside) ++across[root(id)];
  std::set<std::string> moved;
  for (const auto& id : candidates)
    if (inside[root(id)] >= 2 * across[root(id)]) moved.insert(id);
  return moved;
}

ir::Node permute_node(std::string id, std::string input, std::vector<std::int64_t> dims) {
  ir::Node n;
  n.id = std::move(id);
  n.op = ops::OpTag::permute;
  n.inputs = {std::move(input)};
  n.attrs.set("dims", std::move(dims));
  return n;
}

}  // namespace

std::vector<Rewrite> choose_channels_last(ir::Graph& g, SourceValues& values, Layout layout) {
  std::vector<Rewrite> out;
  if (layout == Layout::nchw) return out;
  std::set<std::string> chosen;
  for (const auto& n : g.nodes) {
    if (n.op != ops::OpTag::conv2d && n.op != ops::OpTag::conv2d_activation) continue;
    const Tensor* w = parameter_value(g, values, n.inputs[1]);
    if (n.type.dtype != DType::f32 || n.type.shape.size() != 4 || w == nullptr || w->shape().size() != 4) continue;
    if (layout == Layout::automatic && !channels_last_candidate(g, n)) continue;
    chosen.insert(n.id);
  }
  if (layout == Layout::automatic) chosen = channels_last_runs(g, chosen);
  if (chosen.empty()) return out;
  std::vector<ir::Node> added;
  // The ids of the new nodes: "<id>.nhwc", "<id>.to_nhwc", "<weight>.nhwc", or with ".2", ".3", ... after
  // them where the graph already has that id.
  std::set<std::string> taken;
  for (const auto& n : g.nodes) taken.insert(n.id);
  auto fresh = [&](const std::string& base) {
    std::string id = base;
    for (int k = 2; taken.contains(id); ++k) id = fmt::format("{}.{}", base, k);
    taken.insert(id);
    return id;
  };
  std::map<std::string, std::string> moved_as, permuted_as, repacked_as;  // by the original id
  for (const auto& id : chosen) moved_as[id] = fresh(id + ".nhwc");
  // The channels-last form of node `id`: a chosen convolution's own, or a permute of it made once.
  auto channels_last = [&](const std::string& id) {
    if (chosen.contains(id)) return moved_as.at(id);
    auto [it, first] = permuted_as.try_emplace(id, "");
    if (first) {
      it->second = fresh(id + ".to_nhwc");
      added.push_back(permute_node(it->second, id, {0, 2, 3, 1}));
    }
    return it->second;
  };
  for (auto& n : g.nodes) {
    if (!chosen.contains(n.id)) continue;
    auto [wit, first_use] = repacked_as.try_emplace(n.inputs[1], "");
    if (first_use) wit->second = fresh(n.inputs[1] + ".nhwc");
    const std::string wid = wit->second;
    if (first_use) {
      // [O, C / groups, KH, KW] -> [KH, KW, C / groups, O], once, here.
      const Tensor& w = *parameter_value(g, values, n.inputs[1]);
      const Dims& d = w.shape();
      const std::int64_t o = d[0], cg = d[1], kh = d[2], kw = d[3];
      const std::vector<double> src = w.to_doubles();
      std::vector<float> dst(src.size());
      for (std::int64_t oc = 0; oc < o; ++oc)
        for (std::int64_t c = 0; c < cg; ++c)
          for (std::int64_t i = 0; i < kh; ++i)
            for (std::int64_t j = 0; j < kw; ++j)
              dst[static_cast<std::size_t>(((i * kw + j) * cg + c) * o + oc)] =
                  static_cast<float>(src[static_cast<std::size_t>(((oc * cg + c) * kh + i) * kw + j)]);
      values.insert_or_assign(wid, Tensor::from_values<float>(Dims{kh, kw, cg, o}, dst));
      added.push_back(ir::parameter_node(wid, Dims{kh, kw, cg, o}, DType::f32, false));
    }
    ir::Node conv;
    conv.id = moved_as.at(n.id);
    conv.op = ops::OpTag::conv2d_nhwc;
    conv.inputs = {channels_last(n.inputs[0]), wid};
    if (n.inputs.size() >= 3) conv.inputs.push_back(n.inputs[2]);
    if (n.inputs.size() == 4) conv.inputs.push_back(channels_last(n.inputs[3]));
    conv.attrs = n.attrs;
    if (!conv.attrs.has("activation")) conv.attrs.set("activation", std::string("none"));
    out.push_back(Rewrite{"conv2d_nhwc", {n.id}, conv.id, kLayoutEvidence});
    added.push_back(std::move(conv));
    // The convolution's id now names its output back in [N, C, H, W], for the readers that are not chosen.
    n = permute_node(n.id, moved_as.at(n.id), {0, 3, 1, 2});
  }
  rebuild(g, {}, std::move(added));
  // What nothing reads any more: the permutes back between two chosen convolutions, the weights re-packed
  // (a weight a convolution left NCHW also reads stays).
  const auto reads = readers(g);
  auto unread = [&](const std::string& id) { return !reads.contains(id) || reads.at(id) == 0; };
  std::set<std::string> dropped;
  for (const auto& id : chosen)
    if (unread(id)) dropped.insert(id);
  for (const auto& [id, repacked] : repacked_as) {
    if (!unread(id)) continue;
    dropped.insert(id);
    values.erase(id);
  }
  if (!dropped.empty()) rebuild(g, dropped, {});
  return out;
}

}  // namespace pact::plan
