// The FP8 GEMM's kernel with one flaw each, for the negative controls (tests/negative_controls):
// a kernel that skips the promotion, applies a scale twice, reads the wrong block's scales, (rung
// 04's kernel) never restarts its promotion window or (rung 12's) adds a split tile's first K piece
// twice must fail the op's check, or the check is too weak to trust. Not a rung: kc-bench runs these only
// with --include-negative-controls.
#include "fp8_gemm_kernel.cuh"

namespace kc::stage3 {

void fp8_gemm_01_with_flaw(const Fp8GemmArgs& args, Fp8Flaw flaw, cudaStream_t stream, HopperLaunchCache& cache,
                           const GroupedSplitWorkspace* workspace) {
  switch (flaw) {
    case Fp8Flaw::none: fp8_gemm_01_tma_wgmma(args, stream, cache); return;
    case Fp8Flaw::no_promotion: launch_fp8_gemm_scaled<Fp8GemmConfig<128>, Fp8Flaw::no_promotion>(args, stream, cache); return;
    case Fp8Flaw::scale_twice:
      launch_fp8_gemm<Fp8GemmConfig<128>, Fp8Scaling::block, Fp8Flaw::scale_twice>(args, stream, cache);
      return;
    case Fp8Flaw::window_not_restarted:  // rung 04's kernel: the flaw is in its promotion window
      launch_fp8_gemm<Fp8GemmConfig<192, 4, 192, 4>, Fp8Scaling::per_tensor, Fp8Flaw::window_not_restarted>(args, stream,
                                                                                                        cache);
      return;
    case Fp8Flaw::wrong_scale_block:
      launch_fp8_gemm<Fp8GemmConfig<128>, Fp8Scaling::block, Fp8Flaw::wrong_scale_block>(args, stream, cache);
      return;
    case Fp8Flaw::split_piece_added_twice:  // rung 12's kernel (the wide tiles, split), block scales
      require(fp8_scale_a_rows_take_tma(args), "fp8_gemm_01_with_flaw: rung 12's kernel needs M % 4 == 0 and s_A "
                                               "16-byte aligned");
      launch_fp8_gemm<Fp8GemmConfig<192, 4, 192, 4, Fp8BlockScaleWalk::wide_scales_in_stage, 1, true>,
                      Fp8Scaling::block, Fp8Flaw::split_piece_added_twice>(args, stream, cache, workspace);
      return;
    case Fp8Flaw::neighbours_weight_scales:
      throw Error("fp8_gemm_01_with_flaw: neighbours_weight_scales is the FP8 grouped GEMM's flaw "
                  "(fp8_grouped_gemm_01_neighbours_weight_scales)");
  }
  throw Error("fp8_gemm_01_with_flaw: unknown flaw");
}

}  // namespace kc::stage3
