// attention_fwd_varlen, rung 15 — rung 15 (TMA + WGMMA, FlashAttention-3's overlap) on the packed
// variable-length form: Hopper's ring of tensor-memory copies for a batch of sequences of
// different lengths in one launch.
//
// Idea: the packed form's rung 05 runs one launch for the whole batch, but on mma.sync: with long
// sequences it ran at half the speed of the Hopper rungs called once per sequence (stage-3 README,
// "Sequences of different lengths in one launch"). The Hopper rungs refused the packed form because
// their tensor maps zero-fill only outside the whole tensor: a sequence's last K/V tile would hold
// the next sequence's keys and values, which the mask keeps out of S but not out of P V (0 x NaN is
// NaN), and the last sequence's last Q tile would read past the tensor, whose length only the
// device knows. This rung keeps TMA for every tile that lies wholly inside its sequence — all but
// the last K/V tile and the last Q tile of each sequence — and copies those partial tiles with the
// producer warp's 32 lanes (cp.async, zeros past the sequence's end, nothing read there), in the
// 128-byte swizzle TMA would have written, fenced for the async proxy the WGMMAs read through, and
// announced on the tile's full barrier with a plain arrive. (FlashAttention-3 lets the neighbour's
// keys in and relies on the mask; CUTLASS's grouped kernels rewrite a tensor map per group on the
// device, tensormap.replace. The copies here are the learner's version: no map changes hands.)
//
// What changed from rung 15: its kernel's producer and consumers, unchanged, in a kernel of their
// own (attention/flash_wgmma_varlen.cuh, flash_wgmma_varlen_kernel): a CTA first reads its
// sequence's four offsets (blockIdx.z is the sequence), leaves if its query tile lies past the
// sequence's rows, and runs rung 15's CTA on a one-batch problem of Sq_b queries and Sk_b keys
// (the causal mask bottom-right in that sequence, its own tiles, its own stores; the LSE in the
// sequence's [Hq, Sq_b] block). The tensor maps cover the packed [total, H, D] tensors, their row
// counts the bound B x max_seqlen; the dense rungs' code is not touched.
//
// Expected limiter: rung 15's, plus one partial K/V tile a CTA copied by one warp (up to 64 KiB
// with V, about 128 cp.async a lane) and, in each sequence's last query tile, a partial Q tile:
// the producer waits for those copies, so they cost the consumers a tile's wait at most once per
// CTA. Many short sequences make many such tiles.
//
// SASS to look for: rung 15's (UTMALDG.4D, HGMMA.64x128x16.F32, USETMAXREG, the producer's
// NANOSLEEP.SYNCS, MUFU.EX2, VOTE.ANY), plus the offsets' LDG.E at the start and the partial tiles'
// LDGSTS.E.BYPASS.128 with LDGDEPBAR / DEPBAR and FENCE.VIEW.ASYNC.S; no spills.
//
// Run just this rung (its op, attention_fwd_varlen; sm_90a only):
//   build/ci/bench/kc-bench --filter stage3/attention_fwd_varlen/
//   build/ci/bench/kc-bench --filter stage3/attention_fwd_varlen/15_ --shapes 9x8x2x300x500x128 --param lengths=1 --param causal=1
#include "attention/flash_wgmma_varlen.cuh"

namespace kc::stage3 {

template <typename T>
void attention_fwd_varlen_15_lazy_rescale(const AttentionArgs<T>& args, cudaStream_t stream,
                                          HopperLaunchCache& cache) {
  require_flash_args(args, "attention rung 15 (packed variable-length form)", FlashWgmmaShape<64, 3>::kBlockRows,
                     /*packed=*/true);
  if (!(args.scale > 0.f)) {  // rung 15's consumers take a positive scale; the packed rung 05 any
    attention_fwd_varlen_05_fa2_two_tiles_per_warp(args, stream);
    return;
  }
  if (args.head_dim == 64)
    launch_flash_wgmma_varlen<T, 64, 3>(args, stream, cache);
  else
    launch_flash_wgmma_varlen<T, 128, 2>(args, stream, cache);
}

template void attention_fwd_varlen_15_lazy_rescale<__nv_bfloat16>(const AttentionArgs<__nv_bfloat16>&, cudaStream_t,
                                                                  HopperLaunchCache&);
template void attention_fwd_varlen_15_lazy_rescale<__half>(const AttentionArgs<__half>&, cudaStream_t,
                                                           HopperLaunchCache&);

}  // namespace kc::stage3
