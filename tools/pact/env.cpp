// `pact env [--json]`: what Pact detected about this machine (CPU model, cores, caches, the ISA level the
// kernels run at and why; the CUDA driver, device, kernels and libraries) and, per SIMD family, the level each
// one serves at.

#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "pact/core/cpu.hpp"
#include "pact/core/cuda_device.hpp"
#include "pact/core/cuda_probe.hpp"
#include "pact/core/json.hpp"
#include "pact/core/simd_dispatch.hpp"
#include "pact/kernels/cpu/gemm.hpp"
#include "pact/kernels/cublas.hpp"
#include "pact/kernels/cublaslt.hpp"
#include "pact/kernels/cudnn.hpp"
#include "pact/kernels/kernel.hpp"
#include "tools/pact/command.hpp"

namespace pact::cli {

namespace {

// The CUDA libraries the cublas, cublaslt and cudnn providers load at run time: "loaded", or why not (they are
// looked for only once a device exists).
struct CudaLibrary {
  const char* name;
  std::string status;
};
std::vector<CudaLibrary> cuda_libraries() {
  auto status = [](bool loaded, const std::string& why) { return loaded ? std::string("loaded") : why; };
  return {{"cuBLAS", status(kernels::cublas() != nullptr, kernels::cublas_unavailable_reason())},
          {"cuBLASLt", status(kernels::cublaslt() != nullptr, kernels::cublaslt_unavailable_reason())},
          {"cuDNN", status(kernels::cudnn() != nullptr, kernels::cudnn_unavailable_reason())}};
}

Json env_json() {
  const CpuFacts& f = cpu_facts();
  Json families = Json::object(), libraries = Json::object();
  for (const auto& l : cuda_libraries()) libraries[l.name] = l.status;
  for (const auto& fam : simd::families()) families[std::string(fam.name)] = isa_name(fam.serves(active_isa()));
  return Json{
      {"schema", "pact.env.v1"},
      {"cpu",
       {{"model", f.model},
        {"detected", f.detected},
        {"cores", f.cores},
        {"logical_processors", f.logical},
        {"l1d_bytes", f.l1d},
        {"l2_bytes", f.l2},
        {"l3_bytes", f.l3},
        {"l3_shared_by", f.l3_sharing},
        {"caches_from", f.cache_source},
        {"avx512_bf16", f.avx512_bf16},
        {"avx512_vnni", f.avx512_vnni},
        {"avx_vnni", f.avx_vnni}}},
      {"isa",
       {{"best", isa_name(f.best)}, {"active", isa_name(active_isa())}, {"requested", std::string(requested_isa())}}},
      {"simd_families", families},
      {"openblas_corename", std::string(kernels::cpu::openblas_corename())},
      {"cuda",
       {{"driver", probe_cuda().library != nullptr},
        {"devices", probe_cuda().devices},
        {"summary", probe_cuda().summary},
        {"device", CudaDevice::get() != nullptr ? CudaDevice::get()->description() : ""},
        {"kernels_built", kernels::cuda_kernels_built()},
        {"libraries", libraries}}}};
}

const bool registered = register_command("env", [](CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand("env", "print what Pact detected about this CPU and the ISA level its kernels run at");
  cmd->add_flag("--json", *json, "print it as JSON (schema pact.env.v1)");
  return std::vector<Runner>{
      {cmd, [json] {
         if (*json) {
           fmt::print("{}\n", env_json().dump(2));
           return 0;
         }
         fmt::print("cpu: {}\n", describe_cpu());
         if (!requested_isa().empty()) fmt::print("PACT_ISA={}\n", requested_isa());
         fmt::print("OpenBLAS kernel: {}\n", kernels::cpu::openblas_corename());
         fmt::print("cuda: {}\n", probe_cuda().summary);
         fmt::print("cuda device: {}\n", CudaDevice::get() != nullptr
                                             ? CudaDevice::get()->description()
                                             : "none (" + CudaDevice::unavailable_reason() + ")");
         fmt::print("cuda kernels: {}\n",
                    kernels::cuda_kernels_built() ? kernels::cuda_kernels_status() : "not built (PACT_WITH_CUDA=OFF)");
         for (const auto& l : cuda_libraries()) fmt::print("cuda library {}: {}\n", l.name, l.status);
         for (const auto& fam : simd::families())
           fmt::print("  {:<22} {}\n", fam.name, isa_name(fam.serves(active_isa())));
         return 0;
       }}};
});

}  // namespace

}  // namespace pact::cli
