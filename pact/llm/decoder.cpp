#include "pact/llm/decoder.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "pact/core/error.hpp"
#include "pact/core/file.hpp"
#include "pact/core/json.hpp"
#include "pact/ir/safetensors.hpp"
#include "pact/llm/quantize.hpp"

namespace pact::llm {

using ops::Attributes;
using ops::OpTag;

std::string_view precision_name(Precision p) noexcept {
  switch (p) {
    case Precision::f32:
      return "f32";
    case Precision::bf16:
      return "bf16";
    case Precision::int8:
      return "int8";
  }
  return "?";
}

Precision parse_precision(std::string_view name, std::string_view where) {
  if (name == "f32") return Precision::f32;
  if (name == "bf16") return Precision::bf16;
  if (name == "int8") return Precision::int8;
  throw_error(ErrorCode::invalid_argument, std::string(where),
              fmt::format("--dtype '{}' is not one of f32, bf16, int8", name));
}

std::string scale_name(const std::string& weight) { return weight + "_scale"; }

// ---- the tensors of a configuration ------------------------------------------------------------------

std::vector<TensorSpec> checkpoint_tensors(const DecoderConfig& c) {
  std::vector<TensorSpec> t;
  const std::int64_t d = c.hidden, q = c.heads * c.head_dim, kv = c.kv_heads * c.head_dim, f = c.intermediate;
  auto add = [&](std::string name, Dims shape, bool linear = false, bool conv1d = false) {
    t.push_back({std::move(name), shape, linear, conv1d});
  };
  if (c.family == Family::llama) {
    add("model.embed_tokens.weight", {c.vocab, d});
    for (std::int64_t l = 0; l < c.layers; ++l) {
      const std::string p = fmt::format("model.layers.{}.", l);
      add(p + "input_layernorm.weight", {d});
      const std::pair<const char*, Dims> proj[] = {
          {"q_proj", {q, d}}, {"k_proj", {kv, d}}, {"v_proj", {kv, d}}, {"o_proj", {d, q}}};
      for (const auto& [name, shape] : proj) {
        add(p + "self_attn." + name + ".weight", shape, true);
        if (c.attention_bias) add(p + "self_attn." + name + ".bias", {shape[0]});
      }
      add(p + "post_attention_layernorm.weight", {d});
      const std::pair<const char*, Dims> mlp[] = {{"gate_proj", {f, d}}, {"up_proj", {f, d}}, {"down_proj", {d, f}}};
      for (const auto& [name, shape] : mlp) {
        add(p + "mlp." + name + ".weight", shape, true);
        if (c.mlp_bias) add(p + "mlp." + name + ".bias", {shape[0]});
      }
    }
    add("model.norm.weight", {d});
  } else {
    add("transformer.wte.weight", {c.vocab, d});
    add("transformer.wpe.weight", {c.context, d});
    for (std::int64_t l = 0; l < c.layers; ++l) {
      const std::string p = fmt::format("transformer.h.{}.", l);
      add(p + "ln_1.weight", {d});
      add(p + "ln_1.bias", {d});
      add(p + "attn.c_attn.weight", {3 * d, d}, true, true);
      add(p + "attn.c_attn.bias", {3 * d});
      add(p + "attn.c_proj.weight", {d, d}, true, true);
      add(p + "attn.c_proj.bias", {d});
      add(p + "ln_2.weight", {d});
      add(p + "ln_2.bias", {d});
      add(p + "mlp.c_fc.weight", {f, d}, true, true);
      add(p + "mlp.c_fc.bias", {f});
      add(p + "mlp.c_proj.weight", {d, f}, true, true);
      add(p + "mlp.c_proj.bias", {d});
    }
    add("transformer.ln_f.weight", {d});
    add("transformer.ln_f.bias", {d});
  }
  // An int8 folder of a tied model stores its head quantized on its own (the embedding stays float).
  if (!c.tied || c.storage == Storage::int8) add("lm_head.weight", {c.vocab, d}, true);
  return t;
}

std::int64_t parameter_count(const DecoderConfig& config) {
  DecoderConfig floating = config;
  floating.storage = Storage::floating;
  std::int64_t n = 0;
  for (const auto& t : checkpoint_tensors(floating)) n += ops::numel(t.shape);
  return n;
}

// ---- reading a folder --------------------------------------------------------------------------------

namespace {

// A file of the folder, refusing names that leave it.
std::string inside(const std::string& dir, const std::string& name, std::string_view where) {
  if (name.empty() || !path_within(dir, name)) {
    throw_error(ErrorCode::invalid_argument, std::string(where),
                fmt::format("shard '{}' is not a file inside the folder", printable(name)));
  }
  return (std::filesystem::path(dir) / name).string();
}

}  // namespace

std::map<std::string, std::set<std::string>> parse_shard_index(std::string_view json_text, std::string_view where) {
  const std::string at(where);
  const Json doc = parse_json(json_text, where);
  if (!doc.is_object() || !doc.contains("weight_map") || !doc.at("weight_map").is_object())
    throw_error(ErrorCode::parse_error, at, "weight_map: must be an object of tensor name -> shard file");
  std::map<std::string, std::set<std::string>> by_shard;
  for (const auto& [name, file] : doc.at("weight_map").items()) {
    if (!file.is_string() || file.get<std::string>().empty())
      throw_error(ErrorCode::parse_error, at, fmt::format("weight_map.{}: must be a file name", printable(name)));
    by_shard[file.get<std::string>()].insert(name);
    if (by_shard.size() > kMaxShards)
      throw_error(ErrorCode::invalid_argument, at, fmt::format("names more than {} shards", kMaxShards));
  }
  return by_shard;
}

std::vector<std::pair<std::string, Tensor>> read_checkpoint(const std::string& dir) {
  const std::string single = dir + "/model.safetensors", index = dir + "/model.safetensors.index.json";
  if (std::filesystem::exists(single) || !std::filesystem::exists(index))
    return std::move(ir::read_safetensors(single).tensors);
  auto by_shard = parse_shard_index(read_file(index, "pact generate", kMaxIndexBytes), index);
  std::vector<std::pair<std::string, Tensor>> out;
  std::set<std::string> seen;
  for (auto& [file, names] : by_shard) {
    const std::string path = inside(dir, file, index);
    ir::SafetensorsFile shard = ir::read_safetensors(path);
    for (auto& [name, tensor] : shard.tensors) {
      if (!names.count(name)) {
        throw_error(ErrorCode::invalid_argument, path,
                    fmt::format("holds '{}', which the index puts elsewhere or nowhere", name));
      }
      if (!seen.insert(name).second)
        throw_error(ErrorCode::invalid_argument, path, fmt::format("'{}' is in two shards", name));
      names.erase(name);
      out.emplace_back(name, std::move(tensor));
    }
    if (!names.empty()) {
      throw_error(ErrorCode::invalid_argument, path,
                  fmt::format("lacks '{}', which the index puts there", *names.begin()));
    }
  }
  return out;
}

namespace {

// GPT-2 folders saved from GPT2Model name tensors without the "transformer." prefix.
std::string canonical_name(const DecoderConfig& c, const std::string& name) {
  if (c.family == Family::gpt2 && name.rfind("transformer.", 0) != 0 && name.rfind("lm_head.", 0) != 0)
    return "transformer." + name;
  return name;
}

// Buffers Hugging Face checkpoints may carry that the graph recomputes.
bool recomputable(const DecoderConfig& c, const std::string& name) {
  auto ends = [&](std::string_view suffix) {
    return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (c.family == Family::llama) return ends(".rotary_emb.inv_freq");
  return ends(".attn.bias") || ends(".attn.masked_bias");
}

}  // namespace

std::map<std::string, Tensor> load_weights(std::vector<std::pair<std::string, Tensor>> tensors, const DecoderConfig& c,
                                           Precision precision, std::string_view where) {
  const std::string at(where);
  if (c.storage == Storage::int8 && precision != Precision::int8) {
    throw_error(ErrorCode::invalid_argument, at,
                fmt::format("the folder holds int8 weights (pact_quantization); --dtype {} needs a float folder",
                            precision_name(precision)));
  }
  std::map<std::string, Tensor> file;
  for (auto& [name, tensor] : tensors) {
    std::string canonical = canonical_name(c, name);
    if (recomputable(c, canonical)) continue;
    if (!file.emplace(canonical, std::move(tensor)).second)
      throw_error(ErrorCode::invalid_argument, at, fmt::format("tensor '{}' appears twice", canonical));
  }
  // A tied head saved beside its embedding is the same values: the graph reads the embedding.
  if (c.tied && c.storage == Storage::floating) file.erase("lm_head.weight");
  std::map<std::string, Tensor> out;
  for (const TensorSpec& spec : checkpoint_tensors(c)) {
    auto it = file.find(spec.name);
    if (it == file.end())
      throw_error(ErrorCode::invalid_argument, at, fmt::format("tensor '{}' is missing", spec.name));
    Tensor t = std::move(it->second);
    file.erase(it);
    const bool quantized = spec.linear && c.storage == Storage::int8;
    // Conv1D weights are [in, out] in a float folder; Pact's int8 folders store every weight [out, in].
    const Dims stored = spec.conv1d && !quantized ? Dims{spec.shape[1], spec.shape[0]} : spec.shape;
    if (!(t.shape() == stored)) {
      throw_error(ErrorCode::invalid_argument, at,
                  fmt::format("tensor '{}' is {}; the configuration needs {}", spec.name, t.shape().to_string(),
                              stored.to_string()));
    }
    if (quantized) {
      if (t.dtype() != DType::i8) {
        throw_error(ErrorCode::dtype_mismatch, at,
                    fmt::format("tensor '{}' is {}; an int8 folder stores i8", spec.name, dtype_name(t.dtype())));
      }
      const std::string sname = scale_name(spec.name);
      auto s = file.find(sname);
      if (s == file.end()) throw_error(ErrorCode::invalid_argument, at, fmt::format("tensor '{}' is missing", sname));
      if (!is_floating(s->second.dtype()) || !(s->second.shape() == Dims{spec.shape[0]})) {
        throw_error(ErrorCode::invalid_argument, at,
                    fmt::format("tensor '{}' is {}{}; the configuration needs a float [{}]", sname,
                                dtype_name(s->second.dtype()), s->second.shape().to_string(), spec.shape[0]));
      }
      out.emplace(sname, s->second.as_view().convert(DType::f32));
      file.erase(s);
      out.emplace(spec.name, std::move(t));
      continue;
    }
    if (!is_floating(t.dtype())) {
      throw_error(ErrorCode::dtype_mismatch, at,
                  fmt::format("tensor '{}' is {}; expected a float dtype", spec.name, dtype_name(t.dtype())));
    }
    // The tensor as `d` in Pact's [out, in] orientation, in a fresh allocation. Keeping the tensor the
    // reader filled when it already is `d` saves a copy at load, but was measured to make a 512-token
    // prefill bimodal (0.75 or 1.1-1.55 s against 0.7-0.8 s, the same weights and kernels), so it copies.
    auto as = [&spec](Tensor stored, DType d) {
      if (spec.conv1d) return stored.as_view().transpose(0, 1).convert(d);
      return stored.as_view().convert(d);
    };
    if (spec.linear && precision == Precision::int8) {
      const Tensor dense = as(std::move(t), DType::f32);
      QuantizedRows q = quantize_rows(dense.as_view());
      out.emplace(scale_name(spec.name), std::move(q.scales));
      out.emplace(spec.name, std::move(q.weight));
    } else if (precision == Precision::bf16) {
      // A bf16 run is a bf16 checkpoint: projections stay bf16 (linear_bf16 reads them); the embeddings and
      // norms are rounded to bf16 and computed in f32, so a folder `pact quantize --dtype bf16` wrote runs
      // bit for bit as this conversion in memory.
      Tensor rounded = as(std::move(t), DType::bf16);
      out.emplace(spec.name, spec.linear ? std::move(rounded) : rounded.as_view().convert(DType::f32));
    } else {
      out.emplace(spec.name, as(std::move(t), DType::f32));
    }
  }
  if (c.tied && c.storage == Storage::floating && precision != Precision::f32) {
    // The head of a tied model converted on its own, from the embedding (which stays f32): quantized for
    // int8, bf16 for bf16.
    const std::string table = c.family == Family::llama ? "model.embed_tokens.weight" : "transformer.wte.weight";
    if (precision == Precision::int8) {
      QuantizedRows q = quantize_rows(out.at(table).as_view());
      out.emplace(scale_name("lm_head.weight"), std::move(q.scales));
      out.emplace("lm_head.weight", std::move(q.weight));
    } else {
      out.emplace("lm_head.weight", out.at(table).as_view().convert(DType::bf16));
    }
  }
  if (!file.empty()) {
    throw_error(ErrorCode::invalid_argument, at,
                fmt::format("tensor '{}' is not part of a {} model of this configuration", file.begin()->first,
                            family_name(c.family)));
  }
  return out;
}

// The rotary frequency of pair i, rescaled as rope_scaling says (Hugging Face's
// _compute_linear_scaling_rope_parameters and _compute_llama3_parameters).
double rotary_frequency(const DecoderConfig& c, std::int64_t i) {
  const double f = std::pow(c.rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(c.head_dim));
  if (c.rope_type == "linear") return f / c.rope_factor;
  if (c.rope_type != "llama3") return f;
  const double original = static_cast<double>(c.rope_original_context);
  const double low_wavelength = original / c.rope_low_freq_factor, high_wavelength = original / c.rope_high_freq_factor;
  const double wavelength = 2.0 * std::acos(-1.0) / f;
  if (wavelength < high_wavelength) return f;
  if (wavelength > low_wavelength) return f / c.rope_factor;
  const double smooth =
      (original / wavelength - c.rope_low_freq_factor) / (c.rope_high_freq_factor - c.rope_low_freq_factor);
  return (1.0 - smooth) * f / c.rope_factor + smooth * f;
}

std::pair<Tensor, Tensor> rotary_tables(const DecoderConfig& c, std::int64_t capacity) {
  const std::int64_t hd = c.head_dim, half = hd / 2;
  std::vector<float> cos(static_cast<std::size_t>(capacity * hd)), sin(cos.size());
  for (std::int64_t p = 0; p < capacity; ++p)
    for (std::int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(p) * rotary_frequency(c, i);
      const auto at = static_cast<std::size_t>(p * hd + i);
      cos[at] = cos[at + half] = static_cast<float>(std::cos(angle));
      sin[at] = sin[at + half] = static_cast<float>(std::sin(angle));
    }
  return {Tensor::from_values<float>({capacity, hd}, cos), Tensor::from_values<float>({capacity, hd}, sin)};
}

// ---- the step graph ----------------------------------------------------------------------------------

// Note [Decoder step graph]
// One graph serves prefill (T = the prompt's length) and decode (T = 1): it reads T token ids, their
// positions, and per layer the key and value caches [1, kv_heads, C, head_dim] planned once at the full
// capacity C. Each layer writes its T new keys and values into the caches at their positions with
// index_copy (dim 2): the updated caches are graph outputs, and the caller hands them back to the next
// step by moving their only handle in, so the executor runs index_copy in place (Note [Donated operands]
// in pact/runtime/executor.cpp) and no step copies a cache. Attention reads the whole cache under a
// boolean mask that the caller fills (row of new token t: true up to and including its position): the
// native kernel computes only each row's live prefix, so a step's attention costs the filled part of
// the cache and nothing is recomputed for the prefix. Grouped-query attention without copying the
// cache: the query heads of one key/value head become extra query rows, [1, kv_heads, groups * T,
// head_dim] (row i * T + t is head i of the group at token t), which the mask [groups * T, C] covers.
// Only the last token's logits are computed ([1, 1, vocab]): sampling needs no others.

namespace step {
std::string cache_input(std::int64_t layer, bool value) {
  return fmt::format("cache.{}.{}", layer, value ? "value" : "key");
}
std::string cache_output(std::int64_t layer, bool value) {
  return fmt::format("cache.{}.{}.next", layer, value ? "value" : "key");
}
}  // namespace step

namespace {

Attributes shape_attr(const Dims& d) { return Attributes{{"shape", std::vector<std::int64_t>(d.begin(), d.end())}}; }
Attributes dims(std::int64_t a, std::int64_t b) { return Attributes{{"dim0", a}, {"dim1", b}}; }
Attributes slice_attr(std::int64_t dim, std::int64_t start, std::int64_t end) {
  return Attributes{{"dim", dim}, {"start", start}, {"end", end}};
}

struct StepBuilder {
  const DecoderConfig& c;
  Precision precision;
  std::int64_t t, cap;
  ir::GraphBuilder g;

  std::string param(const std::string& name, const Dims& shape) { return g.parameter(name, shape, DType::f32, false); }
  // x [.., in] @ W^T (+ b) for the projection `prefix` (prefix.weight [out, in]).
  std::string linear(const std::string& id, const std::string& x, const std::string& prefix, std::int64_t out,
                     std::int64_t in, bool bias) {
    std::vector<std::string> args{x};
    OpTag op = OpTag::linear;
    if (precision == Precision::int8) {
      op = OpTag::linear_int8;
      args.push_back(g.parameter(prefix + ".weight", {out, in}, DType::i8, false));
      args.push_back(g.parameter(scale_name(prefix + ".weight"), {out}, DType::f32, false));
    } else if (precision == Precision::bf16) {
      op = OpTag::linear_bf16;
      args.push_back(g.parameter(prefix + ".weight", {out, in}, DType::bf16, false));
    } else {
      args.push_back(param(prefix + ".weight", {out, in}));
    }
    if (bias) args.push_back(param(prefix + ".bias", {out}));
    return g.op(id, op, args);
  }
  std::string norm(const std::string& id, const std::string& x, const std::string& prefix) {
    const Attributes a{{"normalized_shape", std::vector<std::int64_t>{c.hidden}}, {"eps", c.norm_eps}};
    if (c.family == Family::llama) return g.op(id, OpTag::rms_norm, {x, param(prefix + ".weight", {c.hidden})}, a);
    return g.op(id, OpTag::layer_norm, {x, param(prefix + ".weight", {c.hidden}), param(prefix + ".bias", {c.hidden})},
                a);
  }
  // [1, T, n * hd] -> [1, n, T, hd]
  std::string heads(const std::string& id, const std::string& x, std::int64_t n) {
    const std::string r = g.op(id + ".split", OpTag::reshape, {x}, shape_attr({1, t, n, c.head_dim}));
    return g.op(id + ".heads", OpTag::transpose, {r}, dims(1, 2));
  }
  // Rotate-half rotary embedding of x [1, n, T, hd] with the step's cos/sin rows [1, 1, T, hd]: one
  // rotary_embedding node (x cos + rotate_half(x) sin), not the seven slice, neg, concat, mul and add nodes
  // it stands for, each of which a decode step would pay the interpreter and an allocation for.
  std::string rope(const std::string& id, const std::string& x, const std::string& cos, const std::string& sin) {
    return g.op(id, OpTag::rotary_embedding, {x, cos, sin});
  }
  // Writes the new rows into layer l's cache; returns the updated cache.
  std::string cache(std::int64_t l, bool value, const std::string& rows) {
    const std::string in = g.input(step::cache_input(l, value), {1, c.kv_heads, cap, c.head_dim}, DType::f32);
    const std::string out = g.op(step::cache_output(l, value), OpTag::index_copy, {in, step::kPositions, rows},
                                 Attributes{{"dim", std::int64_t{2}}});
    g.output(out);
    return out;
  }
  // Attention of q [1, heads, T, hd] against the layer's caches; returns [1, T, heads * hd].
  std::string attend(const std::string& id, const std::string& q, const std::string& k, const std::string& v) {
    const std::int64_t groups = c.groups();
    const std::string qg =
        g.op(id + ".grouped", OpTag::reshape, {q}, shape_attr({1, c.kv_heads, groups * t, c.head_dim}));
    const std::string a = g.op(id, OpTag::scaled_dot_product_attention, {qg, k, v, step::kMask});
    const std::string back = g.op(id + ".ungrouped", OpTag::reshape, {a}, shape_attr({1, c.heads, t, c.head_dim}));
    const std::string tr = g.op(id + ".tokens", OpTag::transpose, {back}, dims(1, 2));
    return g.op(id + ".merged", OpTag::reshape, {tr}, shape_attr({1, t, c.heads * c.head_dim}));
  }

  std::string llama_layer(std::int64_t l, const std::string& x, const std::string& cos, const std::string& sin) {
    const std::string p = fmt::format("model.layers.{}.", l), id = fmt::format("layers.{}.", l);
    const std::int64_t d = c.hidden, q = c.heads * c.head_dim, kv = c.kv_heads * c.head_dim;
    const std::string h = norm(id + "input_norm", x, p + "input_layernorm");
    const std::string qp = linear(id + "q", h, p + "self_attn.q_proj", q, d, c.attention_bias);
    const std::string kp = linear(id + "k", h, p + "self_attn.k_proj", kv, d, c.attention_bias);
    const std::string vp = linear(id + "v", h, p + "self_attn.v_proj", kv, d, c.attention_bias);
    const std::string qr = rope(id + "q.rope", heads(id + "q", qp, c.heads), cos, sin);
    const std::string kr = rope(id + "k.rope", heads(id + "k", kp, c.kv_heads), cos, sin);
    const std::string kc = cache(l, false, kr), vc = cache(l, true, heads(id + "v", vp, c.kv_heads));
    const std::string a = attend(id + "attention", qr, kc, vc);
    const std::string o = linear(id + "o", a, p + "self_attn.o_proj", d, q, c.attention_bias);
    const std::string r1 = g.op(id + "residual1", OpTag::add, {x, o});
    const std::string h2 = norm(id + "post_norm", r1, p + "post_attention_layernorm");
    const std::string gate = linear(id + "gate", h2, p + "mlp.gate_proj", c.intermediate, d, c.mlp_bias);
    const std::string up = linear(id + "up", h2, p + "mlp.up_proj", c.intermediate, d, c.mlp_bias);
    const std::string act_ = g.op(id + "silu", OpTag::silu, {gate});
    const std::string m = g.op(id + "swiglu", OpTag::mul, {act_, up});
    const std::string down = linear(id + "down", m, p + "mlp.down_proj", d, c.intermediate, c.mlp_bias);
    return g.op(id + "residual2", OpTag::add, {r1, down});
  }

  std::string gpt2_block(std::int64_t l, const std::string& x) {
    const std::string p = fmt::format("transformer.h.{}.", l), id = fmt::format("h.{}.", l);
    const std::int64_t d = c.hidden;
    const std::string h = norm(id + "ln_1", x, p + "ln_1");
    const std::string qkv = linear(id + "qkv", h, p + "attn.c_attn", 3 * d, d, true);
    auto part = [&](const char* name, std::int64_t k) {
      const std::string s = g.op(id + name, OpTag::slice, {qkv}, slice_attr(2, k * d, (k + 1) * d));
      return heads(id + name, s, c.heads);
    };
    const std::string q = part("q", 0);
    const std::string kc = cache(l, false, part("k", 1)), vc = cache(l, true, part("v", 2));
    const std::string a = attend(id + "attention", q, kc, vc);
    const std::string o = linear(id + "proj", a, p + "attn.c_proj", d, d, true);
    const std::string r1 = g.op(id + "residual1", OpTag::add, {x, o});
    const std::string h2 = norm(id + "ln_2", r1, p + "ln_2");
    const std::string fc = linear(id + "fc", h2, p + "mlp.c_fc", c.intermediate, d, true);
    const std::string gelu =
        g.op(id + "gelu", OpTag::gelu, {fc},
             Attributes{{"approximate", std::string(c.activation == "gelu_tanh" ? "tanh" : "none")}});
    const std::string down = linear(id + "mlp_proj", gelu, p + "mlp.c_proj", d, c.intermediate, true);
    return g.op(id + "residual2", OpTag::add, {r1, down});
  }

  ir::Graph build() {
    const std::string tokens = g.input(step::kTokens, {1, t}, DType::i64);
    g.input(step::kPositions, {t}, DType::i64);
    g.input(step::kMask, {c.groups() * t, cap}, DType::boolean);
    std::string x;
    std::string embedding;
    if (c.family == Family::llama) {
      embedding = param("model.embed_tokens.weight", {c.vocab, c.hidden});
      x = g.op("embed", OpTag::embedding, {embedding, tokens});
      const std::string cos_table = g.buffer(step::kRopeCos, {cap, c.head_dim}, DType::f32);
      const std::string sin_table = g.buffer(step::kRopeSin, {cap, c.head_dim}, DType::f32);
      const Attributes rows = shape_attr({1, 1, t, c.head_dim});
      const std::string cos = g.op("rope.cos.rows", OpTag::reshape,
                                   {g.op("rope.cos.at", OpTag::embedding, {cos_table, step::kPositions})}, rows);
      const std::string sin = g.op("rope.sin.rows", OpTag::reshape,
                                   {g.op("rope.sin.at", OpTag::embedding, {sin_table, step::kPositions})}, rows);
      for (std::int64_t l = 0; l < c.layers; ++l) x = llama_layer(l, x, cos, sin);
    } else {
      embedding = param("transformer.wte.weight", {c.vocab, c.hidden});
      const std::string tok = g.op("wte", OpTag::embedding, {embedding, tokens});
      const std::string pos =
          g.op("wpe", OpTag::embedding, {param("transformer.wpe.weight", {c.context, c.hidden}), step::kPositions});
      x = g.op("embed", OpTag::add, {tok, pos});
      for (std::int64_t l = 0; l < c.layers; ++l) x = gpt2_block(l, x);
    }
    const std::string last = g.op("last", OpTag::slice, {x}, slice_attr(1, t - 1, t));
    const std::string normed = norm("final_norm", last, c.family == Family::llama ? "model.norm" : "transformer.ln_f");
    std::string logits;
    // A tied head reads the embedding table in f32; under bf16 and int8 it is converted on its own.
    if (c.tied && precision == Precision::f32) {
      logits = g.op(step::kLogits, OpTag::linear, {normed, embedding});
    } else {
      logits = linear(step::kLogits, normed, "lm_head", c.vocab, c.hidden, false);
    }
    g.output(logits);
    return g.build();
  }
};

}  // namespace

ir::Graph step_graph(const DecoderConfig& config, Precision precision, std::int64_t tokens, std::int64_t capacity) {
  if (tokens < 1 || capacity < 1 || tokens > capacity) {
    throw_error(ErrorCode::invalid_argument, "llm step graph",
                fmt::format("{} new tokens against a cache of {} positions", tokens, capacity));
  }
  if (config.family == Family::gpt2 && capacity > config.context) {
    throw_error(ErrorCode::invalid_argument, "llm step graph",
                fmt::format("a cache of {} positions exceeds n_positions {}", capacity, config.context));
  }
  StepBuilder b{config, precision, tokens, capacity, {}};
  return b.build();
}

}  // namespace pact::llm
