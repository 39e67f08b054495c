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
// Weights that share A (a layer's Q, K and V projections at decode) go in one launch
// (hgemm_12_small_m_gemv_shared_a, behind Gemm::run_shared_a): the grid is the blocks of the first
// weight, then of the second, then of the third, and a block finds its weight by its index. Three
// launches of 8 + 2 + 2 MB (Llama-3.2-1B) each pay the launch and the ramp to full bandwidth; one
// launch of 12 MB pays them once.
//
// An RMSNorm prologue (the kNorm instances; Gemm::run_rmsnorm_shared_a): C = rmsnorm(A).B^T with
// the norm in the same pass. The group's threads between them read every piece of each row of A,
// so each sums the squares of the pieces it reads (8M more FFMA per piece of A) and the group's
// reduction gives the row's sum of squares next to its dot products; A is multiplied by the
// norm's weight as it is read, and 1 / sqrt(mean + eps) scales the finished sums. The engine's
// decode step loses the separate norm kernels this way (RunnerOptions::fuse_kernels).
//
// A SwiGLU prologue (the kSwiglu instances; Gemm::run_swiglu): C = (silu(gate) . up).B^T with A
// given as [gate | up] (M x 2K), the activation computed where A is read (stage 2's core::Silu),
// so the MLP's down projection at decode needs no separate swiglu launch.
//
// In a chain of kernels (the engine's decode step, inside a core::ProgrammaticLaunchScope on an
// sm_90 GPU) the rung launches as a programmatic dependent of the kernel before it
// (kc/core/dependent_launch.hpp): its blocks start while that kernel drains — or while the
// latency-bound kernels before it (RoPE, attention) run — ask the L2 for the first bytes of
// their rows of B with one bulk prefetch each (the grid's share of small_m_gemv_prefetch_budget()),
// and wait for the previous grid only before they read A. The launch gap and the ramp to full
// bandwidth then overlap the previous kernel instead of following it. With
// set_small_m_gemv_first_trip_before_wait (kc/stage3/small_m_gemv_knobs.hpp; on by default) each thread also issues the
// loads of its first trip of the K loop there, into registers (the kFirstTripEarly instances): at
// the Llama-3.2-1B widths a thread's whole share of the o projection is one trip, so a block that
// is resident before the attention ahead of it ends can hold all of its weights by then (the
// engine's measurement: docs/notes/2026-12-07-stage4-first-trip-h100-a8b1fef.md). The MLP in
// one launch (12_small_m_gemv_mlp.cu) does not take it. Alone (kc-bench, or outside a scope) it
// launches the ordinary way and prefetches nothing.
//
// The device code (what a launch computes, the loads, the per-piece products and one block's work)
// is in small_m_gemv.cuh, which the decode MLP in one launch (12_small_m_gemv_mlp.cu) shares.
//
// The group size is chosen at launch from K and N (choose_small_m_gemv_group below): long rows get
// more threads per column, so that each thread has a few 16-byte pieces to fetch; and narrow
// outputs (N small, as the K and V projections of a GQA model) get wider groups so that the grid
// still covers every SM several times.
//
// Analysis (not measurements): bytes in flight. Little's law with ~4.2 TB/s and ~0.7 us of loaded
// DRAM latency asks for ~3 MB in flight over the GPU, ~22 KB per SM. A thread here issues
// kUnroll x kRows loads of 16 bytes before it uses any (2 x 4 x 16 = 128 bytes at M <= 2,
// 2 x 2 x 16 = 64 at M > 2); 2-3 resident blocks of 256 threads (the two-piece instance's
// registers allow no more) keep 64-96 KB per SM in flight while their loads are out, several times
// the need on paper — but a thread waits for its trip's loads before it issues the next, and a
// block's share of a short row is one or two trips, so what is actually in flight depends on how
// many blocks are resident (below). Instruction issue: per 16 bytes of B a thread does 8 x M FMAs,
// 8 conversions of B and 8 x M / kRows conversions of A; at DRAM speed an SM receives ~18 bytes
// of B per clock (4.8 TB/s / 132 SMs / 1.98 GHz, the peak), so at M = 8 about 1.1 pieces x
// (64 + 8 + 32) ~ 115 thread-instructions per clock against the 128 an SM issues: close to the
// issue limit (rung 11's header makes the same count for M = 8, which is why it uses
// the tensor cores). At M <= 4 the issue rate has twice the room, and DRAM is the limit.
//
// Two instances at M = 1: a trip of the K loop loads two pieces of each of the thread's 4 rows
// (8 loads, 32 registers of B) or one (4 loads). With two, ptxas gives the kernel 80-94 registers,
// so 2-3 blocks of 256 threads fit on an SM; with one, and launch bounds that ask for 4 blocks,
// 44-63. A grid the GPU holds at once with two (at most 2 blocks an SM) takes two: every thread's
// pieces arrive in half the trips, and more resident blocks would have nothing to run. A larger
// grid — every projection of Llama-3.2-1B and -8B at decode, and SmolLM2's output projection —
// takes one: more blocks resident, so more of the grid's loads in flight at any moment and fewer
// waves, which on the H200 was worth more than the deeper trip (the stage-3 README's rung-12
// section has the measurement and the kc-gemv-chain rows that compare the two). M > 1 keeps two
// pieces (kRows = 2 above M = 2: 4 loads a trip already); M = 2 with one piece has not been
// measured.
//
// Expected limiter: DRAM bandwidth for M <= 4 on projections of megabytes; the launch and the
// ramp (a few microseconds) on small matrices, where no kernel reaches the roof; the FMA issue
// rate approaching at M = 8.
//
// SASS to look for (cuobjdump -sass -arch sm_90a <build>/stage3-hpc/CMakeFiles/kc_stage3.dir/
// gemm/12_small_m_gemv.cu.o): in small_m_gemv_kernel<M, norm, swiglu, 2> (R = small_m_gemv_rows(M)
// columns a group), per loop trip 2R LDG.E.NA.LTC256B.128.CONSTANT (B, through the non-coherent
// path, L1 not allocated, 256-byte L2 prefetch; LTC128B on sm_80) issued before the first FFMA, 2M
// LDG.E.128.CONSTANT (A), 16MR FFMA per trip (8MR a piece; 16M more with the norm),
// PRMT/SHF/IMAD.U32 for the bf16 -> f32 conversions; after the loop SHFL.BFLY, one BAR.SYNC,
// STS/LDS; no LDL/STL (tests/sass/contracts.md). The one-piece instances (<1, norm, swiglu, 1>):
// R loads and 8MR FFMA a trip, no more than 64 registers, still no LDL/STL.
//
// Refuses: M > 8 (rung 11 and the tile rungs), K % 8 != 0 (16-byte pieces), and leading
// dimensions other than the dense K, K, N or A and B not 16-byte aligned (the op's conformance
// problems are all dense and aligned).
//
// Run just this rung:
//   kc-bench --filter 'hgemm/1[12]_' --shapes 1x4096x4096,1x1024x4096,1x28672x4096,1x4096x14336,2x4096x4096,8x4096x4096
#include <atomic>
#include <cmath>
#include <cstdint>

#include "arch/util.hpp"
#include "gemm_layout.hpp"
#include "hgemm.hpp"
#include "kc/common/device.hpp"
#include "kc/common/error.hpp"
#include "kc/core/dependent_launch.cuh"
#include "small_m_gemv.cuh"

namespace kc::stage3 {
namespace {

using namespace small_m_gemv_detail;
// As a programmatic dependent, the bytes of B the whole grid asks the L2 for before the previous
// kernel ends (hgemm.hpp): few enough that what is fetched early is still there when it is read.
std::atomic<std::size_t> prefetch_budget{kSmallMGemvDefaultPrefetchBudget};

// How rung 12 at M = 1 walks K (hgemm.hpp); `automatic` unless kc-gemv-chain or a test forces one.
std::atomic<SmallMGemvTrip> trip_choice{SmallMGemvTrip::automatic};

// Whether a programmatic dependent loads its first trip before the wait (small_m_gemv_knobs.hpp).
std::atomic<bool> first_trip_early{kSmallMGemvDefaultFirstTripBeforeWait};

// One block: kThreads / group_threads groups, each owning kRows consecutive columns of C, all in
// one weight of `g` (the weight whose block range holds blockIdx.x). kUnroll pieces of each row a
// thread per trip of the K loop; the one-piece instance asks ptxas for 4 resident blocks an SM
// (at most 64 registers a thread), the two-piece instance for 2.
// kFirstTripEarly (launched only as a programmatic dependent, with first_trip_before_wait): every
// thread's loads of its first trip of the K loop go out before the wait as well.
template <int kM, bool kNorm, bool kSwiglu, int kUnroll, bool kFirstTripEarly>
__device__ __forceinline__ SmallMGemvPlace small_m_gemv_run_block(const SmallMGemvLaunch& g) {
  const SmallMGemvPlace place = small_m_gemv_place<kM>(g, [] { return static_cast<int>(blockIdx.x); });
  // As a programmatic dependent (a decode step's chain of kernels): let the next kernel's blocks
  // in, ask the L2 for the first bytes of this block's rows of B (the weights: no kernel writes
  // them), and only then wait for the kernel before, whose output A is. Launched the ordinary
  // way, prefetch_bytes is 0 and the wait returns at once.
  core::let_dependent_grids_start();
  SmallMGemvFirstTrip<kM, kUnroll> first;  // kFirstTripEarly only
  if constexpr (kFirstTripEarly) load_first_trip<kM, kUnroll>(g, place, first);
  if (g.prefetch_bytes != 0 && threadIdx.x == 0) small_m_gemv_prefetch<kM>(g, place, g.prefetch_bytes);
  core::wait_for_previous_grids();
  small_m_gemv_block<kM, kNorm, kSwiglu, /*kCoherentA=*/false, kUnroll, /*kFirstTripLoaded=*/kFirstTripEarly>(
      g, place, &first);
  return place;
}

template <int kM, bool kNorm, bool kSwiglu, int kUnroll, bool kFirstTripEarly = false>
__global__ void __launch_bounds__(kThreads, kUnroll == 1 ? 4 : 2) small_m_gemv_kernel(SmallMGemvLaunch g) {
  small_m_gemv_run_block<kM, kNorm, kSwiglu, kUnroll, kFirstTripEarly>(g);
}

// A launch with column counts (Gemm::ColumnCounts; the RMSNorm prologue, a layer's q|k|v): the
// kNorm instance's block, then its columns counted into their slices' counters with a release
// (count_written_columns, small_m_gemv.cuh) for the kernel that reads them beside this one. (Its
// own kernel, so that the others' instances keep their names and code.)
template <int kM, int kUnroll, bool kFirstTripEarly>
__global__ void __launch_bounds__(kThreads, kUnroll == 1 ? 4 : 2)
    small_m_gemv_counting_kernel(SmallMGemvLaunch g, SmallMGemvColumnCounts counts) {
  const SmallMGemvPlace place = small_m_gemv_run_block<kM, /*kNorm=*/true, /*kSwiglu=*/false, kUnroll,
                                                       kFirstTripEarly>(g);
  count_written_columns<kM>(g, place, counts);
}

void check_weight(const char* what, int m, int n, int k, const bf16* a, const bf16* b, const bf16* c) {
  require(m >= 1 && m <= kSmallMGemvMaxM,
          "{}: M = {} is outside 1..{}; this rung keeps M x 2 or 4 sums per thread in registers, larger M "
          "belongs to rung 11 and the tile rungs",
          what, m, kSmallMGemvMaxM);
  require(n >= 1 && k >= 1 && k % 8 == 0,
          "{}: N = {} and K = {} must be positive and K a multiple of 8 (16-byte loads)", what, n, k);
  require(a != nullptr && b != nullptr && c != nullptr, "{}: A, B and C must be device pointers, not null", what);
  require(aligned_16(a) && aligned_16(b), "{}: A and B must start 16-byte aligned for 16-byte loads; got A = {}, B = {}",
          what, static_cast<const void*>(a), static_cast<const void*>(b));
}

template <int kM, int kUnroll, bool kFirstTripEarly>
void launch_instance(const SmallMGemvLaunch& g, int blocks, cudaStream_t stream, const SmallMGemvColumnCounts* counts) {
  if (counts != nullptr) {  // the RMSNorm prologue only (check_column_counts)
    core::launch_dependent(small_m_gemv_counting_kernel<kM, kUnroll, kFirstTripEarly>, dim3(blocks), dim3(kThreads),
                           0, stream, g, *counts);
    return;
  }
  const auto kernel = g.norm_weight != nullptr ? small_m_gemv_kernel<kM, true, false, kUnroll, kFirstTripEarly>
                      : g.swiglu               ? small_m_gemv_kernel<kM, false, true, kUnroll, kFirstTripEarly>
                                               : small_m_gemv_kernel<kM, false, false, kUnroll, kFirstTripEarly>;
  core::launch_dependent(kernel, dim3(blocks), dim3(kThreads), 0, stream, g);
}

template <int kM, int kUnroll>
void launch_instance(const SmallMGemvLaunch& g, int blocks, cudaStream_t stream, const SmallMGemvColumnCounts* counts) {
  if (g.first_trip_before_wait)
    launch_instance<kM, kUnroll, true>(g, blocks, stream, counts);
  else
    launch_instance<kM, kUnroll, false>(g, blocks, stream, counts);
}

// At M = 1 the two-piece instance (launch bounds: 2 blocks an SM) when the whole grid is resident
// at once with it, every thread's pieces in as few trips as possible; beyond that the one-piece
// instance, whose smaller register count keeps more blocks, and more loads, on each SM.
bool one_piece_trips(int blocks) {
  switch (trip_choice.load()) {
    case SmallMGemvTrip::two_pieces: return false;
    case SmallMGemvTrip::one_piece: return true;
    case SmallMGemvTrip::automatic: break;
  }
  return blocks > 2 * current_device_sm_count();
}

template <int kM>
void launch_kernel(const SmallMGemvLaunch& g, int blocks, cudaStream_t stream, const SmallMGemvColumnCounts* counts) {
  if constexpr (kM == 1) {
    if (one_piece_trips(blocks)) {
      launch_instance<kM, 1>(g, blocks, stream, counts);
      return;
    }
  }
  launch_instance<kM, 2>(g, blocks, stream, counts);
}

void small_m_gemv_launch(const SmallMGemvLaunch& g, int m, int blocks, cudaStream_t stream,
                         const SmallMGemvColumnCounts* counts) {
  switch (m) {
    case 1: launch_kernel<1>(g, blocks, stream, counts); break;
    case 2: launch_kernel<2>(g, blocks, stream, counts); break;
    case 3: launch_kernel<3>(g, blocks, stream, counts); break;
    case 4: launch_kernel<4>(g, blocks, stream, counts); break;
    case 5: launch_kernel<5>(g, blocks, stream, counts); break;
    case 6: launch_kernel<6>(g, blocks, stream, counts); break;
    case 7: launch_kernel<7>(g, blocks, stream, counts); break;
    default: launch_kernel<8>(g, blocks, stream, counts); break;
  }
}

// The column counts' arguments (hgemm_12_small_m_gemv_shared_a): the RMSNorm prologue, aligned
// counters, and every weight's columns cut into the same number of whole slices.
SmallMGemvColumnCounts check_column_counts(const SmallMGemvWeight* weights, int count, const bf16* norm_weight,
                                           unsigned* written, const int* slice_columns) {
  require(norm_weight != nullptr && slice_columns != nullptr,
          "hgemm rung 12: column counts come with the RMSNorm prologue and a slice width for every weight");
  require(reinterpret_cast<std::uintptr_t>(written) % alignof(unsigned) == 0,
          "hgemm rung 12: the column counters must be 4-byte aligned device memory; got {}",
          static_cast<void*>(written));
  SmallMGemvColumnCounts counts;
  counts.written = written;
  const int slices = slice_columns[0] >= 1 ? weights[0].n / slice_columns[0] : 0;
  for (int i = 0; i < count; ++i) {
    require(slice_columns[i] >= 1 && weights[i].n % slice_columns[i] == 0 && weights[i].n / slice_columns[i] == slices,
            "hgemm rung 12: weight {} has {} columns, which slices of {} do not cut into the {} whole slices of "
            "weight 0 (every weight's columns must make the same number of counters)",
            i, weights[i].n, slice_columns[i], slices);
    counts.slice_columns[i] = slice_columns[i];
  }
  return counts;
}

}  // namespace

void set_small_m_gemv_prefetch_budget(std::size_t bytes) { prefetch_budget.store(bytes); }
std::size_t small_m_gemv_prefetch_budget() { return prefetch_budget.load(); }
void set_small_m_gemv_trip(SmallMGemvTrip trip) { trip_choice.store(trip); }
void set_small_m_gemv_first_trip_before_wait(bool on) { first_trip_early.store(on); }
bool small_m_gemv_first_trip_before_wait() { return first_trip_early.load(); }
SmallMGemvTrip small_m_gemv_trip() { return trip_choice.load(); }

void hgemm_12_small_m_gemv(const HgemmArgs& args, cudaStream_t stream) {
  require(args.lda == args.k && args.ldb == args.k && args.ldc == args.n,
          "hgemm rung 12: dense operands only (lda = K, ldb = K, ldc = N); got lda = {}, ldb = {}, ldc = {}",
          args.lda, args.ldb, args.ldc);
  SmallMGemvWeight weight{args.b, args.c, args.n};
  hgemm_12_small_m_gemv_shared_a(args.m, args.k, args.alpha, args.a, &weight, 1, args.beta, stream);
}

SmallMGemvLaunch plan_small_m_gemv(int m, int k, float alpha, const bf16* a, const SmallMGemvWeight* weights, int count,
                                   float beta, const bf16* norm_weight, float norm_eps, bool swiglu_a, int* blocks) {
  require(!(swiglu_a && norm_weight != nullptr), "hgemm rung 12: an RMSNorm and a SwiGLU prologue together");
  require(norm_weight == nullptr || (aligned_16(norm_weight) && std::isfinite(norm_eps) && norm_eps >= 0.f),
          "hgemm rung 12: the RMSNorm weight must be 16-byte aligned (got {}) and eps finite and >= 0 (got {})",
          static_cast<const void*>(norm_weight), norm_eps);
  require(count >= 1 && count <= kSmallMGemvMaxWeights, "hgemm rung 12: {} weights; one launch takes 1 to {}",
          count, kSmallMGemvMaxWeights);
  long long total_n = 0;
  for (int i = 0; i < count; ++i) {
    check_weight("hgemm rung 12", m, weights[i].n, k, a, weights[i].b, weights[i].c);
    total_n += weights[i].n;
  }
  require(total_n <= INT32_MAX, "hgemm rung 12: the weights have {} rows in all, more than 2^31 - 1", total_n);
  const SmallMGemvGroup group =
      choose_small_m_gemv_group(m, static_cast<int>(total_n), k, current_device_sm_count());
  SmallMGemvLaunch g;
  g.a = a;
  g.k = k;
  g.alpha = alpha;
  g.beta = beta;
  g.weights = count;
  g.group_threads = group.threads;
  g.norm_weight = norm_weight;
  g.norm_eps = norm_eps;
  g.swiglu = swiglu_a;
  const int columns_per_block = (kThreads / group.threads) * small_m_gemv_rows(m);
  *blocks = 0;
  for (int i = 0; i < count; ++i) {
    g.b[i] = weights[i].b;
    g.c[i] = weights[i].c;
    g.n[i] = weights[i].n;
    g.block_begin[i] = *blocks;
    *blocks += ceil_div(weights[i].n, columns_per_block);
  }
  if (core::programmatic_launch_active()) {  // the budget shared by the blocks, 16-byte multiples
    g.prefetch_bytes = static_cast<std::uint32_t>(prefetch_budget.load() / *blocks / 16 * 16);
    g.first_trip_before_wait = first_trip_early.load();
  }
  return g;
}

void hgemm_12_small_m_gemv_shared_a(int m, int k, float alpha, const bf16* a, const SmallMGemvWeight* weights,
                                    int count, float beta, cudaStream_t stream, const bf16* norm_weight,
                                    float norm_eps, bool swiglu_a, unsigned* written, const int* slice_columns) {
  int blocks = 0;
  const SmallMGemvLaunch g =
      plan_small_m_gemv(m, k, alpha, a, weights, count, beta, norm_weight, norm_eps, swiglu_a, &blocks);
  if (written != nullptr) {
    const SmallMGemvColumnCounts counts = check_column_counts(weights, count, norm_weight, written, slice_columns);
    small_m_gemv_launch(g, m, blocks, stream, &counts);
  } else {
    small_m_gemv_launch(g, m, blocks, stream, nullptr);
  }
}

}  // namespace kc::stage3
