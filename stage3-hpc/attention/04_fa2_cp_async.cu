// Rung 04 — rung 03 with a cp.async double-buffered K/V pipeline and causal tile skipping.
//
// Idea: keep the tensor cores busy while the next K/V tile travels, and do no work the mask
// throws away. K and V live in two shared-memory buffers; while the warps compute tile t out of
// one, tile t + 1 is already on its way into the other by cp.async (global -> shared directly,
// no registers, no stall at issue; arch/sm80/cp_async.cuh). A block visits only the tiles its
// last query row sees: with the causal mask that is about half of them, and a block whose rows
// see no key at all (Sq > Sk) loads nothing and writes O = 0, LSE = -inf. Only tiles that reach
// past its first row's visible end (the diagonal tiles, and the partial tile at Sk) build the
// mask; the others run the same softmax without a compare per score (a template parameter).
// Blocks are launched heaviest first (the last query tiles see the most keys under the causal
// mask), so the long blocks do not form the tail of the grid.
//
// What changed from rung 03: cp.async with zero fill (src-size 0) past the block's last key
// instead of loads through registers; two K/V buffers and one commit group per tile, waited for
// with cp.async.wait_group 1 (the tile needed now has landed, the next may still be in flight);
// the K/V loop ends at the block's last visible key instead of Sk; the mask is applied on the
// tiles that need it only; reversed block order. Grouped-query heads are read in place as in
// every rung (kv head = h / (Hq / Hkv)): no copy of K or V per query head.
//
// Shared memory: Q tile + 2 x (K, V) tiles of 64 x D: 40 KiB (D = 64), 80 KiB (D = 128), which
// needs the opt-in above 48 KiB.
//
// Expected limiter: the MMA and exp issue of one warp per 16 rows: with 4 warps and 64-row tiles
// the loads hide behind one tile's compute, but the softmax (MUFU.EX2, FMUL, shuffles) sits
// between the two MMA phases of a warp with nothing to overlap it within the warp; the next
// steps are larger tiles per warp and, on Hopper, warpgroup MMAs (wgmma) with producer warps.
//
// SASS to look for: LDGSTS.E.BYPASS.128 (K, V and Q tiles; 2 x D/16 per thread and tile), LDGDEPBAR and DEPBAR.LE
// (commit and wait), LDSM.16.M88.4, LDSM.16.MT88.4, HMMA.16816.F32.BF16 / HMMA.16816.F32, no
// LDG.E.128 of K or V; no LDL/STL.
//
// Run just this rung:
//   build/ci/bench/kc-bench --filter stage3/attention_fwd/04_fa2_cp_async --param causal=1
#include "arch/sm80/cp_async.cuh"
#include "arch/util.hpp"
#include "attention/attention_args.hpp"
#include "attention/fa2_mma.cuh"

namespace kc::stage3 {
namespace {

// Issues the cp.async copies of a 64-row tile (zeros at and past row_end) into a swizzled tile.
template <class Shape, typename T>
__device__ __forceinline__ void copy_tile_async(std::uint8_t* tile, const T* matrix, std::int64_t row_stride,
                                                int row0, int row_end) {
  const std::uint32_t tile_address = smem_u32(tile);
#pragma unroll
  for (int i = 0; i < Shape::kChunksPerThread; ++i) {
    bool valid;
    const T* source = TileCopy<Shape>::source(matrix, row_stride, row0, row_end, i, valid);
    sm80::cp_async_16(tile_address + swizzled_offset<Shape>(TileCopy<Shape>::row(i), TileCopy<Shape>::chunk(i)),
                      source, valid);
  }
}

template <typename T, int kHeadDim>
__global__ void __launch_bounds__(Fa2Shape<kHeadDim>::kThreads) fa2_cp_async_kernel(AttentionArgs<T> args) {
  using Shape = Fa2Shape<kHeadDim>;
  extern __shared__ __align__(128) std::uint8_t smem[];
  std::uint8_t* q_tile = smem;
  const auto k_tile = [&](int buffer) { return smem + (1 + 2 * buffer) * Shape::kTileBytes; };
  const auto v_tile = [&](int buffer) { return smem + (2 + 2 * buffer) * Shape::kTileBytes; };

  const HeadView<T> head(args);
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int query_tile = static_cast<int>(gridDim.x - 1 - blockIdx.x);  // heaviest first
  const int block_row0 = query_tile * Shape::kBlockRows;
  const int warp_row0 = block_row0 + 16 * warp;
  // Keys past key_end are seen by no row of the block: their tiles are not visited. Keys below
  // unmasked_end are seen by every row (the first row sees the fewest): no mask needed there.
  const int key_end = block_key_end(args, block_row0, Shape::kBlockRows);
  const int unmasked_end = visible_key_end(args, block_row0);
  const int tiles = ceil_div(key_end, Shape::kBlockKeys);  // key_end >= 0
  int row_ends[2];
  thread_row_ends(args, warp_row0, row_ends);
  const float scale_log2 = args.scale * kLog2e;

  Fa2Warp<T, Shape> state;
  if (tiles > 0) {  // the first group: Q and tile 0
    copy_tile_async<Shape>(q_tile, head.q, args.q_row_stride, block_row0, args.q_len);
    copy_tile_async<Shape>(k_tile(0), head.k, args.kv_row_stride, 0, key_end);
    copy_tile_async<Shape>(v_tile(0), head.v, args.kv_row_stride, 0, key_end);
    sm80::cp_async_commit_group();
  }
  for (int tile = 0; tile < tiles; ++tile) {
    const int buffer = tile % 2;
    const int key0 = tile * Shape::kBlockKeys;
    if (tile + 1 < tiles) {
      // The other buffer was last read in the previous iteration, before its closing barrier.
      copy_tile_async<Shape>(k_tile(1 - buffer), head.k, args.kv_row_stride, key0 + Shape::kBlockKeys, key_end);
      copy_tile_async<Shape>(v_tile(1 - buffer), head.v, args.kv_row_stride, key0 + Shape::kBlockKeys, key_end);
      sm80::cp_async_commit_group();
      sm80::cp_async_wait_group<1>();  // this tile's group has landed; the next may be in flight
    } else {
      sm80::cp_async_wait_group<0>();
    }
    __syncthreads();  // every thread's copies of this tile are visible to every warp
    if (tile == 0) state.load_q(smem_u32(q_tile), warp);
    float s[Shape::kKeyBlocks][4];
    state.scores(s, smem_u32(k_tile(buffer)));
    if (key0 + Shape::kBlockKeys > unmasked_end)
      state.template softmax<true>(s, scale_log2, key0, row_ends);
    else
      state.template softmax<false>(s, scale_log2, key0, row_ends);
    state.accumulate_pv(s, smem_u32(v_tile(buffer)));
    __syncthreads();  // every warp is done with this buffer before the next iteration refills it
  }
  state.store(head, args, warp_row0, row_ends);
}

// The kernel of one T and D and the shared memory it takes.
template <typename T, int kHeadDim>
struct Rung04 {
  using Shape = Fa2Shape<kHeadDim>;
  static constexpr int kSmemBytes = 5 * Shape::kTileBytes;  // Q + 2 x (K, V)
  static constexpr auto kKernel = &fa2_cp_async_kernel<T, kHeadDim>;
};

}  // namespace

template <typename T>
void attention_fwd_04_fa2_cp_async(const AttentionArgs<T>& args, cudaStream_t stream) {
  launch_fa2_rung<Rung04>(args, stream, "attention rung 04");
}

template void attention_fwd_04_fa2_cp_async<__nv_bfloat16>(const AttentionArgs<__nv_bfloat16>&, cudaStream_t);
template void attention_fwd_04_fa2_cp_async<__half>(const AttentionArgs<__half>&, cudaStream_t);

}  // namespace kc::stage3
