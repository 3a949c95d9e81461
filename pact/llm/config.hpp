#pragma once
/// A Hugging Face decoder checkpoint folder's config.json (Llama and GPT-2 families), read into one
/// DecoderConfig. Every field the reader knows is honoured, ignored (with why) or refused (with why):
/// config_fields() is that table, and docs/llm.md prints it. A refused field, or a value Pact cannot
/// honour, is a typed error naming the field; a field it does not know is reported, not refused.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pact::llm {

/// The model families Pact builds (model_type "llama" and "gpt2").
enum class Family { llama, gpt2 };
std::string_view family_name(Family family) noexcept;

/// How a folder's linear weights are stored: as float tensors, or quantized by `pact quantize --dtype
/// int8` (weight-only, per output channel: Note [Weight-only int8] in quantize.cpp).
enum class Storage { floating, int8 };

struct DecoderConfig {
  Family family = Family::llama;
  std::int64_t hidden = 0;        ///< hidden_size / n_embd
  std::int64_t intermediate = 0;  ///< intermediate_size / n_inner (GPT-2: 4 * n_embd when null)
  std::int64_t heads = 0;         ///< num_attention_heads / n_head
  std::int64_t kv_heads = 0;      ///< num_key_value_heads (GPT-2 and absent: heads)
  std::int64_t head_dim = 0;      ///< head_dim (absent: hidden / heads)
  std::int64_t layers = 0;        ///< num_hidden_layers / n_layer
  std::int64_t vocab = 0;         ///< vocab_size
  std::int64_t context = 0;       ///< max_position_embeddings / n_positions
  double norm_eps = 1e-6;         ///< rms_norm_eps / layer_norm_epsilon
  double rope_theta = 10000.0;    ///< Llama only
  /// rope_scaling (Llama): "default" (none), "linear" (every frequency / factor) or "llama3" (Llama 3.1's
  /// wavelength-dependent scaling between low_freq_factor and high_freq_factor of the original context).
  std::string rope_type = "default";
  double rope_factor = 1.0, rope_low_freq_factor = 1.0, rope_high_freq_factor = 4.0;
  std::int64_t rope_original_context = 0;
  bool tied = false;            ///< tie_word_embeddings (GPT-2: always)
  bool attention_bias = false;  ///< Llama's attention_bias (GPT-2: always)
  bool mlp_bias = false;        ///< Llama's mlp_bias (GPT-2: always)
  std::string activation;       ///< "silu" (Llama), "gelu_tanh" (GPT-2's gelu_new) or "gelu"
  Storage storage = Storage::floating;
  std::vector<std::string> unknown_fields;  ///< fields not in config_fields(), reported by `pact generate`

  std::int64_t groups() const noexcept { return heads / kv_heads; }  ///< query heads per key/value head
};

/// One row of the field table: which families read it, what Pact does with it, and why.
struct ConfigField {
  std::string_view name;
  std::string_view families;   ///< "llama", "gpt2" or "both"
  std::string_view treatment;  ///< "honoured", "ignored" or "refused"
  std::string_view why;
};
/// Every field the reader knows, in the order docs/llm.md lists them.
std::span<const ConfigField> config_fields() noexcept;

/// Largest config.json read (docs/limits.md).
inline constexpr std::uint64_t kMaxConfigBytes = 1u << 20;
/// Largest value of any size field (hidden, heads * head_dim, vocab, ...): 2^24; and most layers: 1024
/// (Llama 3 405B has 126). Every tensor then holds at most 2^50 elements and a checkpoint under 2^62, and
/// a step graph stays under ir::kMaxGraphNodes (docs/limits.md).
inline constexpr std::int64_t kMaxConfigExtent = std::int64_t{1} << 24;
inline constexpr std::int64_t kMaxLayers = 1024;

/// Parses config.json text. `where` names the file in messages. Every failure is pact::Error: parse_error
/// for malformed JSON, invalid_argument naming the field for a missing, mistyped, out-of-range or
/// refused one ("rope_scaling: ... is not supported").
DecoderConfig parse_config(std::string_view json_text, std::string_view where);
/// Reads DIR/config.json (io_error when unreadable, size-limited) and parses it.
DecoderConfig load_config(const std::string& dir);

}  // namespace pact::llm
