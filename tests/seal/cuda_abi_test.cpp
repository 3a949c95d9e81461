// Pact declares cuda.h's launch structures itself (pact/seal/admission.hpp) so nothing links against
// the CUDA toolkit; where the toolkit is installed this test holds the declarations to cuda.h's layout.

#include <cuda.h>
#include <gtest/gtest.h>

#include <cstddef>

#include "pact/seal/admission.hpp"

namespace pact::seal {
namespace {

TEST(SealCudaAbi, LaunchStructuresMatchCudaH) {
  EXPECT_EQ(sizeof(CuLaunchAttribute), sizeof(CUlaunchAttribute));
  EXPECT_EQ(offsetof(CuLaunchAttribute, value), offsetof(CUlaunchAttribute, value));
  EXPECT_EQ(sizeof(CuLaunchConfig), sizeof(CUlaunchConfig));
  EXPECT_EQ(offsetof(CuLaunchConfig, shared_mem_bytes), offsetof(CUlaunchConfig, sharedMemBytes));
  EXPECT_EQ(offsetof(CuLaunchConfig, stream), offsetof(CUlaunchConfig, hStream));
  EXPECT_EQ(offsetof(CuLaunchConfig, attrs), offsetof(CUlaunchConfig, attrs));
  EXPECT_EQ(offsetof(CuLaunchConfig, num_attrs), offsetof(CUlaunchConfig, numAttrs));
  EXPECT_EQ(kCuLaunchAttributeClusterDimension, static_cast<std::uint32_t>(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION));
  EXPECT_EQ(kCuLaunchAttributeCooperative, static_cast<std::uint32_t>(CU_LAUNCH_ATTRIBUTE_COOPERATIVE));
  EXPECT_EQ(kCuLaunchAttributeClusterSchedulingPolicyPreference,
            static_cast<std::uint32_t>(CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE));
  EXPECT_EQ(kCuLaunchAttributeProgrammaticStreamSerialization,
            static_cast<std::uint32_t>(CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION));
  EXPECT_EQ(kCuClusterSchedulingPolicySpread, static_cast<std::int32_t>(CU_CLUSTER_SCHEDULING_POLICY_SPREAD));
  EXPECT_EQ(cu_tensor_map_dtype("u8"), CU_TENSOR_MAP_DATA_TYPE_UINT8);
  EXPECT_EQ(cu_tensor_map_dtype("i32"), CU_TENSOR_MAP_DATA_TYPE_INT32);
  EXPECT_EQ(cu_tensor_map_dtype("f16"), CU_TENSOR_MAP_DATA_TYPE_FLOAT16);
  EXPECT_EQ(cu_tensor_map_dtype("f32"), CU_TENSOR_MAP_DATA_TYPE_FLOAT32);
  EXPECT_EQ(cu_tensor_map_dtype("f64"), CU_TENSOR_MAP_DATA_TYPE_FLOAT64);
  EXPECT_EQ(cu_tensor_map_dtype("bf16"), CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
  EXPECT_EQ(cu_tensor_map_swizzle("none"), CU_TENSOR_MAP_SWIZZLE_NONE);
  EXPECT_EQ(cu_tensor_map_swizzle("32B"), CU_TENSOR_MAP_SWIZZLE_32B);
  EXPECT_EQ(cu_tensor_map_swizzle("64B"), CU_TENSOR_MAP_SWIZZLE_64B);
  EXPECT_EQ(cu_tensor_map_swizzle("128B"), CU_TENSOR_MAP_SWIZZLE_128B);
  EXPECT_EQ(sizeof(CUtensorMap), 128u);
  EXPECT_EQ(kCudaSuccess, CUDA_SUCCESS);
  EXPECT_EQ(kCudaErrorInvalidValue, CUDA_ERROR_INVALID_VALUE);
  // The cluster dimension sits at the start of the value union, as cuda.h's clusterDim does.
  CUlaunchAttribute a{};
  EXPECT_EQ(reinterpret_cast<char*>(&a.value.clusterDim.x) - reinterpret_cast<char*>(&a.value), 0);
  EXPECT_EQ(reinterpret_cast<char*>(&a.value.clusterDim.z) - reinterpret_cast<char*>(&a.value), 8);
  EXPECT_EQ(reinterpret_cast<char*>(&a.value.cooperative) - reinterpret_cast<char*>(&a.value), 0);
  EXPECT_EQ(
      reinterpret_cast<char*>(&a.value.programmaticStreamSerializationAllowed) - reinterpret_cast<char*>(&a.value), 0);
}

}  // namespace
}  // namespace pact::seal
