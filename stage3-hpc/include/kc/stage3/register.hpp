// kc/stage3/register.hpp — the stage-3 ops and ladders, for kc-bench, the tests and the tuners.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kc/common/op_builder.hpp"
#include "kc/common/registry.hpp"

namespace kc::stage3 {

inline constexpr const char* kHgemmOp = "hgemm";
inline constexpr const char* kBiasGeluOp = "gemm_bias_gelu";
inline constexpr const char* kReportGroup = "stage3-gemm";

// hgemm: BF16 in and out (the problem's dtype), B N x K, FP32 accumulation; baseline
// cublasGemmEx, COMPUTE_32F.
// A stage-3 rung's entry: id "stage3/<op>/<name>", its rung number and idea, the data types it
// runs, the docs table it reports in and the lowest compute capability it needs; the caller adds
// its constraints, refusals and launch. Every ladder's registration starts from it.
KernelEntry rung_entry(const std::string& op, const std::string& name, int rung, std::string idea,
                       std::vector<DType> dtypes, std::string report, int min_compute_capability);

OpSpec make_hgemm_op();

// The public GEMM entry's row (not a rung of the ladder): stage3/hgemm/13_entry, in its own report.
inline constexpr const char* kGemmEntryName = "13_entry";
inline constexpr int kGemmEntryRung = 13;
inline constexpr const char* kGemmEntryReport = "stage3-gemm-entry";
// gemm_bias_gelu: the same GEMM followed by + bias[col] and GELU (tanh form); baseline cuBLASLt
// with its GELU_BIAS epilogue; peer cublasGemmEx followed by a separate bias+GELU kernel (the two
// launches rung 10 replaces).
OpSpec make_gemm_bias_gelu_op();

// The conformance problems of both ops (any M and N, K a multiple of 8 and three K that are not,
// alpha/beta cases), and the labels of those every rung refuses (K % 8 != 0).
std::vector<ProblemSpec> hgemm_conformance_problems();
const std::vector<std::string>& hgemm_refusals();

// Shapes every rung of the ladder accepts: any M and N, K a multiple of 8 (rows of A and B are
// moved in 16-byte pieces: vector loads, cp.async and TMA all need 16-byte aligned rows).
// Returns "" or the reason a shape is refused.
std::string hgemm_shape_error(const Problem& problem);

// Rung 11 (stage3/hgemm/11_small_m_split_k) takes M <= 64 only; "" or the reason it refuses a
// shape (hgemm_shape_error's first), and the conformance problems it refuses: every one with
// M > 64, and those every rung refuses.
std::string small_m_shape_error(const Problem& problem);
const std::vector<std::string>& small_m_refusals();

// Rungs 14 and 15 (stage3/hgemm/14_small_m_weights_as_a, 15_small_m_tma_wgmma) take M <= 64 only,
// as rung 11 (their refusals are small_m_refusals()); "" or the reason they refuse a shape.
std::string small_m_weights_as_a_shape_error(const Problem& problem);

// Rung 12 (stage3/hgemm/12_small_m_gemv) takes M <= 8 only; "" or the reason it refuses a shape,
// and the conformance problems it refuses: every one with M > 8, and those every rung refuses.
std::string small_m_gemv_shape_error(const Problem& problem);
const std::vector<std::string>& small_m_gemv_refusals();

// GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), on the host in double (the
// reference): core::gelu_tanh<core::ReferenceMath>, the formula the kernels evaluate in float
// (kc/core/gelu.hpp).
double gelu_tanh_reference(double x);

// C[i][j] = gelu_tanh_reference(C[i][j] + bias[j]) in place, in FP64 on the GPU: the fused op's
// reference for problems too large for the CPU.
void bias_gelu_reference_inplace(double* c, const double* bias, std::int64_t m, std::int64_t n,
                                 cudaStream_t stream);

// Adds the stage-3 ops (hgemm, gemm_bias_gelu) and the tensor-core GEMM ladder
// (stage3/hgemm/01_wmma ... 09_tma_store, stage3/gemm_bias_gelu/10_fused_bias_gelu,
// stage3/hgemm/11_small_m_split_k, stage3/hgemm/12_small_m_gemv,
// stage3/hgemm/14_small_m_weights_as_a), and the other stage-3 ops with
// their ladders: attention, paged decode, the grouped GEMM of mixture-of-experts layers
// (kc/stage3/grouped_gemm.hpp) and its FP8 form (kc/stage3/fp8_grouped_gemm.hpp), the GGUF GEMV
// and the GGUF quantize op that writes its blocks (kc/stage3/quantize_gguf.hpp).
void register_kernels(Registry& registry);

}  // namespace kc::stage3
