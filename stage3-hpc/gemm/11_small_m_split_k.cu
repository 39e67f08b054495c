// Rung 11 — small M (decode): stream B once, split K over CTAs, reduce the partial sums in order.
//
// Idea: with M <= 64 rows (the tokens of a decode step), C = A.B^T is bound by reading B, not by
// arithmetic: every byte of the N x K weight B is read once and used only M times, so the kernel
// is a stream of B through the SMs at DRAM speed with the MMAs riding along. The tile rungs
// (01-10) cut C into 128-row (or 64-row) tiles: at M = 1 a 128 x 256 tile is 1/128 rows of work,
// and N = 4096 gives 16-32 tiles for 132 SMs, so most SMs idle and the few busy ones cannot keep
// enough bytes in flight. Here a CTA owns 128 columns of C and a slice of K, and the K tiles of
// each column block are split over as many CTAs as fill the GPU (split-K); each CTA streams its
// 128 x K-slice piece of B through a cp.async ring, multiplies it with the matching piece of A
// (M rows, padded to m16 tiles) on the tensor cores, and writes FP32 partial sums. A second small
// kernel adds the partials of each output in split order (deterministic: the same bits on every
// run) and applies alpha.sum + beta.C once. With one split (a long N) the CTA applies alpha and
// beta itself and no workspace is used.
//
// What changed from the tile rungs: the tile is 16..64 x 128 (M padded to 16-row tiles, chosen at
// launch: one kernel instance per m16 tile count) instead of 128 x 256; K is split across CTAs
// (plan_small_m_split_k in gemm_layout.hpp, CPU-tested); no ldmatrix: each lane reads its 16-byte
// chunks of A and B with LDS.128 and the k order inside a 64-deep tile is permuted, the same way
// for A and B, so that one 16-byte chunk holds the fragments of two m16n8k16 MMAs (below); FP32
// partials go through a workspace owned by the registration (src/register.cpp), like the split
// workspace of the decode-attention rung 02.
//
// Tensor cores, not CUDA-core FMAs, even at M = 1: an HMMA.16816 does 2048 multiply-adds in one
// warp instruction, so the instruction count per byte of B stays the same from M = 1 to 64 (the
// padded rows cost tensor-core cycles, which a memory-bound kernel has to spare). CUDA-core FMAs
// would need M FMAs per element of B plus the bf16 -> f32 conversions: at M = 8 about 90 of the
// 128 thread-instructions an SM issues per clock at DRAM speed (analysis below), and more past
// that, so one tensor-core kernel for every M <= 64 is simpler and has no cliff.
//
// The fragment trick (why no ldmatrix): mma.sync m16n8k16 wants, per lane (g = lane / 4,
// t = lane % 4), B[n = g][k = 2t, 2t+1] and [k = 2t+8, 2t+9], and A rows g and g + 8 at the same
// k. A dot product does not care about the order of its k terms, so inside a 64-deep K tile lane t
// reads the whole 16-byte chunk c = 2t + s (s = 0, 1) of row g, and its four 32-bit words feed two
// MMAs: words 0, 1 as "k = 2t.., 2t+8.." of MMA (s, 0), words 2, 3 of MMA (s, 1). A's rows are
// read the same way, so the products pair up exactly; the four (s, h) MMAs cover all 64 k. In the
// 128-byte swizzled rows (swizzle_128b_offset, gemm_layout.hpp) the 8 lanes of one LDS.128 phase
// (rows g, g + 1; t = 0..3) hit chunk columns (2t + s) ^ g: the even row the 4 of one parity, the
// odd row the other 4, so all 32 banks once: conflict-free.
//
// Analysis (not measurements) for the documented decode shapes, against the H200's ~4.2 TB/s
// device-to-device copy bandwidth (the op's memory roof):
//   shape (M x N x K)   bytes of B   + A and C   roof time   splits (132 SMs)   workspace r+w
//   1 x 4096 x 4096      33.6 MB      16 KB       8.0 us      4                  0.13 MB
//   16 x 4096 x 4096     33.6 MB      0.26 MB     8.1 us      4                  2.1 MB
//   64 x 4096 x 4096     33.6 MB      1.0 MB      8.2 us      4                  8.4 MB
//   64 x 4096 x 14336    117.4 MB     2.4 MB      28.5 us     4                  8.4 MB
// (N = 4096: 32 column blocks, 132 / 32 = 4 splits, 128 CTAs.) The workspace traffic
// (2 x splits x M x N x 4 bytes) is small against B except at M = 64, K = 4096 (a quarter of B),
// where most of it should stay in the H200's 60 MiB L2: written by the split kernel and read back at once.
// Little's law: 4.2 TB/s x ~0.7 us of loaded DRAM latency (an assumed figure) is ~3 MB in flight
// over the GPU, ~22 KB per SM. A CTA keeps kStages - 1 = 3 tiles of B (16 KiB each) in flight
// after each refill, 48 KiB, so one CTA per SM covers it twice over, which is why the split rule
// aims at one CTA per SM and no more (a second, partial wave would cost more than it hides).
// Tensor work at M = 64: 64 HMMA per warp and K tile, 256 per CTA per 16 KiB of B; at the roof an
// SM gets 16 KiB about every 0.5 us (~900 clocks), 0.28 HMMA per clock, within mma.sync's rate
// but not by a wide margin: at M = 64 the MMAs are the second limiter to watch.
//
// Expected limiter: DRAM bandwidth (B) for M <= 16; at M = 64 DRAM plus the workspace round trip,
// with the mma.sync issue rate close behind. The second kernel's launch is a fixed cost (a few
// microseconds against an 8 us roof): the place to look first when the rows come in.
//
// SASS to look for (cuobjdump -sass -arch sm_90a <build>/stage3-hpc/CMakeFiles/kc_stage3.dir/
// gemm/11_small_m_split_k.cu.o): in small_m_split_k_kernel<T> (T = m16 tiles, 1..4), the K-tile
// loop with 8 LDGSTS...128 (B) per thread plus A's (a short loop of its own), LDGDEPBAR,
// DEPBAR.LE, one BAR.SYNC, 2 x (2T + 4) LDS.128 and 16T HMMA.16816.F32.BF16; no LDSM; no LDL/STL.
// reduce_split_k_partials_kernel: LDG.E / STG.E.U16, no atomics.
//
// Refuses: M > 64 (the tile rungs' shapes), and like every rung K % 8 != 0.
//
// Run just this rung:
//   kc-bench --filter 'hgemm/11_' --shapes 1x4096x4096,16x4096x4096,64x4096x4096,64x4096x14336
#include "arch/sm80/cp_async.cuh"
#include "arch/sm80/mma.cuh"
#include "arch/util.hpp"
#include "epilogue.cuh"
#include "gemm_layout.hpp"
#include "hgemm.hpp"
#include "kc/common/error.hpp"

namespace kc::stage3 {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kNBlocksPerWarp = kSmallMBlockN / (8 * kWarps);  // n8 blocks: 32 columns per warp
constexpr int kStages = 4;
constexpr int kRowBytes = kSmallMBlockK * 2;          // one 64-deep row of a tile: 128 bytes
constexpr int kChunksPerRow = kRowBytes / 16;         // 8 chunks of 16 bytes
constexpr int kTileBytesB = kSmallMBlockN * kRowBytes;  // 16 KiB
constexpr int kChunksPerThreadB = kSmallMBlockN * kChunksPerRow / kThreads;
constexpr int kReduceThreads = 256;
static_assert(kNBlocksPerWarp * 8 * kWarps == kSmallMBlockN, "the warps split the column block evenly");
static_assert(kChunksPerThreadB * kThreads == kSmallMBlockN * kChunksPerRow, "every thread copies as many B chunks");
static_assert(kRowBytes == kSwizzleRowBytes, "a tile row is one 128-byte swizzled row");

template <int kMTiles>
struct SmallMTiles {
  static constexpr int kRowsA = 16 * kMTiles;
  static constexpr int kTileBytesA = kRowsA * kRowBytes;
  static constexpr int kStageBytes = kTileBytesA + kTileBytesB;
  static constexpr int kSmemBytes = kStages * kStageBytes + kSmemAlignment;  // + the alignment slack
};

template <int kMTiles>
using Accumulators = float[kMTiles][kNBlocksPerWarp][4];

// Issues the copies of K tile `k_tile` into `stage`: A rows < M (rows M.. of the padding stay the
// zeros written at the start), and the block's 128 rows of B; chunks past N or K are cp.async with
// src-size 0, which writes zeros.
template <int kMTiles>
__device__ void copy_k_tile(const HgemmArgs& args, int col0, int k_tile, std::uint8_t* stage) {
  const std::uint32_t tile_a = smem_u32(stage);
  const std::uint32_t tile_b = tile_a + SmallMTiles<kMTiles>::kTileBytesA;
  const int k0 = k_tile * kSmallMBlockK;
  for (int chunk = threadIdx.x; chunk < args.m * kChunksPerRow; chunk += kThreads) {
    const int row = chunk / kChunksPerRow, column = chunk % kChunksPerRow;
    const int k = k0 + column * 8;
    const bool valid = k < args.k;
    const bf16* source = valid ? args.a + static_cast<std::size_t>(row) * args.lda + k : args.a;
    sm80::cp_async_16(tile_a + swizzle_128b_offset(row, column), source, valid);
  }
#pragma unroll
  for (int pass = 0; pass < kChunksPerThreadB; ++pass) {
    const int chunk = threadIdx.x + pass * kThreads;
    const int row = chunk / kChunksPerRow, column = chunk % kChunksPerRow;
    const int n = col0 + row, k = k0 + column * 8;
    const bool valid = n < args.n && k < args.k;
    const bf16* source = valid ? args.b + static_cast<std::size_t>(n) * args.ldb + k : args.b;
    sm80::cp_async_16(tile_b + swizzle_128b_offset(row, column), source, valid);
  }
}

__device__ __forceinline__ uint4 load_chunk(const std::uint8_t* tile, int offset) {
  return *reinterpret_cast<const uint4*>(tile + offset);
}

// One warp's MMAs over one 64-deep K tile: its 32 columns against all kMTiles x 16 rows of A.
// `lane_offset` is this lane's step-0 chunk (small_m_lane_chunk(t, 0), row g) in a swizzled tile;
// the step-1 chunk is that XOR 16 (g * 128 leaves bit 4 clear, and (2t ^ g) ^ 1 = (2t + 1) ^ g),
// and rows 8 further down start 1024 bytes later with the same swizzle (CPU-tested).
template <int kMTiles>
__device__ void mma_k_tile(const std::uint8_t* stage, int warp, int lane_offset, Accumulators<kMTiles>& acc) {
  const std::uint8_t* tile_a = stage;
  const std::uint8_t* tile_b = stage + SmallMTiles<kMTiles>::kTileBytesA + warp * (8 * kNBlocksPerWarp) * kRowBytes;
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    const int offset = lane_offset ^ (16 * s);
    uint4 upper[kMTiles], lower[kMTiles], b[kNBlocksPerWarp];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      upper[mt] = load_chunk(tile_a, offset + (16 * mt) * kRowBytes);      // row 16 mt + g
      lower[mt] = load_chunk(tile_a, offset + (16 * mt + 8) * kRowBytes);  // row 16 mt + g + 8
    }
#pragma unroll
    for (int nb = 0; nb < kNBlocksPerWarp; ++nb) b[nb] = load_chunk(tile_b, offset + 8 * nb * kRowBytes);
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      // Words 0, 1 of each chunk are MMA (s, 0)'s "k = 2t.." and "k = 2t+8.."; words 2, 3 MMA (s, 1)'s.
      const std::uint32_t a_first[4] = {upper[mt].x, lower[mt].x, upper[mt].y, lower[mt].y};
      const std::uint32_t a_second[4] = {upper[mt].z, lower[mt].z, upper[mt].w, lower[mt].w};
#pragma unroll
      for (int nb = 0; nb < kNBlocksPerWarp; ++nb) {
        sm80::mma_m16n8k16_bf16(acc[mt][nb], a_first, b[nb].x, b[nb].y);
        sm80::mma_m16n8k16_bf16(acc[mt][nb], a_second, b[nb].z, b[nb].w);
      }
    }
  }
}

// A split's sums for C[row][col], C[row][col + 1] (col even) into its M x N slice of the
// workspace; nothing outside M x N.
__device__ __forceinline__ void store_partial_pair(float* partial, int m, int n, int row, int col, float x, float y) {
  if (row >= m || col >= n) return;
  float* destination = partial + static_cast<std::size_t>(row) * n + col;
  if (col + 1 < n && n % 2 == 0) {
    *reinterpret_cast<float2*>(destination) = make_float2(x, y);
  } else {
    destination[0] = x;
    if (col + 1 < n) destination[1] = y;
  }
}

template <int kMTiles>
__global__ void __launch_bounds__(kThreads)
    small_m_split_k_kernel(HgemmArgs args, SmallMSplitKPlan plan, float* workspace) {
  using Tiles = SmallMTiles<kMTiles>;
  extern __shared__ std::uint8_t smem_raw[];
  std::uint8_t* smem = aligned_dynamic_smem(smem_raw);
  const auto stage_at = [&](int stage) { return smem + stage * Tiles::kStageBytes; };

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int col0 = blockIdx.x * kSmallMBlockN;
  const int split = blockIdx.y;
  const int k_tile_begin = plan.k_tile_begin(split);
  const int k_tiles = plan.k_tile_begin(split + 1) - k_tile_begin;

  // The padding rows M .. 16 kMTiles of A are zero in every stage: written once, never copied over.
  for (int chunk = args.m * kChunksPerRow + threadIdx.x; chunk < Tiles::kRowsA * kChunksPerRow; chunk += kThreads)
    for (int stage = 0; stage < kStages; ++stage)
      *reinterpret_cast<uint4*>(stage_at(stage) + swizzle_128b_offset(chunk / kChunksPerRow, chunk % kChunksPerRow)) =
          make_uint4(0, 0, 0, 0);

  // kStages - 1 K tiles in flight before the first MMA; a group is committed even when empty, so
  // that wait_group counts the same on every path.
#pragma unroll
  for (int stage = 0; stage < kStages - 1; ++stage) {
    if (stage < k_tiles) copy_k_tile<kMTiles>(args, col0, k_tile_begin + stage, stage_at(stage));
    sm80::cp_async_commit_group();
  }

  Accumulators<kMTiles> acc = {};
  const int lane_offset = swizzle_128b_offset(g, small_m_lane_chunk(t, 0));
  for (int i = 0; i < k_tiles; ++i) {
    sm80::cp_async_wait_group<kStages - 2>();  // this thread's copies of tile i have landed
    __syncthreads();  // everyone's have; and every warp is done with tile i - 1, whose stage is refilled next
    const int next = i + kStages - 1;
    if (next < k_tiles) copy_k_tile<kMTiles>(args, col0, k_tile_begin + next, stage_at(next % kStages));
    sm80::cp_async_commit_group();
    mma_k_tile<kMTiles>(stage_at(i % kStages), warp, lane_offset, acc);
  }

  // Fragment (mt, nb): rows 16 mt + g and + 8, columns col0 + 32 warp + 8 nb + 2t and + 1.
  const int warp_col0 = col0 + warp * 8 * kNBlocksPerWarp;
  if (!plan.needs_workspace()) {
    const LinearCombination linear = linear_combination(args);
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int nb = 0; nb < kNBlocksPerWarp; ++nb)
        store_fragment_16x8(args.c, args.m, args.n, 16 * mt, warp_col0 + 8 * nb, acc[mt][nb], linear, Identity{});
    return;
  }
  float* partial = workspace + static_cast<std::size_t>(split) * args.m * args.n;
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int nb = 0; nb < kNBlocksPerWarp; ++nb) {
      const int row = 16 * mt + g, col = warp_col0 + 8 * nb + 2 * t;
      store_partial_pair(partial, args.m, args.n, row, col, acc[mt][nb][0], acc[mt][nb][1]);
      store_partial_pair(partial, args.m, args.n, row + 8, col, acc[mt][nb][2], acc[mt][nb][3]);
    }
}

// C = alpha . (sum of the splits' partials, in split order) + beta . C, one output per thread.
// The order is fixed, so the result does not depend on which CTA finished first.
__global__ void __launch_bounds__(kReduceThreads)
    reduce_split_k_partials_kernel(HgemmArgs args, int splits, const float* workspace) {
  const std::size_t outputs = static_cast<std::size_t>(args.m) * args.n;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(kReduceThreads) + threadIdx.x; i < outputs;
       i += static_cast<std::size_t>(gridDim.x) * kReduceThreads) {
    float sum = 0.f;
    for (int split = 0; split < splits; ++split) sum += workspace[split * outputs + i];
    float value = args.alpha * sum;
    if (args.beta != 0.f) value += args.beta * __bfloat162float(args.c[i]);  // BLAS: C unread when beta == 0
    args.c[i] = __float2bfloat16_rn(value);
  }
}

template <int kMTiles>
void launch_split_kernel(const HgemmArgs& args, const SmallMSplitKPlan& plan, float* workspace, cudaStream_t stream) {
  constexpr int kSmemBytes = SmallMTiles<kMTiles>::kSmemBytes;
  static const bool smem_allowed = [] {
    KC_CUDA_CHECK(cudaFuncSetAttribute(small_m_split_k_kernel<kMTiles>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       kSmemBytes));
    return true;
  }();
  (void)smem_allowed;
  const dim3 grid(plan.n_blocks, plan.splits);
  small_m_split_k_kernel<kMTiles><<<grid, kThreads, kSmemBytes, stream>>>(args, plan, workspace);
}

}  // namespace

void require_small_m_streamed_operands(const HgemmArgs& args, const char* rung) {
  require(args.n >= 1 && args.k >= 1 && args.k % 8 == 0,
          "{}: N = {} and K = {} must be positive and K a multiple of 8 (16-byte cp.async copies)", rung, args.n,
          args.k);
  require(args.lda == args.k && args.ldb == args.k && args.ldc == args.n,
          "{}: dense operands only (lda = K, ldb = K, ldc = N); got lda = {}, ldb = {}, ldc = {}", rung, args.lda,
          args.ldb, args.ldc);
  require(aligned_16(args.a) && aligned_16(args.b),
          "{}: A and B must start 16-byte aligned for cp.async; got A = {}, B = {}", rung,
          static_cast<const void*>(args.a), static_cast<const void*>(args.b));
}

void hgemm_11_small_m_split_k(const HgemmArgs& args, const SmallMSplitKPlan& plan, float* workspace,
                              cudaStream_t stream) {
  require(args.m >= 1 && args.m <= kSmallMMaxM,
          "hgemm rung 11: M = {} is outside 1..{}; this rung pads M to at most four m16 tiles, larger M "
          "belongs to the tile rungs (01-10)",
          args.m, kSmallMMaxM);
  require_small_m_streamed_operands(args, "hgemm rung 11");
  const SmallMSplitKPlan expected = plan_small_m_split_k(args.m, args.n, args.k, 1);
  require(plan.m_tiles == expected.m_tiles && plan.n_blocks == expected.n_blocks &&
              plan.k_tiles == expected.k_tiles && plan.splits >= 1 && plan.splits <= plan.k_tiles &&
              plan.splits <= 65535,
          "hgemm rung 11: the plan ({} m16 tiles, {} column blocks, {} K tiles, {} splits) is not one for "
          "{}x{}x{}; make it with plan_small_m_split_k",
          plan.m_tiles, plan.n_blocks, plan.k_tiles, plan.splits, args.m, args.n, args.k);
  require(!plan.needs_workspace() || workspace != nullptr,
          "hgemm rung 11: {} splits need a workspace of small_m_split_k_workspace_floats = {} floats",
          plan.splits, small_m_split_k_workspace_floats(plan, args.m, args.n));

  switch (plan.m_tiles) {
    case 1: launch_split_kernel<1>(args, plan, workspace, stream); break;
    case 2: launch_split_kernel<2>(args, plan, workspace, stream); break;
    case 3: launch_split_kernel<3>(args, plan, workspace, stream); break;
    default: launch_split_kernel<4>(args, plan, workspace, stream); break;
  }
  if (!plan.needs_workspace()) return;
  const long long outputs = static_cast<long long>(args.m) * args.n;
  const int blocks = static_cast<int>((outputs + kReduceThreads - 1) / kReduceThreads);
  reduce_split_k_partials_kernel<<<blocks, kReduceThreads, 0, stream>>>(args, plan.splits, workspace);
}

}  // namespace kc::stage3
