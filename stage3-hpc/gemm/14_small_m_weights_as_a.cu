// Rung 14 — small M (decode), the operands swapped: the weights are mma.sync's A, the tokens its B,
// and the split-K partials are added by the last CTA of each column block, in the same launch.
//
// Idea: C = A.B^T with M <= 64 rows (the tokens of a decode step) is a stream of the N x K weight B
// (rung 11's header says why). Rung 11 gives mma.sync m16n8k16 the tokens as its A operand: 16
// rows, of which M = 1 fills one, and it builds every A fragment in registers from LDS.128 words
// (three register moves per MMA at M = 64). Write the product the other way round instead,
// C^T = B.A^T: 16 rows of B (16 output columns) are the MMA's A operand, 8 rows of A (8 tokens) its
// B operand, and the MMA's 16 x 8 result is a piece of C^T (row = output column n, column = token
// m). B is N x K with K contiguous, exactly the row-major A that ldmatrix.x4 loads without a
// transpose; A is M x K with K contiguous, exactly the "col" B operand. So both come from swizzled
// shared memory by ldmatrix.x4, no register moves, and M = 1..64 is 1..8 token tiles of 8 (one
// instance of the kernel per count), not 1..4 tiles of 16: M <= 8 costs half of rung 11's MMAs.
// The same swap made rung 05 of the GGUF GEMV (quant/05_gemv_gguf_weights_as_a.cu).
//
// The split and the reduction: a CTA owns 128 output columns (128 rows of B) and a slice of K; the
// K tiles of each column block are split over as many CTAs as give one CTA per SM (rung 11's rule)
// up to 16 tokens, and two CTAs per SM from 17 where each split keeps 16 K tiles or more
// (plan_small_m_weights_as_a in gemm_layout.hpp, CPU-tested; why two: below). With one split a CTA writes C itself.
// With more, each CTA writes its FP32 partial tile (128 columns x 8 T tokens, T token tiles) in
// fragment order to a slot of its own in the workspace, makes it visible (__threadfence), and
// counts itself in its column block's counter (atomicAdd); the CTA that arrives last adds the
// slots in split order — its own from registers, the others from L2 — applies alpha and beta,
// writes C, and sets the counter back to zero for the next launch. The order of the additions is
// fixed, so the result has the same bits whichever CTA finishes last. No second kernel, no
// atomics on the data, no CTA waits for another.
//
// What changed from rung 11: the MMA operand roles (weights as A, 16 columns a product; tokens as
// B in n8 tiles, no 16-row padding); fragments by ldmatrix.x4 from the 128-byte swizzle
// (small_m_weight_lane_offset / small_m_token_lane_offset, gemm_layout.hpp) instead of LDS.128 in a
// permuted k order; the reduction by the last CTA instead of a second kernel. The column block
// (128), the K tile (64), the 4-stage cp.async ring and the split rule are rung 11's. From rung 12:
// the tensor cores instead of the CUDA cores (rung 12 does M FMAs per element of B, which its
// measured table shows falling behind as M grows), and M up to 64.
//
// Analysis (not measurements) for the documented decode shapes, against the H200's ~4.2 TB/s
// device-to-device copy bandwidth (the op's memory roof). FLOPs 2MNK, bytes 2NK (B) + 2MK (A) +
// 2MN (C written; read too when beta != 0):
//   shape (M x N x K)   bytes of B   roof time   T   splits (132 SMs)   partials written
//   1 x 4096 x 4096      33.6 MB      8.0 us      1   4 (128 CTAs)       0.5 MiB
//   16 x 4096 x 4096     33.6 MB      8.1 us      2   4                  1 MiB
//   64 x 4096 x 4096     33.6 MB      8.2 us      8   4                  4 MiB
//   64 x 4096 x 14336    117.4 MB     28.5 us     8   8 (256 CTAs)       8 MiB
//   1 x 28672 x 4096     234.9 MB     56 us       1   1 (224 CTAs)       none
// The partials (n_blocks x splits x 128 x 8T floats) are written once and three quarters of them
// read back once by the last CTAs, from L2. A is read from L2 once per column block: M x K x 2 x
// n_blocks bytes, 16.8 MB at 64 x 4096 x 4096 — half of B's bytes, but L2 traffic, not DRAM.
// Little's law: 4.2 TB/s x ~0.7 us of loaded DRAM latency (an assumed figure, rung 11's) is ~3 MB
// in flight over the GPU, ~22 KB per SM. A CTA keeps kStages - 1 = 3 tiles of B (16 KiB each) in
// flight while it multiplies the fourth: 48 KiB, so one CTA per SM covers it about twice.
// Tensor and shared-memory work per warp and 64-deep K tile: 8T HMMA.16816 and 8 + 2T LDSM.x4
// (8 of the weights: 2 m16 tiles x 4 k16 slices; 2 per token tile: 2 slices each), no moves; per
// CTA and 16 KiB of B, 32T HMMA: 256 at M = 64 (rung 11's count there, without its 768 moves) and
// 32 at M <= 8 (rung 11: 64). At the roof an SM gets 16 KiB of B about every 0.5 us (~900 clocks).
//
// Two CTAs an SM from 17 tokens: a CTA's four warps are one per scheduler, and at 3 to 8 token tiles
// each warp's K tile is a long chain of ldmatrix and dependent mma.sync; profiled with one CTA an
// SM at 64 tokens (ncu), the schedulers found no warp ready on most cycles. Registers (up to 222
// a thread) and shared memory (4 stages of 16 + T KiB) leave room for a second CTA, which gives
// each scheduler a second warp; the price is twice the splits and partial tiles, and splits half as
// long, which is why the plan keeps one CTA an SM where a split would drop below 16 K tiles.
//
// Expected limiter: DRAM bandwidth (B) at every M <= 64. Fixed costs around it: the ramp (the
// first three tiles of a CTA in flight before its first MMA), the last CTA's reduction of a
// column block (at T = 8, 3 x 32 KiB of partials from L2 and the stores of C), and at M = 64 the
// MMA issue rate and A's L2 reads, the next limiters to watch.
//
// SASS to look for (cuobjdump -sass -arch sm_90a <build>/stage3-hpc/CMakeFiles/kc_stage3.dir/
// gemm/14_small_m_weights_as_a.cu.o): in small_m_weights_as_a_kernel<T, false> (T = 1..8), the
// K-tile loop with 8 LDGSTS.E.BYPASS.128 (B) and A's copies, LDGDEPBAR, DEPBAR.LE, one BAR.SYNC,
// 8 + 2T LDSM.16.M88.4 and 8T HMMA.16816.F32.BF16, no IMAD.MOV feeding the HMMAs; after it
// STG.E.128 (the partial tile), MEMBAR, one ATOMG.E.ADD (the arrival), LDG.E.128 of the other
// splits' slots and STG.E.U16 (C); no LDL/STL. The <T, true> instances are the negative control.
//
// Refuses: M > 64 (the tile rungs' shapes), and like every rung K % 8 != 0.
//
// Run just this rung:
//   kc-bench --filter stage3/hgemm/14_small_m_weights_as_a --shapes 1x4096x4096,16x4096x4096,64x4096x4096,64x4096x14336
#include "arch/sm80/cp_async.cuh"
#include "arch/sm80/mma.cuh"
#include "arch/util.hpp"
#include "gemm_layout.hpp"
#include "hgemm.hpp"
#include "kc/common/error.hpp"
#include "split_k_last_cta.cuh"

namespace kc::stage3 {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kColumnsPerWarp = kSmallMBlockN / kWarps;  // 32 output columns (rows of B) per warp
constexpr int kWeightTiles = kColumnsPerWarp / 16;       // 2 m16 tiles of weights per warp
constexpr int kSlices = kSmallMBlockK / 16;              // 4 k16 slices per 64-deep K tile
constexpr int kStages = 4;
constexpr int kRowBytes = kSmallMBlockK * 2;              // one 64-deep row of a tile: 128 bytes
constexpr int kChunksPerRow = kRowBytes / 16;             // 8 chunks of 16 bytes
constexpr int kTileBytesB = kSmallMBlockN * kRowBytes;    // 16 KiB
constexpr int kChunksPerThreadB = kSmallMBlockN * kChunksPerRow / kThreads;  // 8
constexpr int kWeightTileBytes = 16 * kRowBytes;          // the next m16 tile of weights: 2048 bytes on
constexpr int kTokenTileBytes = kSmallMTokensPerTile * kRowBytes;  // the next token tile: 1024 bytes on
constexpr std::uint32_t kSliceXor = 2 * kSwizzleChunkBytes;        // k16 slice s of the weights: XOR 32 s
constexpr std::uint32_t kSlicePairXor = 4 * kSwizzleChunkBytes;    // slices 2, 3 of the tokens: XOR 64
static_assert(kWeightTiles * 16 * kWarps == kSmallMBlockN, "the warps split the column block evenly");
static_assert(kChunksPerThreadB * kThreads == kSmallMBlockN * kChunksPerRow, "every thread copies as many B chunks");
static_assert(kRowBytes == kSwizzleRowBytes, "a tile row is one 128-byte swizzled row");
static_assert(kSlices == 4, "the tokens are loaded two k16 slices per ldmatrix.x4, in two pairs");

// Shared memory of one stage: B's tile (128 rows) first, then A's (8T rows), both 1024-byte
// aligned (kTileBytesB and every stage size are multiples of 1024).
template <int kTokenTiles>
struct StageLayout {
  static constexpr int kRowsA = kSmallMTokensPerTile * kTokenTiles;
  static constexpr int kTileBytesA = kRowsA * kRowBytes;
  static constexpr int kStageBytes = kTileBytesB + kTileBytesA;
  static constexpr int kSmemBytes = kStages * kStageBytes + kSmemAlignment;  // + the alignment slack
  static constexpr int kChunksA = kRowsA * kChunksPerRow;
  static constexpr int kPassesA = (kChunksA + kThreads - 1) / kThreads;
  static_assert(kStageBytes % kSmemAlignment == 0, "every stage starts 1024-byte aligned");
};

// acc[mt][nt]: the 16 x 8 product of weight tile mt (output columns) and token tile nt; lane
// (g, t) holds C^T rows g, g + 8 (columns n) x columns 2t, 2t + 1 (tokens m):
// {C[2t][g], C[2t + 1][g], C[2t][g + 8], C[2t + 1][g + 8]}, relative to the tiles' origins.
template <int kTokenTiles>
using Accumulators = float[kWeightTiles][kTokenTiles][4];

// Issues the copies of K tile `k_tile` into `stage`: the block's 128 rows of B and the 8T rows of
// A. Chunks past N, M or K are cp.async with src-size 0, which writes zeros: the token rows M..8T
// and a K tail then add nothing (and token columns past M are never stored anyway).
template <int kTokenTiles>
__device__ void copy_k_tile(const HgemmArgs& args, int col0, int k_tile, std::uint32_t stage) {
  using Layout = StageLayout<kTokenTiles>;
  const std::uint32_t tile_b = stage;
  const std::uint32_t tile_a = stage + kTileBytesB;
  const int k0 = k_tile * kSmallMBlockK;
  // Consecutive threads take consecutive chunks of a row: 8 threads read one 128-byte row segment.
#pragma unroll
  for (int pass = 0; pass < kChunksPerThreadB; ++pass) {
    const int chunk = static_cast<int>(threadIdx.x) + pass * kThreads;
    const int row = chunk / kChunksPerRow, column = chunk % kChunksPerRow;
    const int n = col0 + row, k = k0 + column * 8;
    const bool valid = n < args.n && k < args.k;
    const bf16* source = valid ? args.b + static_cast<std::size_t>(n) * args.ldb + k : args.b;
    sm80::cp_async_16(tile_b + swizzle_128b_offset(row, column), source, valid);
  }
#pragma unroll
  for (int pass = 0; pass < Layout::kPassesA; ++pass) {
    const int chunk = static_cast<int>(threadIdx.x) + pass * kThreads;
    if (chunk >= Layout::kChunksA) break;
    const int row = chunk / kChunksPerRow, column = chunk % kChunksPerRow;
    const int k = k0 + column * 8;
    const bool valid = row < args.m && k < args.k;
    const bf16* source = valid ? args.a + static_cast<std::size_t>(row) * args.lda + k : args.a;
    sm80::cp_async_16(tile_a + swizzle_128b_offset(row, column), source, valid);
  }
}

// One warp's MMAs over one 64-deep K tile: its 32 output columns (2 weight tiles) against all 8T
// tokens. `weight_lane` is this lane's ldmatrix address for the warp's first weight tile, slice 0;
// `token_lane` for the first token tile, slices 0 and 1 (gemm_layout.hpp: small_m_*_lane_offset).
template <int kTokenTiles>
__device__ __forceinline__ void mma_k_tile(std::uint32_t weight_lane, std::uint32_t token_lane,
                                           Accumulators<kTokenTiles>& acc) {
#pragma unroll
  for (int pair = 0; pair < kSlices / 2; ++pair) {
    // tokens[nt]: b0, b1 of slice 2 pair, then b0, b1 of slice 2 pair + 1, for token tile nt.
    std::uint32_t tokens[kTokenTiles][4];
#pragma unroll
    for (int nt = 0; nt < kTokenTiles; ++nt)
      sm80::ldmatrix_x4(tokens[nt], (token_lane + nt * kTokenTileBytes) ^ (pair * kSlicePairXor));
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int slice = 2 * pair + half;
      std::uint32_t weights[kWeightTiles][4];  // a0..a3 of weight tile mt, this slice
#pragma unroll
      for (int mt = 0; mt < kWeightTiles; ++mt)
        sm80::ldmatrix_x4(weights[mt], (weight_lane + mt * kWeightTileBytes) ^ (slice * kSliceXor));
#pragma unroll
      for (int mt = 0; mt < kWeightTiles; ++mt)
#pragma unroll
        for (int nt = 0; nt < kTokenTiles; ++nt)
          sm80::mma_m16n8k16_bf16(acc[mt][nt], weights[mt], tokens[nt][2 * half], tokens[nt][2 * half + 1]);
    }
  }
}

// kAddsFirstSplitTwice: the negative control's flaw (the last CTA adds split 0's partials twice);
// false in the rung.
template <int kTokenTiles, bool kAddsFirstSplitTwice>
__global__ void __launch_bounds__(kThreads, 1)
    small_m_weights_as_a_kernel(HgemmArgs args, SmallMWeightsAsAPlan plan, SmallMWeightsAsAWorkspace workspace) {
  using Layout = StageLayout<kTokenTiles>;
  extern __shared__ std::uint8_t smem_raw[];
  const std::uint32_t smem = smem_u32(aligned_dynamic_smem(smem_raw));
  const auto stage_at = [&](int stage) { return smem + stage * Layout::kStageBytes; };

  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;
  const int col0 = static_cast<int>(blockIdx.x) * kSmallMBlockN;
  const int split = static_cast<int>(blockIdx.y);
  const int k_tile_begin = plan.k_tile_begin(split);
  const int k_tiles = plan.k_tile_begin(split + 1) - k_tile_begin;

  // kStages - 1 K tiles in flight before the first MMA; a group is committed even when empty, so
  // that wait_group counts the same on every path.
#pragma unroll
  for (int stage = 0; stage < kStages - 1; ++stage) {
    if (stage < k_tiles) copy_k_tile<kTokenTiles>(args, col0, k_tile_begin + stage, stage_at(stage));
    sm80::cp_async_commit_group();
  }

  Accumulators<kTokenTiles> acc = {};
  // The warp's 32 rows of B start 32 warp rows (4096 warp bytes) into the B tile, A's tile
  // kTileBytesB into the stage; both offsets leave the swizzle's low 10 bits alone.
  const std::uint32_t weight_lane = warp * kWeightTiles * kWeightTileBytes + small_m_weight_lane_offset(lane);
  const std::uint32_t token_lane = kTileBytesB + small_m_token_lane_offset(lane);
#pragma unroll 1
  for (int i = 0; i < k_tiles; ++i) {
    sm80::cp_async_wait_group<kStages - 2>();  // this thread's copies of tile i have landed
    __syncthreads();  // everyone's have; and every warp is done with tile i - 1, whose stage is refilled next
    const int next = i + kStages - 1;
    if (next < k_tiles) copy_k_tile<kTokenTiles>(args, col0, k_tile_begin + next, stage_at(next % kStages));
    sm80::cp_async_commit_group();
    const std::uint32_t stage = stage_at(i % kStages);
    mma_k_tile<kTokenTiles>(stage + weight_lane, stage + token_lane, acc);
  }

  // Fragment (mt, nt) = f = mt x T + nt: output columns n0 = col0 + 32 warp + 16 mt + g (and + 8),
  // tokens m0 = 8 nt + 2t (and + 1).
  const int warp_n0 = col0 + warp * kColumnsPerWarp + g;
  split_k::ThreadFragments<kWeightTiles * kTokenTiles> mine;
#pragma unroll
  for (int mt = 0; mt < kWeightTiles; ++mt)
#pragma unroll
    for (int nt = 0; nt < kTokenTiles; ++nt)
      mine.value[mt * kTokenTiles + nt] = make_float4(acc[mt][nt][0], acc[mt][nt][1], acc[mt][nt][2], acc[mt][nt][3]);
  const auto store = [&](int f, float4 sum) {
    split_k::store_transposed_fragment(args, warp_n0 + 16 * (f / kTokenTiles),
                                       kSmallMTokensPerTile * (f % kTokenTiles) + 2 * t, sum);
  };
  if (!plan.needs_workspace()) {
#pragma unroll
    for (int f = 0; f < kWeightTiles * kTokenTiles; ++f) store(f, mine.value[f]);
    return;
  }

  // The partial tiles and the reduction by the last CTA of the column block (split_k_last_cta.cuh).
  constexpr int kTileVectors = kThreads * kWeightTiles * kTokenTiles;  // float4s per slot
  float4* const block_slots =
      reinterpret_cast<float4*>(workspace.partials) + static_cast<std::size_t>(blockIdx.x) * plan.splits * kTileVectors;
  split_k::reduce_in_last_cta<kWeightTiles * kTokenTiles, kTileVectors, kAddsFirstSplitTwice>(
      mine, block_slots, split, plan.splits, workspace.counters + blockIdx.x, store);
}

template <int kTokenTiles, bool kAddsFirstSplitTwice>
void launch_kernel(const HgemmArgs& args, const SmallMWeightsAsAPlan& plan, const SmallMWeightsAsAWorkspace& workspace,
                   cudaStream_t stream) {
  constexpr int kSmemBytes = StageLayout<kTokenTiles>::kSmemBytes;
  static const bool smem_allowed = [] {
    KC_CUDA_CHECK(cudaFuncSetAttribute(small_m_weights_as_a_kernel<kTokenTiles, kAddsFirstSplitTwice>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    return true;
  }();
  (void)smem_allowed;
  const dim3 grid(static_cast<unsigned>(plan.n_blocks), static_cast<unsigned>(plan.splits));
  small_m_weights_as_a_kernel<kTokenTiles, kAddsFirstSplitTwice>
      <<<grid, kThreads, kSmemBytes, stream>>>(args, plan, workspace);
  KC_CHECK_LAUNCH();
}

template <bool kAddsFirstSplitTwice>
void launch(const HgemmArgs& args, const SmallMWeightsAsAPlan& plan, const SmallMWeightsAsAWorkspace& workspace,
            cudaStream_t stream) {
  require_small_m_weights_as_a_launch(args, plan, workspace, "hgemm rung 14");
  switch (plan.token_tiles) {
    case 1: launch_kernel<1, kAddsFirstSplitTwice>(args, plan, workspace, stream); break;
    case 2: launch_kernel<2, kAddsFirstSplitTwice>(args, plan, workspace, stream); break;
    case 3: launch_kernel<3, kAddsFirstSplitTwice>(args, plan, workspace, stream); break;
    case 4: launch_kernel<4, kAddsFirstSplitTwice>(args, plan, workspace, stream); break;
    case 5: launch_kernel<5, kAddsFirstSplitTwice>(args, plan, workspace, stream); break;
    case 6: launch_kernel<6, kAddsFirstSplitTwice>(args, plan, workspace, stream); break;
    case 7: launch_kernel<7, kAddsFirstSplitTwice>(args, plan, workspace, stream); break;
    default: launch_kernel<8, kAddsFirstSplitTwice>(args, plan, workspace, stream); break;
  }
}

}  // namespace

void require_small_m_swapped_plan(const HgemmArgs& args, const SmallMWeightsAsAPlan& plan, const char* rung) {
  require(args.m >= 1 && args.m <= kSmallMMaxM,
          "{}: M = {} is outside 1..{}; this rung holds the rows of A as at most {} token tiles of {} (the "
          "MMA's n8 operand), larger M belongs to the tile rungs (01-10)",
          rung, args.m, kSmallMMaxM, kSmallMMaxTokenTiles, kSmallMTokensPerTile);
  require_small_m_streamed_operands(args, rung);
  const SmallMWeightsAsAPlan expected = plan_small_m_weights_as_a(args.m, args.n, args.k, 1);
  require(plan.token_tiles == expected.token_tiles && plan.n_blocks == expected.n_blocks &&
              plan.k_tiles == expected.k_tiles && plan.splits >= 1 && plan.splits <= plan.k_tiles &&
              plan.splits <= 65535,
          "{}: the plan ({} token tiles, {} column blocks, {} K tiles, {} splits) is not one for {}x{}x{}; make it "
          "with plan_small_m_weights_as_a (rung 14), plan_small_m_tma_wgmma (15) or plan_small_m_cluster_split (16)",
          rung, plan.token_tiles, plan.n_blocks, plan.k_tiles, plan.splits, args.m, args.n, args.k);
}

void require_small_m_weights_as_a_launch(const HgemmArgs& args, const SmallMWeightsAsAPlan& plan,
                                         const SmallMWeightsAsAWorkspace& workspace, const char* rung) {
  require_small_m_swapped_plan(args, plan, rung);
  require(!plan.needs_workspace() || (workspace.partials != nullptr && workspace.counters != nullptr),
          "{}: {} splits need a workspace: small_m_weights_as_a_partial_floats = {} floats and "
          "small_m_weights_as_a_counters = {} zeroed counters",
          rung, plan.splits, small_m_weights_as_a_partial_floats(plan), small_m_weights_as_a_counters(plan));
}

void hgemm_14_small_m_weights_as_a(const HgemmArgs& args, const SmallMWeightsAsAPlan& plan,
                                   const SmallMWeightsAsAWorkspace& workspace, cudaStream_t stream) {
  launch<false>(args, plan, workspace, stream);
}

void hgemm_14_small_m_weights_as_a_adds_a_split_twice(const HgemmArgs& args, const SmallMWeightsAsAPlan& plan,
                                                      const SmallMWeightsAsAWorkspace& workspace,
                                                      cudaStream_t stream) {
  launch<true>(args, plan, workspace, stream);
}

}  // namespace kc::stage3
