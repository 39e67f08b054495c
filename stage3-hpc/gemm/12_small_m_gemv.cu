// Rung 12 — decode at M <= 8: a GEMV on the CUDA cores, every byte of B read once, no second pass.
//
// Idea: C = A.B^T with M <= 8 rows of A (the tokens of a decode step at batch <= 8) is a stream of
// the N x K weight B: each 16-byte piece of a row of B (8 bf16) meets the same 8 columns of each of
// the M rows of A, M x 8 multiply-adds, and is never needed again. So this rung gives up the tile
// and the tensor cores: a group of threads owns a few output columns (rows of B) and reads those
// rows along K in 16-byte pieces, lane after lane, so that one warp instruction moves 512
// contiguous bytes of one row; every thread keeps M x kRows FP32 sums in registers, and at the end
// the group adds them up (warp shuffles, then shared memory across the group's warps) and one
// thread per output writes alpha.sum + beta.C. Nothing goes through a workspace and there is one
// launch, where rung 11 (split K over CTAs, partials reduced by a second kernel) has two and a
// round trip of partial sums.
//
// What changed from rung 11: CUDA-core FMAs instead of mma.sync (no padding of M to 16 rows, no
// shared-memory staging of B: each piece of B goes from DRAM to registers and is used at once);
// the K split lives inside a block (a group of 32-256 threads per column) instead of across CTAs,
// so the partial sums meet in shared memory instead of in a DRAM workspace.
//
// The group size is chosen at launch from K and N (choose_small_m_gemv_group below): long rows get
// more threads per column, so that each thread has a few 16-byte pieces to fetch; and narrow
// outputs (N small, as the K and V projections of a GQA model) get wider groups so that the grid
// still covers every SM several times.
//
// Analysis (not measurements): bytes in flight. Little's law with ~4.2 TB/s and ~0.7 us of loaded
// DRAM latency asks for ~3 MB in flight over the GPU, ~22 KB per SM. A thread here issues
// kUnroll x kRows loads of 16 bytes before it uses any (2 x 4 x 16 = 128 bytes at M <= 2,
// 2 x 2 x 16 = 64 at M > 2); 8 resident blocks of 256 threads keep 128 KB (64 KB) per SM in flight
// when the grid is large enough, several times the need. Instruction issue: per 16 bytes of B a
// thread does 8 x M FMAs, 8 conversions of B and 8 x M / kRows conversions of A; at DRAM speed an
// SM receives ~18 bytes of B per clock (4.8 TB/s / 132 SMs / 1.98 GHz, the peak), so at M = 8
// about 1.1 pieces x (64 + 8 + 32) ~ 115 thread-instructions per clock against the 128 an SM issues:
// close to the issue limit (rung 11's header makes the same count for M = 8, which is why it uses
// the tensor cores). At M <= 4 the issue rate has twice the room, and DRAM is the limit.
//
// Expected limiter: DRAM bandwidth for M <= 4 on projections of megabytes; the launch and the
// ramp (a few microseconds) on small matrices, where no kernel reaches the roof; the FMA issue
// rate approaching at M = 8.
//
// SASS to look for (cuobjdump -sass -arch sm_90a <build>/stage3-hpc/CMakeFiles/kc_stage3.dir/
// gemm/12_small_m_gemv.cu.o): in small_m_gemv_kernel<M> (R = small_m_gemv_rows(M) columns a
// group), per loop trip 2R LDG.E.NA.LTC256B.128.CONSTANT (B, through the non-coherent path, L1 not
// allocated, 256-byte L2 prefetch; LTC128B on sm_80) issued before the first FFMA, 2M
// LDG.E.128.CONSTANT (A), 8MR FFMA per trip, PRMT/SHF/IMAD.U32 for the bf16 -> f32 conversions;
// after the loop SHFL.BFLY, one BAR.SYNC, STS/LDS; no LDL/STL (tests/sass/contracts.md).
//
// Refuses: M > 8 (rung 11 and the tile rungs), K % 8 != 0 (16-byte pieces), and leading
// dimensions other than the dense K, K, N or A and B not 16-byte aligned (the op's conformance
// problems are all dense and aligned).
//
// Run just this rung:
//   kc-bench --filter 'hgemm/(11|12)_' --shapes 1x4096x4096,1x1024x4096,1x28672x4096,1x4096x14336,8x4096x4096
#include <cstdint>

#include "arch/util.hpp"
#include "gemm_layout.hpp"
#include "hgemm.hpp"
#include "kc/common/device.hpp"
#include "kc/common/error.hpp"

namespace kc::stage3 {
namespace {

constexpr int kThreads = kSmallMGemvThreads;
constexpr int kWarps = kThreads / 32;
constexpr int kUnroll = 2;  // K pieces per thread fetched before any is used

// 16 bytes of B through the read-only path, not allocated in L1 (read once), with a 256-byte L2
// prefetch hint (the next pieces of the row are read by the next lanes).
__device__ __forceinline__ uint4 load_streaming(const bf16* pointer) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(pointer));
  return v;
}

__device__ __forceinline__ float2 unpack(std::uint32_t pair) {
  __nv_bfloat162 h;
  static_assert(sizeof h == sizeof pair, "two bf16 in one 32-bit word");
  memcpy(&h, &pair, sizeof pair);
  return __bfloat1622float2(h);
}

// sum += a . b over 8 bf16 pairs held in two 16-byte pieces (a already converted).
__device__ __forceinline__ float dot8(const float2 (&a)[4], uint4 b, float sum) {
  const std::uint32_t words[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 w = unpack(words[i]);
    sum = fmaf(a[i].x, w.x, sum);
    sum = fmaf(a[i].y, w.y, sum);
  }
  return sum;
}

template <int kM, int kRows>
__device__ __forceinline__ void accumulate_piece(const HgemmArgs& args, int piece, const uint4 (&b)[kRows],
                                                 float (&sum)[kM][kRows]) {
#pragma unroll
  for (int m = 0; m < kM; ++m) {
    const uint4 raw = __ldg(reinterpret_cast<const uint4*>(args.a + static_cast<std::size_t>(m) * args.k) + piece);
    const float2 a[4] = {unpack(raw.x), unpack(raw.y), unpack(raw.z), unpack(raw.w)};
#pragma unroll
    for (int r = 0; r < kRows; ++r) sum[m][r] = dot8(a, b[r], sum[m][r]);
  }
}

// One block: kThreads / group_threads groups, each owning kRows consecutive columns of C.
template <int kM>
__global__ void __launch_bounds__(kThreads, 2) small_m_gemv_kernel(HgemmArgs args, int group_threads) {
  constexpr int kRows = small_m_gemv_rows(kM);
  __shared__ float partial[kWarps][kM * kRows];

  const int groups = kThreads / group_threads;
  const int group = threadIdx.x / group_threads;
  const int lane_in_group = threadIdx.x % group_threads;
  const int col0 = (blockIdx.x * groups + group) * kRows;
  const int pieces = args.k / 8;

  // Rows of B past N read the last row instead (their sums are never stored): no predicate in
  // the loop.
  const bf16* rows[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) rows[r] = args.b + static_cast<std::size_t>(min(col0 + r, args.n - 1)) * args.k;

  float sum[kM][kRows];
#pragma unroll
  for (int m = 0; m < kM; ++m)
#pragma unroll
    for (int r = 0; r < kRows; ++r) sum[m][r] = 0.f;

  for (int p0 = lane_in_group; p0 < pieces; p0 += kUnroll * group_threads) {
    uint4 b[kUnroll][kRows];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int piece = p0 + u * group_threads;
#pragma unroll
      for (int r = 0; r < kRows; ++r)
        b[u][r] = piece < pieces ? load_streaming(rows[r] + piece * 8) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int piece = p0 + u * group_threads;
      if (piece < pieces) accumulate_piece<kM, kRows>(args, piece, b[u], sum);
    }
  }

  // A group is one or more whole warps: add within each warp, then across the group's warps.
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int m = 0; m < kM; ++m)
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float s = sum[m][r];
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
      if (lane == 0) partial[warp][m * kRows + r] = s;
    }
  __syncthreads();

  const int warps_per_group = group_threads / 32;
  for (int i = threadIdx.x; i < groups * kM * kRows; i += kThreads) {
    const int g = i / (kM * kRows), j = i % (kM * kRows);
    const int m = j / kRows, r = j % kRows;
    const int col = (blockIdx.x * groups + g) * kRows + r;
    if (col >= args.n) continue;
    float s = 0.f;
    for (int w = g * warps_per_group; w < (g + 1) * warps_per_group; ++w) s += partial[w][j];
    bf16* c = args.c + static_cast<std::size_t>(m) * args.ldc + col;
    float value = args.alpha * s;
    if (args.beta != 0.f) value += args.beta * __bfloat162float(*c);  // BLAS: beta = 0 reads no C
    *c = __float2bfloat16(value);
  }
}

template <int kM>
void launch_gemv(const HgemmArgs& args, cudaStream_t stream, int sm_count) {
  const SmallMGemvGroup group = choose_small_m_gemv_group(args.m, args.n, args.k, sm_count);
  small_m_gemv_kernel<kM><<<group.blocks, kThreads, 0, stream>>>(args, group.threads);
  KC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void hgemm_12_small_m_gemv(const HgemmArgs& args, cudaStream_t stream) {
  require(args.m >= 1 && args.m <= kSmallMGemvMaxM,
          "hgemm rung 12: M = {} is outside 1..{}; this rung keeps M x 2 or 4 sums per thread in registers, "
          "larger M belongs to rung 11 and the tile rungs",
          args.m, kSmallMGemvMaxM);
  require(args.n >= 1 && args.k >= 1 && args.k % 8 == 0,
          "hgemm rung 12: N = {} and K = {} must be positive and K a multiple of 8 (16-byte loads)", args.n,
          args.k);
  require(args.lda == args.k && args.ldb == args.k && args.ldc == args.n,
          "hgemm rung 12: dense operands only (lda = K, ldb = K, ldc = N); got lda = {}, ldb = {}, ldc = {}",
          args.lda, args.ldb, args.ldc);
  require(aligned_16(args.a) && aligned_16(args.b),
          "hgemm rung 12: A and B must start 16-byte aligned for 16-byte loads; got A = {}, B = {}",
          static_cast<const void*>(args.a), static_cast<const void*>(args.b));
  const int sm_count = current_device_sm_count();
  switch (args.m) {
    case 1: launch_gemv<1>(args, stream, sm_count); break;
    case 2: launch_gemv<2>(args, stream, sm_count); break;
    case 3: launch_gemv<3>(args, stream, sm_count); break;
    case 4: launch_gemv<4>(args, stream, sm_count); break;
    case 5: launch_gemv<5>(args, stream, sm_count); break;
    case 6: launch_gemv<6>(args, stream, sm_count); break;
    case 7: launch_gemv<7>(args, stream, sm_count); break;
    default: launch_gemv<8>(args, stream, sm_count); break;
  }
}

}  // namespace kc::stage3
