// The INT8 GEMM's kernel with one flaw each, for the negative controls (tests/negative_controls):
// a kernel that drops the last K step or swaps the row and column scales must fail the ops'
// checks, or the checks are too weak to trust. Not a rung: kc-bench runs these only with
// --include-negative-controls.
#include "int8_gemm_kernel.cuh"

namespace kc::stage3 {

void int8_gemm_01_with_flaw(const Int8GemmArgs& args, Int8Flaw flaw, cudaStream_t stream, HopperLaunchCache& cache) {
  switch (flaw) {
    case Int8Flaw::none: int8_gemm_01_tma_wgmma(args, stream, cache); return;
    case Int8Flaw::k_step_dropped: launch_int8_gemm<Int8Flaw::k_step_dropped>(args, stream, cache); return;
    case Int8Flaw::scales_swapped: launch_int8_gemm<Int8Flaw::scales_swapped>(args, stream, cache); return;
    case Int8Flaw::s32_box_column_halved:  // rung 02's kernel: the flaw is in its TMA epilogue
      launch_int8_gemm<Int8Flaw::s32_box_column_halved, /*kTmaStore=*/true>(args, stream, cache);
      return;
  }
  throw Error("int8_gemm_01_with_flaw: unknown flaw");
}

}  // namespace kc::stage3
