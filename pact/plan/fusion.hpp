#pragma once
/// Inference fusions (issue 18): graph rewrites made before planning a forward-only run, each recorded
/// so the plan audit shows what was fused, into which node, and the evidence that the rewrite keeps the
/// model's values.
///
///  - fold_batch_norm: a batch norm whose input is a convolution read by nothing else becomes that
///    convolution with weight W s and bias (b - mean) s + beta, s = gamma / sqrt(var + eps) per output
///    channel (in f64, stored f32): with the running statistics, batch norm is exactly that affine map.
///    Needs the parameter values, so it runs where they are bound (pact run); the folded values are new
///    parameter nodes "<bn>.folded_weight" and "<bn>.folded_bias".
///  - conv2d_activation: relu, relu6 (clamp to [0, 6]), silu or hardswish of a convolution read by nothing else
///    becomes one conv2d_activation node (the op table's), whose native kernel applies the activation as
///    it stores each chunk; its capsules carry their own evidence (the op sweep).
///  - conv2d_residual: an add of a biased convolution read by nothing else and a tensor of the add's own
///    type (a ResNet block's identity or downsampled branch), with the relu, relu6, silu or hardswish that
///    is the add's only reader, becomes one conv2d_activation node with the tensor as its fourth input
///    (activation "none" where no activation follows); the kernel adds it to each chunk as it is stored.
///    Run after fold_batch_norm (which gives the convolution its bias) and before conv2d_activation.
///  - conv2d_nhwc (the plan-time layout choice): a convolution (conv2d or conv2d_activation, f32, its weight
///    a bound parameter) that choose_channels_last picks runs on channels-last activations: one conv2d_nhwc
///    node "<conv>.nhwc" reading its input (and residual) as [N, H, W, C], with its weight re-packed once,
///    here, to [KH, KW, C / groups, O] (a new parameter node "<weight>.nhwc"). The node with the
///    convolution's id becomes a permute of "<conv>.nhwc" back to [N, C, H, W] for any reader that is not a
///    chosen convolution (and is dropped where there is none); a chosen convolution whose input comes from
///    elsewhere reads a permute "<input>.to_nhwc" of it (each new id gets ".2", ".3", ... after it where the
///    graph already has that id). So a chain of chosen convolutions passes
///    channels-last tensors from one to the next, and the layout changes only at the chain's ends. Run
///    last, after the other fusions.
///  - channels_last: an elementwise op or a mean over H and W between chosen convolutions moves with them
///    (Note [Carrying channels-last through elementwise ops and means], fusion.cpp): the same op "<id>.nhwc"
///    on the channels-last operands (an operand of one pixel per channel reshaped to [1, 1, 1, C]; a mean
///    over the middle dimensions, its [N, C] reshaped back), and the node's id a permute (or reshape) back.
///
/// Each rewrite keeps the id of the node it replaces last, so every consumer and graph output is
/// untouched. Training plans are never rewritten (batch norm trains on batch statistics, and
/// conv2d_activation has no VJP).

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pact/core/tensor.hpp"
#include "pact/ir/graph.hpp"

namespace pact::plan {

/// One rewrite: its kind, the nodes it replaced (in graph order) and the node that now computes them.
struct Rewrite {
  std::string kind;  ///< "fold_batch_norm", "conv2d_residual", "conv2d_activation", "conv2d_nhwc", "channels_last"
  std::vector<std::string> nodes;
  std::string into;
  std::string evidence;  ///< the test that holds the rewrite to the unfused graph's values
};

/// Parameter values by node id: what fold_batch_norms reads, and where it puts the folded values.
using SourceValues = std::map<std::string, Tensor>;

/// Folds every batch norm it can into its convolution (f32, parameters all in `values`), removes the
/// parameters no node reads any more from the graph and `values`, and returns the rewrites.
std::vector<Rewrite> fold_batch_norms(ir::Graph& graph, SourceValues& values);

/// Fuses every add of a biased convolution read by nothing else and a tensor of the add's type, with the
/// add's activation where it is the add's only reader, into conv2d_activation with a residual.
std::vector<Rewrite> fuse_conv_residuals(ir::Graph& graph);

/// Fuses every relu, relu6, silu or hardswish of a convolution read by nothing else into conv2d_activation.
std::vector<Rewrite> fuse_conv_activations(ir::Graph& graph);

/// Which convolutions choose_channels_last moves to channels-last activations: those where it pays
/// (automatic: Note [Where channels-last pays] in fusion.cpp), none, or every one it can.
enum class Layout { automatic, nchw, nhwc };

/// The layout's name as `pact run --layout` spells it ("auto", "nchw", "nhwc"), and back (nullopt for any
/// other name).
std::string_view layout_name(Layout layout) noexcept;
std::optional<Layout> parse_layout(std::string_view name) noexcept;

/// Moves the convolutions `layout` picks to channels-last activations (conv2d_nhwc, weights re-packed
/// into `values`) with the elementwise ops and means between them, removes the parameters and permutes
/// nothing reads any more, and returns one rewrite per node moved.
std::vector<Rewrite> choose_channels_last(ir::Graph& graph, SourceValues& values, Layout layout);

}  // namespace pact::plan
