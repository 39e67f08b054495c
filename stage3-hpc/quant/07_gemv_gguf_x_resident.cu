// Rung 07 of the GGUF GEMV — a link of the decode chain: x kept in shared memory (with the norm or
// the activation before it done on the way in), the weights streamed before the previous kernel
// ends, persistent CTAs.
//
// Idea: rung 06 streams the weights at up to 85% of a copy of the same bytes when it runs alone,
// but a decode step is a chain of kernels, and in the chain rung 06 pays three costs the bf16
// path's GEMV (stage3/hgemm/12_small_m_gemv) does not. (1) Its neighbours: the RMSNorm before
// the q|k|v and gate|up projections and the SwiGLU before down run as kernels of their own (one
// CTA each at batch 1), and q, k and v are three launches. (2) The start: every launch waits for
// the kernel before it to end before its first byte of weights is asked for. (3) Its CTAs are
// short: one 16-column tile each (40 KB of q4_1 at K = 4096 fills rung 06's ring once), so every
// CTA fills its ring, waits for DRAM, computes and drains, and a new CTA starts cold.
//
// What changed from rung 06:
//   - x, with its prologue applied, lives in shared memory for the whole kernel: the consumer
//     warps load it once after the wait (16-byte loads), multiply it by the RMSNorm's weight
//     (the 1 / RMS factor is applied to the finished sums, as rung 12 does) or form silu(gate) .
//     up from a [gate | up] row (stage 2's swiglu, the same bf16 values), and store bf16. The ring
//     carries only the weights' quants and scales.
//   - As a programmatic dependent (kc/core/dependent_launch.hpp): the producer warp never reads
//     what an earlier kernel writes, so it fills the ring with the first weights while the kernel
//     before is still running; only the consumers wait (griddepcontrol.wait) before they read x.
//   - Persistent CTAs: as many as fit on the GPU at once, each taking tiles blockIdx.x,
//     blockIdx.x + gridDim.x, ...; the producer runs on into the next tile's weights while the
//     consumers finish a tile, so the ring does not drain between tiles.
//   - Up to three weights that share x and K in one launch (q, k and v), each with its own y, and
//     y += x . w^T (beta = 1: the residual stream) in the store.
//   - The consumers' loop does less besides the arithmetic (the SASS of the first version ran 188
//     instructions a chunk in the q4_1 M = 1 loop, about 40 of them bookkeeping, for 16 HMMA): a
//     lane's rows of x are read through pointers set once, with rows past M reading the last row
//     instead of testing for zeros (those columns of the products are never stored); a chunk whose
//     4 blocks lie inside K skips the test for K's end (gguf_mma::weights_as_a_chunk_every_row,
//     kWholeChunk); the ring's slot and phase are counted, not divided out of a stage index. About
//     161 instructions a chunk are left.
// Each tile's arithmetic is rung 06's (gemv_gguf_mma.cuh), the chunks of a tile go to the same
// warps in the same order and the warps' sums meet in the same order: without a prologue and with
// beta = 0 rung 07 writes rung 06's bits (a GPU test holds it to that).
//
// Expected limiter: the DRAM stream of the weights. What is left of the chain's costs: the
// consumers' staging of x (K x 2 bytes from the L2 per CTA, once), the last round of tiles (the
// tiles rarely divide evenly among the CTAs) and the store of each tile through shared memory.
// x must fit next to the ring: M x (K + 8) x 2 bytes and the ring in kGgufGemv07MaxDynamicSmem
// (200 KiB); M = 1 at K = 14336 takes 28 KB. Larger M x K is refused with kc::Error
// (gemv_gguf_07_fits says which fit; the engine then runs the norm, the activation and rung 06).
//
// SASS to look for (sm_90a): UBLKCP.S.G and SYNCS.* in the producer; PREEXIT and ACQBULK (the
// programmatic launch's trigger and wait); LDG.E.128.CONSTANT (x, once) then STS.128 in the
// consumers' staging; LDS.128 (x without a predicate) and HMMA.16816.F32.BF16 in their loop,
// twice: the whole chunk's straight run of 16 HMMA, and the last chunk's blocks each behind a
// branch; BAR.SYNC with a named barrier among the consumers; no LDL/STL. Hopper only, as rung 06.
//
// The kernel and its launch live in gemv_x_resident_frame.cuh (XStaging::bf16_as_read), which
// rung 08 shares with x in another form; this file holds rung 07's entry points.
//
// Run just this rung: kc-bench --filter stage3/gemv_gguf/0[67] --param layout=3 --param ggml_type=3
#include "gemv_x_resident_frame.cuh"

namespace kc::stage3 {

bool gemv_gguf_07_fits(GgufBlockType type, int m, int k) { return x_fits(type, m, k, XStaging::bf16_as_read); }

void gemv_gguf_07_link(const GgufGemvLinkArgs& args, cudaStream_t stream) {
  launch<XStaging::bf16_as_read, false>(args, stream);
}

void gemv_gguf_07_x_resident(const GgufGemvArgs& args, cudaStream_t stream) {
  launch<XStaging::bf16_as_read, false>(plain_link(args), stream);
}

void gemv_gguf_07_swapped_nibbles(const GgufGemvArgs& args, cudaStream_t stream) {
  launch<XStaging::bf16_as_read, true>(plain_link(args), stream);
}

}  // namespace kc::stage3
