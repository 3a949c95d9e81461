#include "pact/llm/config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "pact/core/error.hpp"
#include "pact/core/file.hpp"
#include "pact/core/json.hpp"

namespace pact::llm {

std::string_view family_name(Family family) noexcept { return family == Family::llama ? "llama" : "gpt2"; }

namespace {

// clang-format off
constexpr ConfigField kFields[] = {
    {"model_type", "both", "honoured", "selects the family: \"llama\" or \"gpt2\"; any other is refused"},
    {"pact_quantization", "both", "honoured", "written by `pact quantize`: {\"dtype\": \"int8\"} marks int8 linear weights with per-output-channel scales"},
    {"vocab_size", "both", "honoured", "rows of the embedding and of the output head"},
    {"hidden_size", "llama", "honoured", "the residual width"},
    {"intermediate_size", "llama", "honoured", "the SwiGLU width"},
    {"num_attention_heads", "llama", "honoured", "query heads"},
    {"num_key_value_heads", "llama", "honoured", "key/value heads (grouped-query attention); absent: num_attention_heads"},
    {"head_dim", "llama", "honoured", "per-head width; absent: hidden_size / num_attention_heads"},
    {"num_hidden_layers", "llama", "honoured", "decoder layers"},
    {"rms_norm_eps", "llama", "honoured", "RMSNorm epsilon"},
    {"rope_theta", "llama", "honoured", "rotary base (rotate-half convention); absent: 10000"},
    {"max_position_embeddings", "llama", "honoured", "the longest context; the KV cache's default capacity"},
    {"tie_word_embeddings", "both", "honoured", "the output head reads the embedding table (GPT-2 default: true)"},
    {"attention_bias", "llama", "honoured", "biases on the q, k, v and o projections"},
    {"mlp_bias", "llama", "honoured", "biases on the gate, up and down projections"},
    {"hidden_act", "llama", "honoured", "\"silu\" only; any other activation is refused"},
    {"rope_scaling", "llama", "honoured", "null, \"linear\" (factor) and \"llama3\" (factor, low_freq_factor, high_freq_factor, original_max_position_embeddings) rescale the rotary frequencies; \"dynamic\", \"yarn\", \"longrope\" and any other type are refused"},
    {"pretraining_tp", "llama", "ignored", "splits the projections during pretraining only; the products are the same"},
    {"attention_dropout", "llama", "ignored", "dropout is inactive in inference"},
    {"n_embd", "gpt2", "honoured", "the residual width"},
    {"n_inner", "gpt2", "honoured", "the MLP width; null: 4 * n_embd"},
    {"n_head", "gpt2", "honoured", "attention heads"},
    {"n_layer", "gpt2", "honoured", "decoder blocks"},
    {"n_positions", "gpt2", "honoured", "rows of the learned position table; the KV cache's default capacity"},
    {"layer_norm_epsilon", "gpt2", "honoured", "LayerNorm epsilon"},
    {"activation_function", "gpt2", "honoured", "\"gelu_new\" and \"gelu_pytorch_tanh\" (tanh approximation) or \"gelu\" (exact); any other is refused"},
    {"scale_attn_weights", "gpt2", "honoured", "true (scores divided by sqrt(head width)); false is refused"},
    {"scale_attn_by_inverse_layer_idx", "gpt2", "refused", "per-layer score scaling is not implemented; false is accepted"},
    {"add_cross_attention", "gpt2", "refused", "encoder-decoder cross-attention is not a decoder-only model; false is accepted"},
    {"reorder_and_upcast_attn", "gpt2", "ignored", "changes only the order of 16-bit operations; Pact's attention accumulates in f32"},
    {"n_ctx", "gpt2", "ignored", "a legacy duplicate of n_positions"},
    {"resid_pdrop", "gpt2", "ignored", "dropout is inactive in inference"},
    {"embd_pdrop", "gpt2", "ignored", "dropout is inactive in inference"},
    {"attn_pdrop", "gpt2", "ignored", "dropout is inactive in inference"},
    {"summary_type", "gpt2", "ignored", "the sequence-summary head of classification models, not the language model"},
    {"summary_use_proj", "gpt2", "ignored", "the sequence-summary head, not the language model"},
    {"summary_activation", "gpt2", "ignored", "the sequence-summary head, not the language model"},
    {"summary_proj_to_labels", "gpt2", "ignored", "the sequence-summary head, not the language model"},
    {"summary_first_dropout", "gpt2", "ignored", "the sequence-summary head, not the language model"},
    {"task_specific_params", "gpt2", "ignored", "defaults for Hugging Face's pipelines"},
    {"quantization_config", "both", "refused", "GPTQ, AWQ and bitsandbytes weights are not read; `pact quantize` makes Pact's int8"},
    {"initializer_range", "both", "ignored", "initialisation only"},
    {"use_cache", "both", "ignored", "Pact always decodes against its KV cache"},
    {"bos_token_id", "both", "ignored", "token ids come from the caller (--prompt-ids, or the tokenizer)"},
    {"eos_token_id", "both", "ignored", "generation runs --max-new-tokens steps; it does not stop at a token"},
    {"pad_token_id", "both", "ignored", "batch 1 needs no padding"},
    {"torch_dtype", "both", "ignored", "each tensor's dtype is read from the safetensors header; --dtype chooses the compute dtype"},
    {"architectures", "both", "ignored", "provenance; model_type chooses the family"},
    {"transformers_version", "both", "ignored", "provenance"},
    {"_name_or_path", "both", "ignored", "provenance"},
    {"output_attentions", "both", "ignored", "Hugging Face API switches with no effect on the logits"},
    {"output_hidden_states", "both", "ignored", "Hugging Face API switches with no effect on the logits"},
    {"return_dict", "both", "ignored", "Hugging Face API switches with no effect on the logits"},
};
// clang-format on

[[noreturn]] void refuse(std::string_view where, std::string_view field, std::string_view why) {
  throw_error(ErrorCode::invalid_argument, std::string(where), fmt::format("{}: {}", field, why));
}

const ConfigField* known(std::string_view name) {
  for (const auto& f : kFields)
    if (f.name == name) return &f;
  return nullptr;
}

bool present(const Json& doc, const char* field) { return doc.contains(field) && !doc.at(field).is_null(); }

std::int64_t extent(const Json& doc, const char* field, std::string_view where,
                    std::optional<std::int64_t> fallback = {}) {
  if (!present(doc, field)) {
    if (fallback) return *fallback;
    refuse(where, field, "is missing");
  }
  const auto v = json_int64(doc.at(field));
  if (!v || *v < 1 || *v > kMaxConfigExtent)
    refuse(where, field,
           fmt::format("must be an integer in [1, {}]; it is {}", kMaxConfigExtent, doc.at(field).dump()));
  return *v;
}

double positive(const Json& doc, const char* field, std::string_view where, double fallback) {
  if (!present(doc, field)) return fallback;
  const Json& v = doc.at(field);
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0)
    refuse(where, field, fmt::format("must be a positive finite number; it is {}", v.dump()));
  return v.get<double>();
}

bool flag(const Json& doc, const char* field, std::string_view where, bool fallback) {
  if (!present(doc, field)) return fallback;
  if (!doc.at(field).is_boolean())
    refuse(where, field, fmt::format("must be true or false; it is {}", doc.at(field).dump()));
  return doc.at(field).get<bool>();
}

std::string text(const Json& doc, const char* field, std::string_view where, std::string fallback) {
  if (!present(doc, field)) return fallback;
  if (!doc.at(field).is_string()) refuse(where, field, fmt::format("must be a string; it is {}", doc.at(field).dump()));
  return doc.at(field).get<std::string>();
}

// rope_scaling: {"rope_type" (or the older "type"): "linear" | "llama3", "factor": ..., ...}.
void read_rope_scaling(const Json& r, std::string_view where, DecoderConfig& c) {
  if (!r.is_object()) refuse(where, "rope_scaling", fmt::format("must be an object or null; it is {}", r.dump()));
  const std::string type = r.contains("rope_type") ? text(r, "rope_type", where, "") : text(r, "type", where, "");
  if (type != "linear" && type != "llama3") {
    refuse(where, "rope_scaling",
           fmt::format("type '{}' is not supported (\"linear\" and \"llama3\" are)", printable(type)));
  }
  auto number = [&](const char* field) {
    if (!present(r, field)) refuse(where, "rope_scaling", fmt::format("{} scaling needs '{}'", type, field));
    const Json& v = r.at(field);
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0)
      refuse(where, fmt::format("rope_scaling.{}", field),
             fmt::format("must be a positive finite number; it is {}", v.dump()));
    return v.get<double>();
  };
  c.rope_type = type;
  c.rope_factor = number("factor");
  if (type == "llama3") {
    c.rope_low_freq_factor = number("low_freq_factor");
    c.rope_high_freq_factor = number("high_freq_factor");
    if (!(c.rope_high_freq_factor > c.rope_low_freq_factor)) {
      refuse(where, "rope_scaling",
             fmt::format("high_freq_factor {} must exceed low_freq_factor {}", c.rope_high_freq_factor,
                         c.rope_low_freq_factor));
    }
    const auto original = json_int64(r.value("original_max_position_embeddings", Json()));
    if (!original || *original < 1 || *original > kMaxConfigExtent) {
      refuse(where, "rope_scaling.original_max_position_embeddings",
             fmt::format("must be an integer in [1, {}]", kMaxConfigExtent));
    }
    c.rope_original_context = *original;
  }
}

}  // namespace

std::span<const ConfigField> config_fields() noexcept { return kFields; }

DecoderConfig parse_config(std::string_view json_text, std::string_view where) {
  const Json doc = parse_json(json_text, where);
  if (!doc.is_object()) throw_error(ErrorCode::parse_error, std::string(where), "config.json must be a JSON object");
  DecoderConfig c;
  const std::string type = text(doc, "model_type", where, "");
  if (type == "llama") {
    c.family = Family::llama;
  } else if (type == "gpt2") {
    c.family = Family::gpt2;
  } else {
    refuse(where, "model_type",
           type.empty() ? "is missing (Pact reads \"llama\" and \"gpt2\" folders)"
                        : fmt::format("'{}' is not supported (Pact reads \"llama\" and \"gpt2\" folders)", type));
  }
  // Fields of the other family are unknown here: a GPT-2 config with rope_theta is reported, not read.
  for (const auto& [name, value] : doc.items()) {
    const ConfigField* f = known(name);
    if (f == nullptr || (f->families != "both" && f->families != type)) c.unknown_fields.push_back(name);
  }
  if (present(doc, "quantization_config")) refuse(where, "quantization_config", known("quantization_config")->why);
  c.vocab = extent(doc, "vocab_size", where);
  if (c.family == Family::llama) {
    c.hidden = extent(doc, "hidden_size", where);
    c.intermediate = extent(doc, "intermediate_size", where);
    c.heads = extent(doc, "num_attention_heads", where);
    c.kv_heads = extent(doc, "num_key_value_heads", where, c.heads);
    c.layers = extent(doc, "num_hidden_layers", where);
    c.context = extent(doc, "max_position_embeddings", where);
    c.norm_eps = positive(doc, "rms_norm_eps", where, 1e-6);
    c.rope_theta = positive(doc, "rope_theta", where, 10000.0);
    c.tied = flag(doc, "tie_word_embeddings", where, false);
    c.attention_bias = flag(doc, "attention_bias", where, false);
    c.mlp_bias = flag(doc, "mlp_bias", where, false);
    if (c.heads % c.kv_heads != 0) {
      refuse(where, "num_key_value_heads",
             fmt::format("{} does not divide num_attention_heads {}", c.kv_heads, c.heads));
    }
    if (!present(doc, "head_dim") && c.hidden % c.heads != 0)
      refuse(where, "num_attention_heads", fmt::format("{} does not divide hidden_size {}", c.heads, c.hidden));
    c.head_dim = extent(doc, "head_dim", where, c.hidden / c.heads);
    if (c.head_dim % 2 != 0)
      refuse(where, "head_dim", fmt::format("{} is odd; rotary embeddings pair halves", c.head_dim));
    c.activation = text(doc, "hidden_act", where, "silu");
    if (c.activation != "silu")
      refuse(where, "hidden_act", fmt::format("'{}': only \"silu\" is supported", c.activation));
    if (present(doc, "rope_scaling")) read_rope_scaling(doc.at("rope_scaling"), where, c);
  } else {
    c.hidden = extent(doc, "n_embd", where);
    c.heads = extent(doc, "n_head", where);
    c.kv_heads = c.heads;
    c.layers = extent(doc, "n_layer", where);
    c.context = extent(doc, "n_positions", where);
    c.intermediate = extent(doc, "n_inner", where, std::min(4 * c.hidden, kMaxConfigExtent));
    c.norm_eps = positive(doc, "layer_norm_epsilon", where, 1e-5);
    c.tied = flag(doc, "tie_word_embeddings", where, true);
    c.attention_bias = c.mlp_bias = true;
    if (c.hidden % c.heads != 0)
      refuse(where, "n_head", fmt::format("{} does not divide n_embd {}", c.heads, c.hidden));
    c.head_dim = c.hidden / c.heads;
    const std::string act = text(doc, "activation_function", where, "gelu_new");
    if (act == "gelu_new" || act == "gelu_pytorch_tanh") {
      c.activation = "gelu_tanh";
    } else if (act == "gelu") {
      c.activation = "gelu";
    } else {
      refuse(where, "activation_function",
             fmt::format("'{}': \"gelu_new\", \"gelu_pytorch_tanh\" and \"gelu\" are supported", act));
    }
    if (!flag(doc, "scale_attn_weights", where, true)) refuse(where, "scale_attn_weights", "false is not supported");
    if (flag(doc, "scale_attn_by_inverse_layer_idx", where, false))
      refuse(where, "scale_attn_by_inverse_layer_idx", known("scale_attn_by_inverse_layer_idx")->why);
    if (flag(doc, "add_cross_attention", where, false))
      refuse(where, "add_cross_attention", known("add_cross_attention")->why);
  }
  if (c.layers > kMaxLayers) {
    refuse(where, c.family == Family::llama ? "num_hidden_layers" : "n_layer",
           fmt::format("{} layers; at most {} are read", c.layers, kMaxLayers));
  }
  if (c.heads * c.head_dim > kMaxConfigExtent || c.kv_heads * c.head_dim > kMaxConfigExtent) {
    refuse(where, "head_dim",
           fmt::format("{} heads of {} exceed a width of {}", c.heads, c.head_dim, kMaxConfigExtent));
  }
  if (present(doc, "pact_quantization")) {
    const Json& q = doc.at("pact_quantization");
    if (!q.is_object() || !q.contains("dtype") || q.at("dtype") != "int8")
      refuse(where, "pact_quantization", fmt::format("must be {{\"dtype\": \"int8\"}}; it is {}", q.dump()));
    c.storage = Storage::int8;
  }
  return c;
}

DecoderConfig load_config(const std::string& dir) {
  const std::string path = dir + "/config.json";
  return parse_config(read_file(path, "pact generate", kMaxConfigBytes), path);
}

}  // namespace pact::llm
