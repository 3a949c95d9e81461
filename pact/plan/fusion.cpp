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
// ones of 24 outputs or more from 16 inputs or more; with the elementwise ops and means between them (Note
// [Carrying channels-last through elementwise ops and means]) they form runs, linked by the images one
// passes another, and a run moves only where it holds a convolution and passes at least twice as many
// images inside as across its ends (each image from outside, each read outside): mobilenet_v2's and
// mnasnet's inverted residual chains move, and efficientnet_b0's and mobilenet_v3's blocks through their
// squeeze-and-excitation, each model one run from its stem to its global mean; resnet18's 1 x 1
// downsamples, alone between 3 x 3 layers, stay NCHW. Whole models, interleaved, best warm time (auto /
// nchw, one thread): mobilenet_v2 0.82-0.89; efficientnet_b0 0.93 at AVX-512, 0.96 at AVX2;
// mobilenet_v3_small 0.90 at AVX-512, level (1.01-1.04) at AVX2; mnasnet1_0 and mnasnet0_5 0.94-1.04.
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

// Note [Carrying channels-last through elementwise ops and means]
// A convolution's output is read by more than convolutions: efficientnet_b0's and mobilenet_v3's
// squeeze-and-excitation blocks take the mean of a depthwise output over H and W, and multiply that output
// by a per-channel gate ([1, C, 1, 1]) before the projection reads it; models end in a global mean. Such a
// reader acts on each element alone (an elementwise op), or reduces H and W together (a mean or sum over
// them), so it runs on the channels-last tensor as well: an elementwise op unchanged, with an operand of
// [1, C, 1, 1] (or [C, 1, 1]) reshaped to [1, 1, 1, C] (the same memory) and a single value as it is; a mean
// over H and W as a mean over the middle dimensions of [N, H, W, C] (column sums, vectorised along C),
// whose [N, C] result is the NCHW one. So they join the runs of chosen convolutions, which then pass
// through a squeeze-and-excitation block instead of ending at it, and the layout changes only where an
// image (a 4-d tensor of more than one pixel) enters or leaves a run: what a change of layout costs is a
// pass over an image, and a tensor of one pixel per channel is the same memory in both layouts.
// A gate per image as well as per channel ([N, C, 1, 1] with N > 1) stays out: channels-last it would be
// [N, 1, 1, C], no trailing block of [N, H, W, C], which the native kernels take only in their generic
// broadcasting loop; [1, 1, 1, C] they repeat along the image's rows (a batch of images keeps its squeeze-
// and-excitation blocks NCHW, as before).

enum class Carries { no, convolution, elementwise, pooling };

bool one_pixel(const Dims& d) { return d.size() == 4 && d[2] * d[3] == 1; }
bool is_image(const ir::Node* n) {
  return n != nullptr && n->type.dtype == DType::f32 && n->type.shape.size() == 4 && !one_pixel(n->type.shape);
}

// How an operand of an elementwise member reads channels-last: the image itself (the op's own shape), a
// value per channel (reshaped), or a single value (as it is).
enum class Operand { image, per_channel, single, other };
Operand operand_kind(const Dims& operand, const Dims& out) {
  if (operand == out) return Operand::image;
  if (ops::numel(operand) == 1) return Operand::single;
  if (operand.size() < 3 || operand.size() > 4) return Operand::other;
  // One value per channel for every image, not per image as well (Note [Carrying channels-last through
  // elementwise ops and means]).
  const std::int64_t a = operand.size() == 4 ? operand[0] : 1;
  const std::int64_t c = operand[operand.size() - 3];
  const bool pixel = operand[operand.size() - 2] == 1 && operand[operand.size() - 1] == 1;
  return pixel && a == 1 && (c == 1 || c == out[1]) ? Operand::per_channel : Operand::other;
}

// Whether node n can run channels-last, and how (convolutions: those `layout` picks, chosen by the caller).
Carries carries(const ir::Graph& g, const ir::Node& n) {
  using ops::OpTag;
  if (!is_image(&n) && n.op != OpTag::mean && n.op != OpTag::sum) return Carries::no;
  if (ops::elementwise_map(n.op)) return is_image(g.find(n.inputs[0])) ? Carries::elementwise : Carries::no;
  switch (n.op) {
    case OpTag::add:
    case OpTag::sub:
    case OpTag::mul:
    case OpTag::div: {
      int images = 0;
      for (const auto& id : n.inputs) {
        const ir::Node* x = g.find(id);
        if (x == nullptr || x->type.dtype != DType::f32) return Carries::no;
        const Operand k = operand_kind(x->type.shape, n.type.shape);
        if (k == Operand::other) return Carries::no;
        images += k == Operand::image ? 1 : 0;
      }
      return images > 0 ? Carries::elementwise : Carries::no;
    }
    case OpTag::mean:
    case OpTag::sum: {
      const ir::Node* x = g.find(n.inputs[0]);
      if (!is_image(x)) return Carries::no;
      std::set<std::int64_t> dims;
      const char* op = n.op == OpTag::sum ? "sum" : "mean";
      for (auto d : n.attrs.get_ints(op, "dims", std::vector<std::int64_t>{})) dims.insert(d < 0 ? d + 4 : d);
      return dims == std::set<std::int64_t>{2, 3} ? Carries::pooling : Carries::no;
    }
    default:
      return Carries::no;
  }
}

// The inputs of member n that carry its activations (a convolution's input and residual; every input of
// the others).
std::vector<std::size_t> activation_inputs(const ir::Node& n) {
  if (n.op == ops::OpTag::conv2d || n.op == ops::OpTag::conv2d_activation)
    return n.inputs.size() == 4 ? std::vector<std::size_t>{0, 3} : std::vector<std::size_t>{0};
  std::vector<std::size_t> ks(n.inputs.size());
  for (std::size_t k = 0; k < ks.size(); ++k) ks[k] = k;
  return ks;
}

// The runs of members that move (Note [Where channels-last pays]): members linked by the images they pass
// one another; a run moves when it holds a convolution and, for the automatic choice, passes at least twice
// as many images inside as across its ends.
std::set<std::string> channels_last_runs(const ir::Graph& g, const std::map<std::string, Carries>& members,
                                         bool automatic) {
  std::map<std::string, std::string> parent;
  for (const auto& [id, how] : members) parent[id] = id;
  auto root = [&](std::string id) {
    while (parent[id] != id) id = parent[id] = parent[parent[id]];
    return id;
  };
  auto inside_edge = [&](const std::string& input) { return members.contains(input) && is_image(g.find(input)); };
  for (const auto& n : g.nodes) {
    if (!members.contains(n.id)) continue;
    for (std::size_t k : activation_inputs(n))
      if (inside_edge(n.inputs[k])) parent[root(n.inputs[k])] = root(n.id);
  }
  std::map<std::string, int> inside, across;  // by run
  std::map<std::string, std::set<std::string>> entries;
  std::set<std::string> read_outside, with_convolution;
  for (const auto& n : g.nodes) {
    if (members.contains(n.id)) {
      if (members.at(n.id) == Carries::convolution) with_convolution.insert(root(n.id));
      for (std::size_t k : activation_inputs(n)) {
        if (inside_edge(n.inputs[k])) {
          ++inside[root(n.id)];
        } else if (is_image(g.find(n.inputs[k]))) {
          entries[root(n.id)].insert(n.inputs[k]);
        }
      }
      continue;
    }
    for (const auto& in : n.inputs)
      if (members.contains(in) && is_image(g.find(in))) read_outside.insert(in);
  }
  for (const auto& o : g.outputs)
    if (members.contains(o) && is_image(g.find(o))) read_outside.insert(o);
  for (const auto& [run, ins] : entries) across[run] += static_cast<int>(ins.size());
  for (const auto& id : read_outside) ++across[root(id)];
  std::set<std::string> moved;
  for (const auto& [id, how] : members) {
    const std::string run = root(id);
    if (with_convolution.contains(run) && (!automatic || inside[run] >= 2 * across[run])) moved.insert(id);
  }
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

ir::Node reshape_node(std::string id, std::string input, const Dims& shape) {
  ir::Node n;
  n.id = std::move(id);
  n.op = ops::OpTag::reshape;
  n.inputs = {std::move(input)};
  n.attrs.set("shape", std::vector<std::int64_t>(shape.begin(), shape.end()));
  return n;
}

// [O, C / groups, KH, KW] -> [KH, KW, C / groups, O].
Tensor repacked_weight(const Tensor& w) {
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
  return Tensor::from_values<float>(Dims{kh, kw, cg, o}, dst);
}

}  // namespace

std::vector<Rewrite> choose_channels_last(ir::Graph& g, SourceValues& values, Layout layout) {
  std::vector<Rewrite> out;
  if (layout == Layout::nchw) return out;
  std::map<std::string, Carries> members;
  for (const auto& n : g.nodes) {
    if (n.op == ops::OpTag::conv2d || n.op == ops::OpTag::conv2d_activation) {
      const Tensor* w = parameter_value(g, values, n.inputs[1]);
      if (n.type.dtype != DType::f32 || n.type.shape.size() != 4 || w == nullptr || w->shape().size() != 4) continue;
      if (layout == Layout::automatic && !channels_last_candidate(g, n)) continue;
      members.emplace(n.id, Carries::convolution);
    } else if (const Carries how = carries(g, n); how != Carries::no) {
      members.emplace(n.id, how);
    }
  }
  const std::set<std::string> chosen = channels_last_runs(g, members, layout == Layout::automatic);
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
  std::map<std::string, Dims> shape_of;  // before the rewrite, which replaces the chosen nodes as it goes
  for (const auto& n : g.nodes) shape_of.emplace(n.id, n.type.shape);
  std::map<std::string, std::string> moved_as, converted_as, repacked_as;  // by the original id
  for (const auto& id : chosen) moved_as[id] = fresh(id + ".nhwc");
  // The channels-last form of node `id`: a chosen node's own (but a mean's, [N, C]); else, made once, a
  // permute of an image to [N, H, W, C], a reshape of one pixel per channel to [N or 1, 1, 1, C], or the node
  // itself for one value.
  auto channels_last = [&](const std::string& id) {
    if (chosen.contains(id) && members.at(id) != Carries::pooling) return moved_as.at(id);
    const Dims& d = shape_of.at(id);
    if (ops::numel(d) == 1 && d.size() != 4) return id;
    auto [it, first] = converted_as.try_emplace(id, "");
    if (first) {
      it->second = fresh(id + ".to_nhwc");
      if (d.size() == 4 && !one_pixel(d)) {
        added.push_back(permute_node(it->second, id, {0, 2, 3, 1}));
      } else {
        const std::int64_t a = d.size() == 4 ? d[0] : 1, c = d[d.size() - 3];
        added.push_back(reshape_node(it->second, id, Dims{a, 1, 1, c}));
      }
    }
    return it->second;
  };
  for (auto& n : g.nodes) {
    if (!chosen.contains(n.id)) continue;
    ir::Node moved = n;
    moved.id = moved_as.at(n.id);
    moved.type_declared = false;
    const Carries how = members.at(n.id);
    std::string kind = "channels_last";
    if (how == Carries::convolution) {
      kind = "conv2d_nhwc";
      auto [wit, first_use] = repacked_as.try_emplace(n.inputs[1], "");
      if (first_use) {
        wit->second = fresh(n.inputs[1] + ".nhwc");
        Tensor w = repacked_weight(*parameter_value(g, values, n.inputs[1]));
        added.push_back(ir::parameter_node(wit->second, w.shape(), DType::f32, false));
        values.insert_or_assign(wit->second, std::move(w));
      }
      moved.op = ops::OpTag::conv2d_nhwc;
      moved.inputs[1] = wit->second;
      if (!moved.attrs.has("activation")) moved.attrs.set("activation", std::string("none"));
    } else if (how == Carries::pooling) {
      moved.attrs.set("dims", std::vector<std::int64_t>{1, 2});
      moved.attrs.set("keepdim", false);
    }
    for (std::size_t k : activation_inputs(n)) moved.inputs[k] = channels_last(n.inputs[k]);
    out.push_back(Rewrite{kind, {n.id}, moved.id, kLayoutEvidence});
    // The node's id now names its output back in [N, C, H, W] (or as the mean's [N, C] or [N, C, 1, 1]), for
    // the readers that did not move.
    ir::Node back = how == Carries::pooling || one_pixel(n.type.shape) ? reshape_node(n.id, moved.id, n.type.shape)
                                                                       : permute_node(n.id, moved.id, {0, 3, 1, 2});
    added.push_back(std::move(moved));
    n = std::move(back);
  }
  rebuild(g, {}, std::move(added));
  // What nothing reads any more: the nodes back to NCHW between two chosen ones, the weights re-packed (a
  // weight a convolution left NCHW also reads stays).
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
