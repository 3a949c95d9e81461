#pragma once
/// A decoder checkpoint as a Pact graph (SPEC §7's IR, planned like any model): the tensors a
/// configuration needs under their Hugging Face names, the folder's weights read and checked against
/// them, and the graph of one forward step over T new tokens against a KV cache of fixed capacity C.
///
/// Llama: embedding, per layer RMSNorm, q/k/v projections, rotate-half rotary embeddings (rope_theta),
/// grouped-query attention, o projection, residual, RMSNorm, SwiGLU, residual; final RMSNorm and a tied
/// or untied head. GPT-2: token and learned position embeddings, per block LayerNorm, a fused qkv
/// projection (Conv1D weights, stored [in, out] in the files, transposed once at load), attention,
/// projection, residual, LayerNorm, GELU MLP, residual; final LayerNorm and the tied head.
/// Note [Decoder step graph] in decoder.cpp says how the cache, the mask and grouped heads are laid out.

#include <map>
#include <set>
#include <string>
#include <vector>

#include "pact/core/tensor.hpp"
#include "pact/ir/graph.hpp"
#include "pact/llm/config.hpp"

namespace pact::llm {

/// How a run stores its projection weights: f32, bf16 (linear_bf16) or int8 (linear_int8: i8 with
/// per-output-channel scales). Activations, the KV cache, embeddings and norms are f32 in every precision:
/// decode reads each weight once per token, so the weights' bytes are what a narrower dtype saves.
enum class Precision { f32, bf16, int8 };
std::string_view precision_name(Precision p) noexcept;
/// "f32", "bf16" or "int8"; anything else is invalid_argument naming `where`.
Precision parse_precision(std::string_view name, std::string_view where);

/// One tensor a configuration's checkpoint holds, as Pact names it (Hugging Face's name; GPT-2's with
/// the "transformer." prefix) and in the shape the graph uses ([out, in] for every linear weight).
struct TensorSpec {
  std::string name;
  Dims shape;
  bool linear = false;  ///< a projection weight: stored as bf16 or i8 under those precisions
  bool conv1d = false;  ///< GPT-2's Conv1D: the file stores it transposed, [in, out]
};
/// Every tensor of `config`'s checkpoint (float storage), in layer order.
std::vector<TensorSpec> checkpoint_tensors(const DecoderConfig& config);
/// The number of parameters the checkpoint holds (a tied head counted once).
std::int64_t parameter_count(const DecoderConfig& config);

/// The name an int8 linear weight's per-output-channel scales are stored under ("X.weight_scale").
std::string scale_name(const std::string& weight);

/// Largest checkpoint index read (model.safetensors.index.json) and most shards it may name
/// (docs/limits.md).
inline constexpr std::uint64_t kMaxIndexBytes = 16u << 20;
inline constexpr std::size_t kMaxShards = 4096;

/// A model.safetensors.index.json: shard file -> the tensors the index puts there. Malformed text, a
/// weight_map that is not an object of names to non-empty file names, or more than kMaxShards shards is a
/// typed error naming `where`.
std::map<std::string, std::set<std::string>> parse_shard_index(std::string_view json_text, std::string_view where);
/// The tensors of a folder's model.safetensors, or of the shards a model.safetensors.index.json names
/// (each shard file inside the folder; an entry whose file lacks it, a tensor in two shards or a shard
/// outside the folder is a typed error naming it), under their file names.
std::vector<std::pair<std::string, Tensor>> read_checkpoint(const std::string& dir);

/// The weights of a run: every graph parameter by name, checked and converted. A missing tensor names
/// itself; a shape other than the configuration's names the tensor and both shapes; a tensor the
/// configuration does not use is refused by name (Hugging Face's recomputable buffers, rotary inv_freq
/// and GPT-2's attn.bias / attn.masked_bias, are dropped). Float tensors of any float dtype are converted
/// to the precision's; int8 quantizes the linear weights of a float folder, and reads an int8 folder's
/// as they are (whose precision must then be int8).
std::map<std::string, Tensor> load_weights(std::vector<std::pair<std::string, Tensor>> tensors,
                                           const DecoderConfig& config, Precision precision, std::string_view where);

/// The f32 rotary tables of a Llama configuration at positions [0, capacity): cos and sin of position *
/// rope_theta^(-2i / head_dim) (rescaled as rope_scaling says), each half repeated ([capacity, head_dim],
/// Hugging Face's rotate-half layout), computed in double and rounded once.
std::pair<Tensor, Tensor> rotary_tables(const DecoderConfig& config, std::int64_t capacity);

/// The names of a step graph's sources and outputs.
namespace step {
inline constexpr const char* kTokens = "input_ids";     ///< i64 [1, T]
inline constexpr const char* kPositions = "positions";  ///< i64 [T]
inline constexpr const char* kMask = "attention_mask";  ///< bool [groups * T, C]
inline constexpr const char* kLogits = "logits";        ///< [1, 1, vocab]: the last new token's
inline constexpr const char* kRopeCos = "rope.cos";     ///< Llama: [C, head_dim]
inline constexpr const char* kRopeSin = "rope.sin";
std::string cache_input(std::int64_t layer, bool value);   ///< "cache.L.key" / "cache.L.value"
std::string cache_output(std::int64_t layer, bool value);  ///< the updated cache (index_copy's node)
}  // namespace step

/// The graph of one step over `tokens` new tokens (T) against caches of `capacity` positions (C).
/// invalid_argument when T or C is not positive, T > C, or C exceeds a GPT-2's position table.
ir::Graph step_graph(const DecoderConfig& config, Precision precision, std::int64_t tokens, std::int64_t capacity);

}  // namespace pact::llm
