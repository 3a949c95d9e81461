#pragma once
/// A Llama-style decoder written against the eager API (SPEC §9): token embedding, per layer RMSNorm,
/// multi-head attention with grouped key/value heads (repeat-interleaved) and a causal mask, residual,
/// RMSNorm, SwiGLU feed-forward, residual; a final RMSNorm and an untied output head. Parameter names
/// follow Meta's checkpoints (tok_embeddings, layers.N.attention.wq, feed_forward.w1, ...). Rotary
/// position embeddings are left out: they have no parameters and under 0.1% of the FLOPs. `pact capture
/// llama --config DIR/config.json` builds one from a Hugging Face config (pact/llm reads it), with the
/// checkpoint's exact parameter count. Under structure-only capture it runs with no weights anywhere.

#include <string_view>

#include "pact/capture/capture.hpp"

namespace pact::capture {

struct LlamaConfig {
  std::string name;
  std::int64_t layers = 2, d_model = 64, heads = 4, kv_heads = 4, ffn = 172, vocab = 256, seq = 32, batch = 1;
  double norm_eps = 1e-5;
  std::int64_t head_dim = 0;  ///< per-head width; 0: d_model / heads
  bool tied = false;          ///< the output head reads the embedding table (one parameter, counted once)
  bool attention_bias = false, mlp_bias = false;  ///< biases on the attention / feed-forward projections
};

/// Named configurations: "7b" (32 layers, d_model 4096, 32 heads, ffn 11008, vocab 32000, seq 2048),
/// "13b" (40 layers, d_model 5120, 40 heads, ffn 13824), "70b" (Llama 2: 80 layers, d_model 8192, 64 heads,
/// 8 kv heads, ffn 28672, seq 4096), "tiny" (2 layers, d_model 64, 4 heads, 2 kv heads, ffn 172, vocab
/// 256, seq 32). Unknown names
/// are invalid_argument listing the known ones.
LlamaConfig llama_config(std::string_view name);

/// The model code of a configuration (inputs: "tokens", i64 [batch, seq]; output: logits [batch, seq, vocab]).
ModelFn llama_model(const LlamaConfig& config);

}  // namespace pact::capture
