// Rung 13 — the softmax's scale inside the exponent's FMA.
//
// Idea: the online softmax turns each score s into 2^(scale_log2 . s - max), where max is the
// row's running maximum of the scaled scores. Rungs 03-12 multiply every score by scale_log2
// (FMUL), take the maximum of the products, then subtract the maximum (FADD) before the exponential
// (MUFU.EX2): two floating-point instructions a score besides the exponential, the maximum and
// the row sum. For a positive scale the maximum of the scaled scores is the scaled maximum of the
// raw ones, so the maximum can be taken over the raw scores and scaled once a row, and the
// exponent formed by one FFMA, fma(s, scale_log2, -max) — FlashAttention-2's form. ncu's counts of
// rungs 11 and 12 (stage-3 README) put FMUL and FADD at two each per exponential; this removes one
// FMUL a score. The FFMA rounds once where FMUL then FADD rounded twice: P moves by at most an ulp
// before it is rounded to 16 bits.
//
// What changed from rung 12: softmax_probabilities' kScaleInExponent (attention/fa2_mma.cuh),
// passed through the consumer (the kernel's kScaleInExponent). A scale that is not positive (the
// op allows any) runs rung 12's kernels, whose maximum is taken after the scaling.
//
// Expected limiter: rung 12's, with fewer instructions issued a tile; at D = 64, where the
// exponentials and the tensor cores already ask for the same time, the freed issue slots matter
// most.
//
// SASS to look for: rung 12's HGMMA counts; in the softmax, FFMA feeding MUFU.EX2 where rung 12
// has FADD, and about one FMUL a score fewer.
//
// Run just this rung (sm_90a only):
//   build/ci/bench/kc-bench --filter 'stage3/attention_fwd/1[23]_' --shapes 4x32x32x4096x4096x64
#include "attention/flash_wgmma_kernel.cuh"

namespace kc::stage3 {

template <typename T>
void attention_fwd_13_scale_in_exponent(const AttentionArgs<T>& args, cudaStream_t stream,
                                        HopperLaunchCache& cache) {
  require_flash_args(args, "attention rung 13", FlashWgmmaShape<64, 3>::kBlockRows);
  if (!(args.scale > 0.f)) {  // rung 12's kernels: its maximum is taken after the scaling
    attention_fwd_12_added_descriptors(args, stream, cache);
    return;
  }
  if (args.head_dim == 64)
    launch_flash_wgmma<T, 64, FlashLoop::overlapped, 3, 128, true, true, true>(args, stream, cache);
  else
    launch_flash_wgmma<T, 128, FlashLoop::overlapped, 2, 128, true, true, true>(args, stream, cache);
}

template void attention_fwd_13_scale_in_exponent<__nv_bfloat16>(const AttentionArgs<__nv_bfloat16>&, cudaStream_t,
                                                               HopperLaunchCache&);
template void attention_fwd_13_scale_in_exponent<__half>(const AttentionArgs<__half>&, cudaStream_t,
                                                        HopperLaunchCache&);

}  // namespace kc::stage3
