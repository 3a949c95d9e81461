#pragma once
/// `pact quantize`: a decoder folder converted to bf16 or to weight-only int8 (Note [Weight-only int8] in
/// quantize.cpp), written as a folder `pact generate` reads.

#include <string>

#include "pact/core/tensor.hpp"
#include "pact/llm/decoder.hpp"

namespace pact::llm {

/// A float weight [out, in] as i8 rows and their f32 scales [out]: w ~ weight * scales[:, None].
struct QuantizedRows {
  Tensor weight;
  Tensor scales;
};
/// Quantizes each row symmetrically (Note [Weight-only int8]). `w` is a float [out, in] view.
QuantizedRows quantize_rows(const TensorView& w);

/// What quantize_folder wrote.
struct QuantizeReport {
  std::int64_t tensors = 0;
  std::uint64_t bytes_in = 0, bytes_out = 0;  ///< the tensors' bytes before and after
};

/// Reads the folder `dir` (config.json and its safetensors), converts it and writes `out`/config.json and
/// `out`/model.safetensors (atomically; a tokenizer.model beside them is copied). bf16: every float tensor
/// in bf16, the names and layouts unchanged. int8: the projection weights quantized (i8 [out, in], GPT-2's
/// Conv1D weights included, with "NAME_scale" f32 [out]), every other tensor f32, and config.json gaining
/// "pact_quantization": {"dtype": "int8"}. f32 is invalid_argument (nothing to convert), as is an `out`
/// that is `dir` or an existing file.
QuantizeReport quantize_folder(const std::string& dir, Precision to, const std::string& out);

}  // namespace pact::llm
