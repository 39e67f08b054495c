// Rung 03 — FlashAttention-2 on the tensor cores: mma.sync m16n8k16 + ldmatrix, P kept in registers.
//
// Idea: both products of rung 02 on the tensor cores, with FlashAttention-2's work split. A block
// of 4 warps owns 64 query rows; each warp owns 16 of them (the M of one m16n8k16) and needs no
// other warp's data: S = Q K^T of its rows lands in its FP32 accumulators, the online softmax
// runs on those accumulator fragments (a row spread over the 4 lanes of a quad: 2 shuffles for
// its maximum), and P is rounded to bf16/f16 in registers and fed straight back as the A operand
// of O += P V — the m16n8 accumulator layout of two adjacent key blocks is the m16k16 A fragment
// of one key slice (fa2_mma.cuh spells out the identity). Q's fragments are loaded once and stay
// in registers; K fragments come from ldmatrix, V's from ldmatrix.trans (V is stored key-major,
// which is K x N for P V). exp2 with scale . log2 e folded into one multiply per score.
//
// What changed from rung 02: tensor cores instead of FP32 FMAs for both products (2 x 16 x 8 x 16
// FLOPs per mma.sync); 64 x 64 tiles instead of 32 x 32, so each K/V byte in shared memory feeds
// twice as many query rows; shared tiles unpadded and XOR-swizzled (chunk c of row r at c ^ r%8),
// which makes every ldmatrix and every 16-byte store conflict-free; the row's softmax state lives
// in 4 lanes instead of a whole warp.
// Not yet: loads still go global -> registers -> shared with two barriers per tile and nothing
// in flight during the MMAs; and every K/V tile up to Sk is visited and masked, even the ones a
// causal block sees none of (their loads are skipped and zero-filled, their MMAs are not). Rung 04
// removes both.
//
// Non-finite inputs: a NaN in Q or K propagates to exactly the rows that see it (the mask selects
// -inf, it does not add, and the maximum propagates NaN). A NaN or Inf in a row of V that some
// rows of a 64-key tile see and others of the same 64-row block do not reaches those others too
// (their P is 0 there, and 0 x NaN = NaN inside the MMA), as in FlashAttention; rung 02, which
// stops each row at its own last key, does not have this. Keys no row of the block sees are never
// loaded (zero fill).
//
// Per warp and K/V tile (analysis): D/16 x 4 ldmatrix.x4 + D/16 x 8 mma for S, 4 x D/16
// ldmatrix.x4.trans + 4 x D/8 mma for P V, 64 MUFU.EX2; D = 128: 64 LDSM and 128 HMMA.
// Registers: Q fragments D/4, O accumulators D/2, S 32 (D = 128: 32 + 64 + 32).
// Shared memory: Q, K and V tiles of 64 x D, 3 x 8 KiB (D = 64) or 3 x 16 KiB (D = 128).
//
// Expected limiter: latency — the global loads of each tile are waited for with the tensor
// cores idle (one block tile in flight per block, two barriers per tile); on causal problems
// about half the MMAs multiply zero-filled, fully masked tiles.
//
// SASS to look for: LDSM.16.M88.4 (Q, K) and LDSM.16.MT88.4 (V, transposed), HMMA.16816.F32.BF16 /
// HMMA.16816.F32 (f16), MUFU.EX2, F2FP.BF16.F32.PACK_AB / F2FP.F16.F32.PACK_AB (P to the A
// operand); no LDGSTS; no LDL/STL.
//
// Run just this rung:
//   build/ci/bench/kc-bench --filter stage3/attention_fwd/03_fa2_mma_sync
#include "arch/util.hpp"
#include "kc/stage3/attention_args.hpp"
#include "attention/fa2_mma.cuh"

namespace kc::stage3 {
namespace {

template <typename T, int kHeadDim>
__global__ void __launch_bounds__(Fa2Shape<kHeadDim>::kThreads) fa2_mma_sync_kernel(AttentionParams<T> args) {
  using Shape = Fa2Shape<kHeadDim>;
  extern __shared__ __align__(128) std::uint8_t smem[];
  std::uint8_t* q_tile = smem;
  std::uint8_t* k_tile = smem + Shape::kQTileBytes;
  std::uint8_t* v_tile = smem + Shape::kQTileBytes + Shape::kTileBytes;

  const HeadView<T> head(args);
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int block_row0 = static_cast<int>(blockIdx.x) * Shape::kBlockRows;
  const int warp_row0 = block_row0 + Shape::kWarpRows * warp;
  const int key_end = block_key_end(args, block_row0, Shape::kBlockRows);  // keys past it: zeros
  int row_ends[Shape::kThreadRows];
  thread_row_ends(args, warp_row0, row_ends);
  const float scale_log2 = args.scale * kLog2e;

  Fa2Warp<T, Shape> state;
  copy_tile_through_registers<Shape, Shape::kBlockRows>(q_tile, head.q, args.q_row_stride, block_row0, args.q_len);
  __syncthreads();
  state.load_q(smem_u32(q_tile), warp);

  for (int key0 = 0; key0 < args.kv_len; key0 += Shape::kBlockKeys) {
    copy_tile_through_registers<Shape>(k_tile, head.k, args.kv_row_stride, key0, key_end);
    copy_tile_through_registers<Shape>(v_tile, head.v, args.kv_row_stride, key0, key_end);
    __syncthreads();  // the tiles are complete
    float s[Shape::kTilesPerWarp][Shape::kKeyBlocks][4];
    state.scores(s, smem_u32(k_tile));
    state.template softmax<true>(s, scale_log2, key0, row_ends);
    state.accumulate_pv(s, smem_u32(v_tile));
    __syncthreads();  // every warp is done with them before the next tile overwrites them
  }
  state.store(head, args, warp_row0, row_ends);
}

// The kernel of one T and D and the shared memory it takes.
template <typename T, int kHeadDim>
struct Rung03 {
  using Shape = Fa2Shape<kHeadDim>;
  static constexpr int kSmemBytes = Shape::kQTileBytes + 2 * Shape::kTileBytes;  // Q, K, V
  static constexpr auto kKernel = &fa2_mma_sync_kernel<T, kHeadDim>;
};

}  // namespace

template <typename T>
void attention_fwd_03_fa2_mma_sync(const AttentionArgs<T>& args, cudaStream_t stream) {
  launch_fa2_rung<Rung03>(args, stream, "attention rung 03");
}

template void attention_fwd_03_fa2_mma_sync<__nv_bfloat16>(const AttentionArgs<__nv_bfloat16>&, cudaStream_t);
template void attention_fwd_03_fa2_mma_sync<__half>(const AttentionArgs<__half>&, cudaStream_t);

}  // namespace kc::stage3
