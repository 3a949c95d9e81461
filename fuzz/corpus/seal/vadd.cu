// A sealed-artifact example kernel (issue 8): out[i] = a[i] + b[i] over n elements, with a grid-stride
// loop whose block index comes from a fast_divmod_u32 record. Compiled only by the validator-owned
// prebuild (-cubin, the profile's architecture); the only values it receives are the export's declared
// profile inputs, as macros.
#include <cstdint>

struct FastDivmodU32 {
  std::uint32_t divisor, multiplier, shift;
  __device__ std::uint32_t div(std::uint32_t n) const { return divisor == 1 ? n : __umulhi(n, multiplier) >> shift; }
};

extern "C" __global__ void vadd(const float* a, const float* b, float* out, std::int32_t n, FastDivmodU32 per_block) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  (void)per_block.div(i);
  for (std::uint32_t k = i; k < static_cast<std::uint32_t>(n); k += gridDim.x * blockDim.x) out[k] = a[k] + b[k];
}
