// Fuzzes the readers of a Hugging Face decoder folder (pact/llm): the first byte picks config.json,
// model.safetensors.index.json, a safetensors file checked against a fixed tiny Llama configuration, or a
// tokenizer.model (whatever loads encodes and decodes text without failing).
// Malformed bytes are a typed pact::Error; a config that parses yields consistent tensors and, when small,
// a step graph that validates; weights that load are exactly the configuration's tensors.

#include <cstdint>

#include "pact/ir/safetensors.hpp"
#include "pact/llm/decoder.hpp"
#include "pact/llm/tokenizer.hpp"

namespace {

const char* kTiny = R"({"model_type": "llama", "hidden_size": 8, "intermediate_size": 12, "num_attention_heads": 2,
  "num_key_value_heads": 1, "num_hidden_layers": 1, "vocab_size": 6, "max_position_embeddings": 8})";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    switch (data[0] % 4) {
      case 0: {
        const pact::llm::DecoderConfig c = pact::llm::parse_config(text, "fuzz");
        if (c.heads % c.kv_heads != 0 || c.head_dim <= 0 || c.layers > pact::llm::kMaxLayers) __builtin_trap();
        if (pact::llm::parameter_count(c) <= 0) __builtin_trap();
        if (c.layers <= 2 && c.hidden <= 4096 && c.vocab <= 4096) {
          const pact::ir::Graph g =
              pact::llm::step_graph(c, pact::llm::Precision::f32, 1, std::min<std::int64_t>(c.context, 4));
          if (g.outputs.size() != static_cast<std::size_t>(2 * c.layers + 1)) __builtin_trap();
        }
        break;
      }
      case 1: {
        const auto shards = pact::llm::parse_shard_index(text, "fuzz");
        if (shards.size() > pact::llm::kMaxShards) __builtin_trap();
        for (const auto& [file, names] : shards)
          if (file.empty() || names.empty()) __builtin_trap();
        break;
      }
      case 3: {
        const auto t = pact::llm::Tokenizer::parse(text, "fuzz");
        const auto ids = t.encode("pact runs a plan");
        (void)t.decode(ids);
        (void)t.decode({-1, t.vocab_size(), 0});
        break;
      }
      default: {
        const auto c = pact::llm::parse_config(kTiny, "tiny");
        auto file = pact::ir::parse_safetensors(
            std::span<const std::byte>(reinterpret_cast<const std::byte*>(text.data()), text.size()), "fuzz");
        const auto w = pact::llm::load_weights(std::move(file.tensors), c, pact::llm::Precision::f32, "fuzz");
        if (w.size() != pact::llm::checkpoint_tensors(c).size()) __builtin_trap();
        break;
      }
    }
  } catch (const pact::Error&) {
    return 0;
  }
  return 0;
}
