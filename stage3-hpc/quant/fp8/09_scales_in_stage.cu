// FP8 GEMM rung 09 — rung 07 with each K step's scales brought into the stage by the producer (sm_90a).
//
// Idea: rung 07's profile (stage-3 README) puts the consumers' stalls on "dispatch" at the address
// arithmetic of the scales' global loads (LEA, IMAD.WIDE between the QGMMAs): every thread of both
// consumers works out, every K step, where its two rows' scales of A and its tile's scale of B lie
// in global memory, and loads them. Those are the same 129 floats for the whole CTA a step. DeepGEMM
// has its producer copy them into shared memory with the step's tiles: then they land on the same
// full barrier as the tiles, and a consumer reads its three factors with LDS at offsets fixed for
// the thread, no address arithmetic and no global load of its own.
//
// What changed from rung 07 (Fp8BlockScaleWalk::scales_in_stage; consume_promoting_behind and
// produce_tiles_and_scales in fp8_gemm_kernel.cuh):
//   - each stage has 640 bytes of scales beside its A and B tiles (Fp8StageScales, after the ring's
//     barriers): the producer thread loads A's 128 row scales of the step, s_A[kb][row0 .. row0 +
//     127], by TMA as one 512-byte box (s_A's rows seen as two-byte elements, as TMA's maps here
//     are), and B's one scale s_B[n block][kb] with an ordinary load issued before its wait for the
//     free stage, written into the stage before its arrive. The arrive announces 32 KiB + 512
//     bytes. Rows past M read as zeros from TMA; their results are never stored.
//   - a consumer reads a step's factors from the stage right after issuing its WGMMAs, before the
//     stage can be freed, and multiplies them at the promotion one step later, as rung 07 does;
//     rung 06's lookahead across tiles is gone.
//   - store passes of 64 columns (two 8 KiB buffers instead of rung 07's 16 KiB ones): six stages,
//     their scales and rung 07's two 16 KiB buffers would pass the 227 KiB a block may have.
//
// Layouts and limits: rung 01's, and TMA's rule for s_A's rows: 16-byte aligned, so M % 4 == 0 and
// s_A 16-byte aligned. Anything else (and one scale per tensor) runs rung 07 (which runs rung 05 for
// one scale per tensor). Expected limiter: the tensor cores, with the consumers' issue slots
// between the QGMMAs freed of the scales' address arithmetic. SASS to look for: in the consumers'
// step, three LDS of the scales after its 4 QGMMA.64x128x32.F32.E4M3.E4M3 and no LDG (the only LDG
// is the producer's of B's scale), two copies of the step, 8 QGMMA and 256 FFMA in the kernel, a
// third UTMALDG.2D (A's scales) in the producer, no LDL/STL, and no ptxas warning that the WGMMAs
// are serialized.
//
// Run just this rung:  kc-bench --filter stage3/fp8_gemm/09_scales_in_stage --param scaling=1
//                      kc-bench --filter 'stage3/fp8_gemm/0[79]' --param scaling=1 --shapes 4096x4096x4096
#include "fp8_gemm_kernel.cuh"

namespace kc::stage3 {

void fp8_gemm_09_scales_in_stage(const Fp8GemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  if (args.scaling != Fp8Scaling::block || !fp8_scale_a_rows_take_tma(args)) {
    fp8_gemm_07_promote_behind(args, stream, cache);
    return;
  }
  launch_fp8_gemm<Fp8GemmConfig<128, /*promotion interval*/ 4, /*store pass columns*/ 64, /*stages*/ 6,
                                Fp8BlockScaleWalk::scales_in_stage>,
                  Fp8Scaling::block, Fp8Flaw::none>(args, stream, cache);
}

}  // namespace kc::stage3
