// Rung 09 — a cp.async multi-stage pipeline (the kernel; 09_cp_async.cu runs it).
//
// Idea: in rung 08 every k tile goes load -> wait -> multiply -> wait, and while a block waits
// for global memory its FMA units only have the other resident block's work. Here the loads of
// the next STAGES - 1 k tiles are already in flight while the current one is multiplied. They are
// issued with cp.async (SASS: LDGSTS), which copies global memory straight into shared memory
// without passing through registers: the thread issues the copy and moves on, no registers are
// tied up holding loaded values, and cp.async.wait_group later says when a tile has landed.
//   * B: one 16-byte cp.async per float4 (LDGSTS.E.BYPASS.128: through the L2 only).
//   * A: must land transposed, which a 16-byte copy cannot do, so each element is its own 4-byte
//     cp.async to its transposed place (a_scatter_slot: 8 lanes take 8 consecutive k of one row,
//     one 32-byte sector; the padded row length 4 + bm keeps the 32 stores of a warp in 32 banks).
//   * Outside A or B, the copy's source size is 0 (or less than 16 bytes): cp.async fills the rest
//     of the destination with zeros. So partial tiles, K = 1 and N = 1 need no special path; only
//     rows of B that are not 16-byte aligned (N not a multiple of 4) switch B to 4-byte copies.
//   * Interior blocks, whose every tile lies inside A and B (most blocks of a large problem), copy
//     through a second instantiation of the loop without any of those checks: each thread walks
//     one pointer into A and one into B, and every copy address is that pointer plus a
//     compile-time offset. The checks cost more issue slots than the copies themselves.
// One __syncthreads per k tile, placed before the tile's last k rather than at its top, and the
// thread's A and B values loaded one k ahead, across tile boundaries too: at that barrier tile
// kt + 1 has landed for everyone and everyone has already loaded its values for the last k of
// tile kt, so tile kt's stage takes the copies of tile kt + STAGES, and the LDS.128 of tile
// kt + 1's first k run while the FMAs of tile kt's last k do. With the barrier at the top of
// the tile (as this rung first had it), every tile began with a barrier and then LDS.128 whose
// latency nothing in the warp covered. Moving the barrier raised ncu's issue-slot utilization
// and rung 10's share of cuBLAS at 4096^3 (the figures, with their commit and date:
// docs/notes/2026-12-01-stage1-history.md).
//
// What changed from rung 08: cp.async copies into STAGES shared-memory buffers (3 here, dynamic
// shared memory) instead of a single buffer filled through registers; and blocks visit the tiles
// of C in a grouped raster (grouped_tile: 8 tile rows at a time) so that the A rows and B columns
// of the blocks resident together are reused from the L2.
//
// Expected limiter: instruction issue. Per k tile of 512 FFMA a thread also issues 32 LDS.128
// and, in the sm_90a SASS, 46 copy, wait, barrier, address and loop instructions in the unchecked
// loop of interior blocks (167 in the checked loop of edge blocks; bk = 16 halves that share:
// rung 10 tries it); then how well the compiler hides LDS latency inside a k tile. On shapes with
// few 128 x 128 tiles (1024^3, 128 x 8192 x 8192: 64 blocks for 132 SMs), idle SMs.
// The target is cuBLAS's pedantic FP32 SGEMM, timed in the same kc-bench run.
//
// SASS to look for (the kernel is instantiated in 10_autotuned.cu; entry 0 is this rung):
// LDGSTS.E.BYPASS.128.ZFILL (B), LDGSTS.E with a zero-fill predicate (A), LDGDEPBAR (commit),
// DEPBAR.LE SB0, 0x1 (wait), then 32 LDS.128 and 512 FFMA per k tile, no LDL/STL:
//   cuobjdump --dump-sass <build>/stage1-sgemm/CMakeFiles/kc_stage1.dir/kernels/10_autotuned.cu.o
//   (then grep -E 'Function|LDGSTS|DEPBAR|LDL|STL')
//
// Run just this rung:  kc-bench --filter stage1/sgemm/09_cp_async
#pragma once

#include "kc/stage1/sgemm.hpp"
#include "kc/stage1/sgemm_tiling.hpp"
#include "sgemm_common.cuh"

namespace kc::stage1 {

// cp.async: copy `src_bytes` (0 or 4) bytes from global to shared memory and zero-fill the rest of
// the 4-byte destination. `.ca` keeps the line in L1: the 8 floats of a sector are fetched by 8
// consecutive lanes.
__device__ __forceinline__ void cp_async_4(float* smem, const float* global, int src_bytes) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(address), "l"(global),
               "r"(src_bytes)
               : "memory");
}

// The same for 16 bytes (src_bytes 0..16, `global` 16-byte aligned); `.cg` bypasses L1, since
// a float4 of B is read once per block.
__device__ __forceinline__ void cp_async_16(float* smem, const float* global, int src_bytes) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(global),
               "r"(src_bytes)
               : "memory");
}

// Closes the group of copies issued since the previous commit.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Waits until at most `kPending` of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// What a launch of the pipelined kernel needs besides the matrices.
struct PipelineParams {
  int tiles_m = 0, tiles_n = 0;  // C cut into tiles of bm x bn
  int raster_group = 1;          // see grouped_tile
  int k_per_split = 0;           // K range of one blockIdx.z (split-K, rung 10); >= K: no split
  bool b_rows_aligned = false;   // rows of B start on 16-byte boundaries: 16-byte copies
  bool c_rows_aligned = false;   // rows of C start on 16-byte boundaries: float4 stores
  bool accumulate = false;       // add alpha * A.B into C (already beta * C) atomically: split-K
                                 // (rung 10) and stream-K blocks (rung 11)
};

// Where a block works: its tile of C and its K range.
struct BlockWork {
  int row0 = 0, col0 = 0;     // top-left element of the block's tile of C
  int k_begin = 0, k_end = 0;
  int k_tiles = 0;            // >= 1: the host never plans an empty split
};

// The main loop of one block. kFullTiles: every tile this block copies lies wholly inside A and
// B (the block's rows and columns are inside the matrices, B's rows are 16-byte aligned and the K
// range is whole k tiles), so the copies need no bounds checks and each thread just walks two
// pointers. Most blocks of a large problem take that path; the blocks on the right and bottom
// edges, and any K that is not a multiple of the k tile, take the checked one.
template <typename Tiles, bool kFullTiles>
__device__ __forceinline__ void run_pipeline(const SgemmArgs& args, const PipelineParams& params,
                                             const BlockWork& work, float* smem_a, float* smem_b) {
  constexpr WarpTileConfig kConfig = Tiles::config();
  constexpr int kStages = kConfig.stages;
  constexpr int kThreads = kConfig.threads();
  constexpr int kTileRows = kConfig.bm, kTileCols = kConfig.bn, kTileK = kConfig.bk;
  constexpr int kAStride = kConfig.a_stride();
  constexpr int kAStageFloats = kTileK * kAStride;
  constexpr int kBStageFloats = kTileK * kTileCols;
  constexpr int kAPasses = kTileRows * kTileK / kThreads;
  constexpr int kBPasses = kTileK * kTileCols / 4 / kThreads;
  constexpr int kBRowsPerPass = kThreads / (kTileCols / 4);
  const int tid = static_cast<int>(threadIdx.x);

  // What this thread copies in every k tile: the A elements of slots tid, tid + kThreads, ...
  // (a_scatter_slot) and the B float4 of the same slots (vec4_slot). Their rows and columns
  // differ from the first slot's by compile-time constants (a_scatter_slot_of_pass,
  // vec4_slot_of_pass), so only the first slot's position, one pointer into A and one into B
  // are kept in registers.
  const TileElement a_first = a_scatter_slot(tid, kTileRows);
  const TileElement b_first = vec4_slot(tid, kTileCols);
  float* const a_thread_smem = smem_a + a_first.col * kAStride + a_first.row;
  float* const b_thread_smem = smem_b + b_first.row * kTileCols + b_first.col;

  // Checked path: clamping keeps the pointers inside the matrices; the guards keep a thread from
  // reading through a clamped one, and a source size of 0 makes cp.async write zeros instead.
  const int a_rows_left = args.m - (work.row0 + a_first.row);  // row offsets below this are inside A
  const int b_cols_inside = max(0, min(4, args.n - (work.col0 + b_first.col)));  // of the thread's float4
  const float* const a_thread = args.a + min(work.row0 + a_first.row, args.m - 1) * args.lda;
  const float* const b_thread = args.b + min(work.col0 + b_first.col, args.n - 1);

  // Full-tile path: the first element this thread copies in k tile 0, and how far its later
  // passes lie below it.
  const float* const a_full = args.a + (work.row0 + a_first.row) * args.lda + work.k_begin + a_first.col;
  const float* const b_full = args.b + (work.k_begin + b_first.row) * args.ldb + work.col0 + b_first.col;
  const int a_pass_stride = (kThreads / 8) * args.lda;     // a_scatter_slot_of_pass: rows apart
  const int b_pass_stride = kBRowsPerPass * args.ldb;

  // Issues the copies of k tile `k_tile` (counted from k_begin) into stage `stage`.
  const auto copy_tile = [&](int stage, int k_tile) {
    float* const a_dst = a_thread_smem + stage * kAStageFloats;
    float* const b_dst = b_thread_smem + stage * kBStageFloats;
    if constexpr (kFullTiles) {
      const float* const a_src = a_full + k_tile * kTileK;
      const float* const b_src = b_full + k_tile * kTileK * args.ldb;
#pragma unroll
      for (int pass = 0; pass < kAPasses; ++pass) {
        constexpr int kPassesPerSector = 8 * kTileRows / kThreads;
        const TileElement offset = a_scatter_slot_of_pass(TileElement{0, 0}, pass, kTileRows, kThreads);
        cp_async_4(a_dst + offset.col * kAStride + offset.row,
                   a_src + (pass % kPassesPerSector) * a_pass_stride + offset.col, 4);
      }
#pragma unroll
      for (int pass = 0; pass < kBPasses; ++pass)
        cp_async_16(b_dst + pass * kBRowsPerPass * kTileCols, b_src + pass * b_pass_stride, 16);
    } else {
      const int k_tile0 = work.k_begin + k_tile * kTileK;
#pragma unroll
      for (int pass = 0; pass < kAPasses; ++pass) {
        const TileElement offset = a_scatter_slot_of_pass(TileElement{0, 0}, pass, kTileRows, kThreads);
        const int k = k_tile0 + a_first.col + offset.col;
        const bool inside = offset.row < a_rows_left && k < work.k_end;
        cp_async_4(a_dst + offset.col * kAStride + offset.row,
                   inside ? a_thread + (offset.row * args.lda + k) : args.a, inside ? 4 : 0);
      }
#pragma unroll
      for (int pass = 0; pass < kBPasses; ++pass) {
        const int row = vec4_slot_of_pass(TileElement{0, 0}, pass, kTileCols, kThreads).row;
        const int k = k_tile0 + b_first.row + row;
        float* const dst = b_dst + row * kTileCols;
        if (params.b_rows_aligned) {
          const int inside = k < work.k_end ? b_cols_inside : 0;  // floats to copy; the rest is zero-filled
          cp_async_16(dst, inside > 0 ? b_thread + k * args.ldb : args.b, 4 * inside);
        } else {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const bool inside = k < work.k_end && j < b_cols_inside;
            cp_async_4(dst + j, inside ? b_thread + (k * args.ldb + j) : args.b, inside ? 4 : 0);
          }
        }
      }
    }
  };

  // Prologue: tiles 0 .. kStages - 1 in flight, every stage filling. A group is committed even
  // when it is empty, so that group g always holds tile g and wait_group counts stay in step
  // with tiles.
#pragma unroll
  for (int s = 0; s < kStages; ++s) {
    if (s < work.k_tiles) copy_tile(s, s);
    cp_async_commit();
  }
  cp_async_wait<kStages - 1>();  // this thread's copies of tile 0 have landed
  __syncthreads();               // everyone's have

  // The thread's values of A and B for one k, in two sets: while the FMAs of k use one, the
  // LDS.128 of k + 1 fill the other.
  constexpr int TM = kConfig.tm, TN = kConfig.tn;
  static_assert(kTileK % 2 == 0, "the fragment sets alternate per k: k = 0 of every tile must use set 0");
  const FragmentPlacement place = warptile_placement(kConfig, tid);
  float frag_a[2][TM];
  float frag_b[2][TN];
  load_fragment(smem_a, place.row0, place.row_step, frag_a[0]);
  load_fragment(smem_b, place.col0, place.col_step, frag_b[0]);

  float acc[TM][TN] = {};
  int stage = 0;
  for (int kt = 0; kt < work.k_tiles; ++kt) {
    const int next_stage = stage + 1 == kStages ? 0 : stage + 1;
    const float* const a_stage = smem_a + stage * kAStageFloats;
    const float* const b_stage = smem_b + stage * kBStageFloats;
#pragma unroll
    for (int k = 0; k < kTileK; ++k) {
      if (k + 1 < kTileK) {
        load_fragment(a_stage + (k + 1) * kAStride, place.row0, place.row_step, frag_a[(k + 1) % 2]);
        load_fragment(b_stage + (k + 1) * kTileCols, place.col0, place.col_step, frag_b[(k + 1) % 2]);
      } else {
        // Before the last k: committed so far are tiles 0 .. kt + kStages - 1; all but the newest
        // kStages - 2 done means tile kt + 1 has landed (this thread's copies). The barrier makes
        // it everyone's, and by now every thread has loaded its last values of tile kt (one k
        // ahead), so tile kt's stage can take tile kt + kStages; then the first values of tile
        // kt + 1 are loaded while the FMAs of tile kt's last k run.
        cp_async_wait<kStages - 2>();
        __syncthreads();
        if (kt + kStages < work.k_tiles) copy_tile(stage, kt + kStages);
        cp_async_commit();
        load_fragment(smem_a + next_stage * kAStageFloats, place.row0, place.row_step, frag_a[0]);
        load_fragment(smem_b + next_stage * kBStageFloats, place.col0, place.col_step, frag_b[0]);
      }
      accumulate_outer_product(frag_a[k % 2], frag_b[k % 2], acc);
    }
    stage = next_stage;
  }
  cp_async_wait<0>();  // only empty groups can be left; leave nothing in flight at exit
  store_register_tile(args, work.row0, work.col0, place, acc, params.c_rows_aligned, params.accumulate);
}

// The work of a block that computes tile `tile` (in tiles) of C over k_begin .. k_end - 1.
template <typename Tiles>
__device__ __forceinline__ BlockWork tile_work(TileElement tile, int k_begin, int k_end) {
  constexpr WarpTileConfig kConfig = Tiles::config();
  BlockWork work;
  work.row0 = tile.row * kConfig.bm;
  work.col0 = tile.col * kConfig.bn;
  work.k_begin = k_begin;
  work.k_end = k_end;
  work.k_tiles = ceil_div(k_end - k_begin, kConfig.bk);
  return work;
}

// Runs the pipeline over `work` in this block, through the unchecked copies when every tile it
// copies lies inside A and B. The pipelined kernel calls it once per block; rung 11's stream-K
// blocks once per tile they work on.
template <typename Tiles>
__device__ __forceinline__ void run_block_work(const SgemmArgs& args, const PipelineParams& params,
                                               const BlockWork& work) {
  constexpr WarpTileConfig kConfig = Tiles::config();
  static_assert(is_valid(kConfig), "invalid tile configuration: config_error() in sgemm_tiling.hpp says why");
  static_assert(kConfig.stages >= 2, "a pipeline needs at least two stages");
  extern __shared__ float4 smem_float4[];  // declared as float4: 16-byte aligned for cp.async
  float* const smem_a = reinterpret_cast<float*>(smem_float4);       // kStages transposed A tiles
  float* const smem_b = smem_a + kConfig.stages * kConfig.bk * kConfig.a_stride();  // kStages B tiles
  const bool full_tiles = work.row0 + kConfig.bm <= args.m && work.col0 + kConfig.bn <= args.n &&
                          params.b_rows_aligned && (work.k_end - work.k_begin) % kConfig.bk == 0;
  if (full_tiles)  // the same for every thread of the block: no divergence
    run_pipeline<Tiles, true>(args, params, work, smem_a, smem_b);
  else
    run_pipeline<Tiles, false>(args, params, work, smem_a, smem_b);
}

// `Tiles::config()` is the WarpTileConfig (a type, because C++17 cannot take a struct as a
// template parameter).
template <typename Tiles>
__global__ void __launch_bounds__(Tiles::config().threads(), Tiles::config().min_blocks_per_sm())
    sgemm_pipelined_kernel(SgemmArgs args, PipelineParams params) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Lets a kernel launched after this one as its programmatic dependent (rung 11's stream-K
  // kernel) start once every block of this grid has started; nothing waits on it otherwise.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
  const TileElement tile =
      grouped_tile(static_cast<int>(blockIdx.x), params.tiles_m, params.tiles_n, params.raster_group);
  const int k_begin = static_cast<int>(blockIdx.z) * params.k_per_split;
  run_block_work<Tiles>(args, params, tile_work<Tiles>(tile, k_begin, min(args.k, k_begin + params.k_per_split)));
}

// Split-K (rung 10) first sets C to beta * C (0 when beta == 0, without reading C); the blocks of
// all splits then add alpha * (their part of A.B) into it. Defined in 09_cp_async.cu.
void scale_c_by_beta(const SgemmArgs& args, cudaStream_t stream);

// The launch parameters of a pipelined kernel for `Tiles` over the whole of K (no split), in
// grouped-raster order of `raster_group` tile rows.
template <typename Tiles>
PipelineParams pipeline_params(const SgemmArgs& args, int raster_group) {
  constexpr WarpTileConfig kConfig = Tiles::config();
  PipelineParams params;
  params.tiles_m = ceil_div(args.m, kConfig.bm);
  params.tiles_n = ceil_div(args.n, kConfig.bn);
  params.raster_group = raster_group;
  params.k_per_split = args.k;
  params.b_rows_aligned = rows_are_float4_aligned(args.b, args.ldb);
  params.c_rows_aligned = rows_are_float4_aligned(args.c, args.ldc);
  return params;
}

// More than 48 KiB of dynamic shared memory must be opted into, once per kernel; callers keep the
// result in a static local, which makes it once per process (the attribute stays set).
template <typename Kernel>
bool allow_dynamic_smem(Kernel* kernel, int bytes) {
  KC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  return true;
}

// Launches the pipelined kernel for `Tiles` with `requested_splits` split-K blocks per tile
// (1: no split; see plan_split_k) and blocks in grouped-raster order of `raster_group` rows.
template <typename Tiles>
void launch_pipelined(const SgemmArgs& args, int requested_splits, int raster_group, cudaStream_t stream) {
  constexpr WarpTileConfig kConfig = Tiles::config();
  constexpr int kSmemBytes = kConfig.smem_bytes();
  static const bool smem_allowed = allow_dynamic_smem(sgemm_pipelined_kernel<Tiles>, kSmemBytes);
  (void)smem_allowed;

  const SplitK split = plan_split_k(args.k, kConfig.bk, requested_splits);
  PipelineParams params = pipeline_params<Tiles>(args, raster_group);
  params.k_per_split = split.k_per_split;
  params.accumulate = split.splits > 1;
  if (params.accumulate) scale_c_by_beta(args, stream);
  const dim3 grid(static_cast<unsigned>(params.tiles_m) * static_cast<unsigned>(params.tiles_n), 1,
                  static_cast<unsigned>(split.splits));
  sgemm_pipelined_kernel<Tiles><<<grid, kConfig.threads(), kSmemBytes, stream>>>(args, params);
  KC_CHECK_LAUNCH();
}

}  // namespace kc::stage1
