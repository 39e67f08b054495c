// Files every stage-1 rung with the registry: id, rung number, one-line idea and launch.
#include <utility>

#include "kc/stage1/sgemm.hpp"

namespace kc::stage1 {
namespace {

using SgemmLaunch = void (*)(const SgemmArgs&, cudaStream_t);

KernelEntry sgemm_entry(std::string name, int rung, std::string idea, SgemmLaunch launch) {
  KernelEntry entry;
  entry.id = "stage1/sgemm/" + name;
  entry.op = "sgemm";
  entry.rung = rung;
  entry.idea = std::move(idea);
  entry.dtype = DType::f32;
  entry.min_compute_capability = 80;
  entry.launch = [launch](const Problem& problem, Operands& operands, cudaStream_t stream) {
    launch(gemm_args<float>(problem, operands, BLayout::k_by_n), stream);
  };
  return entry;
}

}  // namespace

OpSpec make_sgemm_op() {
  GemmOpConfig config;
  config.name = "sgemm";
  config.ab_type = DType::f32;
  config.c_type = DType::f32;
  config.b_layout = BLayout::k_by_n;
  config.math = MathUnit::fp32_cuda_core;
  config.precision = DType::f32;
  return make_gemm_op(config);
}

void register_kernels(Registry& registry) {
  if (!registry.has_op("sgemm")) registry.add_op(make_sgemm_op());
  registry.add_kernel(sgemm_entry("01_naive", 1,
                                  "one thread per C element, straight from global memory",
                                  &sgemm_01_naive));
}

}  // namespace kc::stage1
