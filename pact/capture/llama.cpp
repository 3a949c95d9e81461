#include "pact/capture/llama.hpp"

#include <fmt/format.h>

namespace pact::capture {

using ops::Attributes;
using ops::OpTag;
using runtime::EagerTensor;

LlamaConfig llama_config(std::string_view name) {
  if (name == "7b") return {"7b", 32, 4096, 32, 32, 11008, 32000, 2048, 1, 1e-5};
  if (name == "13b") return {"13b", 40, 5120, 40, 40, 13824, 32000, 2048, 1, 1e-5};
  // Llama 2 70B: grouped-query attention, 8 key/value heads for 64 query heads.
  if (name == "70b") return {"70b", 80, 8192, 64, 8, 28672, 32000, 4096, 1, 1e-5};
  if (name == "tiny") return {"tiny", 2, 64, 4, 2, 172, 256, 32, 1, 1e-5};
  throw_error(ErrorCode::invalid_argument, "llama",
              fmt::format("unknown configuration '{}' (known: 7b, 13b, 70b, tiny)", name));
}

namespace {

Attributes shape_attr(std::initializer_list<std::int64_t> shape) {
  return Attributes{{"shape", std::vector<std::int64_t>(shape)}};
}

EagerTensor op(runtime::Session& s, OpTag tag, std::initializer_list<EagerTensor> in, const Attributes& attrs = {}) {
  return s.apply(tag, std::vector<EagerTensor>(in), attrs);
}

EagerTensor rms_norm(runtime::Session& s, Substrate& sub, const char* scope, const EagerTensor& x,
                     const LlamaConfig& c) {
  auto m = s.module(scope);
  EagerTensor w = s.parameter("weight", sub.filled(Dims{c.d_model}, 1.0));
  return op(s, OpTag::rms_norm, {x, w},
            Attributes{{"normalized_shape", std::vector<std::int64_t>{c.d_model}}, {"eps", c.norm_eps}});
}

// [B, KV, T, Dh] -> [B, KV * groups, T, Dh], each key/value head repeated for `groups` consecutive query heads.
EagerTensor repeat_kv(runtime::Session& s, const EagerTensor& x, const LlamaConfig& c, std::int64_t dh) {
  const std::int64_t groups = c.heads / c.kv_heads;
  if (groups == 1) return x;
  EagerTensor one = op(s, OpTag::reshape, {x}, shape_attr({c.batch, c.kv_heads, 1, c.seq, dh}));
  std::vector<EagerTensor> copies(static_cast<std::size_t>(groups), one);
  EagerTensor rep = s.apply(OpTag::concat, copies, Attributes{{"dim", std::int64_t{2}}});
  return op(s, OpTag::reshape, {rep}, shape_attr({c.batch, c.heads, c.seq, dh}));
}

}  // namespace

ModelFn llama_model(const LlamaConfig& c) {
  if (c.heads <= 0 || c.kv_heads <= 0 || c.heads % c.kv_heads != 0 || (c.head_dim <= 0 && c.d_model % c.heads != 0)) {
    throw_error(ErrorCode::invalid_argument, "llama",
                fmt::format("heads {} must divide d_model {} and be a multiple of kv_heads {}", c.heads, c.d_model,
                            c.kv_heads));
  }
  return [c](runtime::Session& s, Substrate& sub) {
    const std::int64_t dh = c.head_dim > 0 ? c.head_dim : c.d_model / c.heads, q_width = c.heads * dh,
                       kv = c.kv_heads * dh;
    const double init = 0.02;
    EagerTensor tokens = s.input("tokens", sub.input(Dims{c.batch, c.seq}, DType::i64, c.vocab));
    EagerTensor emb = s.parameter("tok_embeddings.weight", sub.parameter(Dims{c.vocab, c.d_model}, init));
    EagerTensor x = op(s, OpTag::embedding, {emb, tokens});
    for (std::int64_t l = 0; l < c.layers; ++l) {
      auto layer = s.module(fmt::format("layers.{}", l));
      EagerTensor h = rms_norm(s, sub, "attention_norm", x, c);
      EagerTensor attn;
      {
        auto m = s.module("attention");
        auto projection = [&](const char* name, std::int64_t out, std::int64_t in) {
          std::vector<EagerTensor> p{s.parameter(fmt::format("{}.weight", name), sub.parameter(Dims{out, in}, init))};
          if (c.attention_bias) p.push_back(s.parameter(fmt::format("{}.bias", name), sub.filled(Dims{out}, 0.0)));
          return p;
        };
        const auto wq = projection("wq", q_width, c.d_model), wk = projection("wk", kv, c.d_model),
                   wv = projection("wv", kv, c.d_model), wo = projection("wo", c.d_model, q_width);
        auto linear = [&](const EagerTensor& x, std::vector<EagerTensor> w) {
          w.insert(w.begin(), x);
          return s.apply(OpTag::linear, w);
        };
        auto heads = [&](const std::vector<EagerTensor>& w, std::int64_t n) {
          EagerTensor p = linear(h, w);
          EagerTensor r = op(s, OpTag::reshape, {p}, shape_attr({c.batch, c.seq, n, dh}));
          return op(s, OpTag::transpose, {r}, Attributes{{"dim0", std::int64_t{1}}, {"dim1", std::int64_t{2}}});
        };
        EagerTensor q = heads(wq, c.heads);
        EagerTensor k = repeat_kv(s, heads(wk, c.kv_heads), c, dh);
        EagerTensor v = repeat_kv(s, heads(wv, c.kv_heads), c, dh);
        EagerTensor a = op(s, OpTag::scaled_dot_product_attention, {q, k, v}, Attributes{{"is_causal", true}});
        EagerTensor t = op(s, OpTag::transpose, {a}, Attributes{{"dim0", std::int64_t{1}}, {"dim1", std::int64_t{2}}});
        EagerTensor merged = op(s, OpTag::reshape, {t}, shape_attr({c.batch, c.seq, q_width}));
        attn = linear(merged, wo);
      }
      x = op(s, OpTag::add, {x, attn});
      h = rms_norm(s, sub, "ffn_norm", x, c);
      EagerTensor ff;
      {
        auto m = s.module("feed_forward");
        auto projection = [&](const char* name, std::int64_t out, std::int64_t in) {
          std::vector<EagerTensor> p{h,
                                     s.parameter(fmt::format("{}.weight", name), sub.parameter(Dims{out, in}, init))};
          if (c.mlp_bias) p.push_back(s.parameter(fmt::format("{}.bias", name), sub.filled(Dims{out}, 0.0)));
          return p;
        };
        auto w1 = projection("w1", c.ffn, c.d_model), w3 = projection("w3", c.ffn, c.d_model);
        auto w2 = projection("w2", c.d_model, c.ffn);
        EagerTensor gate = op(s, OpTag::silu, {s.apply(OpTag::linear, w1)});
        EagerTensor up = s.apply(OpTag::linear, w3);
        w2[0] = op(s, OpTag::mul, {gate, up});
        ff = s.apply(OpTag::linear, w2);
      }
      x = op(s, OpTag::add, {x, ff});
    }
    x = rms_norm(s, sub, "norm", x, c);
    EagerTensor head = c.tied ? s.tie("output.weight", emb)
                              : s.parameter("output.weight", sub.parameter(Dims{c.vocab, c.d_model}, init));
    return std::vector<EagerTensor>{op(s, OpTag::linear, {x, head})};
  };
}

}  // namespace pact::capture
