#include "pact/llm/quantize.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "pact/core/error.hpp"
#include "pact/core/file.hpp"
#include "pact/core/json.hpp"
#include "pact/ir/safetensors.hpp"

namespace pact::llm {

// Note [Weight-only int8]
// Each output row r of a projection weight is stored as i8 values q and one f32 scale s_r = max|w_r| /
// 127 (1 for an all-zero row), q = round-to-nearest-even(w / s_r) clamped to [-127, 127], so w ~ q * s_r
// with an error of at most s_r / 2 per element. linear_int8 computes y = x (q * s)^T + b with f32
// activations and accumulation: only the weights' bytes shrink, fourfold, which is what a decode step,
// bound by reading its weights, gains from. Embedding tables and norms stay f32; a tied head is
// quantized on its own (the embedding lookup keeps full precision).

QuantizedRows quantize_rows(const TensorView& w) {
  if (w.rank() != 2) {
    throw_error(ErrorCode::invalid_argument, "quantize",
                fmt::format("a weight to quantize is [out, in]; this one is {}", w.shape().to_string()));
  }
  const std::int64_t rows = w.shape()[0], cols = w.shape()[1];
  const std::vector<double> v = w.to_doubles();
  std::vector<std::int8_t> q(v.size());
  std::vector<float> scales(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    const double* row = v.data() + r * cols;
    double top = 0;
    for (std::int64_t j = 0; j < cols; ++j) top = std::max(top, std::abs(row[j]));
    if (!std::isfinite(top)) {
      throw_error(ErrorCode::invalid_argument, "quantize", fmt::format("row {} holds a non-finite value", r));
    }
    const float s = top > 0 ? static_cast<float>(top / 127.0) : 1.0f;
    scales[static_cast<std::size_t>(r)] = s;
    for (std::int64_t j = 0; j < cols; ++j) {
      const double x = std::nearbyint(row[j] / static_cast<double>(s));
      q[static_cast<std::size_t>(r * cols + j)] = static_cast<std::int8_t>(std::clamp(x, -127.0, 127.0));
    }
  }
  return {Tensor::from_values<std::int8_t>({rows, cols}, q), Tensor::from_values<float>({rows}, scales)};
}

QuantizeReport quantize_folder(const std::string& dir, Precision to, const std::string& out) {
  constexpr const char* op = "pact quantize";
  if (to == Precision::f32)
    throw_error(ErrorCode::invalid_argument, op, "--dtype f32: nothing to convert (bf16 or int8)");
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(out, ec) && !fs::is_directory(out, ec))
    throw_error(ErrorCode::invalid_argument, op, fmt::format("-o {} is an existing file", out));
  if (fs::exists(out, ec) && fs::equivalent(out, dir, ec))
    throw_error(ErrorCode::invalid_argument, op, "-o names the folder being read; write to another folder");
  const std::string config_path = dir + "/config.json";
  const std::string config_text = read_file(config_path, op, kMaxConfigBytes);
  const DecoderConfig config = parse_config(config_text, config_path);
  if (config.storage == Storage::int8)
    throw_error(ErrorCode::invalid_argument, op, fmt::format("{} already holds int8 weights", dir));
  std::vector<std::pair<std::string, Tensor>> tensors = read_checkpoint(dir);
  QuantizeReport report;
  for (const auto& [name, t] : tensors) report.bytes_in += t.nbytes();
  Json doc = parse_json(config_text, config_path);
  std::vector<std::pair<std::string, Tensor>> written;
  if (to == Precision::bf16) {
    for (auto& [name, t] : tensors) {
      const bool floating = is_floating(t.dtype()) && t.dtype() != DType::bf16;
      written.emplace_back(name, floating ? t.as_view().convert(DType::bf16) : std::move(t));
    }
    doc["torch_dtype"] = "bfloat16";
  } else {
    std::map<std::string, Tensor> weights = load_weights(std::move(tensors), config, Precision::int8, dir);
    for (auto& [name, t] : weights) written.emplace_back(name, std::move(t));
    doc["pact_quantization"] = Json{{"dtype", "int8"}};
  }
  fs::create_directories(out, ec);
  if (ec) throw_error(ErrorCode::io_error, op, fmt::format("cannot create {}: {}", out, ec.message()));
  std::vector<std::pair<std::string, TensorView>> views;
  for (const auto& [name, t] : written) {
    views.emplace_back(name, t.as_view());
    report.bytes_out += t.nbytes();
  }
  report.tensors = static_cast<std::int64_t>(views.size());
  ir::write_safetensors(out + "/model.safetensors", views,
                        {{"format", "pt"}, {"pact.quantized", std::string(precision_name(to))}});
  write_file_atomic(out + "/config.json", doc.dump(2) + "\n", op);
  if (fs::exists(dir + "/tokenizer.model", ec)) {
    fs::copy_file(dir + "/tokenizer.model", out + "/tokenizer.model", fs::copy_options::overwrite_existing, ec);
    if (ec) throw_error(ErrorCode::io_error, op, fmt::format("cannot copy tokenizer.model: {}", ec.message()));
  }
  return report;
}

}  // namespace pact::llm
