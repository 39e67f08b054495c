// Rung 12's pieces (12_small_m_gemv.cu), shared with the decode MLP in one launch
// (12_small_m_gemv_mlp.cu): what a launch computes, the loads, the per-piece products with an
// optional RMSNorm or SwiGLU prologue, and one block's work. The two files' headers tell the story;
// this one only holds the code both compile.
#pragma once

#include <cuda_bf16.h>

#include <cuda/atomic>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "gemm_layout.hpp"
#include "hgemm.hpp"
#include "kc/core/dependent_launch.cuh"
#include "kc/core/elementwise.cuh"

namespace kc::stage3::small_m_gemv_detail {

constexpr int kThreads = kSmallMGemvThreads;
constexpr int kWarps = kThreads / 32;

// What a launch computes: C_w = alpha.A.B_w^T + beta.C_w for each weight w, all sharing A (M x K)
// and K; blocks [block_begin[w], block_begin[w + 1]) belong to weight w.
struct SmallMGemvLaunch {
  const bf16* a = nullptr;
  int k = 0;
  float alpha = 1.f, beta = 0.f;
  int weights = 0;
  int group_threads = 0;  // choose_small_m_gemv_group on the weights' rows together
  const bf16* b[kSmallMGemvMaxWeights] = {};
  bf16* c[kSmallMGemvMaxWeights] = {};
  int n[kSmallMGemvMaxWeights] = {};
  int block_begin[kSmallMGemvMaxWeights] = {};
  // With an RMSNorm prologue (null: none): C_w = alpha.norm(A).B_w^T + beta.C_w, where row m of
  // norm(A) is A[m] . norm_weight / sqrt(mean(A[m]^2) + norm_eps).
  const bf16* norm_weight = nullptr;
  float norm_eps = 0.f;
  // With a SwiGLU prologue (false: none): A is [gate | up], M x 2K, and the product uses
  // silu(gate) . up, M x K (stage 2's swiglu, done where A is read).
  bool swiglu = false;
  // Launched as a programmatic dependent (kc/core/dependent_launch.hpp): the bytes of its rows of
  // B a block asks the L2 for before it waits for the previous kernel (0: none).
  std::uint32_t prefetch_bytes = 0;
  // ... and whether each thread issues the loads of its first trip of the K loop before that wait
  // (set_small_m_gemv_first_trip_before_wait, kc/stage3/small_m_gemv_knobs.hpp): the instances with kFirstTripEarly.
  bool first_trip_before_wait = false;
};

// Column counts for a reader running beside a launch (small_m_gemv_counting_kernel,
// 12_small_m_gemv.cu; Gemm::ColumnCounts, kc/stage3/gemm.hpp): column c of weight w counts into
// written[c / slice_columns[w]], each block adding its columns with a release once they are
// stored. A parameter of its own beside SmallMGemvLaunch: a field there would change every
// instance's code.
struct SmallMGemvColumnCounts {
  unsigned* written = nullptr;
  int slice_columns[kSmallMGemvMaxWeights] = {};
};

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

// 16 bytes of A: through the read-only path (LDG.CONSTANT) when no thread of the launch writes A,
// else through the L2 only (ld.global.cg), which sees what other blocks of the same launch wrote
// before a grid-wide barrier (the MLP in one launch: 12_small_m_gemv_mlp.cu).
template <bool kCoherent>
__device__ __forceinline__ uint4 load_a(const uint4* pointer) {
  if constexpr (kCoherent)
    return __ldcg(pointer);
  else
    return __ldg(pointer);
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

// The piece's products with every row of A. With the RMSNorm prologue (kNorm), each row's squares
// are summed on the way (the group's threads see every piece of K once between them, so after the
// group's reduction they are the row's whole sum) and A is multiplied by the norm's weight before
// the products; the 1 / RMS factor is applied to the finished sums.
template <int kM, int kRows, bool kNorm, bool kSwiglu, bool kCoherentA>
__device__ __forceinline__ void accumulate_piece(const bf16* a_rows, const bf16* norm_weight, int k, int piece,
                                                 const uint4 (&b)[kRows], float (&sum)[kM][kRows],
                                                 float (&squares)[kM]) {
  static_assert(!(kNorm && kSwiglu), "one prologue at a time");
  float2 w[4] = {};
  if constexpr (kNorm) {
    const uint4 raw = __ldg(reinterpret_cast<const uint4*>(norm_weight) + piece);
    w[0] = unpack(raw.x);
    w[1] = unpack(raw.y);
    w[2] = unpack(raw.z);
    w[3] = unpack(raw.w);
  }
#pragma unroll
  for (int m = 0; m < kM; ++m) {
    float2 a[4];
    if constexpr (kSwiglu) {  // rows of 2K: gate in [0, K), up in [K, 2K)
      const bf16* row = a_rows + static_cast<std::size_t>(m) * 2 * k;
      const uint4 gate = load_a<kCoherentA>(reinterpret_cast<const uint4*>(row) + piece);
      const uint4 up = load_a<kCoherentA>(reinterpret_cast<const uint4*>(row + k) + piece);
      const std::uint32_t gates[4] = {gate.x, gate.y, gate.z, gate.w}, ups[4] = {up.x, up.y, up.z, up.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float2 g = unpack(gates[i]), u = unpack(ups[i]);
        a[i] = make_float2(core::Silu{}(g.x) * u.x, core::Silu{}(g.y) * u.y);
      }
    } else {
      const uint4 raw = load_a<kCoherentA>(reinterpret_cast<const uint4*>(a_rows + static_cast<std::size_t>(m) * k) + piece);
      a[0] = unpack(raw.x);
      a[1] = unpack(raw.y);
      a[2] = unpack(raw.z);
      a[3] = unpack(raw.w);
    }
    if constexpr (kNorm) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        squares[m] = fmaf(a[i].x, a[i].x, squares[m]);
        squares[m] = fmaf(a[i].y, a[i].y, squares[m]);
        a[i].x *= w[i].x;
        a[i].y *= w[i].y;
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) sum[m][r] = dot8(a, b[r], sum[m][r]);
  }
}

// Where a block of a launch works: the block that `index` names, its weight (b, c, n), its place
// among that weight's blocks, and its group's geometry. The weight comes from a short unrolled
// scan with constant indices (indexing the parameter arrays by a runtime value would copy them to
// local memory).
struct SmallMGemvPlace {
  int block = 0;  // within its weight
  int n = 0;
  const bf16* b = nullptr;
  bf16* c = nullptr;
  int group_threads = 0, groups = 0, lane_in_group = 0;
  int col0 = 0;    // the group's first column
  int pieces = 0;  // 16-byte pieces of a row of K
};

// `index()` names the block: blockIdx.x for rung 12's own grid (read where it is compared, as the
// rung always did), a loop counter in a persistent grid.
template <int kM, class Index>
__device__ __forceinline__ SmallMGemvPlace small_m_gemv_place(const SmallMGemvLaunch& g, Index index) {
  constexpr int kRows = small_m_gemv_rows(kM);
  const bf16* b = g.b[0];
  bf16* c_weight = g.c[0];
  int n = g.n[0], first_block = 0;
#pragma unroll
  for (int i = 1; i < kSmallMGemvMaxWeights; ++i)
    if (i < g.weights && index() >= g.block_begin[i]) {
      b = g.b[i];
      c_weight = g.c[i];
      n = g.n[i];
      first_block = g.block_begin[i];
    }
  SmallMGemvPlace p;
  p.block = index() - first_block;
  p.n = n;
  p.b = b;
  p.c = c_weight;
  p.group_threads = g.group_threads;
  p.groups = kThreads / p.group_threads;
  const int group = threadIdx.x / p.group_threads;
  p.lane_in_group = threadIdx.x % p.group_threads;
  p.col0 = (p.block * p.groups + group) * kRows;
  p.pieces = g.k / 8;
  return p;
}

// Asks the L2 for the first `cap` bytes of the block's rows of B (one bulk prefetch; thread 0).
template <int kM>
__device__ __forceinline__ void small_m_gemv_prefetch(const SmallMGemvLaunch& g, const SmallMGemvPlace& p,
                                                      std::uint32_t cap) {
  constexpr int kRows = small_m_gemv_rows(kM);
  const int block_col0 = p.block * p.groups * kRows;
  const std::size_t block_bytes =
      static_cast<std::size_t>(min(p.groups * kRows, p.n - block_col0)) * g.k * sizeof(bf16);
  const std::size_t bytes = block_bytes < cap ? block_bytes : cap;
  core::prefetch_to_l2(p.b + static_cast<std::size_t>(block_col0) * g.k, static_cast<std::uint32_t>(bytes));
}

// The pieces of B a thread loads in its first trip of the K loop (small_m_gemv_block's loop, the
// iteration at p0 = lane_in_group), held in registers: as a programmatic dependent the kernel
// loads them before it waits for the kernel ahead (B is weights, which no kernel writes).
template <int kM, int kUnroll>
struct SmallMGemvFirstTrip {
  uint4 b[kUnroll][small_m_gemv_rows(kM)];
};

// Row r of the group's rows of B; rows past N read the last row instead (their sums are never
// stored): no predicate in the loop.
__device__ __forceinline__ const bf16* small_m_gemv_b_row(const SmallMGemvLaunch& g, const SmallMGemvPlace& p, int r) {
  return p.b + static_cast<std::size_t>(min(p.col0 + r, p.n - 1)) * g.k;
}

// The loads of one trip of the K loop: pieces p0 + u.group_threads of each of the thread's rows
// (zeros past the row's end).
template <int kM, int kUnroll>
__device__ __forceinline__ void load_trip(const bf16* const (&rows)[small_m_gemv_rows(kM)], int p0, int group_threads,
                                          int pieces, uint4 (&b)[kUnroll][small_m_gemv_rows(kM)]) {
  constexpr int kRows = small_m_gemv_rows(kM);
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int piece = p0 + u * group_threads;
#pragma unroll
    for (int r = 0; r < kRows; ++r) b[u][r] = piece < pieces ? load_streaming(rows[r] + piece * 8) : make_uint4(0, 0, 0, 0);
  }
}

template <int kM, int kUnroll>
__device__ __forceinline__ void load_first_trip(const SmallMGemvLaunch& g, const SmallMGemvPlace& p,
                                                SmallMGemvFirstTrip<kM, kUnroll>& trip) {
  constexpr int kRows = small_m_gemv_rows(kM);
  const bf16* rows[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) rows[r] = small_m_gemv_b_row(g, p, r);
  load_trip<kM, kUnroll>(rows, p.lane_in_group, p.group_threads, p.pieces, trip.b);
}

// One block's work: kThreads / group_threads groups, each owning kRows consecutive columns of C in
// the block's weight; its threads read their rows of B along K and every row of A, then the
// group's sums meet in shared memory and one thread an output writes alpha.sum + beta.C.
// kCoherentA: A is read through the L2 (load_a). Ends after its stores, without a barrier: a
// caller that runs a second block in the same CTA synchronizes first (partial[] is reused).
// kUnroll: the 16-byte pieces of each of its rows a thread loads in one trip of the K loop,
// before it uses any (12_small_m_gemv.cu's header: two, or one where the grid is larger than the
// GPU holds at once). The sums are added in the same order either way.
// `first` (kFirstTripLoaded): the first trip's pieces, loaded already (load_first_trip).
template <int kM, bool kNorm, bool kSwiglu, bool kCoherentA, int kUnroll, bool kFirstTripLoaded = false>
__device__ __forceinline__ void small_m_gemv_block(const SmallMGemvLaunch& g, const SmallMGemvPlace& p,
                                                   const SmallMGemvFirstTrip<kM, kUnroll>* first = nullptr) {
  constexpr int kRows = small_m_gemv_rows(kM);
  constexpr int kSums = kM * kRows + (kNorm ? kM : 0);  // the products, then each row's squares
  __shared__ float partial[kWarps][kSums];
  const int group_threads = p.group_threads, groups = p.groups, lane_in_group = p.lane_in_group;
  const int pieces = p.pieces;

  const bf16* rows[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) rows[r] = small_m_gemv_b_row(g, p, r);

  float sum[kM][kRows];
  float squares[kM];
#pragma unroll
  for (int m = 0; m < kM; ++m) {
    squares[m] = 0.f;
#pragma unroll
    for (int r = 0; r < kRows; ++r) sum[m][r] = 0.f;
  }

  // A trip's products, in the same order whether its pieces were loaded here or before the wait.
  const auto accumulate_trip = [&](int p0, const uint4(&pieces_of_b)[kUnroll][kRows]) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int piece = p0 + u * group_threads;
      if (piece < pieces)
        accumulate_piece<kM, kRows, kNorm, kSwiglu, kCoherentA>(g.a, g.norm_weight, g.k, piece, pieces_of_b[u], sum, squares);
    }
  };
  int p0 = lane_in_group;
  if constexpr (kFirstTripLoaded) {
    accumulate_trip(p0, first->b);
    p0 += kUnroll * group_threads;
  }
  for (; p0 < pieces; p0 += kUnroll * group_threads) {
    uint4 pieces_of_b[kUnroll][kRows];
    load_trip<kM, kUnroll>(rows, p0, group_threads, pieces, pieces_of_b);
    accumulate_trip(p0, pieces_of_b);
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
  if constexpr (kNorm) {
#pragma unroll
    for (int m = 0; m < kM; ++m) {
      float s = squares[m];
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
      if (lane == 0) partial[warp][kM * kRows + m] = s;
    }
  }
  __syncthreads();

  const int warps_per_group = group_threads / 32;
  for (int i = threadIdx.x; i < groups * kM * kRows; i += kThreads) {
    const int j = i % (kM * kRows), group_of_i = i / (kM * kRows);
    const int m = j / kRows, r = j % kRows;
    const int col = (p.block * groups + group_of_i) * kRows + r;
    if (col >= p.n) continue;
    float s = 0.f;
    for (int v = group_of_i * warps_per_group; v < (group_of_i + 1) * warps_per_group; ++v) s += partial[v][j];
    if constexpr (kNorm) {
      float row_squares = 0.f;
      for (int v = group_of_i * warps_per_group; v < (group_of_i + 1) * warps_per_group; ++v)
        row_squares += partial[v][kM * kRows + m];
      s *= rsqrtf(row_squares / static_cast<float>(g.k) + g.norm_eps);
    }
    bf16* c = p.c + static_cast<std::size_t>(m) * p.n + col;
    float value = g.alpha * s;
    if (g.beta != 0.f) value += g.beta * __bfloat162float(*c);  // BLAS: beta = 0 reads no C
    *c = __float2bfloat16(value);
  }
}

// After small_m_gemv_block (small_m_gemv_counting_kernel, 12_small_m_gemv.cu): the block's
// columns counted into their slices' counters, so that a kernel already running beside this one (a
// decode attention that acquires its kv head's counter: decode rung 11) may read them. The barrier
// puts every thread's stores of C before thread 0's counts; each count is a release at GPU scope,
// cumulative over what the barrier ordered before it. A block's columns lie in one weight (found
// as small_m_gemv_place finds it, from blockIdx.x: a slice width in SmallMGemvPlace changed the
// other instances' code) and may span slices.
template <int kM>
__device__ __forceinline__ void count_written_columns(const SmallMGemvLaunch& g, const SmallMGemvPlace& p,
                                                      const SmallMGemvColumnCounts& counts) {
  constexpr int kRows = small_m_gemv_rows(kM);
  __syncthreads();
  if (threadIdx.x != 0) return;
  int slice = counts.slice_columns[0];
#pragma unroll
  for (int i = 1; i < kSmallMGemvMaxWeights; ++i)
    if (i < g.weights && static_cast<int>(blockIdx.x) >= g.block_begin[i]) slice = counts.slice_columns[i];
  const int begin = p.block * p.groups * kRows;
  const int end = min(begin + p.groups * kRows, p.n);
  for (int s = begin / slice; s * slice < end; ++s) {
    const int columns = min(end, (s + 1) * slice) - max(begin, s * slice);
    cuda::atomic_ref<unsigned, cuda::thread_scope_device> count(counts.written[s]);
    count.fetch_add(static_cast<unsigned>(columns), cuda::memory_order_release);
  }
}

}  // namespace kc::stage3::small_m_gemv_detail

namespace kc::stage3 {

// Checks rung 12's arguments and builds its launch (12_small_m_gemv.cu): the group rule, each
// weight's blocks (`blocks` receives the grid) and, as a programmatic dependent, each block's
// share of the prefetch budget.
small_m_gemv_detail::SmallMGemvLaunch plan_small_m_gemv(int m, int k, float alpha, const bf16* a,
                                                        const SmallMGemvWeight* weights, int count, float beta,
                                                        const bf16* norm_weight, float norm_eps, bool swiglu_a,
                                                        int* blocks);

}  // namespace kc::stage3
