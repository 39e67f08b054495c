// Decode rung 02 — flash-decoding: the context split over CTAs, each page read once per group of
// query heads, partial results merged by a second kernel.
//
// Idea: rung 01 has two problems on a decode batch, and both have one fix each.
// (1) Too few warps for a short batch: one sequence of 32k keys is Hq x Sq warps, whatever its
//     length. So the context is split: split s of a sequence covers keys [s, s + 1) x
//     keys_per_split, and each (split, kv head, sequence) is a CTA. Each split ends with its own
//     softmax state, normalized: a partial O_s (FP32) and LSE_s; a combine kernel merges them,
//         LSE = log sum_s exp(LSE_s),  O = sum_s exp(LSE_s - LSE) O_s,
//     which is exactly the merge of two online-softmax states that rung 01 did between teams of a
//     warp, done here across CTAs through a workspace. The number of splits comes from the grid
//     and the SM count (plan_decode_splits in decode_args.hpp): enough CTAs to give every SM
//     several, never splits under 256 keys, a multiple of 64 keys each (whole pages); with one
//     split the CTAs write O and LSE themselves and no combine runs.
// (2) Every query head read the pages of its kv head by itself. Here the CTA holds all the
//     Hq / Hkv x Sq query rows of one kv head (up to 32; a larger group is cut into chunks of 32
//     rows) and brings each page into shared memory once for all of them.
// Pages travel by cp.async, 32 keys a tile (two pages of 16, one of 32, half of 64), double
// buffered: the copies of tile t + 1 are in flight while the warps compute tile t. A 16-byte copy
// of a key at or past the end of the split or of the sequence is a zero fill (src-size 0): the
// NaN rows past a sequence's length and the kNoBlock slots are never read, and a zero V row times
// a zero probability stays 0.
//
// Work split inside the CTA (up to 4 warps; fewer when the group has fewer rows): warp w owns the
// rows w, w + warps, ... For one tile, lane j computes the scores of key j for every row of its
// warp (D/8 LDS.128 of its K row, conflict-free thanks to a 16-byte pad per row, against the rows
// of Q in FP32, broadcast); each row's online softmax runs on the warp's 32 scores (SHFL.BFLY for
// the maximum and the sum); then P.V: for each key of the tile the lane reads its D/32 columns of
// the V row once (shared by all the warp's rows) and each row's probability is broadcast with
// SHFL.IDX. O stays in FP32 registers, D/32 columns x up to 8 rows per lane.
//
// What changed from rung 01: the grid (split x kv head x sequence instead of one warp per query
// row); the group's rows share every K/V byte through shared memory; cp.async double buffering
// instead of loads into registers; a workspace and a combine kernel. Still CUDA cores: FP32 FMAs
// on operands converted from bf16/f16.
//
// Expected limiter: memory bandwidth while the group is small (Llama-3-8B's 4 query heads a kv
// head and one new token: 4 rows, analysis: 2 multiply-adds per K/V byte); instruction issue on
// the CUDA cores as group x Sq grows (16 rows: 8 multiply-adds per byte, each with its share of
// conversions, LDS and shuffles). The next rung moves Q.K^T and P.V onto mma.sync with the
// group's rows as the M dimension of the tile.
//
// Workspace: [B, Hq, Sq, splits, D] + [B, Hq, Sq, splits] floats, held by the registration
// (src/register_attention_decode.cpp), grown on the first launch (kc-bench's untimed warm-up) and
// kept.
//
// Shared memory: two stages of K and V tiles (32 rows of D + 8 elements) and the CTA's rows of Q in
// FP32: 34 KiB + 512 bytes a row at D = 128 (50 KiB for 32 rows, past the 48 KiB a launch gets
// without opting in), 18 KiB + 256 bytes a row at D = 64.
//
// SASS to look for: split_kv_kernel: LDGSTS.E.BYPASS.128 (pages), LDGDEPBAR and DEPBAR.LE (commit
// and wait), LDG.E.128 (Q), LDS.128 (K rows: D/8 a tile, against 2 x D/8 a row of Q), STG.E.128
// of the FP32 partial O (D = 128), SHFL.BFLY and SHFL.IDX, MUFU.EX2, FFMA; no HMMA; no
// LDL/STL. decode_combine_kernel (decode_common.cuh, shared with rung 03): MUFU.EX2 (the
// weights), MUFU.RCP (1 / their sum), SHFL.BFLY (the largest LSE_s), no LDL/STL.
//
// Run just this rung:
//   build/ci/bench/kc-bench --filter '^stage3/attention_decode_paged/02_split_kv'
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "arch/sm80/cp_async.cuh"
#include "arch/util.hpp"
#include "kc/stage3/decode_args.hpp"
#include "attention/decode_common.cuh"
#include "kc/core/dependent_launch.cuh"

namespace kc::stage3 {
namespace {

constexpr int kMaxWarps = 4;
constexpr int kTileKeys = core::kWarpSize;  // one key per lane
constexpr int kStages = 2;
constexpr int kMaxRowsPerWarp = kDecodeMaxRowsPerCta / kMaxWarps;
constexpr int kDefaultSmemBytes = 48 * 1024;  // dynamic shared memory a launch gets without opting in

// Shared memory, carved out of the dynamic allocation: K and V tiles of kStages x 32 rows, each
// row padded by 16 bytes (8 elements) so that 8 lanes reading 8 different rows at the same column
// with LDS.128 hit 8 different groups of 4 banks; then the CTA's rows of Q in FP32.
template <typename T, int kHeadDim>
struct SplitKvSmem {
  static constexpr int kRowElements = kHeadDim + kDecodeChunkElements;
  static constexpr int kTileBytes = kTileKeys * kRowElements * static_cast<int>(sizeof(T));
  static constexpr int kTilesBytes = 2 * kStages * kTileBytes;  // K and V
  static constexpr int bytes(int rows) { return kTilesBytes + rows * kHeadDim * static_cast<int>(sizeof(float)); }

  static __device__ T* k_tile(std::uint8_t* smem, int stage) {
    return reinterpret_cast<T*>(smem + stage * kTileBytes);
  }
  static __device__ T* v_tile(std::uint8_t* smem, int stage) {
    return reinterpret_cast<T*>(smem + (kStages + stage) * kTileBytes);
  }
  static __device__ float* q(std::uint8_t* smem) { return reinterpret_cast<float*>(smem + kTilesBytes); }
};

// What one CTA works on.
struct SplitWork {
  int b, kv_head, row0, rows;          // sequence, kv head, the chunk's first group row and row count
  int key_begin, key_end;              // the split's keys, cut at the sequence's length
  std::int64_t first_row;              // the chunk's first row in [B, Hq, Sq] order
};

// Issues the cp.async copies of tile `tile` (keys key_begin + 32 tile ...) of K and V into
// `stage`; keys at or past key_end are zero-filled and read nothing.
template <typename T, int kHeadDim>
__device__ __forceinline__ void copy_tile_async(std::uint8_t* smem, int stage, int tile, const SplitWork& work,
                                                const std::int32_t* table_row, int block_shift,
                                                const DecodeArgs<T>& args) {
  using Smem = SplitKvSmem<T, kHeadDim>;
  constexpr int kChunksPerRow = kHeadDim / kDecodeChunkElements;
  constexpr int kChunksPerTile = kTileKeys * kChunksPerRow;
  const int key0 = work.key_begin + tile * kTileKeys;
  for (int i = static_cast<int>(threadIdx.x); i < 2 * kChunksPerTile; i += static_cast<int>(blockDim.x)) {
    const bool is_v = i >= kChunksPerTile;
    const int chunk = is_v ? i - kChunksPerTile : i;
    const int key_row = chunk / kChunksPerRow;
    const int column = chunk % kChunksPerRow * kDecodeChunkElements;
    const int key = key0 + key_row;
    const bool valid = key < work.key_end;
    // A zero-filled copy still needs a valid address: the pool's first row.
    const T* pool = is_v ? args.v_cache : args.k_cache;
    const T* source = valid ? page_row(pool, table_row[key >> block_shift], work.kv_head,
                                       key & (args.block_size - 1), args) + column
                            : pool;
    T* tile_base = is_v ? Smem::v_tile(smem, stage) : Smem::k_tile(smem, stage);
    sm80::cp_async_16(smem_u32(tile_base + key_row * Smem::kRowElements + column), source, valid);
  }
}

template <typename T, int kHeadDim>
__global__ void __launch_bounds__(kMaxWarps * core::kWarpSize)
    split_kv_kernel(DecodeArgs<T> args, DecodeSplitPlan plan, DecodeSplitWorkspace workspace) {
  using Smem = SplitKvSmem<T, kHeadDim>;
  constexpr int kChunksPerRow = kHeadDim / kDecodeChunkElements;
  constexpr int kColumnsPerLane = kHeadDim / core::kWarpSize;  // of O and V: 4 (D = 128) or 2
  extern __shared__ __align__(16) std::uint8_t smem[];
  // In the engine's decode step both kernels launch as programmatic dependents
  // (kc/core/dependent_launch.hpp): nothing before the wait; the next kernel may start its
  // blocks as soon as these have.
  core::let_dependent_grids_start();
  core::wait_for_previous_grids();

  const int warps = static_cast<int>(blockDim.x) / core::kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / core::kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % core::kWarpSize;
  const int group_rows = args.group_rows();
  const int split = static_cast<int>(blockIdx.x);

  SplitWork work;
  work.b = static_cast<int>(blockIdx.z);
  work.kv_head = static_cast<int>(blockIdx.y) / plan.row_chunks;
  work.row0 = static_cast<int>(blockIdx.y) % plan.row_chunks * kDecodeMaxRowsPerCta;
  work.rows = min(kDecodeMaxRowsPerCta, group_rows - work.row0);
  // The group's rows are consecutive in [B, Hq, Sq]: query heads kv_head x group ... on, Sq each.
  work.first_row = (static_cast<std::int64_t>(work.b) * args.kv_heads + work.kv_head) * group_rows + work.row0;
  const int length = args.seq_lens[work.b];
  work.key_begin = split * plan.keys_per_split;
  work.key_end = min(length, work.key_begin + plan.keys_per_split);
  const bool direct = !plan.combines();  // one split: O and LSE written here, no combine

  // This warp's rows (chunk rows warp, warp + warps, ...) and the keys each sees in this split.
  int row_end[kMaxRowsPerWarp];
  int my_rows = 0;
#pragma unroll
  for (int i = 0; i < kMaxRowsPerWarp; ++i) {
    const int r = warp + i * warps;
    row_end[i] = work.key_begin;
    if (r < work.rows) {
      my_rows = i + 1;
      const int token = (work.row0 + r) % args.q_len;
      row_end[i] = max(work.key_begin, min(work.key_end, decode_visible_keys(length, args.q_len, token)));
    }
  }

  if (work.key_begin >= length) {
    // The split starts past the sequence (or the sequence is empty). With a combine, the combine
    // never reads this split; alone, the CTA owns its rows' output: O = 0, LSE = -inf.
    if (direct) {
      const float zeros[kColumnsPerLane] = {};
      for (int i = 0; i < my_rows; ++i) {
        const std::int64_t row = work.first_row + warp + i * warps;
        core::store_floats<T, kColumnsPerLane>(args.o + row * kHeadDim + lane * kColumnsPerLane, zeros);
        if (lane == 0) args.lse[row] = -CUDART_INF_F;
      }
    }
    return;  // the whole CTA: no barrier is left behind
  }

  const std::int32_t* table_row = args.block_table + static_cast<std::int64_t>(work.b) * args.max_blocks;
  const int block_shift = __ffs(args.block_size) - 1;  // block_size is 16, 32 or 64
  const int tiles = ceil_div(work.key_end - work.key_begin, kTileKeys);
  copy_tile_async<T, kHeadDim>(smem, 0, 0, work, table_row, block_shift, args);
  sm80::cp_async_commit_group();

  // Q of the chunk's rows, FP32, pre-multiplied by scale . log2 e (while tile 0 travels).
  float* q_smem = Smem::q(smem);
  const float q_scale = args.scale * kLog2e;
  for (int chunk = static_cast<int>(threadIdx.x); chunk < work.rows * kChunksPerRow;
       chunk += static_cast<int>(blockDim.x)) {
    float v[kDecodeChunkElements];
    core::load_floats<T, kDecodeChunkElements>(args.q + work.first_row * kHeadDim + chunk * kDecodeChunkElements, v);
    auto* destination = reinterpret_cast<float4*>(q_smem + chunk * kDecodeChunkElements);
    destination[0] = make_float4(v[0] * q_scale, v[1] * q_scale, v[2] * q_scale, v[3] * q_scale);
    destination[1] = make_float4(v[4] * q_scale, v[5] * q_scale, v[6] * q_scale, v[7] * q_scale);
  }

  RowState state[kMaxRowsPerWarp];
  float acc[kMaxRowsPerWarp][kColumnsPerLane] = {};

  for (int tile = 0; tile < tiles; ++tile) {
    const int stage = tile % kStages;
    if (tile + 1 < tiles) {
      copy_tile_async<T, kHeadDim>(smem, (tile + 1) % kStages, tile + 1, work, table_row, block_shift, args);
      sm80::cp_async_commit_group();
      sm80::cp_async_wait_group<1>();  // tile t has landed; t + 1 may still be in flight
    } else {
      sm80::cp_async_wait_group<0>();
    }
    __syncthreads();  // every thread's copies of tile t (and, the first time, Q) are visible

    const int key0 = work.key_begin + tile * kTileKeys;
    const T* k_row = Smem::k_tile(smem, stage) + lane * Smem::kRowElements;

    // Scores of key key0 + lane for each of the warp's rows.
    float score[kMaxRowsPerWarp];
#pragma unroll
    for (int i = 0; i < kMaxRowsPerWarp; ++i) score[i] = 0.f;
#pragma unroll
    for (int chunk = 0; chunk < kChunksPerRow; ++chunk) {
      float k[kDecodeChunkElements];
      core::load_floats<T, kDecodeChunkElements>(k_row + chunk * kDecodeChunkElements, k);
#pragma unroll
      for (int i = 0; i < kMaxRowsPerWarp; ++i) {
        if (i >= my_rows) break;
        const float4* q_row = reinterpret_cast<const float4*>(
            q_smem + (warp + i * warps) * kHeadDim + chunk * kDecodeChunkElements);
        const float4 q0 = q_row[0];
        const float4 q1 = q_row[1];
        score[i] = fmaf(q0.x, k[0], score[i]);
        score[i] = fmaf(q0.y, k[1], score[i]);
        score[i] = fmaf(q0.z, k[2], score[i]);
        score[i] = fmaf(q0.w, k[3], score[i]);
        score[i] = fmaf(q1.x, k[4], score[i]);
        score[i] = fmaf(q1.y, k[5], score[i]);
        score[i] = fmaf(q1.z, k[6], score[i]);
        score[i] = fmaf(q1.w, k[7], score[i]);
      }
    }

    // Online softmax per row over the tile's 32 scores; p[i] is lane's probability for row i.
    float p[kMaxRowsPerWarp];
#pragma unroll
    for (int i = 0; i < kMaxRowsPerWarp; ++i) {
      p[i] = 0.f;
      if (i >= my_rows || key0 >= row_end[i]) continue;  // warp-uniform: the row sees none of the tile
      const float s = key0 + lane < row_end[i] ? score[i] : -CUDART_INF_F;
      const float new_max = core::max_propagate_nan(state[i].max, core::warp_reduce_max(s));
      const float base = exponent_base(new_max);
      p[i] = exp2_flush_to_zero(s - base);
      const float rescale = exp2_flush_to_zero(state[i].max - base);
      state[i].sum = state[i].sum * rescale + core::warp_reduce_sum(p[i]);
      state[i].max = new_max;
#pragma unroll
      for (int c = 0; c < kColumnsPerLane; ++c) acc[i][c] *= rescale;
    }

    // O += P.V: each V row read once for all of the warp's rows.
    const T* v_tile = Smem::v_tile(smem, stage);
    const int tile_keys = min(kTileKeys, work.key_end - key0);
    for (int j = 0; j < tile_keys; ++j) {
      float v[kColumnsPerLane];
      core::load_floats<T, kColumnsPerLane>(v_tile + j * Smem::kRowElements + lane * kColumnsPerLane, v);
#pragma unroll
      for (int i = 0; i < kMaxRowsPerWarp; ++i) {
        if (i >= my_rows) break;
        const float p_j = __shfl_sync(core::kFullWarpMask, p[i], j);
#pragma unroll
        for (int c = 0; c < kColumnsPerLane; ++c) acc[i][c] = fmaf(p_j, v[c], acc[i][c]);
      }
    }
    __syncthreads();  // every warp is done with this stage before tile t + 2 is copied into it
  }

  // Each row: O and LSE (one split), or the split's normalized partial O and its LSE.
#pragma unroll
  for (int i = 0; i < kMaxRowsPerWarp; ++i) {
    if (i >= my_rows) break;
    const std::int64_t row = work.first_row + warp + i * warps;
    const RowResult result = finish_row(state[i].max, state[i].sum, row_end[i] - work.key_begin);
    float o[kColumnsPerLane];
#pragma unroll
    for (int c = 0; c < kColumnsPerLane; ++c) o[c] = acc[i][c] * result.o_scale;
    if (direct) {
      core::store_floats<T, kColumnsPerLane>(args.o + row * kHeadDim + lane * kColumnsPerLane, o);
      if (lane == 0) args.lse[row] = result.lse;
    } else {
      const std::int64_t slot = row * plan.splits + split;
      core::store_floats<float, kColumnsPerLane>(workspace.partial_o + slot * kHeadDim + lane * kColumnsPerLane, o);
      if (lane == 0) workspace.partial_lse[slot] = result.lse;
    }
  }
}

template <typename T, int kHeadDim>
void launch(const DecodeArgs<T>& args, const DecodeSplitPlan& plan, const DecodeSplitWorkspace& workspace,
            cudaStream_t stream) {
  using Smem = SplitKvSmem<T, kHeadDim>;
  const int rows = min(args.group_rows(), kDecodeMaxRowsPerCta);
  const int warps = min(rows, kMaxWarps);
  const int smem_bytes = Smem::bytes(rows);
  const auto kernel = split_kv_kernel<T, kHeadDim>;
  if (smem_bytes > kDefaultSmemBytes) allow_dynamic_smem(kernel, smem_bytes);  // D = 128 with over 28 rows
  const dim3 grid(static_cast<unsigned>(plan.splits), static_cast<unsigned>(args.kv_heads * plan.row_chunks),
                  static_cast<unsigned>(args.batch));
  core::launch_dependent(kernel, grid, dim3(warps * core::kWarpSize), smem_bytes, stream, args, plan, workspace);
  launch_decode_combine<T, kHeadDim>(args, plan, workspace, stream);  // none with one split
}

}  // namespace

template <typename T>
void attention_decode_02_split_kv(const DecodeArgs<T>& args, const DecodeSplitPlan& plan,
                                  const DecodeSplitWorkspace& workspace, cudaStream_t stream) {
  require_decode_args(args, "decode rung 02");
  require_decode_split_plan(args, plan, workspace, "decode rung 02");
  if (args.head_dim == 64)
    launch<T, 64>(args, plan, workspace, stream);
  else
    launch<T, 128>(args, plan, workspace, stream);
}

template void attention_decode_02_split_kv<__nv_bfloat16>(const DecodeArgs<__nv_bfloat16>&, const DecodeSplitPlan&,
                                                          const DecodeSplitWorkspace&, cudaStream_t);
template void attention_decode_02_split_kv<__half>(const DecodeArgs<__half>&, const DecodeSplitPlan&,
                                                   const DecodeSplitWorkspace&, cudaStream_t);

}  // namespace kc::stage3
