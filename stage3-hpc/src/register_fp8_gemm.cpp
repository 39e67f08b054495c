// Files the fp8_gemm op and its ladder with the registry (quant/fp8/: 01 TMA + FP8 WGMMA with FP32
// promotion per K step).
#include <memory>
#include <string>
#include <utility>

#include "arch/sm90/tma_descriptor.hpp"
#include "kc/stage3/fp8_gemm.hpp"
#include "kc/stage3/register.hpp"

namespace kc::stage3 {

void register_fp8_gemm_kernels(Registry& registry) {
  if (!registry.has_op(kFp8GemmOp)) registry.add_op(make_fp8_gemm_op());

  // sm_90a machine code (wgmma, setmaxnreg) runs on compute capability 9.0 only.
  KernelEntry rung = rung_entry(kFp8GemmOp, "01_tma_wgmma", 1,
                                "TMA + FP8 WGMMA m64n128k32, producer warp and two consumer warpgroups, persistent; "
                                "each 128-deep K step summed on the tensor cores, then promoted into FP32 "
                                "registers with its scales",
                                {DType::f8e4m3}, kFp8GemmReport, 90);
  rung.max_compute_capability = 90;
  rung.constraints = "K % 16 == 0";
  rung.supports = &fp8_gemm_rung_shape_error;
  rung.refuses = fp8_gemm_rung_refusals();
  auto cache = std::make_shared<HopperLaunchCache>();
  rung.launch = [cache](const Problem& problem, Operands& operands, cudaStream_t stream) {
    fp8_gemm_01_tma_wgmma(fp8_gemm_args(problem, operands), stream, *cache);
  };
  registry.add_kernel(std::move(rung));
}

}  // namespace kc::stage3
