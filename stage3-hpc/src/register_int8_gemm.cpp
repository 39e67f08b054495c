// Files the INT8 GEMM's two ops and rungs 01 (quant/int8/: TMA + WGMMA s8 -> s32, the s32 or the
// dequantizing epilogue), 02 (+ the epilogue through shared memory and TMA) and 03 (cp.async +
// mma.sync s8, for sm_80) with the registry.
#include <memory>
#include <string>
#include <utility>

#include "arch/sm90/tma_descriptor.hpp"
#include "kc/stage3/int8_gemm.hpp"
#include "kc/stage3/register.hpp"

namespace kc::stage3 {

void register_int8_gemm_kernels(Registry& registry) {
  if (!registry.has_op(kInt8GemmOp)) registry.add_op(make_int8_gemm_op());
  if (!registry.has_op(kInt8GemmDequantOp)) registry.add_op(make_int8_gemm_dequant_op());

  // A rung of either op: the shape rules every INT8 rung shares (K % 16, the exact-sum bound).
  const auto rung_of = [](const char* op, const char* name, int rung_number, const char* idea,
                          int min_compute_capability) {
    KernelEntry rung = rung_entry(op, name, rung_number, idea, {DType::i8}, kInt8GemmReport, min_compute_capability);
    rung.constraints = "K % 16 == 0";
    rung.supports = &int8_gemm_rung_shape_error;
    rung.refuses = int8_gemm_rung_refusals();
    return rung;
  };
  // sm_90a machine code (wgmma, setmaxnreg) runs on compute capability 9.0 only. One kernel, two
  // epilogues: the s32 op and the dequantizing op each file it, each with its own launch cache.
  using Launch = void (*)(const Int8GemmArgs&, cudaStream_t, HopperLaunchCache&);
  const auto add_hopper = [&registry, &rung_of](const char* op, const char* name, int rung_number, const char* idea,
                                                Launch launch) {
    KernelEntry rung = rung_of(op, name, rung_number, idea, 90);
    rung.max_compute_capability = 90;
    auto cache = std::make_shared<HopperLaunchCache>();
    rung.launch = [cache, launch](const Problem& problem, Operands& operands, cudaStream_t stream) {
      launch(int8_gemm_args(problem, operands), stream, *cache);
    };
    registry.add_kernel(std::move(rung));
  };
  for (const char* op : {kInt8GemmOp, kInt8GemmDequantOp}) {
    add_hopper(op, "01_tma_wgmma", 1,
               "TMA + WGMMA m64n256k32 s8 -> s32, producer warp and two consumer warpgroups, persistent 128x256 "
               "tiles; exact integer sums, s32 stores or dequantized to bf16 in the epilogue",
               &int8_gemm_01_tma_wgmma);
    add_hopper(op, "02_tma_store", 2,
               "rung 01 with the epilogue through shared memory and TMA stores (64-row boxes of 128 bytes, whole "
               "lines in the background)",
               &int8_gemm_02_tma_store);
    add_hopper(op, "04_ping_pong", 4,
               "the two consumer warpgroups on 128x128 tiles of their own, taking alternate tiles: one's epilogue "
               "runs under the other's WGMMAs",
               &int8_gemm_04_ping_pong);
    // Rung 03 runs wherever mma.sync s8 and 145 KiB of shared memory per block do (sm_80, sm_90).
    KernelEntry rung = rung_of(op, "03_mma_sync", 3,
                               "the bf16 ladder's rung 03 on the s8 bytes: cp.async pipeline, ldmatrix, mma.sync "
                               "m16n8k32 s8 -> s32, 128x256 blocks of 2x4 warps; for GPUs without WGMMA (sm_80)",
                               80);
    rung.launch = [](const Problem& problem, Operands& operands, cudaStream_t stream) {
      int8_gemm_03_mma_sync(int8_gemm_args(problem, operands), stream);
    };
    registry.add_kernel(std::move(rung));
  }
}

}  // namespace kc::stage3
