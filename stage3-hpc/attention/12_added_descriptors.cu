// Rung 12 — descriptors made once, moved by addition.
//
// Idea: every WGMMA reads its operands from shared memory through a 64-bit matrix descriptor
// whose low 14 bits are the operand's address >> 4; the other fields (the swizzle mode, the
// strides) are the same for every WGMMA of the kernel. Rungs 06-11 build each descriptor from its
// address (sm90::smem_descriptor_sw128: a mask, a shift, an or, and moves of the constant upper
// word), for Q and K before each of S's D/16 WGMMAs and for V before each of P V's 8. ncu's
// instruction counts of rung 07 next to cuDNN's kernel (stage-3 README, "Where rung 07's time goes
// at D = 128") put that arithmetic among the instructions rung 07 executes and cuDNN's kernel does
// not: its kernel makes its descriptors once and adds offsets to them.
//
// What changed from rung 11: the consumers make three descriptors in their constructor (their Q
// rows, stage 0's K tile, stage 0's V tile) and form each WGMMA's descriptors from them with
// sm90::advance_descriptor (arch/sm90/wgmma.cuh): the stage's offset plus the step's, shifted
// right by 4, added to the low word (the kernel's kDescriptorsAdded). The producer sleeps as in
// rung 11; the kernels are rung 11's otherwise (three consumer warpgroups at D = 64, two at D = 128).
//
// Expected limiter: rung 11's, with fewer instructions issued between a consumer's WGMMAs.
//
// SASS to look for: the same HGMMA counts as rung 11 (24 at D = 64, 32 at D = 128), with no
// ULOP3.LUT/LOP3.LUT masking an address with 0x3fff0 between them.
//
// Run just this rung (sm_90a only):
//   build/ci/bench/kc-bench --filter 'stage3/attention_fwd/(07|11|12)' --shapes 4x16x16x4096x4096x128
#include "attention/flash_wgmma_kernel.cuh"

namespace kc::stage3 {

template <typename T>
void attention_fwd_12_added_descriptors(const AttentionArgs<T>& args, cudaStream_t stream,
                                        HopperLaunchCache& cache) {
  require_flash_args(args, "attention rung 12", FlashWgmmaShape<64, 3>::kBlockRows);
  if (args.head_dim == 64)
    launch_flash_wgmma<T, 64, FlashLoop::overlapped, 3, 128, true, true>(args, stream, cache);
  else
    launch_flash_wgmma<T, 128, FlashLoop::overlapped, 2, 128, true, true>(args, stream, cache);
}

template void attention_fwd_12_added_descriptors<__nv_bfloat16>(const AttentionArgs<__nv_bfloat16>&, cudaStream_t,
                                                               HopperLaunchCache&);
template void attention_fwd_12_added_descriptors<__half>(const AttentionArgs<__half>&, cudaStream_t,
                                                        HopperLaunchCache&);

}  // namespace kc::stage3
