// Rung 14 — consumers without query rows leave.
//
// Idea: a CTA of rung 13 owns kConsumers x 64 query rows (192 at D = 64, 128 at D = 128), and the
// last query tile of a length that is not a multiple of that holds fewer rows. Its consumers past
// Sq still ran every WGMMA, softmax and turn of the ping-pong on rows whose results are thrown
// away: at D = 64 and Sq = 1024 (5 x 192 + 64), the last of six query tiles has one consumer's rows
// and does three consumers' work, a ninth of the launch's tensor-core time spent on nothing. Here
// such a consumer returns as soon as the CTA has set up its barriers. The stages' empty barriers
// count only the working consumers' warps, the ping-pong's turns go round the working consumers
// only, and a consumer working alone takes no turns at all.
//
// What changed from rung 13: the kernel's kRowlessConsumersLeave (attention/flash_wgmma_kernel.cuh):
// the number of working consumers from Sq and the tile's first row, the barrier counts from it,
// FlashWgmmaConsumer's turns over it. Every other tile runs rung 13's code.
//
// Expected limiter: rung 13's. What it can gain is at most the rowless consumers' share of the
// launch: large at a short Sq with a partial last tile (D = 64 at 1024 rows), a few percent at
// 2k-4k, nothing where Sq is a multiple of the CTA's rows (D = 128 at the table's lengths). A lone
// consumer in the last tile runs with no partner to fill the tensor cores during its softmax, so the
// last tile takes more than a third of a full one.
//
// SASS to look for: rung 13's HGMMA counts; the turns' BAR.SYNC / BAR.ARV behind a branch on the
// working count.
//
// Run just this rung (sm_90a only):
//   build/ci/bench/kc-bench --filter 'stage3/attention_fwd/1[34]_' --shapes 16x32x32x1024x1024x64
#include "attention/flash_wgmma_kernel.cuh"

namespace kc::stage3 {

template <typename T>
void attention_fwd_14_rowless_consumers_leave(const AttentionArgs<T>& args, cudaStream_t stream,
                                              HopperLaunchCache& cache) {
  require_flash_args(args, "attention rung 14", FlashWgmmaShape<64, 3>::kBlockRows);
  if (!(args.scale > 0.f)) {  // rung 13's softmax needs a positive scale; rung 12's kernels otherwise
    attention_fwd_12_added_descriptors(args, stream, cache);
    return;
  }
  if (args.head_dim == 64)
    launch_flash_wgmma<T, 64, FlashLoop::overlapped, 3, 128, true, true, true, true>(args, stream, cache);
  else
    launch_flash_wgmma<T, 128, FlashLoop::overlapped, 2, 128, true, true, true, true>(args, stream, cache);
}

template void attention_fwd_14_rowless_consumers_leave<__nv_bfloat16>(const AttentionArgs<__nv_bfloat16>&,
                                                                      cudaStream_t, HopperLaunchCache&);
template void attention_fwd_14_rowless_consumers_leave<__half>(const AttentionArgs<__half>&, cudaStream_t,
                                                               HopperLaunchCache&);

}  // namespace kc::stage3
