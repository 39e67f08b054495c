// The INT8 GEMM's kernels with one flaw each, for the negative controls (tests/negative_controls):
// a kernel that drops the last K step, swaps the row and column scales, misplaces a TMA box or
// gives half a fragment's rows the wrong scale must fail the ops' checks, or the checks are too
// weak to trust. Not a rung: kc-bench runs these only with --include-negative-controls.
#include "int8_gemm_kernel.cuh"
#include "int8_mma_sync_kernel.cuh"

namespace kc::stage3 {

void int8_gemm_with_flaw(const Int8GemmArgs& args, Int8Flaw flaw, cudaStream_t stream, HopperLaunchCache& cache) {
  switch (flaw) {
    case Int8Flaw::none: int8_gemm_01_tma_wgmma(args, stream, cache); return;
    case Int8Flaw::k_step_dropped: launch_int8_gemm<Int8Flaw::k_step_dropped>(args, stream, cache); return;
    case Int8Flaw::scales_swapped: launch_int8_gemm<Int8Flaw::scales_swapped>(args, stream, cache); return;
    case Int8Flaw::s32_box_column_halved:  // rung 02's kernel: the flaw is in its TMA epilogue
      launch_int8_gemm<Int8Flaw::s32_box_column_halved, /*kTmaStore=*/true>(args, stream, cache);
      return;
    case Int8Flaw::fragment_rows_share_scale:  // rung 03's kernel: the flaw is in its fragment epilogue
      launch_int8_gemm_mma_sync<Int8Flaw::fragment_rows_share_scale>(args, stream);
      return;
  }
  throw Error("int8_gemm_with_flaw: unknown flaw");
}

}  // namespace kc::stage3
