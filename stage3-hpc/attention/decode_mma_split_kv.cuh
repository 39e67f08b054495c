// decode_mma_split_kv.cuh — the kernel of paged decode rungs 03 and 04 (and of rung 04's negative
// control): flash-decoding on mma.sync, the group's query rows as an m16 tile against 64-key tiles
// of pages in a 3- or 4-stage cp.async pipeline. The idea, the layout and the SASS to look for are
// in rung 03's header (decode_03_mma_split_kv.cu); the files differ in how the splits are merged:
//   DecodeMerge::combine_kernel   rung 03: each split stores its partial O and LSE, a second
//                                 kernel (decode_common.cuh's combine) merges them.
//   DecodeMerge::in_kernel        rung 04 (decode_04_fused_combine.cu): the split that finishes
//                                 last merges its group in the same launch; a sequence that one
//                                 split holds is written directly.
//   DecodeMerge::in_kernel_drops_last_split
//                                 rung 04 with a flaw, for the negative control: the merge leaves
//                                 the last split out.
// and in whether anything happens before the wait for the kernel ahead (kEarlyPages: rung 05,
// decode_05_early_pages.cu, prefetches the first pages of its split into L2 there), and in where
// the new tokens' rows come from (Rope: NoRope, from the cache and Q as given; DecodeRopeArgs,
// rung 06, decode_06_rope_in.cu: Q and the new keys rotated here, the new K/V rows written to the
// cache here and put in the tiles from registers), and in whether the first tiles' cached rows are
// copied into shared memory before the wait (Rope::kPagesBeforeWait: rung 07,
// decode_07_pages_before_wait.cu), and in how a copy finds its row's address (Rope::kPageWalk:
// rung 08, decode_08_page_walk.cu, works each thread's addresses out once a CTA), and in the grid's
// order (Rope::kWorkersFirst: rung 09, decode_09_workers_first.cu, puts the CTAs that hold keys first
// and lets the others leave before the wait), and in how a split hands its partials to the merge
// (Rope::kReleaseAcquireMerge: rung 10, decode_10_release_acquire_merge.cu, one release/acquire
// count by thread 0 in place of every thread's sequentially consistent fences), and in what a CTA
// waits for (Rope::kHeadsHandedOver: rung 11, decode_11_heads_handed_over.cu, its kv head's count
// of written q, k and v columns instead of the whole kernel ahead).
// Unnamed namespace: each rung's file compiles its own instances, no symbol shared between them.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cuda/atomic>

#include <cstdint>

#include "arch/sm80/cp_async.cuh"
#include "arch/sm80/mma.cuh"
#include "arch/util.hpp"
#include "kc/stage3/decode_args.hpp"
#include "attention/decode_common.cuh"
#include "attention/fa2_mma.cuh"
#include "kc/core/dependent_launch.cuh"
#include "kc/core/rope.cuh"
#include "kc/core/vector_io.hpp"

namespace kc::stage3 {

enum class DecodeMerge { combine_kernel, in_kernel, in_kernel_drops_last_split };

// The Rope parameter of rungs 03 to 05: Q and the cache as given, nothing rotated or written.
struct NoRope {
  static constexpr bool kPagesBeforeWait = false;
  static constexpr bool kPageWalk = false;
  static constexpr bool kWorkersFirst = false;
  static constexpr bool kReleaseAcquireMerge = false;
  static constexpr bool kHeadsHandedOver = false;
};

// Rung 06's: DecodeRopeArgs, and for its negative control a flaw — kPositionOffByOne rotates the
// new tokens' Q and K by the angle of position p - 1 (p + 1 at position 0) instead of p.
template <typename T, bool kPositionOffByOne_ = false>
struct RopeIn : DecodeRopeArgs<T> {
  static constexpr bool kPositionOffByOne = kPositionOffByOne_;
  static constexpr bool kPagesBeforeWait = false;
  static constexpr bool kPageWalk = false;
  static constexpr bool kWorkersFirst = false;
  static constexpr bool kReleaseAcquireMerge = false;
  static constexpr bool kHeadsHandedOver = false;
};

// Rung 07's: rung 06's rotation and cache write, with every stage of the ring filled with cached
// rows before the wait for the kernel ahead and the new rows stored into those tiles after it. For
// its negative control a flaw — kNewRowsFromCache copies the new tokens' rows from their pages
// before the wait as well (rows the kernel has not written yet) and builds none of them into
// those tiles.
template <typename T, bool kNewRowsFromCache_ = false>
struct RopePagesFirst : DecodeRopeArgs<T> {
  static constexpr bool kPositionOffByOne = false;
  static constexpr bool kPagesBeforeWait = true;
  static constexpr bool kNewRowsFromCache = kNewRowsFromCache_;
  static constexpr bool kPageWalk = false;
  static constexpr bool kWorkersFirst = false;
  static constexpr bool kReleaseAcquireMerge = false;
  static constexpr bool kHeadsHandedOver = false;
};

// Rung 08's: rung 07's, with each thread's page addresses worked out once a CTA (PageWalk below)
// instead of once a row. For its negative control a flaw — kOnePagePerTile reads every row of a
// tile from the page of the tile's first key: a page read from the wrong block wherever a tile
// spans more than one block (blocks of 16 or 32 keys).
template <typename T, bool kOnePagePerTile_ = false>
struct RopePageWalk : RopePagesFirst<T> {
  static constexpr bool kPageWalk = true;
  static constexpr bool kOnePagePerTile = kOnePagePerTile_;
};

// Rung 09's: rung 08's, in a grid turned round — the group (kv head and row chunk) the fast index and
// the split the slow one, so the CTAs of the splits that hold keys (the first ones) come first in
// the order the GPU starts CTAs — and with a CTA whose split holds no key leaving before the wait
// for the kernel ahead. For its negative control a flaw — kPartialsInRung08Slots stores a split's
// partial O and LSE in the slot of the index that is the split in rung 08's grid, the group's
// (modulo the splits): partials of one split land in another's slot, and the merge adds the wrong
// ones wherever a sequence's keys span several splits.
template <typename T, bool kPartialsInRung08Slots_ = false>
struct RopeWorkersFirst : RopePageWalk<T> {
  static constexpr bool kWorkersFirst = true;
  static constexpr bool kPartialsInRung08Slots = kPartialsInRung08Slots_;
};

// Rung 10's: rung 08's, with the split's hand-over to the merge (merge_if_last) ordered by one
// atomic with release and acquire semantics, thread 0's, after a barrier, in place of a
// sequentially consistent fence in every thread before the count and another in the last CTA
// after it.
template <typename T>
struct RopeReleaseAcquireMerge : RopePageWalk<T> {
  static constexpr bool kReleaseAcquireMerge = true;
};

// Rung 11's: rung 10's, with a CTA that, given rope.heads_written, acquires its kv head's count of
// written q, k and v columns (wait_for_head_rows) in place of the wait for the kernel ahead, and
// leaves first where its split holds no key. For its negative control a flaw — kWaitsForHeadZero
// acquires kv head 0's count in every CTA.
template <typename T, bool kWaitsForHeadZero_ = false>
struct RopeHeadsHandedOver : RopeReleaseAcquireMerge<T> {
  static constexpr bool kHeadsHandedOver = true;
  static constexpr bool kWaitsForHeadZero = kWaitsForHeadZero_;
};

// The split a CTA works on, and its group (kv head x row chunk) and the groups in the grid: rungs 02
// to 08 and 10 launch splits x groups x sequences, rung 09 groups x splits x sequences.
template <class Rope>
__device__ __forceinline__ int split_index() {
  if constexpr (Rope::kWorkersFirst) return static_cast<int>(blockIdx.y);
  return static_cast<int>(blockIdx.x);
}
template <class Rope>
__device__ __forceinline__ unsigned group_index() {
  if constexpr (Rope::kWorkersFirst) return blockIdx.x;
  return blockIdx.y;
}
template <class Rope>
__device__ __forceinline__ unsigned group_count() {
  if constexpr (Rope::kWorkersFirst) return gridDim.x;
  return gridDim.y;
}

// The row of cos_sin a new token at `position` is rotated by (the control's flaw, or the position).
template <class Rope>
__device__ __forceinline__ int angle_row(int position) {
  if constexpr (Rope::kPositionOffByOne) return position >= 1 ? position - 1 : position + 1;
  return position;
}

namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * core::kWarpSize;
constexpr int kTileKeys = 64;
constexpr int kMmaRows = 16;  // the M of m16n8k16
static_assert(kDecodeSplitKeyMultiple % kTileKeys == 0, "a split is a whole number of 64-key tiles");
static_assert(kDecodeMaxRowsPerCta <= 2 * kMmaRows, "a CTA's rows fit two m16 tiles");

// One warp's share of a tile, as Fa2Warp (fa2_mma.cuh) sees it: one 16-row MMA tile against
// kWarpKeys keys (the warp's slice of the 64-key tile; its K and V rows start at a multiple of 16
// rows, so the tile's XOR swizzle reads the same), all of D.
template <int kHeadDim, int kWarpKeys>
struct WarpSliceShape {
  static constexpr int kTilesPerWarp = 1;
  static constexpr int kWarpRows = kMmaRows;
  static constexpr int kThreadRows = 2;  // lane/4 and lane/4 + 8
  static constexpr int kRowBytes = kHeadDim * 2;
  static constexpr int kDimSlices = kHeadDim / 16;  // k16 slices of Q K^T
  static constexpr int kDimBlocks = kHeadDim / 8;   // n8 blocks of O
  static constexpr int kKeyBlocks = kWarpKeys / 8;  // n8 blocks of S
  static constexpr int kKeySlices = kWarpKeys / 16;  // k16 slices of P V
  static constexpr bool kQInRegisters = true;        // D/4 registers beside O's D/2
  static_assert(kWarpKeys % 16 == 0, "a warp's keys are whole k16 slices");
};

// The compile-time layout of one instance: kRowTiles m16 tiles of rows (1 up to 16 rows, 2 up to
// 32), D, the pipeline depth and where everything lives in shared memory.
template <int kHeadDim, int kRowTiles>
struct MmaSplitKvLayout {
  static constexpr int kStages = kHeadDim == 64 ? 4 : 3;
  static constexpr int kKeySplits = kWarps / kRowTiles;        // warps that share an m16 tile: 4 or 2
  static constexpr int kWarpKeys = kTileKeys / kKeySplits;     // keys a warp owns in a tile: 16 or 32
  using TileShape = Fa2Shape<kHeadDim>;                        // 64 keys x D, 128 threads: swizzle, copies
  using WarpShape = WarpSliceShape<kHeadDim, kWarpKeys>;
  using Copy = TileCopy<TileShape>;
  static constexpr int kRowsPerThread = Copy::kChunksPerThread;  // D/16 rows of each tile a thread copies
  static constexpr int kRowBytes = kHeadDim * 2;
  static constexpr int kTileBytes = kTileKeys * kRowBytes;  // K or V
  static constexpr int kStageBytes = 2 * kTileBytes;
  static constexpr int kQRows = kRowTiles * kMmaRows;
  static constexpr int kQOffset = kStages * kStageBytes;
  static constexpr int kSmemBytes = kQOffset + kQRows * kRowBytes;
  // The merge after the last tile, over the stages: per warp 16 rows of O (FP32, D + 8 floats a
  // row: the 8 quads of a warp store to 8 different bank groups) and 16 maxima and sums.
  static constexpr int kMergeRowFloats = kHeadDim + 8;
  static constexpr int kMergeOFloats = kWarps * kMmaRows * kMergeRowFloats;
  static constexpr int kMergeBytes = (kMergeOFloats + 2 * kWarps * kMmaRows) * static_cast<int>(sizeof(float));
  static_assert(kMergeBytes <= kQOffset, "the merge fits in the stage buffers");
  static_assert(Copy::kChunksPerThread * kThreads == kTileKeys * TileShape::kChunksPerRow, "whole rows per thread");
};

// What one CTA works on (rung 02's grid): split blockIdx.x of sequence blockIdx.z, kv head and row
// chunk from blockIdx.y (rung 09: the other way round, split_index and group_index).
struct SplitWork {
  int b, kv_head, row0, rows;  // sequence, kv head, the chunk's first group row and row count
  int length;                  // the sequence's keys
  int key_begin, key_end;      // the split's keys, cut at the sequence's length
  std::int64_t first_row;      // the chunk's first row in [B, Hq, Sq] order
  int tiles;                   // 64-key tiles of the split
};

template <class Rope, typename T>
__device__ __forceinline__ SplitWork split_work(const DecodeArgs<T>& args, const DecodeSplitPlan& plan) {
  SplitWork work;
  const int group_rows = args.group_rows();
  work.b = static_cast<int>(blockIdx.z);
  work.kv_head = static_cast<int>(group_index<Rope>()) / plan.row_chunks;
  work.row0 = static_cast<int>(group_index<Rope>()) % plan.row_chunks * kDecodeMaxRowsPerCta;
  work.rows = min(kDecodeMaxRowsPerCta, group_rows - work.row0);
  // The group's rows are consecutive in [B, Hq, Sq]: query heads kv_head x group ... on, Sq each.
  work.first_row = (static_cast<std::int64_t>(work.b) * args.kv_heads + work.kv_head) * group_rows + work.row0;
  work.length = args.seq_lens[work.b];
  work.key_begin = split_index<Rope>() * plan.keys_per_split;
  work.key_end = min(work.length, work.key_begin + plan.keys_per_split);
  work.tiles = ceil_div(work.key_end - work.key_begin, kTileKeys);
  return work;
}

// The keys chunk row r (< work.rows) sees inside the split: [key_begin, its end).
template <typename T>
__device__ __forceinline__ int row_key_end(const DecodeArgs<T>& args, const SplitWork& work, int r) {
  const int token = (work.row0 + r) % args.q_len;
  return max(work.key_begin, min(work.key_end, decode_visible_keys(work.length, args.q_len, token)));
}

// The block ids of this thread's rows of tile `tile` (an unused 0 for a key past the split:
// never read), loaded an iteration before copy_tile_pages needs them.
template <class Layout>
__device__ __forceinline__ void load_block_ids(int (&ids)[Layout::kRowsPerThread], int tile, const SplitWork& work,
                                               const std::int32_t* table_row, int block_shift) {
  if (tile >= work.tiles) return;
  const int key0 = work.key_begin + tile * kTileKeys;
#pragma unroll
  for (int i = 0; i < Layout::kRowsPerThread; ++i) {
    const int key = key0 + Layout::Copy::row(i);
    ids[i] = key < work.key_end ? table_row[key >> block_shift] : 0;
  }
}

// Rung 06: one 16-byte chunk of new token `key`'s K and V rows (kv head work.kv_head), from the
// projection's output: K rotated by its position (rotate_half: chunk c of the first half pairs with
// chunk c + D/16), rounded to T as the unfused RoPE stores it, put in the tile at `k_tile` /
// `v_tile` from registers, and — by the first row chunk's CTA only, so that one CTA writes each row —
// stored to the row's place in the cache for the steps after this one. The CTAs of other row
// chunks compute the same chunk for their own tiles instead of reading a row another CTA may not
// have written yet. In two halves: the loads (load_new_token_chunk), then the rotation and the
// stores (store_new_token_chunk), so that rung 07 can have a chunk's loads in flight beside Q's.
template <typename T>
struct NewTokenChunk {
  float a[kDecodeChunkElements], b[kDecodeChunkElements];  // the pair's halves of K
  float cos[kDecodeChunkElements], sin[kDecodeChunkElements];
  uint4 v;
};

template <int kHeadDim, class Rope, typename T>
__device__ __forceinline__ NewTokenChunk<T> load_new_token_chunk(const Rope& rope, const DecodeArgs<T>& args,
                                                                  const SplitWork& work, int key, int chunk) {
  constexpr int kHalfChunks = kHeadDim / (2 * kDecodeChunkElements);
  const int token = key - (work.length - args.q_len);
  const std::int64_t row = (static_cast<std::int64_t>(work.b) * args.q_len + token) * args.kv_heads + work.kv_head;
  const int pair = chunk < kHalfChunks ? chunk : chunk - kHalfChunks;  // the chunk of the pairs' first elements
  NewTokenChunk<T> loaded;
  core::load_floats<T, kDecodeChunkElements>(rope.k_new + row * kHeadDim + pair * kDecodeChunkElements, loaded.a);
  core::load_floats<T, kDecodeChunkElements>(rope.k_new + row * kHeadDim + (pair + kHalfChunks) * kDecodeChunkElements,
                                             loaded.b);
  const float* angles =
      rope.cos_sin + static_cast<std::int64_t>(angle_row<Rope>(key)) * kHeadDim + pair * kDecodeChunkElements;
#pragma unroll
  for (int e = 0; e < kDecodeChunkElements; ++e) {
    loaded.cos[e] = angles[e];
    loaded.sin[e] = angles[kHeadDim / 2 + e];
  }
  loaded.v = *reinterpret_cast<const uint4*>(rope.v_new + row * kHeadDim + chunk * kDecodeChunkElements);
  return loaded;
}

template <int kHeadDim, class Rope, typename T>
__device__ __forceinline__ void store_new_token_chunk(NewTokenChunk<T> loaded, const Rope& rope,
                                                      const DecodeArgs<T>& args, const SplitWork& work, int key,
                                                      int chunk, std::int32_t block, std::uint8_t* k_tile,
                                                      std::uint8_t* v_tile) {
  constexpr int kHalfChunks = kHeadDim / (2 * kDecodeChunkElements);
  const bool first_half = chunk < kHalfChunks;
  float k[kDecodeChunkElements];
#pragma unroll
  for (int e = 0; e < kDecodeChunkElements; ++e) {
    core::rotate_pair(loaded.a[e], loaded.b[e], loaded.cos[e], loaded.sin[e]);
    k[e] = first_half ? loaded.a[e] : loaded.b[e];
  }
  core::store_floats<T, kDecodeChunkElements>(reinterpret_cast<T*>(k_tile), k);
  *reinterpret_cast<uint4*>(v_tile) = loaded.v;
  if (work.row0 == 0) {
    const std::int64_t at = (static_cast<std::int64_t>(block) * args.kv_heads + work.kv_head) * args.block_size +
                            (key & (args.block_size - 1));
    core::store_floats<T, kDecodeChunkElements>(rope.k_cache + at * kHeadDim + chunk * kDecodeChunkElements, k);
    *reinterpret_cast<uint4*>(rope.v_cache + at * kHeadDim + chunk * kDecodeChunkElements) = loaded.v;
  }
}

template <int kHeadDim, class Rope, typename T>
__device__ __forceinline__ void new_token_chunk(const Rope& rope, const DecodeArgs<T>& args,
                                                const SplitWork& work, int key, int chunk, std::int32_t block,
                                                std::uint8_t* k_tile, std::uint8_t* v_tile) {
  store_new_token_chunk<kHeadDim>(load_new_token_chunk<kHeadDim>(rope, args, work, key, chunk), rope, args, work, key,
                                  chunk, block, k_tile, v_tile);
}

// The cp.async copies of tile `tile` of K and V into `stage` (swizzled, as fa2_mma.cuh's tiles),
// each row from its page; keys at or past the split's end are zero-filled and read nothing. With
// rung 06's rope (kRopeIn), the rows of the new tokens are new_token_chunk's, stored into the
// stage (`stage_pointer`, the same shared memory) from registers instead. kBeforeWait (rung 07's
// copies before the wait for the kernel ahead): the new tokens' rows are skipped — they are the
// kernel ahead's output, built into the tile after the wait (store_q_and_new_rows_after_wait) —
// except by the negative control's flaw, which copies them from their pages like any other row.
template <class Layout, bool kBeforeWait = false, typename T, class Rope>
__device__ __forceinline__ void copy_tile_pages(std::uint32_t stage, std::uint8_t* stage_pointer,
                                                const int (&ids)[Layout::kRowsPerThread], int tile,
                                                const SplitWork& work, const DecodeArgs<T>& args, const Rope& rope) {
  constexpr bool kRopeIn = !std::is_same_v<Rope, NoRope>;
  if constexpr (!kRopeIn) {
    (void)stage_pointer;
    (void)rope;
  }
  const int key0 = work.key_begin + tile * kTileKeys;
#pragma unroll
  for (int i = 0; i < Layout::kRowsPerThread; ++i) {
    const int row = Layout::Copy::row(i);
    const int chunk = Layout::Copy::chunk(i);
    const int key = key0 + row;
    const bool valid = key < work.key_end;
    const int column = chunk * kDecodeChunkElements;
    const std::uint32_t offset = swizzled_offset<typename Layout::TileShape>(row, chunk);
    if constexpr (kBeforeWait) {
      if (!Rope::kNewRowsFromCache && valid && key >= work.length - args.q_len) continue;
    } else if constexpr (kRopeIn) {
      if (valid && key >= work.length - args.q_len) {
        new_token_chunk<Layout::TileShape::kHeadDim, Rope>(rope, args, work, key, chunk, ids[i], stage_pointer + offset,
                                                           stage_pointer + Layout::kTileBytes + offset);
        continue;
      }
    }
    // A zero-filled copy still needs a valid address: the pool's first row.
    const T* k_source = valid ? page_row(args.k_cache, ids[i], work.kv_head, key & (args.block_size - 1), args) + column
                              : args.k_cache;
    const T* v_source = valid ? page_row(args.v_cache, ids[i], work.kv_head, key & (args.block_size - 1), args) + column
                              : args.v_cache;
    sm80::cp_async_16(stage + offset, k_source, valid);
    sm80::cp_async_16(stage + Layout::kTileBytes + offset, v_source, valid);
  }
}

// Rung 08: where this thread's rows of every tile live, worked out once a CTA. TileCopy gives
// thread t chunk c = t mod (D/8) of the rows r0 + kRowStep i of a 64-key tile (r0 = t / (D/8),
// kRowStep = 128 / (D/8): 8 at D = 128, 16 at D = 64). A block holds 16, 32 or 64 keys, a multiple
// of kRowStep, and a tile starts on a block boundary (splits and tiles are whole 64-key tiles), so
// row r0 + kRowStep i lies in the block of key key0 + kRowStep i — the same block for every
// thread, whose id is one broadcast load — at row r0 + (kRowStep i mod block_size) of it, and in
// the stage at swizzled_offset(r0, c) + kRowStep i rows (the XOR swizzle reads row mod 8, which is
// r0 mod 8). So a copy's address is this thread's first row plus block id x block bytes plus a
// row offset that depends on i alone: one 32 x 32 -> 64-bit product and an add, where rung 07's
// copy_tile_pages forms (block x kv_heads + kv_head) x block_size + row, x D, in 64 bits from
// runtime sizes, for every row of every tile.
struct NoPageWalk {};

template <class Layout>
struct PageWalk {
  static constexpr int kRowStep = kThreads / Layout::TileShape::kChunksPerRow;
  static_assert(kThreads % Layout::TileShape::kChunksPerRow == 0 && kRowStep % 8 == 0 && 16 % kRowStep == 0,
                "a thread's rows keep their swizzle and their block: kRowStep a multiple of 8 dividing 16");
  const std::uint8_t* k_row;      // chunk c of row r0 of this kv head's rows in block 0 of the K pool
  const std::uint8_t* v_row;      // ... of the V pool
  std::uint32_t block_bytes;      // one block of a pool: kv_heads x block_size rows
  std::uint32_t row_mask_bytes;   // (block_size - 1) rows: a row offset inside a block
  std::uint32_t stage_offset;     // swizzled_offset(r0, c)
  int r0;
  int block_shift;
};

template <class Layout, class Rope, typename T>
__device__ __forceinline__ auto page_walk_for(const DecodeArgs<T>& args, const SplitWork& work) {
  if constexpr (Rope::kPageWalk) {
    using Copy = typename Layout::Copy;
    constexpr int kRowBytes = Layout::kRowBytes;
    PageWalk<Layout> walk;
    walk.r0 = Copy::row(0);
    const int chunk = Copy::chunk(0);
    const std::int64_t first =
        (static_cast<std::int64_t>(work.kv_head) * args.block_size + walk.r0) * kRowBytes + chunk * 16;
    walk.k_row = reinterpret_cast<const std::uint8_t*>(args.k_cache) + first;
    walk.v_row = reinterpret_cast<const std::uint8_t*>(args.v_cache) + first;
    walk.block_bytes = static_cast<std::uint32_t>(args.kv_heads * args.block_size * kRowBytes);
    walk.row_mask_bytes = static_cast<std::uint32_t>((args.block_size - 1) * kRowBytes);
    walk.stage_offset = swizzled_offset<typename Layout::TileShape>(walk.r0, chunk);
    walk.block_shift = __ffs(args.block_size) - 1;
    return walk;
  } else {
    (void)args;
    (void)work;
    return NoPageWalk{};
  }
}

// Rung 08's load_block_ids: the id of the block of key key0 + kRowStep i for each i (0 past the
// split: a valid block, never read). A block holds at least 16 keys, so at D = 128 (kRowStep 8)
// steps 2j and 2j + 1 share one: half the loads. The negative control's flaw takes the tile's
// first block for every i.
template <class Layout, class Rope>
__device__ __forceinline__ void load_walk_block_ids(int (&ids)[Layout::kRowsPerThread], int tile,
                                                    const SplitWork& work, const std::int32_t* table_row,
                                                    const PageWalk<Layout>& walk) {
  constexpr int kStepsPerSmallestBlock = 16 / PageWalk<Layout>::kRowStep;
  if (tile >= work.tiles) return;
  const unsigned key0 = static_cast<unsigned>(work.key_begin + tile * kTileKeys);
#pragma unroll
  for (int i = 0; i < Layout::kRowsPerThread; ++i) {
    if (i % kStepsPerSmallestBlock != 0) {
      ids[i] = ids[i - i % kStepsPerSmallestBlock];
      continue;
    }
    const unsigned key = key0 + PageWalk<Layout>::kRowStep * i;
    const unsigned block_key = Rope::kOnePagePerTile ? key0 : key;
    ids[i] = key < static_cast<unsigned>(work.key_end) ? table_row[block_key >> walk.block_shift] : 0;
  }
}

// Rung 08's copy_tile_pages: the same rows, zero fills, skipped and built new rows, with the
// addresses of PageWalk. A row past the split is a zero fill from a row of a valid block (its id
// is a loaded one or 0).
template <class Layout, bool kBeforeWait = false, typename T, class Rope>
__device__ __forceinline__ void copy_walk_tile(std::uint32_t stage, std::uint8_t* stage_pointer,
                                               const int (&ids)[Layout::kRowsPerThread], int tile,
                                               const SplitWork& work, const DecodeArgs<T>& args, const Rope& rope,
                                               const PageWalk<Layout>& walk) {
  constexpr int kRowStep = PageWalk<Layout>::kRowStep;
  const int key0 = work.key_begin + tile * kTileKeys;
  const int end = work.key_end - key0 - walk.r0;                    // step i is a key iff kRowStep i < end
  const int new_begin = work.length - args.q_len - key0 - walk.r0;  // ... a new token's iff >= new_begin
#pragma unroll
  for (int i = 0; i < Layout::kRowsPerThread; ++i) {
    const int step = kRowStep * i;
    const bool valid = step < end;
    const std::uint32_t offset = walk.stage_offset + static_cast<std::uint32_t>(step * Layout::kRowBytes);
    if (valid && step >= new_begin) {
      if constexpr (!kBeforeWait) {
        new_token_chunk<Layout::TileShape::kHeadDim, Rope>(rope, args, work, key0 + walk.r0 + step,
                                                           Layout::Copy::chunk(0), ids[i], stage_pointer + offset,
                                                           stage_pointer + Layout::kTileBytes + offset);
      }
      continue;  // before the wait: built after it (store_q_and_new_rows_after_wait)
    }
    const std::uint64_t at =
        static_cast<std::uint64_t>(static_cast<std::uint32_t>(ids[i])) * walk.block_bytes +
        (static_cast<std::uint32_t>(step * Layout::kRowBytes) & walk.row_mask_bytes);
    sm80::cp_async_16(stage + offset, walk.k_row + at, valid);
    sm80::cp_async_16(stage + Layout::kTileBytes + offset, walk.v_row + at, valid);
  }
}

// A split that starts past its sequence (or an empty sequence). With a combine, the combine never
// reads this split; alone, the CTA owns its rows' output: O = 0, LSE = -inf.
template <typename T, int kHeadDim>
__device__ __forceinline__ void store_empty_rows(const DecodeArgs<T>& args, const SplitWork& work) {
  constexpr int kChunksPerRow = kHeadDim / kDecodeChunkElements;
  const float zeros[kDecodeChunkElements] = {};
  for (int i = static_cast<int>(threadIdx.x); i < work.rows * kChunksPerRow; i += kThreads)
    core::store_floats<T, kDecodeChunkElements>(args.o + work.first_row * kHeadDim + i * kDecodeChunkElements, zeros);
  for (int r = static_cast<int>(threadIdx.x); r < work.rows; r += kThreads)
    args.lse[work.first_row + r] = -CUDART_INF_F;
}

// Rung 05's start, before the wait for the kernel ahead: the pages of this split's first
// kStages - 1 tiles (the pipeline's prologue) asked into L2, one bulk prefetch per page and K or
// V, for the keys older than the sequence's new tokens. They and the block table and lengths that
// locate them are the caller's, written before the step's chain of kernels (the new tokens' rows
// are the kernel ahead's output: read only after the wait). A prefetch moves no data into the
// CTA and orders nothing; the copies after the wait find the lines in L2 instead of DRAM.
template <int kStages, typename T>
__device__ __forceinline__ void prefetch_first_pages(const DecodeArgs<T>& args, const SplitWork& work) {
  const int old_end = min(work.key_end, work.length - args.q_len);  // keys before the new tokens
  const int end = min(old_end, work.key_begin + (kStages - 1) * kTileKeys);
  if (end <= work.key_begin) return;
  const int block_shift = __ffs(args.block_size) - 1;
  const int first_page = work.key_begin >> block_shift;
  const int pages = ((end - 1) >> block_shift) - first_page + 1;
  const std::int32_t* table_row = args.block_table + static_cast<std::int64_t>(work.b) * args.max_blocks;
  const std::uint32_t row_bytes = static_cast<std::uint32_t>(args.head_dim) * sizeof(T);
  for (int i = static_cast<int>(threadIdx.x); i < 2 * pages; i += kThreads) {
    const int page = first_page + i / 2;
    const int row0 = max(work.key_begin, page << block_shift) - (page << block_shift);
    const int row1 = min(end, (page + 1) << block_shift) - (page << block_shift);
    const T* pool = i % 2 == 0 ? args.k_cache : args.v_cache;
    core::prefetch_to_l2(page_row(pool, table_row[page], work.kv_head, row0, args),
                         static_cast<std::uint32_t>(row1 - row0) * row_bytes);
  }
}

// Rung 04's ending, after this split's partials are stored: the split counts itself in its group's
// arrival counter, and the one that arrives last merges the group's rows over every split that
// holds keys — a warp per row, rung 03's combine (merge_split_row) reading the partials from L2 —
// and sets the counter back to zero for the next launch. Every partial is stored before its
// thread's fence, and every thread's fence before thread 0 counts (the barrier); the last CTA's
// reads come after it has seen the count and fenced. No CTA waits for another.
// Rung 10 (Rope::kReleaseAcquireMerge) orders the same hand-over with one atomic: the barrier puts
// every thread's partial stores before thread 0's count, and that count, an acq_rel read-modify-
// write at GPU scope, releases them (a release is cumulative: it covers the writes the barrier
// ordered before it) and, in the last CTA, acquires the other splits' partials, which the threads
// read after the barrier that passes `last` on: the last count reads what the earlier counts wrote
// in turn, and observation order runs through atomic read-modify-writes, so its acquire
// synchronizes with every earlier count's release. No thread fences on its own.
template <class Rope, typename T, int kHeadDim, DecodeMerge kMerge>
__device__ __forceinline__ void merge_if_last(const DecodeArgs<T>& args, const DecodeSplitPlan& plan,
                                              const DecodeSplitWorkspace& workspace, const SplitWork& work,
                                              int used_splits, int warp, int lane) {
  // Rungs 04-09's fence stays ahead of the counter's address: moved into the branch below it
  // changes their SASS (their measurements hold for this order).
  if constexpr (!Rope::kReleaseAcquireMerge) __threadfence();
  unsigned* arrivals = workspace.arrivals + blockIdx.z * group_count<Rope>() + group_index<Rope>();
  bool last = false;
  if constexpr (Rope::kReleaseAcquireMerge) {
    __syncthreads();  // every thread's partials stored before thread 0's release
    if (threadIdx.x == 0) {
      cuda::atomic_ref<unsigned, cuda::thread_scope_device> count(*arrivals);
      last = count.fetch_add(1u, cuda::memory_order_acq_rel) == static_cast<unsigned>(used_splits - 1);
    }
  } else {
    if (threadIdx.x == 0) last = atomicAdd(arrivals, 1u) == static_cast<unsigned>(used_splits - 1);
  }
  if (!__syncthreads_or(last)) return;
  // the other splits' partials, seen through their count, are read after it
  if constexpr (!Rope::kReleaseAcquireMerge) __threadfence();
  if (threadIdx.x == 0) *arrivals = 0;  // every used split of the group has counted
  // The negative control's flaw: the last split's partial is left out of the merge.
  const int merged = kMerge == DecodeMerge::in_kernel_drops_last_split ? used_splits - 1 : used_splits;
  for (int r = warp; r < work.rows; r += kWarps)
    merge_split_row<T, kHeadDim, /*kFromL2=*/true>(args, plan, workspace, work.first_row + r, merged, lane);
}

// Rung 06: the chunk's rows of Q into the Q tile (swizzled, zeros past the chunk's rows), each
// rotated by its token's position L - Sq + t and rounded to T as the unfused RoPE stores it. A
// thread takes chunk c and c + D/16 of a row: the two halves of 8 rotate_half pairs.
template <class Layout, class Rope, typename T>
__device__ __forceinline__ void store_rotated_q(std::uint8_t* q_tile, const DecodeArgs<T>& args, const Rope& rope,
                                                const SplitWork& work) {
  constexpr int kHeadDim = Layout::TileShape::kHeadDim;
  constexpr int kHalfChunks = kHeadDim / (2 * kDecodeChunkElements);
  for (int item = static_cast<int>(threadIdx.x); item < Layout::kQRows * kHalfChunks; item += kThreads) {
    const int r = item / kHalfChunks, pair = item % kHalfChunks;
    float a[kDecodeChunkElements] = {}, b[kDecodeChunkElements] = {};
    if (r < work.rows) {
      const T* q_row = args.q + (work.first_row + r) * kHeadDim;
      core::load_floats<T, kDecodeChunkElements>(q_row + pair * kDecodeChunkElements, a);
      core::load_floats<T, kDecodeChunkElements>(q_row + (pair + kHalfChunks) * kDecodeChunkElements, b);
      const int position = work.length - args.q_len + (work.row0 + r) % args.q_len;
      const float* angles =
          rope.cos_sin + static_cast<std::int64_t>(angle_row<Rope>(position)) * kHeadDim + pair * kDecodeChunkElements;
#pragma unroll
      for (int e = 0; e < kDecodeChunkElements; ++e) core::rotate_pair(a[e], b[e], angles[e], angles[kHeadDim / 2 + e]);
    }
    core::store_floats<T, kDecodeChunkElements>(
        reinterpret_cast<T*>(q_tile + swizzled_offset<typename Layout::TileShape>(r, pair)), a);
    core::store_floats<T, kDecodeChunkElements>(
        reinterpret_cast<T*>(q_tile + swizzled_offset<typename Layout::TileShape>(r, pair + kHalfChunks)), b);
  }
}

// Rung 07, before the wait: every stage of the ring filled with tiles 0 .. kStages - 1 of the
// split — the cached rows only (copy_tile_pages<kBeforeWait>), the new tokens' rows left for
// after the wait. One cp.async group a tile. Everything read here is the caller's: the length,
// the block table and rows written by earlier steps (PagedDecodeAttention's contract for rungs 05
// to 07).
template <class Layout, typename T, class Rope, class Walk>
__device__ __forceinline__ void copy_first_tiles_before_wait(int (&ids)[Layout::kRowsPerThread], std::uint8_t* smem,
                                                             const DecodeArgs<T>& args, const SplitWork& work,
                                                             const Rope& rope, const Walk& walk) {
  const std::uint32_t smem_base = smem_u32(smem);
  const std::int32_t* table_row = args.block_table + static_cast<std::int64_t>(work.b) * args.max_blocks;
  const int block_shift = __ffs(args.block_size) - 1;
#pragma unroll
  for (int tile = 0; tile < Layout::kStages; ++tile) {
    if constexpr (Rope::kPageWalk) {
      (void)block_shift;
      load_walk_block_ids<Layout, Rope>(ids, tile, work, table_row, walk);
      if (tile < work.tiles)
        copy_walk_tile<Layout, /*kBeforeWait=*/true>(smem_base + tile * Layout::kStageBytes,
                                                     smem + tile * Layout::kStageBytes, ids, tile, work, args, rope,
                                                     walk);
    } else {
      (void)walk;
      load_block_ids<Layout>(ids, tile, work, table_row, block_shift);
      if (tile < work.tiles)
        copy_tile_pages<Layout, /*kBeforeWait=*/true>(smem_base + tile * Layout::kStageBytes,
                                                      smem + tile * Layout::kStageBytes, ids, tile, work, args, rope);
    }
    sm80::cp_async_commit_group();  // empty past the last tile: the group count stays uniform
  }
}

// Rung 11's wait, given the projection's counts (rope.heads_written): thread 0 reads kv head
// `kv_head`'s count with acquire semantics at GPU scope until it reaches the target, and the
// barrier after it orders every thread's reads of Q and the new rows after that acquire — which
// synchronizes with the projection blocks' releases, each made after their outputs were stored
// (count_written_columns, gemm/small_m_gemv.cuh). Everything else the wait for the kernel ahead
// guarded is as safe after it: a projection block counts only after its own wait for the kernel
// ahead of it, which ran after the previous layer's attention and the o projection that read O and
// the workspace. A count that never arrives (a caller's mistake) traps after about 2^24 reads
// instead of hanging the GPU. Without counters: the wait for the kernel ahead, as rung 10.
template <class Rope>
__device__ __forceinline__ void wait_for_head_rows(const Rope& rope, int kv_head) {
  if (rope.heads_written == nullptr) {
    core::wait_for_previous_grids();
    return;
  }
  if (threadIdx.x == 0) {
    const int head = Rope::kWaitsForHeadZero ? 0 : kv_head;  // the negative control's flaw
    cuda::atomic_ref<unsigned, cuda::thread_scope_device> written(const_cast<unsigned&>(rope.heads_written[head]));
    unsigned reads = 0;
    while (written.load(cuda::memory_order_acquire) < rope.heads_written_target)
      if (++reads == (1u << 24)) __trap();
  }
  __syncthreads();
}

// Rung 07, after the wait: the rows of the new tokens that fall in the first kStages tiles,
// rotated and stored into their stage (and to their page by the first row chunk's CTA), and Q
// rotated into its tile. A thread's first new-row chunk is loaded before Q's rows, so that the two
// loads are in flight together: one round trip instead of two. (More chunks than threads — more
// than 8 new tokens at D = 128 — take a second pass.) The negative control's flaw builds none:
// its tiles hold what the pages held before the wait.
template <class Layout, typename T, class Rope>
__device__ __forceinline__ void store_q_and_new_rows_after_wait(std::uint8_t* smem, const DecodeArgs<T>& args,
                                                                const Rope& rope, const SplitWork& work,
                                                                const std::int32_t* table_row, int block_shift) {
  constexpr int kHeadDim = Layout::TileShape::kHeadDim;
  constexpr int kChunksPerRow = kHeadDim / kDecodeChunkElements;
  const int new_begin = max(work.key_begin, work.length - args.q_len);
  const int first_tiles_end = min(work.key_end, work.key_begin + Layout::kStages * kTileKeys);
  const int chunks = Rope::kNewRowsFromCache ? 0 : max(0, first_tiles_end - new_begin) * kChunksPerRow;
  const auto store_chunk = [&](const NewTokenChunk<T>& loaded, int item, std::int32_t block) {
    const int key = new_begin + item / kChunksPerRow, chunk = item % kChunksPerRow;
    const int local = key - work.key_begin;
    std::uint8_t* stage = smem + local / kTileKeys * Layout::kStageBytes;
    const std::uint32_t offset = swizzled_offset<typename Layout::TileShape>(local % kTileKeys, chunk);
    store_new_token_chunk<kHeadDim>(loaded, rope, args, work, key, chunk, block, stage + offset,
                                    stage + Layout::kTileBytes + offset);
  };
  // Not in the D = 64 instance with two m16 tiles of rows: ptxas holds it at 128 registers, and a
  // chunk held across Q's rotation spilled there (on sm_80); its chunks follow Q.
  constexpr bool kLoadsTogether = !(kHeadDim == 64 && Layout::kQRows == 2 * kMmaRows);
  const int first = static_cast<int>(threadIdx.x);
  if constexpr (kLoadsTogether) {
    NewTokenChunk<T> loaded{};
    std::int32_t block = 0;
    if (first < chunks) {
      const int key = new_begin + first / kChunksPerRow;
      loaded = load_new_token_chunk<kHeadDim>(rope, args, work, key, first % kChunksPerRow);
      block = table_row[key >> block_shift];
    }
    store_rotated_q<Layout, Rope>(smem + Layout::kQOffset, args, rope, work);
    if (first < chunks) store_chunk(loaded, first, block);
  } else {
    store_rotated_q<Layout, Rope>(smem + Layout::kQOffset, args, rope, work);
  }
  for (int item = kLoadsTogether ? first + kThreads : first; item < chunks; item += kThreads) {
    const int key = new_begin + item / kChunksPerRow;
    store_chunk(load_new_token_chunk<kHeadDim>(rope, args, work, key, item % kChunksPerRow), item,
                table_row[key >> block_shift]);
  }
}

template <typename T, int kHeadDim, int kRowTiles, DecodeMerge kMerge, bool kEarlyPages, class Rope>
__global__ void __launch_bounds__(kThreads)
    mma_split_kv_kernel(DecodeArgs<T> args, DecodeSplitPlan plan, DecodeSplitWorkspace workspace, Rope rope) {
  constexpr bool kRopeIn = !std::is_same_v<Rope, NoRope>;
  using Layout = MmaSplitKvLayout<kHeadDim, kRowTiles>;
  using WarpShape = typename Layout::WarpShape;
  constexpr int kStages = Layout::kStages;
  extern __shared__ __align__(128) std::uint8_t smem[];
  // In the engine's decode step the kernels launch as programmatic dependents
  // (kc/core/dependent_launch.hpp). Rungs 03 and 04: nothing before the wait. Rung 05
  // (kEarlyPages): the length, the table and the pages of keys older than the new tokens — what no
  // kernel of the step writes — before it (prefetch_first_pages). Rung 07 (kPagesFirst): those
  // pages copied into every stage of the ring before it (copy_first_tiles_before_wait).
  constexpr bool kPagesFirst = Rope::kPagesBeforeWait;
  static_assert(!kPagesFirst || (kEarlyPages && kMerge != DecodeMerge::combine_kernel),
                "rung 07 is rung 06 (early start, merge in the launch) with its first tiles copied before the wait");
  static_assert(!Rope::kPageWalk || kPagesFirst, "rung 08 is rung 07 with its page addresses worked out once");
  core::let_dependent_grids_start();
  if constexpr (!kEarlyPages) core::wait_for_previous_grids();

  const int warp = static_cast<int>(threadIdx.x) / core::kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % core::kWarpSize;
  const SplitWork work = split_work<Rope>(args, plan);
  if constexpr (Rope::kWorkersFirst || Rope::kHeadsHandedOver) {
    // Rung 09, and rung 11 given counts (in rung 10's grid): a split past the sequence's keys has
    // nothing to read or write (the merge counts the splits that hold keys only) and leaves now,
    // before the wait, giving its SM back. Split 0 of a sequence without keys stays: it writes
    // that sequence's rows after the wait, below.
    const bool leaves_early = Rope::kWorkersFirst || rope.heads_written != nullptr;
    if (leaves_early && work.key_begin >= work.length && !(work.length <= 0 && split_index<Rope>() == 0)) return;
  }
  [[maybe_unused]] const auto walk = page_walk_for<Layout, Rope>(args, work);  // rung 08; empty in the others
  int ids[Layout::kRowsPerThread];
  if constexpr (kPagesFirst) {
    copy_first_tiles_before_wait<Layout>(ids, smem, args, work, rope, walk);
    if constexpr (Rope::kHeadsHandedOver)
      wait_for_head_rows(rope, work.kv_head);  // rung 11: this kv head's rows written
    else
      core::wait_for_previous_grids();  // Q, the new tokens' K/V rows, O and the workspace: after it
  } else if constexpr (kEarlyPages) {
    prefetch_first_pages<kStages>(args, work);
    core::wait_for_previous_grids();  // Q, the new tokens' K/V rows, O and the workspace: after it
  }
  constexpr bool kMergesHere = kMerge != DecodeMerge::combine_kernel;
  // The splits of this sequence that hold keys (rung 04's merge counts them).
  const int used_splits = kMergesHere ? decode_used_splits(plan, work.length) : plan.splits;
  // One split: O and LSE written here, no partials. Rung 03: one split in the plan; rung 04: one
  // split holds the whole sequence.
  const bool direct = kMergesHere ? used_splits <= 1 : !plan.combines();
  if (work.key_begin >= work.length) {
    // Rung 03: the CTA of the only split; rung 04: split 0 of an empty sequence (no split holds a
    // key, so no merge runs).
    if (kMergesHere ? (work.length <= 0 && split_index<Rope>() == 0) : direct) store_empty_rows<T, kHeadDim>(args, work);
    return;  // the whole CTA: no barrier is left behind
  }

  const std::uint32_t smem_base = smem_u32(smem);
  const std::int32_t* table_row = args.block_table + static_cast<std::int64_t>(work.b) * args.max_blocks;
  const int block_shift = __ffs(args.block_size) - 1;  // block_size is 16, 32 or 64

  // This warp: m16 tile warp % kRowTiles, keys (warp / kRowTiles) x kWarpKeys .. of every tile.
  const int row_tile = warp % kRowTiles;
  const int key_offset = warp / kRowTiles * Layout::kWarpKeys;
  Fa2Warp<T, WarpShape> step;
  if constexpr (kPagesFirst) {
    // Rung 07: the first kStages tiles' cached rows are on their way (before the wait); what is left
    // is the kernel ahead's output — Q and the new tokens' rows of those tiles — loaded together.
    store_q_and_new_rows_after_wait<Layout>(smem, args, rope, work, table_row, block_shift);
    __syncthreads();
  } else {
    // Group 0: the chunk's rows of Q (zeros past them); groups 1 .. kStages - 1: the first tiles.
    // Rung 06 stores Q rotated from registers (the barrier after the wait below publishes it) and
    // commits an empty group 0. (Storing it after the first tiles' copies are issued spilled
    // registers in the D = 64, two-row-tile instances, and was not kept.)
    if constexpr (kRopeIn)
      store_rotated_q<Layout, Rope>(smem + Layout::kQOffset, args, rope, work);
    else
      copy_tile_async<typename Layout::TileShape, Layout::kQRows>(smem + Layout::kQOffset,
                                                                  args.q + work.first_row * kHeadDim, kHeadDim, 0,
                                                                  work.rows);
    sm80::cp_async_commit_group();
#pragma unroll
    for (int tile = 0; tile < kStages - 1; ++tile) {
      load_block_ids<Layout>(ids, tile, work, table_row, block_shift);
      if (tile < work.tiles)
        copy_tile_pages<Layout>(smem_base + tile * Layout::kStageBytes, smem + tile * Layout::kStageBytes, ids, tile,
                                work, args, rope);
      sm80::cp_async_commit_group();  // empty past the last tile: the group count stays uniform
    }
    load_block_ids<Layout>(ids, kStages - 1, work, table_row, block_shift);
    sm80::cp_async_wait_group<kStages - 1>();  // Q has landed (the tiles may still travel)
    __syncthreads();
  }
  step.load_q(smem_base + Layout::kQOffset, row_tile);

  // This thread's rows (chunk rows 16 row_tile + lane/4 + 8h): the keys each sees; padding rows
  // see none (every key masked; they are never stored).
  int row_ends[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = kMmaRows * row_tile + lane / 4 + 8 * h;
    row_ends[h] = r < work.rows ? row_key_end(args, work, r) : work.key_begin;
  }
  // Keys at and past this may be masked for some row of the chunk (the split's end, or the first
  // new token's end): slices before it skip the mask's compares.
  const int unmasked_end = max(work.key_begin, min(work.key_end, work.length - (args.q_len - 1)));
  const float scale_log2 = args.scale * kLog2e;

  for (int tile = 0; tile < work.tiles; ++tile) {
    // Rung 07: kStages groups (tiles 0 .. kStages - 1) before the loop, and an empty one in its
    // first iteration (tile kStages - 1 is in its stage already), so tile t >= kStages is group
    // t + 1 and the same wait holds it; for t < kStages it also waits for tile t + 1, copied
    // before the kernel ahead finished.
    sm80::cp_async_wait_group<kStages - 2>();  // tile `tile` has landed
    __syncthreads();  // ... for every thread's copies; every warp is done with tile - 1, refilled now
    const int next = tile + kStages - 1;
    if constexpr (Rope::kPageWalk) {
      if (next < work.tiles && next >= kStages)
        copy_walk_tile<Layout>(smem_base + next % kStages * Layout::kStageBytes,
                               smem + next % kStages * Layout::kStageBytes, ids, next, work, args, rope, walk);
      sm80::cp_async_commit_group();
      load_walk_block_ids<Layout, Rope>(ids, next + 1, work, table_row, walk);
    } else {
      if (next < work.tiles && (!kPagesFirst || next >= kStages))
        copy_tile_pages<Layout>(smem_base + next % kStages * Layout::kStageBytes,
                                smem + next % kStages * Layout::kStageBytes, ids, next, work, args, rope);
      sm80::cp_async_commit_group();
      load_block_ids<Layout>(ids, next + 1, work, table_row, block_shift);
    }

    const std::uint32_t k_slice = smem_base + tile % kStages * Layout::kStageBytes + key_offset * Layout::kRowBytes;
    const int key0 = work.key_begin + tile * kTileKeys + key_offset;
    float s[1][WarpShape::kKeyBlocks][4];
    step.scores(s, k_slice);
    if (key0 + Layout::kWarpKeys > unmasked_end)
      step.template softmax<true>(s, scale_log2, key0, row_ends);
    else
      step.template softmax<false>(s, scale_log2, key0, row_ends);
    step.accumulate_pv(s, k_slice + Layout::kTileBytes);
  }

  // Merge the warps that share an m16 tile, through the stage buffers.
  sm80::cp_async_wait_group<0>();  // only empty groups are left: nothing lands in the merge area
  __syncthreads();                 // every warp is done with the last tile
  float* merge_o = reinterpret_cast<float*>(smem);
  float* merge_max = merge_o + Layout::kMergeOFloats;
  float* merge_sum = merge_max + kWarps * kMmaRows;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int tile_row = lane / 4 + 8 * h;
    float sum = step.row[h].sum;  // this thread's columns; the quad's 4 lanes hold the row
    sum += core::shuffle_xor(sum, 1);
    sum += core::shuffle_xor(sum, 2);
    if (lane % 4 == 0) {
      merge_max[warp * kMmaRows + tile_row] = step.row[h].max;
      merge_sum[warp * kMmaRows + tile_row] = sum;
    }
#pragma unroll
    for (int n = 0; n < WarpShape::kDimBlocks; ++n)
      *reinterpret_cast<float2*>(merge_o + (warp * kMmaRows + tile_row) * Layout::kMergeRowFloats + 8 * n +
                                 2 * (lane % 4)) = make_float2(step.o[0][n][2 * h], step.o[0][n][2 * h + 1]);
  }
  __syncthreads();

  // Each thread: 4 columns of one row at a time, O and LSE (one split) or the split's normalized
  // partial O and LSE.
  constexpr int kQuadsPerRow = kHeadDim / 4;
  for (int item = static_cast<int>(threadIdx.x); item < work.rows * kQuadsPerRow; item += kThreads) {
    const int r = item / kQuadsPerRow;
    const int column = item % kQuadsPerRow * 4;
    const int tile_row = r % kMmaRows;
    const int first_warp = r / kMmaRows;  // the warps of m-tile r / 16: first_warp + kRowTiles k
    float max = -CUDART_INF_F;
#pragma unroll
    for (int k = 0; k < Layout::kKeySplits; ++k)
      max = core::max_propagate_nan(max, merge_max[(first_warp + kRowTiles * k) * kMmaRows + tile_row]);
    const float base = exponent_base(max);
    float sum = 0.f;
    float o[4] = {};
#pragma unroll
    for (int k = 0; k < Layout::kKeySplits; ++k) {
      const int slot = (first_warp + kRowTiles * k) * kMmaRows + tile_row;
      const float weight = exp2_flush_to_zero(merge_max[slot] - base);
      sum = fmaf(merge_sum[slot], weight, sum);
      const float4 part = *reinterpret_cast<const float4*>(merge_o + slot * Layout::kMergeRowFloats + column);
      o[0] = fmaf(weight, part.x, o[0]);
      o[1] = fmaf(weight, part.y, o[1]);
      o[2] = fmaf(weight, part.z, o[2]);
      o[3] = fmaf(weight, part.w, o[3]);
    }
    const RowResult result = finish_row(max, sum, row_key_end(args, work, r) - work.key_begin);
#pragma unroll
    for (int c = 0; c < 4; ++c) o[c] *= result.o_scale;
    const std::int64_t row = work.first_row + r;
    if (direct) {
      core::store_floats<T, 4>(args.o + row * kHeadDim + column, o);
      if (column == 0) args.lse[row] = result.lse;
    } else {
      int split = split_index<Rope>();
      if constexpr (Rope::kWorkersFirst)
        if constexpr (Rope::kPartialsInRung08Slots) split = static_cast<int>(blockIdx.x) % plan.splits;  // the flaw
      const std::int64_t slot = row * plan.splits + split;
      core::store_floats<float, 4>(workspace.partial_o + slot * kHeadDim + column, o);
      if (column == 0) workspace.partial_lse[slot] = result.lse;
    }
  }
  if constexpr (kMergesHere) {
    if (!direct) merge_if_last<Rope, T, kHeadDim, kMerge>(args, plan, workspace, work, used_splits, warp, lane);
  }
}

// The kernel of one instance, its shared memory allowed once per process (it is above the 48 KiB
// a launch gets without opting in).
template <typename T, int kHeadDim, int kRowTiles, DecodeMerge kMerge, bool kEarlyPages, class Rope>
auto prepared_kernel() {
  const auto kernel = mma_split_kv_kernel<T, kHeadDim, kRowTiles, kMerge, kEarlyPages, Rope>;
  static const bool smem_allowed = [kernel] {
    allow_dynamic_smem(kernel, MmaSplitKvLayout<kHeadDim, kRowTiles>::kSmemBytes);
    return true;
  }();
  (void)smem_allowed;
  return kernel;
}

template <typename T, int kHeadDim, int kRowTiles, DecodeMerge kMerge, bool kEarlyPages, class Rope>
void launch(const DecodeArgs<T>& args, const DecodeSplitPlan& plan, const DecodeSplitWorkspace& workspace,
            const Rope& rope, cudaStream_t stream) {
  const auto splits = static_cast<unsigned>(plan.splits);
  const auto groups = static_cast<unsigned>(args.kv_heads * plan.row_chunks);
  // Rung 09 turns the grid round: the groups of split 0 first (split_index, group_index).
  const dim3 grid(Rope::kWorkersFirst ? groups : splits, Rope::kWorkersFirst ? splits : groups,
                  static_cast<unsigned>(args.batch));
  core::launch_dependent(prepared_kernel<T, kHeadDim, kRowTiles, kMerge, kEarlyPages, Rope>(), grid, dim3(kThreads),
                         MmaSplitKvLayout<kHeadDim, kRowTiles>::kSmemBytes, stream, args, plan, workspace, rope);
  if constexpr (kMerge == DecodeMerge::combine_kernel) launch_decode_combine<T, kHeadDim>(args, plan, workspace, stream);
}

template <typename T, int kHeadDim, int kRowTiles, DecodeMerge kMerge, bool kEarlyPages, class Rope>
int ctas_per_sm() {
  int ctas = 0;
  KC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas,
                                                              prepared_kernel<T, kHeadDim, kRowTiles, kMerge, kEarlyPages, Rope>(),
                                                              kThreads,
                                                              MmaSplitKvLayout<kHeadDim, kRowTiles>::kSmemBytes));
  return ctas > 0 ? ctas : 1;
}

// One m16 tile up to 16 rows a CTA, two up to 32.
template <typename T>
bool two_row_tiles(const DecodeArgs<T>& args) {
  return args.group_rows() > kMmaRows;
}

// The checks of a rung that merges its splits in the launch (rungs 04 and 05): rung 03's, and the
// arrival counters wherever splits are merged.
template <typename T>
void require_in_kernel_merge_args(const DecodeArgs<T>& args, const DecodeSplitPlan& plan,
                                  const DecodeSplitWorkspace& workspace, const char* rung) {
  require_decode_args(args, rung);
  require_decode_split_plan(args, plan, workspace, rung);
  require(!plan.combines() || workspace.arrivals != nullptr,
          "{}: {} splits need {} zeroed arrival counters (decode_split_arrival_counters) in the workspace", rung,
          plan.splits, decode_split_arrival_counters(args.batch, args.kv_heads, plan));
}

// The instance for `args`: D and one or two m16 row tiles.
template <DecodeMerge kMerge, bool kEarlyPages = false, typename T, class Rope = NoRope>
void launch_mma_split_kv(const DecodeArgs<T>& args, const DecodeSplitPlan& plan, const DecodeSplitWorkspace& workspace,
                         cudaStream_t stream, const Rope& rope = Rope{}) {
  if (args.head_dim == 64 && two_row_tiles(args))
    launch<T, 64, 2, kMerge, kEarlyPages>(args, plan, workspace, rope, stream);
  else if (args.head_dim == 64)
    launch<T, 64, 1, kMerge, kEarlyPages>(args, plan, workspace, rope, stream);
  else if (two_row_tiles(args))
    launch<T, 128, 2, kMerge, kEarlyPages>(args, plan, workspace, rope, stream);
  else
    launch<T, 128, 1, kMerge, kEarlyPages>(args, plan, workspace, rope, stream);
}

// Rungs 06 and 07's launch: the checks of a merge in the launch and of the rope arguments, then
// the instance for `args` with the rope parameter `Rope` (RopeIn or RopePagesFirst, a flaw or
// none) holding `rope`.
template <class Rope, typename T>
void launch_rope_rung(const DecodeArgs<T>& args, const DecodeRopeArgs<T>& rope, const DecodeSplitPlan& plan,
                      const DecodeSplitWorkspace& workspace, cudaStream_t stream, const char* rung) {
  require_in_kernel_merge_args(args, plan, workspace, rung);
  require_rope_args(args, rope, rung);
  Rope in;
  static_cast<DecodeRopeArgs<T>&>(in) = rope;
  launch_mma_split_kv<DecodeMerge::in_kernel, /*kEarlyPages=*/true>(args, plan, workspace, stream, in);
}

template <DecodeMerge kMerge, bool kEarlyPages = false, class Rope = NoRope, typename T>
int mma_split_kv_ctas_per_sm(const DecodeArgs<T>& args) {
  if (args.head_dim == 64)
    return two_row_tiles(args) ? ctas_per_sm<T, 64, 2, kMerge, kEarlyPages, Rope>()
                               : ctas_per_sm<T, 64, 1, kMerge, kEarlyPages, Rope>();
  return two_row_tiles(args) ? ctas_per_sm<T, 128, 2, kMerge, kEarlyPages, Rope>()
                             : ctas_per_sm<T, 128, 1, kMerge, kEarlyPages, Rope>();
}

}  // namespace

}  // namespace kc::stage3
