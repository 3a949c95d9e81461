// `pact generate DIR` and `pact quantize DIR`: Hugging Face decoder folders (pact/llm).

#include "pact/llm/generate.hpp"

#include <fmt/format.h>
#include <omp.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "pact/core/json.hpp"
#include "pact/kernels/cpu/gemm.hpp"
#include "pact/llm/quantize.hpp"
#include "pact/llm/tokenizer.hpp"
#include "tools/pact/command.hpp"

namespace pact::cli {

namespace {

struct GenerateArgs {
  std::string dir, prompt_ids, prompt, dtype, profile = "cpu-checked";
  std::int64_t max_new_tokens = 16, top_k = 0, context = 0;
  double temperature = 0;
  std::uint64_t seed = 0;
  int threads = 0;
  bool json = false, audit = false;
};

// "1,2,3" -> ids; anything else names the bad entry.
std::vector<std::int64_t> parse_ids(const std::string& text) {
  std::vector<std::int64_t> ids;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string_view item(text.data() + at, comma - at);
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size()) {
      throw_error(ErrorCode::invalid_argument, "pact generate",
                  fmt::format("--prompt-ids entry {} '{}' is not an integer", ids.size(), printable(item)));
    }
    ids.push_back(v);
    at = comma + 1;
  }
  return ids;
}

int run_generate(const GenerateArgs& a) {
  constexpr const char* op = "pact generate";
  if (a.threads < 0)
    throw_error(ErrorCode::invalid_argument, op, fmt::format("--threads {} must be positive", a.threads));
  if (a.threads > 0) {
    omp_set_num_threads(a.threads);
    kernels::cpu::openblas_threads(a.threads);
  }
  if (a.prompt_ids.empty() == a.prompt.empty())
    throw_error(ErrorCode::invalid_argument, op, "give the prompt as --prompt-ids 1,2,3 or as --prompt TEXT (one)");
  // A tokenizer.model beside the weights turns --prompt into ids and the new ids into text.
  const std::string tokenizer_path = a.dir + "/tokenizer.model";
  std::optional<llm::Tokenizer> tokenizer;
  if (std::filesystem::exists(tokenizer_path)) {
    tokenizer.emplace(llm::Tokenizer::load(tokenizer_path));
  } else if (!a.prompt.empty()) {
    throw_error(ErrorCode::invalid_argument, op,
                fmt::format("--prompt needs a SentencePiece {}; give --prompt-ids instead", tokenizer_path));
  }
  const std::vector<std::int64_t> prompt = a.prompt.empty() ? parse_ids(a.prompt_ids) : tokenizer->encode(a.prompt);
  const llm::DecoderConfig config = llm::load_config(a.dir);
  for (const auto& f : config.unknown_fields)
    std::fprintf(stderr, "pact generate: config.json field '%s' is not known to Pact; ignored\n", printable(f).c_str());
  const llm::Precision precision =
      a.dtype.empty() ? (config.storage == llm::Storage::int8 ? llm::Precision::int8 : llm::Precision::f32)
                      : llm::parse_precision(a.dtype, op);
  const llm::SamplingOptions sampling{a.temperature, a.top_k, a.seed};
  (void)llm::Sampler(sampling);  // bad sampling options are refused before the weights are read
  const std::int64_t capacity = a.context == 0 ? config.context : a.context;
  if (static_cast<std::int64_t>(prompt.size()) > capacity) {
    throw_error(ErrorCode::invalid_argument, op,
                fmt::format("the prompt has {} tokens; the context holds {}", prompt.size(), capacity));
  }
  auto weights = llm::load_weights(llm::read_checkpoint(a.dir), config, precision, a.dir);
  auto planned = llm::Generator::plan(config, std::move(weights), precision, a.context,
                                      contract::builtin_profile(a.profile), nullptr);
  if (!planned) {
    std::fputs(plan::render_audit_table(planned.error().audit).c_str(), stdout);
    return 2;
  }
  llm::Generator& generator = *planned;
  if (a.audit && !a.json) std::fputs(plan::render_audit_table(generator.audit()).c_str(), stdout);
  const bool progress = !a.json && ::isatty(STDERR_FILENO) != 0;
  const auto result = llm::generate(
      generator, prompt, a.max_new_tokens, sampling, false, [&](std::int64_t, const llm::GenerationResult& so_far) {
        if (!progress) return;
        std::fprintf(stderr, "\r%zu/%lld tokens, %.1f tokens/s", so_far.tokens.size(),
                     static_cast<long long>(a.max_new_tokens), so_far.tokens_per_second());
      });
  if (progress) std::fputc('\n', stderr);
  if (a.json) {
    Json doc{{"tokens", result.tokens},
             {"tokens_per_second", result.tokens_per_second()},
             {"prompt_tokens", prompt.size()},
             {"prefill_seconds", result.prefill_seconds},
             {"decode_seconds", result.decode_seconds},
             {"dtype", std::string(llm::precision_name(precision))},
             {"profile", a.profile},
             {"family", std::string(llm::family_name(config.family))},
             {"context", generator.capacity()},
             {"threads", omp_get_max_threads()}};
    if (tokenizer) doc["text"] = tokenizer->decode(result.tokens);
    // Text a tokenizer decoded may end inside a UTF-8 sequence: replaced, never a throw.
    std::printf("%s\n", doc.dump(-1, ' ', false, Json::error_handler_t::replace).c_str());
    return 0;
  }
  if (tokenizer) {
    std::printf("%s\n", tokenizer->decode(result.tokens).c_str());
    return 0;
  }
  std::string ids;
  for (std::size_t i = 0; i < result.tokens.size(); ++i) ids += (i ? "," : "") + std::to_string(result.tokens[i]);
  std::printf("%s\n", ids.c_str());
  std::fprintf(stderr, "pact generate: %zu tokens in %.3f s (%.1f tokens/s; prefill of %zu tokens %.3f s), %s, %s\n",
               result.tokens.size(), result.prefill_seconds + result.decode_seconds, result.tokens_per_second(),
               prompt.size(), result.prefill_seconds, std::string(llm::precision_name(precision)).c_str(),
               a.profile.c_str());
  return 0;
}

const bool generate_registered = register_command("generate", [](CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "generate tokens from a Hugging Face Llama or GPT-2 folder");
  cmd->add_option("dir", a->dir, "folder with config.json and model.safetensors (or a sharded index)")->required();
  cmd->add_option("--prompt-ids", a->prompt_ids, "the prompt's token ids, comma-separated");
  cmd->add_option("--prompt", a->prompt, "the prompt as text (needs DIR/tokenizer.model); the new text is printed");
  cmd->add_option("--max-new-tokens", a->max_new_tokens, "tokens to generate (default 16)");
  cmd->add_option("--dtype", a->dtype, "f32 | bf16 | int8 (default: the folder's: f32, or int8 for a quantized one)");
  cmd->add_option("--temperature", a->temperature, "0 (default) is greedy; above 0 samples");
  cmd->add_option("--top-k", a->top_k, "with --temperature: sample among the K most likely (0: all)");
  cmd->add_option("--seed", a->seed, "with --temperature: the sampler's seed");
  cmd->add_option("--context", a->context, "KV cache capacity (default: the configuration's context)");
  cmd->add_option("--profile", a->profile, "backend profile (default cpu-checked)");
  cmd->add_option("--threads", a->threads, "threads for the kernels (default: OMP_NUM_THREADS or all)");
  cmd->add_flag("--json", a->json, "print {\"tokens\": [...], \"tokens_per_second\": ...}");
  cmd->add_flag("--audit", a->audit, "print the decode step's plan audit first");
  return std::vector<Runner>{{cmd, [a] { return run_generate(*a); }}};
});

struct QuantizeArgs {
  std::string dir, dtype, out;
};

const bool quantize_registered = register_command("quantize", [](CLI::App& app) {
  auto a = std::make_shared<QuantizeArgs>();
  auto* cmd = app.add_subcommand("quantize", "convert a Hugging Face decoder folder to bf16 or weight-only int8");
  cmd->add_option("dir", a->dir, "folder with config.json and its safetensors")->required();
  cmd->add_option("--dtype", a->dtype, "bf16 | int8")->required();
  cmd->add_option("-o,--out", a->out, "the folder to write")->required();
  return std::vector<Runner>{{cmd, [a] {
                                const auto to = llm::parse_precision(a->dtype, "pact quantize");
                                const auto r = llm::quantize_folder(a->dir, to, a->out);
                                std::printf("wrote %s: %lld tensors, %.1f MB -> %.1f MB (%s)\n", a->out.c_str(),
                                            static_cast<long long>(r.tensors), r.bytes_in / 1e6, r.bytes_out / 1e6,
                                            a->dtype.c_str());
                                return 0;
                              }}};
});

}  // namespace

}  // namespace pact::cli
