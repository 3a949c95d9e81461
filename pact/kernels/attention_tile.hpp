#pragma once
/// The tiling of the CUDA provider's fused attention forward (pact_attention_f32_v32/_v64/_v128 in
/// pact/kernels/cuda/kernels.cu): one definition of its block shape and shared-memory layout, read by the
/// device code and by the host code that sizes the launch. Dependency-free C++17 so nvcc compiles it.

#include <cstdint>

#include "pact/kernels/host_device.hpp"

namespace pact::kernels {

/// One block of kThreads threads computes kRows query rows of one batch entry, kKeys keys at a time.
struct AttentionTile {
  static constexpr int kRows = 64, kKeys = 32, kThreads = 128;
  static constexpr int kProbabilityStride = 40;  ///< a probability row in shared memory (32 keys, padded)
  static constexpr std::int64_t kMaxValueWidth = 128;
};

/// The padded row stride (floats) of the query and key tiles for head width e: whole float4s, an odd number
/// of them, so the eight keys that a warp's lanes read in one float4 load sit in distinct banks.
PACT_HOST_DEVICE constexpr std::int64_t attention_row_stride(std::int64_t e) {
  const std::int64_t quads = (e + 3) / 4;
  return 4 * (quads % 2 == 1 ? quads : quads + 1);
}

/// The value tile's columns in chunks of 32 (one float4 per lane of eight): 1, 2 or 4, the kernel variant;
/// 0 past kMaxValueWidth.
PACT_HOST_DEVICE constexpr int attention_value_chunks(std::int64_t ev) {
  return ev <= 32 ? 1 : ev <= 64 ? 2 : ev <= AttentionTile::kMaxValueWidth ? 4 : 0;
}

/// Dynamic shared memory (floats): the query tile, the key tile, the value tile and the probabilities.
PACT_HOST_DEVICE constexpr std::int64_t attention_shared_floats(std::int64_t e, std::int64_t ev) {
  const std::int64_t es = attention_row_stride(e);
  return AttentionTile::kRows * es + AttentionTile::kKeys * es +
         AttentionTile::kKeys * 32 * attention_value_chunks(ev) +
         AttentionTile::kRows * AttentionTile::kProbabilityStride;
}

}  // namespace pact::kernels
