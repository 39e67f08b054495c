// The public GEMM entry of stage 3 (kc/stage3/gemm.hpp): checks, the dispatch, and the Gemm object.
//
// The dispatch thresholds come from docs/benchmarks/h200/stage3-gemm.md (kc-bench, H200, BF16, each
// rung timed in alternation with cublasGemmEx on the same operands): rung 09 (and the fused
// rung 10) are at parity with cuBLAS or above from 2048 x 2048 outputs up and well below at 1024³,
// where 32 tiles of 128 x 256 leave most of the 132 SMs idle; rung 03 stays below cuBLAS on the
// H200 except on the odd shape, where cuBLAS itself is slow. So on the H200: rung 09 (and 10)
// from 2048 x 2048 outputs up, cuBLAS below — and cuBLAS, not rung 03, when the build has no
// sm_90a code. Nothing between 1024² and 2048² outputs was measured, so the threshold sits at the
// smallest shape where rung 09 matched cuBLAS. The measured shapes have K from 1032 to 14336; K is
// not part of the rule. Rung 03 on other GPUs (A100 and later non-Hopper parts) has not been
// measured against cuBLAS there: it is kc's kernel for them until a table says otherwise. Decode
// shapes with M = 1 go to rung 12 (a GEMV on the CUDA cores) on every GPU from sm_80 on, where the
// table's decode columns have it above cuBLAS on the smaller weights and within a few points on
// the largest. Shapes with 1 < M <= 64 (a 128-row tile would be mostly empty) follow the small-M
// table on an sm_90 GPU with sm_90a code: rung 12, rung 16 or cuBLAS, per tuned shape, whichever
// kc-bench measured fastest on the H200 (stage3-hpc/gemm/small_m_dispatch_h200.json, written by
// scripts/tune_small_m_dispatch.py, compiled in from the generated small_m_dispatch_h200.inc); a
// call between the tuned shapes takes its M bucket's nearest weight. Elsewhere they go to cuBLAS:
// nothing was measured there.
#include "kc/stage3/gemm.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <utility>

#include "hgemm.hpp"
#include "kc/common/blas.hpp"
#include "kc/common/buffer.hpp"
#include "kc/common/device.hpp"
#include "kc/common/error.hpp"
#include "kc/stage2/ops.hpp"
#include "arch/util.hpp"
#include "arch/sm90/tma_descriptor.hpp"

#ifndef KC_STAGE3_HAS_SM90A
#define KC_STAGE3_HAS_SM90A 0
#endif

namespace kc::stage3 {
namespace {

// The largest span of one matrix, in elements, that 32-bit indexing reaches.
constexpr std::int64_t kMaxMatrixSpan = INT32_MAX;

// One row-major operand: `rows` rows of `cols` elements, `ld` elements apart.
struct Operand {
  const char* name;       // "A"
  const char* ld_name;    // "lda"
  const char* rows_name;  // "M"
  const char* cols_name;  // "K"
  const void* pointer;
  int rows, cols, ld;
};

void check_operand(const char* entry, const Operand& x) {
  require(x.pointer != nullptr,
          "{}: {} is a null pointer; pass the device address of {} ({} x {}, "
          "row-major bf16)",
          entry, x.name, x.name, x.rows_name, x.cols_name);
  require(aligned(x.pointer, sizeof(bf16)),
          "{}: {} = {} is not aligned to 2 bytes, the size of one bf16; pass the address of an "
          "element",
          entry, x.name, x.pointer);
  require(x.ld >= x.cols,
          "{}: {} = {} is smaller than {} = {}, the length of a row of {}; set {} = {} for a dense "
          "{}, or to the row pitch of the wider matrix {} is a window into",
          entry, x.ld_name, x.ld, x.cols_name, x.cols, x.name, x.ld_name, x.cols_name, x.name,
          x.name);
  const std::int64_t span = (std::int64_t{x.rows} - 1) * x.ld + x.cols;
  require(
      span <= kMaxMatrixSpan,
      "{}: {} spans ({} - 1) x {} + {} = {} elements, more than 2^31 - 1: the kernels and cuBLAS "
      "index with 32-bit integers; split the GEMM along M or N into smaller ones",
      entry, x.name, x.rows_name, x.ld_name, x.cols_name, span);
}

// `empty_allowed`: the plain GEMM takes M, N or K = 0 as cuBLAS does (check_gemm_args).
void check_gemm(const char* entry, const HgemmArgs& args, bool empty_allowed) {
  if (!empty_allowed)
    require(args.m >= 1 && args.n >= 1 && args.k >= 1,
            "{}: M = {}, N = {}, K = {}; each must be at least 1 (this entry has no empty form: run the "
            "plain GEMM, Gemm::run, which takes 0)",
            entry, args.m, args.n, args.k);
  require(args.m >= 0 && args.n >= 0 && args.k >= 0, "{}: M = {}, N = {}, K = {}; a dimension cannot be negative",
          entry, args.m, args.n, args.k);
  require(std::isfinite(args.alpha) && std::isfinite(args.beta),
          "{}: alpha = {} and beta = {} must both be finite (beta = 0 means C is not read)", entry,
          args.alpha, args.beta);
  if (args.m == 0 || args.n == 0) return;  // no output: nothing is read or written
  if (args.k > 0) {  // K = 0: C = beta.C, A and B are not read
    check_operand(entry, {"A", "lda", "M", "K", args.a, args.m, args.k, args.lda});
    check_operand(entry, {"B", "ldb", "N", "K", args.b, args.n, args.k, args.ldb});
  }
  check_operand(entry, {"C", "ldc", "M", "N", args.c, args.m, args.n, args.ldc});
}

constexpr const char* kGemmEntry = "kc::stage3::Gemm::run";
constexpr const char* kBiasGeluEntry = "kc::stage3::Gemm::run_bias_gelu";

bool dense(const GemmProblem& p) { return p.lda == p.k && p.ldb == p.k && p.ldc == p.n; }

// The reasons no kc kernel can run the call, common to both ops, in the order they are reported.
GemmFallback hard_constraint(const GemmProblem& p) {
  if (p.k % 8 != 0) return GemmFallback::k_not_multiple_of_8;
  if (!dense(p)) return GemmFallback::leading_dimensions;
  if (!p.operands_16_byte_aligned) return GemmFallback::misaligned;
  return GemmFallback::none;
}

// After hard_constraint: 1 < M <= 64, the small-M table's calls.
static_assert(kGemvMaxM <= kSmallMGemvMaxM, "the dispatch sends rung 12 only what it takes");
static_assert(kSmallM == kSmallMMaxM, "the table's M range is rung 16's");
bool small_m_call(const GemmProblem& p) { return p.m > kGemvMaxM && p.m <= kSmallM; }

const std::vector<SmallMTableEntry> kSmallMTable = {
#include "small_m_dispatch_h200.inc"
};

// How far apart two weights are for the table: |log2(n / n')| + |log2(k / k')|.
double weight_distance(int n, int k, const SmallMTableEntry& e) {
  return std::fabs(std::log2(static_cast<double>(n) / e.n)) + std::fabs(std::log2(static_cast<double>(k) / e.k));
}

// On an sm_90 GPU: none when the Hopper rung (09 or 10) takes the call.
GemmFallback hopper_fallback(const GemmProblem& p, const GemmTarget& target) {
  if (!target.has_sm90a_code) return GemmFallback::no_sm90a_code;
  const long long outputs = static_cast<long long>(p.m) * p.n;
  if (outputs < kHopperMinOutputElements || p.n < kHopperMinColumns)
    return GemmFallback::small_output;
  if (p.k % kHopperAlignedK != 0) return GemmFallback::k_rows_unaligned;
  return GemmFallback::none;
}

struct ScopedDevice {
  explicit ScopedDevice(int device) {
    KC_CUDA_CHECK(cudaGetDevice(&previous));
    KC_CUDA_CHECK(cudaSetDevice(device));
  }
  ~ScopedDevice() { (void)cudaSetDevice(previous); }
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;
  int previous = 0;
};

GemmTarget query_target(int device) {
  int count = 0;
  KC_CUDA_CHECK(cudaGetDeviceCount(&count));
  require(device >= 0 && device < count,
          "kc::stage3::Gemm: there is no CUDA device {}; this machine has {} (ordinals 0 to {})",
          device, count, count - 1);
  int major = 0, minor = 0, shared = 0;
  KC_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  KC_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  KC_CUDA_CHECK(cudaDeviceGetAttribute(&shared, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return {major * 10 + minor, shared, built_with_sm90a_code()};
}

static_assert(sizeof(Gemm::ColumnCounts::slice_columns) / sizeof(int) == kSmallMGemvMaxWeights,
              "a slice width for each weight a shared-A launch takes");

// One launch of rung 12 over the weights of a shared-A call, every one of which plan_shared_a
// found on rung 12; with an RMSNorm (norm_weight) or SwiGLU prologue when asked, and column counts
// (Gemm::ColumnCounts) when given.
void launch_on_rung12(int m, int k, const bf16* a, const Gemm::SharedAWeight* weights, int count, float beta,
                      cudaStream_t stream, const bf16* norm_weight = nullptr, float eps = 0.f, bool swiglu = false,
                      const Gemm::ColumnCounts* counts = nullptr) {
  SmallMGemvWeight fused[kSmallMGemvMaxWeights];
  for (int i = 0; i < count; ++i) fused[i] = {weights[i].b, weights[i].c, weights[i].n};
  hgemm_12_small_m_gemv_shared_a(m, k, 1.f, a, fused, count, beta, stream, norm_weight, eps, swiglu,
                                 counts != nullptr ? counts->counters : nullptr,
                                 counts != nullptr ? counts->slice_columns : nullptr);
  KC_CHECK_LAUNCH();
}

}  // namespace

// ---- names -------------------------------------------------------------------------------------

std::string_view gemm_kernel_name(GemmKernel kernel) {
  switch (kernel) {
    case GemmKernel::hgemm_09_tma_store: return "stage3/hgemm/09_tma_store";
    case GemmKernel::hgemm_03_cp_async: return "stage3/hgemm/03_cp_async";
    case GemmKernel::hgemm_12_small_m_gemv: return "stage3/hgemm/12_small_m_gemv";
    case GemmKernel::hgemm_16_small_m_cluster_split: return "stage3/hgemm/16_small_m_cluster_split";
    case GemmKernel::hgemm_17_unaligned_k_clusters: return "stage3/hgemm/17_unaligned_k_clusters";
    case GemmKernel::cublas_gemm_ex: return "cuBLAS GemmEx";
    case GemmKernel::gemm_bias_gelu_10_fused:
      return "stage3/gemm_bias_gelu/10_fused_bias_gelu";
    case GemmKernel::cublas_gemm_ex_then_bias_gelu:
      return "cuBLAS GemmEx + stage3 bias_gelu_inplace";
    case GemmKernel::empty_output: return "nothing to run (M or N is 0)";
    case GemmKernel::scale_c: return "C = beta.C (K is 0): a memset or stage2 elementwise scale";
  }
  return "unknown GEMM kernel";
}

std::string_view gemm_fallback_reason(GemmFallback fallback) {
  switch (fallback) {
    case GemmFallback::none: return "";
    case GemmFallback::architecture: return "GPU below sm_80";
    case GemmFallback::k_not_multiple_of_8: return "K % 8 != 0";
    case GemmFallback::leading_dimensions:
      return "leading dimensions other than lda = K, ldb = K, ldc = N";
    case GemmFallback::misaligned: return "A, B or C not 16-byte aligned";
    case GemmFallback::small_m:
      return "M <= 64 without the small-M table (measured on sm_90 with sm_90a code only, for the plain GEMM; "
             "rung 12 takes M = 1 of the plain GEMM)";
    case GemmFallback::small_m_table:
      return "1 < M <= 64, where the small-M table has cuBLAS fastest at the nearest tuned shape";
    case GemmFallback::small_output:
      return "output below 2048 x 2048 or narrower than 256 columns, where cuBLAS measured faster";
    case GemmFallback::k_rows_unaligned:
      return "K % 64 != 0 (rows of A and B not 128-byte aligned) and N % 8 == 0, where cuBLAS measured faster";
    case GemmFallback::no_sm90a_code: return "sm_90 GPU, but this build has no sm_90a code";
    case GemmFallback::shared_memory:
      return "the GPU offers a block less than rung 03's 145 KiB of shared memory";
    case GemmFallback::grid_limit: return "N > 16776960, beyond rung 03's grid";
    case GemmFallback::not_sm90: return "not an sm_90 GPU";
  }
  return "unknown reason";
}

std::string GemmPath::name() const {
  if (fallback == GemmFallback::none) return std::string(gemm_kernel_name(kernel));
  return fmt::format("{} (fallback: {})", gemm_kernel_name(kernel), gemm_fallback_reason(fallback));
}

bool built_with_sm90a_code() { return KC_STAGE3_HAS_SM90A != 0; }

bool runs_hopper_rungs(int ordinal) {
  return built_with_sm90a_code() && query_device(ordinal).compute_capability() == 90;
}

// ---- the decision ------------------------------------------------------------------------------

const std::vector<SmallMTableEntry>& small_m_table() { return kSmallMTable; }

const SmallMTableEntry& nearest_small_m_entry(int m, int n, int k) {
  require(m > kGemvMaxM && m <= kSmallM && n >= 1 && k >= 1,
          "kc::stage3::nearest_small_m_entry: M = {}, N = {}, K = {}; the small-M table covers {} < M <= {} "
          "and N, K >= 1",
          m, n, k, kGemvMaxM, kSmallM);
  int bucket = 0;  // the smallest tuned M at or above m
  for (const SmallMTableEntry& e : kSmallMTable)
    if (e.m >= m && (bucket == 0 || e.m < bucket)) bucket = e.m;
  require(bucket != 0, "kc::stage3::nearest_small_m_entry: the small-M table has no row with M >= {}", m);
  const SmallMTableEntry* nearest = nullptr;
  double best = 0.0;
  for (const SmallMTableEntry& e : kSmallMTable) {
    if (e.m != bucket) continue;
    const double distance = weight_distance(n, k, e);
    if (nearest == nullptr || distance < best) {
      nearest = &e;
      best = distance;
    }
  }
  return *nearest;
}

GemmProblem gemm_problem(const HgemmArgs& args) {
  GemmProblem p;
  p.m = args.m;
  p.n = args.n;
  p.k = args.k;
  p.lda = args.lda;
  p.ldb = args.ldb;
  p.ldc = args.ldc;
  p.operands_16_byte_aligned = aligned(args.a, 16) && aligned(args.b, 16) && aligned(args.c, 16);
  return p;
}

GemmPath choose_gemm_path(const GemmProblem& p, const GemmTarget& target) {
  const auto cublas = [](GemmFallback why) { return GemmPath{GemmKernel::cublas_gemm_ex, why}; };
  if (p.m == 0 || p.n == 0) return {GemmKernel::empty_output, GemmFallback::none};
  if (p.k == 0) return {GemmKernel::scale_c, GemmFallback::none};
  if (target.compute_capability < 80) return cublas(GemmFallback::architecture);
  if (const GemmFallback why = hard_constraint(p); why != GemmFallback::none) return cublas(why);
  if (p.m <= kGemvMaxM) return {GemmKernel::hgemm_12_small_m_gemv, GemmFallback::none};
  if (small_m_call(p)) {
    if (target.compute_capability != 90 || !target.has_sm90a_code) return cublas(GemmFallback::small_m);
    const SmallMTableEntry& row = nearest_small_m_entry(p.m, p.n, p.k);
    if (row.kernel == GemmKernel::cublas_gemm_ex) return cublas(GemmFallback::small_m_table);
    return {row.kernel, GemmFallback::none};
  }
  if (target.compute_capability == 90) {
    const GemmFallback why = hopper_fallback(p, target);
    if (why == GemmFallback::k_rows_unaligned && p.n % kCublasAlignedN != 0)
      return {GemmKernel::hgemm_17_unaligned_k_clusters, GemmFallback::none};
    if (why != GemmFallback::none) return cublas(why);
    return {GemmKernel::hgemm_09_tma_store, GemmFallback::none};
  }
  if (target.shared_memory_per_block < kRung03SharedMemoryBytes)
    return cublas(GemmFallback::shared_memory);
  if (p.n > kRung03MaxN) return cublas(GemmFallback::grid_limit);
  return {GemmKernel::hgemm_03_cp_async, GemmFallback::none};
}

GemmPath choose_bias_gelu_path(const GemmProblem& p, const GemmTarget& target) {
  const auto unfused = [](GemmFallback why) {
    return GemmPath{GemmKernel::cublas_gemm_ex_then_bias_gelu, why};
  };
  if (target.compute_capability != 90) return unfused(GemmFallback::not_sm90);
  if (const GemmFallback why = hard_constraint(p); why != GemmFallback::none) return unfused(why);
  if (p.m <= kSmallM) return unfused(GemmFallback::small_m);
  if (const GemmFallback why = hopper_fallback(p, target); why != GemmFallback::none)
    return unfused(why);
  return {GemmKernel::gemm_bias_gelu_10_fused, GemmFallback::none};
}

// ---- the checks --------------------------------------------------------------------------------

void check_gemm_args(const HgemmArgs& args) { check_gemm(kGemmEntry, args, /*empty_allowed=*/true); }

void check_bias_gelu_args(const HgemmArgs& args, const bf16* bias) {
  check_gemm(kBiasGeluEntry, args, /*empty_allowed=*/false);
  require(bias != nullptr,
          "{}: bias is a null pointer; pass the device address of the N = {} bf16 biases",
          kBiasGeluEntry, args.n);
  require(aligned(bias, 4),
          "{}: bias = {} is not 4-byte aligned; the fused kernel reads it in bf16 pairs: allocate "
          "it on its own or at an even element offset",
          kBiasGeluEntry, static_cast<const void*>(bias));
  require(args.ldc == args.n,
          "{}: ldc = {} but N = {}; the bias+GELU epilogue needs a dense C (ldc = N): run the GEMM "
          "into a dense buffer, or call run() and apply the epilogue yourself",
          kBiasGeluEntry, args.ldc, args.n);
  require(args.n % 8 != 0 || (aligned(args.c, 16) && aligned(bias, 16)),
          "{}: with N = {} (a multiple of 8) C and bias must be 16-byte aligned (the separate "
          "bias+GELU kernel moves 16-byte vectors); got C = {}, bias = {}",
          kBiasGeluEntry, args.n, static_cast<const void*>(args.c), static_cast<const void*>(bias));
}

// ---- the entry ---------------------------------------------------------------------------------

// Gemm::run_rmsnorm_mlp's grid-wide barrier: the arrival count and the generation, zeroed once.
struct MlpBarrier {
  DeviceBuffer<std::uint32_t> words{2};
  MlpBarrier() { KC_CUDA_CHECK(cudaMemset(words.data(), 0, 2 * sizeof(std::uint32_t))); }
};

Gemm::Gemm(int device) : Gemm(device, query_target(device)) {}

std::unique_ptr<Gemm> make_gemm_on_current_device() {
  int device = 0;
  KC_CUDA_CHECK(cudaGetDevice(&device));
  return std::make_unique<Gemm>(device);
}

Gemm::Gemm(int device, const GemmTarget& target) : device_(device), target_(target) {
  const GemmTarget actual = query_target(device);
  require(target.compute_capability <= actual.compute_capability &&
              target.shared_memory_per_block <= actual.shared_memory_per_block &&
              (!target.has_sm90a_code || actual.has_sm90a_code) &&
              (target.compute_capability != 90 || actual.compute_capability == 90),
          "kc::stage3::Gemm: the target (sm_{}, {} bytes of shared memory per block, sm_90a code: "
          "{}) promises more than device {} and this build offer (sm_{}, {} bytes, sm_90a code: "
          "{}); a target may only take capabilities away",
          target.compute_capability, target.shared_memory_per_block, target.has_sm90a_code, device,
          actual.compute_capability, actual.shared_memory_per_block, actual.has_sm90a_code);
  const ScopedDevice on_device(device);
  sm_count_ = current_device_sm_count();
  cublas_ = std::make_unique<CublasHandle>();
  hopper_ = std::make_unique<HopperLaunchCache>();
  mlp_barrier_ = std::make_unique<MlpBarrier>();
}

Gemm::~Gemm() = default;
Gemm::Gemm(Gemm&&) noexcept = default;
Gemm& Gemm::operator=(Gemm&&) noexcept = default;

GemmPath Gemm::plan(const HgemmArgs& args) const {
  check_gemm_args(args);
  return choose_gemm_path(gemm_problem(args), target_);
}

GemmPath Gemm::plan_bias_gelu(const HgemmArgs& args, const bf16* bias) const {
  check_bias_gelu_args(args, bias);
  return choose_bias_gelu_path(gemm_problem(args), target_);
}

void Gemm::require_current_device() const {
  require(cublas_ != nullptr,
          "kc::stage3::Gemm: this object was moved from; use the one it moved to");
  int current = 0;
  KC_CUDA_CHECK(cudaGetDevice(&current));
  require(current == device_,
          "kc::stage3::Gemm: this object belongs to device {} but device {} is current; call "
          "cudaSetDevice({}) first, or use the Gemm made for device {}",
          device_, current, device_, current);
}

void Gemm::run_cublas(const HgemmArgs& args, cudaStream_t stream) {
  cublas_gemm_ex(cublas_->get(), stream, GemmShape{args.m, args.n, args.k}, DType::bf16,
                 DType::bf16, args.alpha, args.a, args.b, BLayout::n_by_k, args.beta, args.c,
                 GemmLeadingDims{args.lda, args.ldb, args.ldc});
}

// K = 0: alpha.A.B^T is an empty sum, so C = beta.C, each element rounded to bf16 once as cuBLAS
// rounds it; rows ldc apart.
void Gemm::scale_c(const HgemmArgs& args, cudaStream_t stream) {
  if (args.beta == 1.f) return;
  const std::size_t row_bytes = static_cast<std::size_t>(args.n) * sizeof(bf16);
  if (args.beta == 0.f) {  // beta = 0: C is not read (a NaN there does not survive), +0 written
    KC_CUDA_CHECK(cudaMemset2DAsync(args.c, static_cast<std::size_t>(args.ldc) * sizeof(bf16), 0, row_bytes,
                                    static_cast<std::size_t>(args.m), stream));
    return;
  }
  stage2::ElementwiseArgs<bf16> scale;
  scale.kind = stage2::ElementwiseKind::scale;
  scale.alpha = args.beta;
  const bool dense = args.ldc == args.n;
  scale.count = dense ? static_cast<std::int64_t>(args.m) * args.n : args.n;
  for (int row = 0; row < (dense ? 1 : args.m); ++row) {  // a strided C row by row
    scale.a = scale.out = args.c + static_cast<std::size_t>(row) * args.ldc;
    stage2::elementwise(scale, stream);
  }
}

GemmPath Gemm::run(const HgemmArgs& args, cudaStream_t stream) {
  const GemmPath path = plan(args);
  require_current_device();
  switch (path.kernel) {
    case GemmKernel::hgemm_09_tma_store: hgemm_09_tma_store(args, stream, *hopper_); break;
    case GemmKernel::hgemm_17_unaligned_k_clusters: hgemm_17_unaligned_k_clusters(args, stream, *hopper_); break;
    case GemmKernel::hgemm_03_cp_async: hgemm_03_cp_async(args, stream); break;
    case GemmKernel::hgemm_12_small_m_gemv: hgemm_12_small_m_gemv(args, stream); break;
    case GemmKernel::hgemm_16_small_m_cluster_split:
      hgemm_16_small_m_cluster_split(args, plan_small_m_cluster_split(args.m, args.n, args.k, sm_count_),
                                     SmallMWeightsAsAWorkspace{}, stream, *hopper_);
      break;
    case GemmKernel::cublas_gemm_ex: run_cublas(args, stream); break;
    case GemmKernel::empty_output: return path;
    case GemmKernel::scale_c: scale_c(args, stream); break;
    case GemmKernel::gemm_bias_gelu_10_fused:
    case GemmKernel::cublas_gemm_ex_then_bias_gelu:
      throw Error(
          fmt::format("kc::stage3::Gemm::run: the plain GEMM was routed to {}; this is a bug "
                      "in choose_gemm_path",
                      path.name()));
  }
  KC_CHECK_LAUNCH();
  return path;
}

HgemmArgs Gemm::shared_a_args(int m, int k, const bf16* a, const SharedAWeight& weight) {
  HgemmArgs args;
  args.m = m;
  args.n = weight.n;
  args.k = k;
  args.a = a;
  args.b = weight.b;
  args.c = weight.c;
  args.lda = k;
  args.ldb = k;
  args.ldc = weight.n;
  return args;
}

bool Gemm::plan_shared_a(const char* entry, int m, int k, const bf16* a, const SharedAWeight* weights, int count,
                         HgemmArgs* calls, GemmPath* paths) const {
  require(weights != nullptr && count >= 1 && count <= kSmallMGemvMaxWeights, "{}: {} weights; pass 1 to {}", entry,
          count, kSmallMGemvMaxWeights);
  bool fused = true;
  for (int i = 0; i < count; ++i) {
    calls[i] = shared_a_args(m, k, a, weights[i]);
    const GemmPath path = plan(calls[i]);  // checks every call before anything runs
    fused = fused && path.kernel == GemmKernel::hgemm_12_small_m_gemv;
    if (paths != nullptr) paths[i] = path;
  }
  return fused;
}

void Gemm::run_shared_a(int m, int k, const bf16* a, const SharedAWeight* weights, int count, cudaStream_t stream,
                        GemmPath* paths) {
  HgemmArgs calls[kSmallMGemvMaxWeights];
  const bool fused = plan_shared_a("kc::stage3::Gemm::run_shared_a", m, k, a, weights, count, calls, paths);
  require_current_device();
  if (!fused) {
    for (int i = 0; i < count; ++i) run(calls[i], stream);
    return;
  }
  launch_on_rung12(m, k, a, weights, count, 0.f, stream);
}

bool Gemm::run_rmsnorm_shared_a(int m, int k, const bf16* x, const bf16* norm_weight, float eps,
                                const SharedAWeight* weights, int count, cudaStream_t stream, GemmPath* paths,
                                const ColumnCounts* counts) {
  constexpr const char* kEntry = "kc::stage3::Gemm::run_rmsnorm_shared_a";
  require(counts == nullptr || counts->counters != nullptr, "{}: column counts need their counters (a device pointer)",
          kEntry);
  require(norm_weight != nullptr && aligned(norm_weight, 16),
          "{}: the RMSNorm weight ({} elements) must be a 16-byte aligned device pointer; got {}", kEntry, k,
          static_cast<const void*>(norm_weight));
  require(std::isfinite(eps) && eps >= 0.f, "{}: eps = {} must be finite and >= 0", kEntry, eps);
  HgemmArgs calls[kSmallMGemvMaxWeights];
  if (!plan_shared_a(kEntry, m, k, x, weights, count, calls, paths)) return false;
  require_current_device();
  launch_on_rung12(m, k, x, weights, count, 0.f, stream, norm_weight, eps, /*swiglu=*/false, counts);
  return true;
}

bool Gemm::run_swiglu(int m, int k, const bf16* gate_up, const SharedAWeight& weight, float beta, cudaStream_t stream,
                      GemmPath* path) {
  constexpr const char* kEntry = "kc::stage3::Gemm::run_swiglu";
  require(std::isfinite(beta), "{}: beta = {} must be finite", kEntry, beta);
  HgemmArgs call;
  GemmPath planned;
  // The product as run() would see it (A = the activation, M x K); gate_up's alignment is A's, and
  // its second half starts K elements on, 16-byte aligned whenever K % 8 == 0.
  const bool fused = plan_shared_a(kEntry, m, k, gate_up, &weight, 1, &call, &planned);
  if (path != nullptr) *path = planned;
  if (!fused) return false;
  require_current_device();
  launch_on_rung12(m, k, gate_up, &weight, 1, beta, stream, nullptr, 0.f, /*swiglu=*/true);
  return true;
}

bool Gemm::run_rmsnorm_mlp(int m, int hidden, int intermediate, bf16* x, const bf16* norm_weight, float eps,
                           const bf16* gate_up_weight, bf16* gate_up, const bf16* down_weight, cudaStream_t stream,
                           GemmPath* paths) {
  constexpr const char* kEntry = "kc::stage3::Gemm::run_rmsnorm_mlp";
  require(norm_weight != nullptr && aligned(norm_weight, 16),
          "{}: the RMSNorm weight ({} elements) must be a 16-byte aligned device pointer; got {}", kEntry, hidden,
          static_cast<const void*>(norm_weight));
  require(std::isfinite(eps) && eps >= 0.f, "{}: eps = {} must be finite and >= 0", kEntry, eps);
  require(intermediate >= 1 && intermediate <= INT32_MAX / 2, "{}: intermediate = {} must be in 1..2^30 - 1", kEntry,
          intermediate);
  require(gate_up == nullptr || gate_up != x, "{}: gate_up and x must be different buffers", kEntry);
  const SharedAWeight up{gate_up_weight, gate_up, 2 * intermediate};
  const SharedAWeight down{down_weight, x, hidden};
  HgemmArgs up_call, down_call;
  GemmPath up_path, down_path;
  const bool up_fused = plan_shared_a(kEntry, m, hidden, x, &up, 1, &up_call, &up_path);
  const bool down_fused = plan_shared_a(kEntry, m, intermediate, gate_up, &down, 1, &down_call, &down_path);
  if (paths != nullptr) {
    paths[0] = up_path;
    paths[1] = down_path;
  }
  if (!up_fused || !down_fused) return false;
  require_current_device();
  const SmallMGemvMlp mlp{m,       hidden,         intermediate, x,           norm_weight,
                          eps,     gate_up_weight, gate_up,      down_weight, mlp_barrier_->words.data()};
  const bool launched = hgemm_12_small_m_gemv_mlp(mlp, stream);
  KC_CHECK_LAUNCH();
  return launched;
}

GemmPath Gemm::run_bias_gelu(const HgemmArgs& args, const bf16* bias, cudaStream_t stream) {
  const GemmPath path = plan_bias_gelu(args, bias);
  require_current_device();
  if (path.kernel == GemmKernel::gemm_bias_gelu_10_fused) {
    BiasGeluArgs fused;
    fused.gemm = args;
    fused.bias = bias;
    gemm_bias_gelu_10_fused(fused, stream, *hopper_);
  } else {
    run_cublas(args, stream);
    bias_gelu_inplace(args.c, bias, args.m, args.n, stream);
  }
  KC_CHECK_LAUNCH();
  return path;
}

}  // namespace kc::stage3
