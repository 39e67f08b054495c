// The packed rung 15's kernel with one flaw, for a negative control: every tile by TMA, the
// partial ones included (VarlenTileFlaw::whole_tiles_by_tma), so a sequence's last K/V tile holds
// the next sequence's keys and values past its own, and its last Q tile the next sequence's rows.
// The mask keeps those keys out of S, so on finite inputs the results are right; a NaN in the next
// sequence's first key and value reaches this sequence's O through P V (0 x NaN).
// AttentionVarlenGpu.NoSequenceReadsItsNeighboursKeys checks that this kernel fails it and the
// rung passes it. Not a rung: it is not registered. Its tensors must hold B x max_seqlen rows (the
// maps' bound), since its last tiles read that far.
#include "attention/flash_wgmma_varlen.cuh"

namespace kc::stage3 {

template <typename T>
void attention_fwd_varlen_15_with_whole_tiles_by_tma(const AttentionArgs<T>& args, cudaStream_t stream,
                                                     HopperLaunchCache& cache) {
  require_flash_args(args, "the flawed packed rung 15", FlashWgmmaShape<64, 3>::kBlockRows, /*packed=*/true);
  require(args.scale > 0.f, "the flawed packed rung 15 runs positive scales only");
  if (args.head_dim == 64)
    launch_flash_wgmma_varlen<T, 64, 3, VarlenTileFlaw::whole_tiles_by_tma>(args, stream, cache);
  else
    launch_flash_wgmma_varlen<T, 128, 2, VarlenTileFlaw::whole_tiles_by_tma>(args, stream, cache);
}

template void attention_fwd_varlen_15_with_whole_tiles_by_tma<__nv_bfloat16>(const AttentionArgs<__nv_bfloat16>&,
                                                                            cudaStream_t, HopperLaunchCache&);
template void attention_fwd_varlen_15_with_whole_tiles_by_tma<__half>(const AttentionArgs<__half>&, cudaStream_t,
                                                                     HopperLaunchCache&);

}  // namespace kc::stage3
