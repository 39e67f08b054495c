// fa2_cp_async_kernel.cuh — the kernel of rungs 04 and 05: the warp step of fa2_mma.cuh fed by a
// cp.async double buffer of K/V tiles, visiting only the tiles a block's rows see, heaviest blocks
// first. Rung 04 runs it with one 16-row MMA tile per warp (64 query rows per block), rung 05 with
// two (128). See the header comments of 04_fa2_cp_async.cu and 05_fa2_two_tiles_per_warp.cu.
// The packed variable-length form (attention_args.hpp) runs the same kernel with kPacked, which
// first finds the block's sequence (varlen_05_fa2_two_tiles_per_warp.cu).
#pragma once

#include <type_traits>

#include "arch/sm80/cp_async.cuh"
#include "arch/util.hpp"
#include "kc/stage3/attention_args.hpp"
#include "attention/fa2_mma.cuh"

namespace kc::stage3 {
// Unnamed: each rung's file compiles its own kernels (rungs 04 and 05 both instantiate the D = 128
// kernel with one tile per warp), with no symbol shared between them.
namespace {

// The kernel's parameter: AttentionParams for the dense form; for the packed variable-length form
// the whole AttentionArgs, the offsets included.
template <typename T, bool kPacked>
using Fa2KernelArgs = std::conditional_t<kPacked, AttentionArgs<T>, AttentionParams<T>>;

// A tile's cp.async copies: per chunk (rungs 04, 05, 16: copy_tile_async) or with the addresses
// computed once a call (rung 21: copy_tile_async_lean).
template <class Shape, int kRows, bool kLeanCopy, typename T>
__device__ __forceinline__ void copy_fa2_tile(std::uint8_t* tile, const T* matrix, std::int64_t row_stride, int row0,
                                              int row_end) {
  if constexpr (kLeanCopy)
    copy_tile_async_lean<Shape, kRows>(tile, matrix, row_stride, row0, row_end);
  else
    copy_tile_async<Shape, kRows>(tile, matrix, row_stride, row0, row_end);
}

// kPacked false, the dense form: blockIdx.z is the batch, blockIdx.y the query head.
// kPacked true, the packed variable-length form: blockIdx.z is the sequence, whose offsets and
// lengths the block reads from cu_seqlens_q/k first. The grid's x covers the longest sequence's
// query tiles (q_len is max_seqlen_q there), so the blocks past this sequence's last tile have
// nothing to do and leave at once; the others run the dense form's code on the sequence's rows
// (HeadView of a sequence) with its Sq_b and Sk_b in place of q_len and kv_len: the mask is the
// sequence's, K/V tiles past Sk_b are never visited and the rows of a tile past Sk_b (or Q past
// Sq_b) are zero-filled, so no block reads a neighbouring sequence, and rows past Sq_b are not
// stored. The packed form's lines are the `if constexpr` block and nothing else: the dense kernel
// compiles to the code it had before the packed form existed.
// kLeanSoftmax (rung 16): the warp step's softmax of the Hopper rungs 13 and 15 (Fa2Warp);
// kFlawBaseNeverMoves: its negative control's flaw (16_fa2_lean_softmax_flawed.cu).
// kLeanCopy (rung 21): the tiles' cp.async copies with their addresses computed once a call
// (copy_tile_async_lean) instead of once a chunk. kNarrowKeyTiles (rung 22): K/V tiles of 32 keys
// instead of 64. kPrefetchFragments (rung 23): the warp step's ldmatrix issued a step ahead of
// the MMAs that read them (Fa2Warp). kWholeTileCopies (rung 24): a K/V tile whose keys all lie
// below key_end is copied by copy_tile_async_lean with kAllRowsExist, without the checks of the
// lean copy; the block's last tile keeps them (and its zeros past key_end).
template <typename T, int kHeadDim, int kTilesPerWarp, bool kPacked, bool kLeanSoftmax = false,
          bool kFlawBaseNeverMoves = false, bool kLeanCopy = false, bool kNarrowKeyTiles = false,
          bool kPrefetchFragments = false, bool kWholeTileCopies = false>
__global__ void __launch_bounds__(Fa2Shape<kHeadDim, kTilesPerWarp>::kThreads)
    fa2_cp_async_kernel(Fa2KernelArgs<T, kPacked> args) {
  using Shape = Fa2Shape<kHeadDim, kTilesPerWarp, kNarrowKeyTiles ? 32 : 64>;
  extern __shared__ __align__(128) std::uint8_t smem[];
  std::uint8_t* q_tile = smem;
  const auto k_tile = [&](int buffer) { return smem + Shape::kQTileBytes + 2 * buffer * Shape::kTileBytes; };
  const auto v_tile = [&](int buffer) { return smem + Shape::kQTileBytes + (2 * buffer + 1) * Shape::kTileBytes; };

  if constexpr (kPacked) {
    const VarlenSequence sequence = varlen_sequence(args, static_cast<int>(blockIdx.z));
    // The same query tile as below; past the sequence's rows the whole block leaves (no barrier
    // is skipped by part of it).
    if (static_cast<int>(gridDim.x - 1 - blockIdx.x) * Shape::kBlockRows >= sequence.q_len) return;
    args.q_len = sequence.q_len;
    args.kv_len = sequence.kv_len;
  }
  const HeadView<T> head(args);  // packed: the sequence's rows (HeadView's AttentionArgs constructor)
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int query_tile = static_cast<int>(gridDim.x - 1 - blockIdx.x);  // heaviest first
  const int block_row0 = query_tile * Shape::kBlockRows;
  const int warp_row0 = block_row0 + Shape::kWarpRows * warp;
  // Keys past key_end are seen by no row of the block: their tiles are not visited. Keys below
  // unmasked_end are seen by every row (the first row sees the fewest): no mask needed there.
  const int key_end = block_key_end(args, block_row0, Shape::kBlockRows);
  const int unmasked_end = visible_key_end(args, block_row0);
  const int tiles = ceil_div(key_end, Shape::kBlockKeys);  // key_end >= 0
  // The visible ends of this thread's rows: kept for the whole loop, or (kLeanCopy) computed again
  // where they are used, in the masked tiles and for the store, so that they hold no registers
  // across the loop.
  int row_ends[Shape::kThreadRows];
  if constexpr (!kLeanCopy) thread_row_ends(args, warp_row0, row_ends);
  const float scale_log2 = args.scale * kLog2e;

  Fa2Warp<T, Shape, kLeanSoftmax, kFlawBaseNeverMoves, kPrefetchFragments> state;
  if (tiles > 0) {  // the first group: Q and tile 0
    copy_fa2_tile<Shape, Shape::kBlockRows, kLeanCopy>(q_tile, head.q, args.q_row_stride, block_row0, args.q_len);
    copy_fa2_tile<Shape, Shape::kBlockKeys, kLeanCopy>(k_tile(0), head.k, args.kv_row_stride, 0, key_end);
    copy_fa2_tile<Shape, Shape::kBlockKeys, kLeanCopy>(v_tile(0), head.v, args.kv_row_stride, 0, key_end);
    sm80::cp_async_commit_group();
  }
  for (int tile = 0; tile < tiles; ++tile) {
    const int buffer = tile % 2;
    const int key0 = tile * Shape::kBlockKeys;
    if (tile + 1 < tiles) {
      // The other buffer was last read in the previous iteration, before its closing barrier.
      const int next_key0 = key0 + Shape::kBlockKeys;
      if (kWholeTileCopies && next_key0 + Shape::kBlockKeys <= key_end) {
        copy_tile_async_lean<Shape, Shape::kBlockKeys, true>(k_tile(1 - buffer), head.k, args.kv_row_stride,
                                                             next_key0, key_end);
        copy_tile_async_lean<Shape, Shape::kBlockKeys, true>(v_tile(1 - buffer), head.v, args.kv_row_stride,
                                                             next_key0, key_end);
      } else {
        copy_fa2_tile<Shape, Shape::kBlockKeys, kLeanCopy>(k_tile(1 - buffer), head.k, args.kv_row_stride, next_key0,
                                                           key_end);
        copy_fa2_tile<Shape, Shape::kBlockKeys, kLeanCopy>(v_tile(1 - buffer), head.v, args.kv_row_stride, next_key0,
                                                           key_end);
      }
      sm80::cp_async_commit_group();
      sm80::cp_async_wait_group<1>();  // this tile's group has landed; the next may be in flight
    } else {
      sm80::cp_async_wait_group<0>();
    }
    __syncthreads();  // every thread's copies of this tile are visible to every warp
    if (tile == 0) state.load_q(smem_u32(q_tile), warp);
    float s[Shape::kTilesPerWarp][Shape::kKeyBlocks][4];
    state.scores(s, smem_u32(k_tile(buffer)));
    if (key0 + Shape::kBlockKeys > unmasked_end) {
      if constexpr (kLeanCopy) thread_row_ends(args, warp_row0, row_ends);
      state.template softmax<true>(s, scale_log2, key0, row_ends);
    } else {
      state.template softmax<false>(s, scale_log2, key0, row_ends);
    }
    state.accumulate_pv(s, smem_u32(v_tile(buffer)));
    __syncthreads();  // every warp is done with this buffer before the next iteration refills it
  }
  if constexpr (kLeanCopy) thread_row_ends(args, warp_row0, row_ends);
  state.store(head, args, warp_row0, row_ends);
}

// The kernel for one T, D and number of MMA tiles per warp, and the shared memory it takes: the
// Q tile of the block's rows + 2 x (K, V) tiles of kBlockKeys rows (64; 32 in rung 22).
// kPacked: the packed variable-length form's kernel (varlen_05_fa2_two_tiles_per_warp.cu);
// kLeanSoftmax: rung 16's softmax (16_fa2_lean_softmax.cu); kFlawBaseNeverMoves: its negative
// control.
// kLeanCopy: rung 21's copies (copy_fa2_tile); kNarrowKeyTiles: rung 22's 32-key tiles;
// kPrefetchFragments: rung 23's fragments loaded a step ahead; kWholeTileCopies: rung 24's copies of
// whole tiles.
template <typename T, int kHeadDim, int kTilesPerWarp, bool kPacked = false, bool kLeanSoftmax = false,
          bool kFlawBaseNeverMoves = false, bool kLeanCopy = false, bool kNarrowKeyTiles = false,
          bool kPrefetchFragments = false, bool kWholeTileCopies = false>
struct Fa2CpAsyncRung {
  using Shape = Fa2Shape<kHeadDim, kTilesPerWarp, kNarrowKeyTiles ? 32 : 64>;
  static constexpr int kSmemBytes = Shape::kQTileBytes + 4 * Shape::kTileBytes;
  static constexpr auto kKernel =
      &fa2_cp_async_kernel<T, kHeadDim, kTilesPerWarp, kPacked, kLeanSoftmax, kFlawBaseNeverMoves, kLeanCopy,
                           kNarrowKeyTiles, kPrefetchFragments, kWholeTileCopies>;
};

// Rung 05's 16-row MMA tiles per warp at each head dimension, which its packed form shares: two at
// D = 64; at D = 128 one, rung 04's kernel, because two spill (05_fa2_two_tiles_per_warp.cu says
// why). Setting kRung05TilesAtHeadDim128 to 2 builds the two-tile D = 128 kernel as it stands.
inline constexpr int kRung05TilesAtHeadDim128 = 1;
constexpr int rung05_tiles_per_warp(int head_dim) { return head_dim == 64 ? 2 : kRung05TilesAtHeadDim128; }

// Launches a rung with the lean softmax (16, 21-24): its maximum is taken over the raw scores,
// which is the scaled maximum only for a positive scale, so any other scale runs rung 05's kernels
// (after the same argument checks).
template <template <typename, int> class Rung, typename T>
void launch_lean_softmax_rung(const AttentionArgs<T>& args, cudaStream_t stream, const char* rung_name) {
  if (!(args.scale > 0.f)) {
    require_flash_args(args, rung_name, std::max(Rung<T, 64>::Shape::kBlockRows, Rung<T, 128>::Shape::kBlockRows));
    attention_fwd_05_fa2_two_tiles_per_warp(args, stream);
    return;
  }
  launch_fa2_rung<Rung>(args, stream, rung_name);
}

}  // namespace
}  // namespace kc::stage3
