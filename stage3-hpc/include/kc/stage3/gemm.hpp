// kc/stage3/gemm.hpp — the public GEMM entry of stage 3: C = alpha.A.B^T + beta.C in BF16.
//
// Stage 4 calls the tensor-core GEMM through this header, never through a rung. The op is the
// stage-3 one (stage3-hpc/README.md): A row-major M x K, B row-major N x K (an nn.Linear weight),
// C row-major M x N, all BF16, FP32 accumulation; BLAS semantics, so with beta = 0 C is not read.
// Leading dimensions (kc::GemmArgs::lda, ldb, ldc) are the distances between row starts, in
// elements: K, K and N for dense operands, larger for windows into wider matrices. They must be
// set: 0 is refused like any other value below the row length.
//
// An entry, on every call:
//   1. checks the arguments (check_gemm_args, check_bias_gelu_args) and throws kc::Error naming
//      the argument and the rule before any CUDA call: on bad input nothing runs and nothing is
//      written;
//   2. picks the path (choose_gemm_path, choose_bias_gelu_path): a pure function of the shape,
//      the leading dimensions, the alignment and the GPU, so CPU tests cover it exhaustively;
//   3. runs it and returns it: a GemmPath names the kc kernel that ran, or "cuBLAS GemmEx" with
//      the reason for the fallback, so the engine can report which GEMMs still fall back.
//
// The dispatch (measured on the H200: docs/benchmarks/h200/stage3-gemm.md; gemm.cpp says why):
//   - cuBLAS (cublasGemmEx, CUBLAS_COMPUTE_32F) whenever a kc kernel cannot run the call: a GPU
//     below sm_80; K % 8 != 0; leading dimensions other than the dense K, K, N; A, B or C not
//     16-byte aligned;
//   - M = 1 (kGemvMaxM: decode at batch 1), on every GPU from sm_80 on: rung 12
//     (stage3/hgemm/12_small_m_gemv), a GEMV on the CUDA cores, which measured above cuBLAS or
//     within a few points of it at M = 1 on the table's decode shapes and below it from M = 2 on,
//     where its FMAs per byte of B approach the SM's issue rate (the fused op: cuBLAS and the
//     separate bias+GELU kernel);
//   - 1 < M <= 64 (decode at small batches) on compute capability 9.0 with sm_90a code in this
//     build: the small-M table (small_m_table below) — rung 12 (M <= 8), rung 16
//     (stage3/hgemm/16_small_m_cluster_split) or cuBLAS, whichever kc-bench measured fastest on
//     the H200 at the tuned shape nearest the call; on other GPUs cuBLAS (no table measured
//     there). Rung 14 (stage3/hgemm/14_small_m_weights_as_a), faster than both on a few shapes,
//     is not a candidate: its split-K counters allow one launch at a time, and the entry may be
//     called on several streams;
//   - compute capability 9.0 (H100/H200) with sm_90a code in this build: rung 09
//     (stage3/hgemm/09_tma_store) for outputs of at least 2048 x 2048 elements and 256
//     columns, where it measures at parity with cuBLAS or above; cuBLAS below that (too few
//     tiles for the SMs), when K % 64 != 0 (rows of A and B that do not start 128-byte aligned:
//     every 128-byte TMA box row then spans two cache lines, and rung 09 measured well below
//     cuBLAS there: docs/benchmarks/h200/stage3-gemm-entry.md) and when the build has no sm_90a
//     code (rung 03 stays below cuBLAS on the H200);
//   - other GPUs from sm_80 on: rung 03 (stage3/hgemm/03_cp_async), except where it cannot
//     launch: GPUs that offer a block less than its 145 KiB of shared memory (sm_86 and sm_89
//     offer 99 KiB), and N beyond its grid (N > 65535 x 256); those go to cuBLAS.
// The fused C = gelu(alpha.A.B^T + beta.C + bias) follows the same rules with rung 10
// (stage3/gemm_bias_gelu/10_fused_bias_gelu) in rung 09's place; where it does not run
// (including every GPU other than sm_90), cuBLAS runs the GEMM and stage 3's separate
// bias_gelu_inplace kernel the epilogue — the two launches rung 10 replaces.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kc/common/gemm_args.hpp"

namespace kc {
class CublasHandle;  // kc/common/blas.hpp
}

namespace kc::stage3 {

using bf16 = __nv_bfloat16;
using HgemmArgs = GemmArgs<bf16>;

class HopperLaunchCache;  // TMA descriptors and launch facts of the Hopper rungs
struct MlpBarrier;        // device words of Gemm::run_rmsnorm_mlp's barrier (src/gemm.cpp)

// ---- the decision ----------------------------------------------------------------------------

// What runs.
enum class GemmKernel {
  hgemm_09_tma_store,             // stage3/hgemm/09_tma_store (sm_90a)
  hgemm_03_cp_async,              // stage3/hgemm/03_cp_async (sm_80+)
  hgemm_12_small_m_gemv,          // stage3/hgemm/12_small_m_gemv (sm_80+, M = 1; M <= 8 from the small-M table)
  hgemm_16_small_m_cluster_split, // stage3/hgemm/16_small_m_cluster_split (sm_90a, 1 < M <= 64, from the table)
  hgemm_17_unaligned_k_clusters,  // stage3/hgemm/17_unaligned_k_clusters (sm_90a, K % 64 != 0 and N % 8 != 0)
  cublas_gemm_ex,                 // cublasGemmEx, BF16, CUBLAS_COMPUTE_32F
  gemm_bias_gelu_10_fused,        // stage3/gemm_bias_gelu/10_fused_bias_gelu (sm_90a)
  cublas_gemm_ex_then_bias_gelu,  // cublasGemmEx, then stage 3's bias_gelu_inplace kernel
  empty_output,                   // M = 0 or N = 0: C has no element, nothing runs
  scale_c,                        // K = 0: C = beta.C (the product is empty): a memset for beta = 0,
                                  // stage 2's elementwise scale otherwise, nothing for beta = 1
};

// Why a call fell back to cuBLAS (none: a kc kernel runs it).
enum class GemmFallback {
  none,
  architecture,         // GPU below sm_80: the kc kernels use mma.sync, ldmatrix, cp.async
  k_not_multiple_of_8,  // rows of A and B are moved in 16-byte pieces
  leading_dimensions,   // lda != K, ldb != K or ldc != N: the kc kernels assume dense operands
  misaligned,           // A, B or C not 16-byte aligned
  small_m,              // 1 < M <= 64 without the small-M table (a GPU other than sm_90 with sm_90a
                        // code; the fused op at any M <= 64)
  small_m_table,        // 1 < M <= 64: the small-M table has cuBLAS fastest at the nearest tuned shape
  small_output,         // sm_90: M x N below 2048 x 2048 or N < 256, where cuBLAS measured faster
  k_rows_unaligned,     // sm_90: K % 64 != 0, rows of A and B not 128-byte aligned, and N % 8 == 0,
                        // where cuBLAS measured faster (N % 8 != 0 runs rung 17)
  no_sm90a_code,        // sm_90 GPU, but this build holds no sm_90a code for the Hopper rungs
  shared_memory,        // rung 03: a block gets less shared memory than its pipeline needs
  grid_limit,           // rung 03: N > 65535 x 256, more column blocks than its grid holds
  not_sm90,             // the fused rung 10 runs on compute capability 9.0 only
};

struct GemmPath {
  GemmKernel kernel = GemmKernel::cublas_gemm_ex;
  GemmFallback fallback = GemmFallback::none;

  bool uses_cublas() const {
    return kernel == GemmKernel::cublas_gemm_ex ||
           kernel == GemmKernel::cublas_gemm_ex_then_bias_gelu;
  }
  // "stage3/hgemm/09_tma_store", "cuBLAS GemmEx (fallback: K % 8 != 0)",
  // "cuBLAS GemmEx + stage3 bias_gelu_inplace (fallback: not an sm_90 GPU)".
  std::string name() const;

  friend bool operator==(const GemmPath& x, const GemmPath& y) {
    return x.kernel == y.kernel && x.fallback == y.fallback;
  }
  friend bool operator!=(const GemmPath& x, const GemmPath& y) { return !(x == y); }
};

// "stage3/hgemm/09_tma_store", "cuBLAS GemmEx", ...
std::string_view gemm_kernel_name(GemmKernel kernel);
// "K % 8 != 0", ...; "" for none.
std::string_view gemm_fallback_reason(GemmFallback fallback);

// The GPU and the build, as the decision sees them.
struct GemmTarget {
  // major * 10 + minor: 90 for H100/H200, 80 for A100.
  int compute_capability = 0;
  // Bytes of shared memory a block may opt into: 232448 on H100/H200, 166912 on A100.
  int shared_memory_per_block = 0;
  // The build holds sm_90a code for the Hopper rungs (CMAKE_CUDA_ARCHITECTURES has 90a).
  bool has_sm90a_code = false;
};

// Whether this build of kc_stage3 holds sm_90a code for the Hopper rungs.
bool built_with_sm90a_code();
// Whether device `ordinal` runs them: compute capability 9.0 (sm_90a code runs nowhere else) and
// such code in this build. Asks the device (a CUDA call).
bool runs_hopper_rungs(int ordinal);

// A call, as the decision sees it.
struct GemmProblem {
  int m = 0, n = 0, k = 0;
  int lda = 0, ldb = 0, ldc = 0;
  bool operands_16_byte_aligned = false;  // A, B and C all start at 16-byte aligned addresses
};
GemmProblem gemm_problem(const HgemmArgs& args);

// The smallest output rung 09 (and rung 10) take on sm_90: 2048 x 2048 elements, the smallest
// measured shape where rung 09 matched cuBLAS, and at least one 256-column tile wide.
inline constexpr long long kHopperMinOutputElements = 2048LL * 2048LL;
inline constexpr int kHopperMinColumns = 256;
// Rung 09's TMA boxes are 64 bf16 (128 bytes) wide: with K a multiple of this every row of A and B
// starts 128-byte aligned.
inline constexpr int kHopperAlignedK = 64;
// With N a multiple of this every row of C starts 16-byte aligned. Where it is not and K % 64 != 0,
// cuBLAS measured several times slower than rung 17 (its kernel for rows of C that are not 16-byte
// aligned; the stage-3 README's rung 17 has the figures), so gemm() runs rung 17 there; where it
// is, cuBLAS was the faster.
inline constexpr int kCublasAlignedN = 8;
// M at or below this is a decode shape: the plain GEMM takes M <= kGemvMaxM to rung 12 and
// 1 < M <= kSmallM through the small-M table (sm_90 with sm_90a code) or to cuBLAS; the fused op
// takes it to cuBLAS.
inline constexpr int kSmallM = 64;
// M at or below this goes to rung 12 (the rung itself takes M <= 8: kSmallMGemvMaxM in
// gemm/gemm_layout.hpp; the dispatch stops where it measured below cuBLAS).
inline constexpr int kGemvMaxM = 1;
// Rung 03's grid has one block row per 128 rows and one block column per 256 columns, at most
// 65535 of them (gridDim.y).
inline constexpr int kRung03MaxN = 65535 * 256;
// Rung 03's dynamic shared memory: 3 stages of a 128 x 64 A tile and a 256 x 64 B tile in bf16,
// plus 1 KiB to align the swizzled tiles (Rung03Config in gemm/03_cp_async.cuh).
inline constexpr int kRung03SharedMemoryBytes = 3 * (128 + 256) * 64 * 2 + 1024;

// The small-M table (stage3-hpc/gemm/small_m_dispatch_h200.json, written by
// scripts/tune_small_m_dispatch.py from kc-bench runs on the H200 and compiled in by CMake): at
// each tuning shape, 1 < M <= 64, the kernel the entry runs on an sm_90 GPU with sm_90a code —
// rung 12, rung 16 or cuBLAS, whichever measured fastest (a rung only where it beat cuBLAS by a
// point in every tuning session: the ratio moves between machines).
struct SmallMTableEntry {
  int m = 0, n = 0, k = 0;
  GemmKernel kernel = GemmKernel::cublas_gemm_ex;
};
// The rows, in the JSON's order.
const std::vector<SmallMTableEntry>& small_m_table();
// The row the dispatch follows for an M x N x K call, 1 < m <= kSmallM: among the rows of the
// smallest tuned M at or above m (its bucket: M = 3 takes the rows of M = 4, M = 33 those of
// M = 64), the one whose weight is nearest, by |log2(N / n)| + |log2(K / k)| (the first in the
// table's order on a tie). Pure. Throws kc::Error for m outside 2..kSmallM.
const SmallMTableEntry& nearest_small_m_entry(int m, int n, int k);

// The path gemm() takes for `problem` on `target`. Pure: no CUDA call. Expects a problem that
// check_gemm_args accepted.
GemmPath choose_gemm_path(const GemmProblem& problem, const GemmTarget& target);
// The path gemm_bias_gelu() takes: rung 10 where gemm() would take rung 09, otherwise cuBLAS and
// the separate bias+GELU kernel, with the reason.
GemmPath choose_bias_gelu_path(const GemmProblem& problem, const GemmTarget& target);

// ---- the checks ------------------------------------------------------------------------------

// Throws kc::Error unless `args` describe a GEMM something can run: M, N, K >= 0 (what cuBLAS
// accepts: M = 0 or N = 0 is a GEMM with no output, which reads and writes nothing, so none of its
// pointers is looked at; K = 0 is C = beta.C, which reads neither A nor B); every operand that is
// read or written non-null and aligned to a bf16 element (2 bytes); lda >= K, ldb >= K, ldc >= N;
// no matrix spanning more than 2^31 - 1 elements ((rows - 1) x ld + row length: the 32-bit
// indexing of the kernels and of cuBLAS's int arguments); alpha and beta finite. No CUDA call.
void check_gemm_args(const HgemmArgs& args);

// check_gemm_args with M, N, K >= 1 (the fused op has no empty form), and for the fused op: bias (N elements) non-null and 4-byte aligned (rung 10
// reads it in bf16 pairs); C dense (ldc = N: the separate bias+GELU kernel of the fallback walks C
// as one M x N block); when N % 8 == 0, C and bias 16-byte aligned (that kernel then moves 16-byte
// vectors). No CUDA call.
void check_bias_gelu_args(const HgemmArgs& args, const bf16* bias);

// ---- the entry -------------------------------------------------------------------------------

// Owns what the GEMM paths need between calls — the cuBLAS handle and the Hopper rungs' TMA
// descriptor cache — for one GPU. Create one per device and keep it for the life of the engine:
// no globals. Not thread-safe: give each host thread its own. The descriptor cache keeps one
// entry per distinct (pointer, shape) operand, so a caller that cycles through fresh buffers on
// every call grows it; an engine's fixed weight and activation buffers do not. The first call of
// a path on new operands does one-time host work (kernel attributes, occupancy, TMA descriptors):
// run each shape once before capturing the calls in a CUDA graph.
class Gemm {
 public:
  // Reads the compute capability and shared memory of `device` and creates a cuBLAS handle on it
  // (the current device is restored). Throws kc::CudaError without a GPU.
  explicit Gemm(int device = 0);
  // Decides as if on `target`, which may only take away what the device and the build offer (a
  // lower compute capability, less shared memory, no sm_90a code; an sm_90 decision only on an
  // sm_90 GPU): how tests run rung 03 and the cuBLAS fallbacks on an H200, and how a what-if
  // report is made. Throws kc::Error for a target that promises more.
  Gemm(int device, const GemmTarget& target);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;
  Gemm(Gemm&&) noexcept;
  Gemm& operator=(Gemm&&) noexcept;

  int device() const { return device_; }
  const GemmTarget& target() const { return target_; }

  // The path run() would take, after the same checks; launches nothing.
  GemmPath plan(const HgemmArgs& args) const;
  GemmPath plan_bias_gelu(const HgemmArgs& args, const bf16* bias) const;

  // C = alpha.A.B^T + beta.C on `stream`, asynchronously. The current device must be device().
  GemmPath run(const HgemmArgs& args, cudaStream_t stream);
  // C = gelu_tanh(alpha.A.B^T + beta.C + bias), bias a row vector of N (README: GELU, tanh form).
  GemmPath run_bias_gelu(const HgemmArgs& args, const bf16* bias, cudaStream_t stream);

  // One weight of run_shared_a: B (n x K) and C (M x n), both dense.
  struct SharedAWeight {
    const bf16* b = nullptr;
    bf16* c = nullptr;
    int n = 0;
  };
  // The plain product the shared-A entries make of one weight: C = A.B^T with A M x K, B n x K and
  // C M x n, all dense. run() plans each weight as this call.
  static HgemmArgs shared_a_args(int m, int k, const bf16* a, const SharedAWeight& weight);
  // C_i = A.B_i^T for 1 to 3 weights of the same K that share A (M x K, dense): a layer's Q, K and
  // V projections. When run() would take rung 12 for every one of them (M = 1, or M <= 8 where the
  // small-M table picks rung 12 for each weight; dense, aligned),
  // they run as one launch of rung 12, which streams the three weights as one; otherwise each runs
  // through run(). Each call is checked as run() checks it, all before anything is launched.
  // `paths`, when not null, receives the path of each weight (count of them).
  void run_shared_a(int m, int k, const bf16* a, const SharedAWeight* weights, int count, cudaStream_t stream,
                    GemmPath* paths = nullptr);
  // C_i = rmsnorm(x).B_i^T, rmsnorm(x)[m] = x[m] . norm_weight / sqrt(mean(x[m]^2) + eps) (stage
  // 2's RMSNorm), the norm done inside the one launch of rung 12 that run_shared_a would make: it
  // sums each row's squares in the same pass over x and scales the finished dot products. Only
  // where run_shared_a would fuse (every weight on rung 12); otherwise it launches nothing and
  // returns false, and the caller runs the norm (kc::stage2::rmsnorm) and run_shared_a. The
  // arguments are checked as run_shared_a checks them, plus norm_weight (K elements, 16-byte
  // aligned) and eps (finite, >= 0). `paths` as in run_shared_a.
  //
  // `counts` (not null): the launch also tells a kernel running beside it which columns are written.
  // Weight i's columns are cut into slices of counts->slice_columns[i] (every weight into the same
  // number of slices, else kc::Error), and slice s of every weight counts into counters[s]: each
  // block of the launch, once its outputs are stored, adds its columns of the slice with a release
  // at GPU scope. So counters[s] reaches the sum of the slice widths once slice s of every weight is
  // written, and a reader that acquires that value sees those outputs (decode rung 11,
  // kc/stage3/decode_args.hpp, reads a kv head's q, k and v rows this way: the slices are its query
  // heads' columns of q and its columns of k and v). The counters hold zero before the launch (the
  // caller's; nothing resets them). Counted only where the call fuses (returns true).
  struct ColumnCounts {
    unsigned* counters = nullptr;
    int slice_columns[3] = {};
  };
  bool run_rmsnorm_shared_a(int m, int k, const bf16* x, const bf16* norm_weight, float eps,
                            const SharedAWeight* weights, int count, cudaStream_t stream, GemmPath* paths = nullptr,
                            const ColumnCounts* counts = nullptr);
  // C = (silu(gate) . up).B^T + beta.C with gate_up = [gate | up], M x 2K (an MLP's down
  // projection after its fused gate/up projection), the activation (stage 2's swiglu) done inside
  // rung 12's launch as it reads A. Only where run() would take rung 12 for the M x N x K product
  // (as for run_shared_a); otherwise it launches nothing and returns false, and the
  // caller runs kc::stage2::swiglu and run(). `path`, when not null, receives the product's path.
  bool run_swiglu(int m, int k, const bf16* gate_up, const SharedAWeight& weight, float beta, cudaStream_t stream,
                  GemmPath* path = nullptr);
  // A decode step's MLP with the residual add, in one launch:
  //   gate_up = rmsnorm(x).W_gate_up^T         (M x 2I scratch; W_gate_up 2I x H: gate rows, then up)
  //   x += (silu(gate) . up).W_down^T          (W_down H x I; x M x H, read and added to in place)
  // — what run_rmsnorm_shared_a on [gate | up] followed by run_swiglu with beta = 1 computes, bit for
  // bit: rung 12's two passes with a grid-wide barrier between them (gemm/12_small_m_gemv_mlp.cu),
  // one launch where the two make two. Only where both products would take rung 12 (as for
  // run_shared_a) and one CTA per block of the larger pass fits on the GPU at once (a small
  // model's MLP: SmolLM2's does, Llama-3.2-1B's does not); otherwise it launches nothing and returns
  // false, and the caller makes the two calls. The arguments are checked as those two calls check
  // them. The barrier is this Gemm's: one run_rmsnorm_mlp in flight at a time (the calls of one
  // stream, in order, are). `paths`, when not null, receives the two products' paths (gate_up,
  // then down).
  bool run_rmsnorm_mlp(int m, int hidden, int intermediate, bf16* x, const bf16* norm_weight, float eps,
                       const bf16* gate_up_weight, bf16* gate_up, const bf16* down_weight, cudaStream_t stream,
                       GemmPath* paths = nullptr);

 private:
  void require_current_device() const;
  // Checks and plans each weight of a shared-A call; true when every one takes rung 12.
  bool plan_shared_a(const char* entry, int m, int k, const bf16* a, const SharedAWeight* weights, int count,
                     HgemmArgs* calls, GemmPath* paths) const;
  void run_cublas(const HgemmArgs& args, cudaStream_t stream);
  void scale_c(const HgemmArgs& args, cudaStream_t stream);  // the K = 0 path

  int device_ = 0;
  GemmTarget target_;
  int sm_count_ = 0;  // the device's SMs: rung 16's split plan
  std::unique_ptr<CublasHandle> cublas_;
  std::unique_ptr<HopperLaunchCache> hopper_;
  std::unique_ptr<MlpBarrier> mlp_barrier_;  // run_rmsnorm_mlp's grid-wide barrier (two words)
};

// A Gemm for the device current on the calling thread (cudaGetDevice): what an object made before
// anyone chose the device (a kc-bench rung, created at registration) builds at its first launch.
std::unique_ptr<Gemm> make_gemm_on_current_device();

}  // namespace kc::stage3
