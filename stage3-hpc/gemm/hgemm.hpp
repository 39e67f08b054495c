// hgemm.hpp — the stage-3 tensor-core GEMM ladder: the arguments and one launch per rung.
//
// Every rung computes C = alpha.A.B^T + beta.C with A (M x K), B (N x K) and C (M x N) row-major
// BF16 and FP32 accumulation: B is stored N x K ("TN", the layout of an nn.Linear weight), so both
// operands are K-contiguous, which is what ldmatrix, TMA and WGMMA read without a transpose.
// Rung 10 computes C = gelu(alpha.A.B^T + beta.C + bias). An argument header: the kernels include
// it and nothing of the harness; kc/stage3/register.hpp describes the ops to kc-bench.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "gemm_layout.hpp"
#include "kc/common/gemm_args.hpp"

namespace kc::stage3 {

using bf16 = __nv_bfloat16;
using HgemmArgs = GemmArgs<bf16>;

// The fused op's arguments: the GEMM plus a bias row vector of N elements.
struct BiasGeluArgs {
  HgemmArgs gemm;
  const bf16* bias = nullptr;
};

class HopperLaunchCache;  // arch/sm90/tma_descriptor.hpp: tensor maps and launch facts, built once

// sm_80 and newer.
void hgemm_01_wmma(const HgemmArgs& args, cudaStream_t stream);
void hgemm_02_mma_ldmatrix(const HgemmArgs& args, cudaStream_t stream);
void hgemm_03_cp_async(const HgemmArgs& args, cudaStream_t stream);
// sm_90a only.
void hgemm_04_tma_wgmma(const HgemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache);
void hgemm_05_two_consumers(const HgemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache);
void hgemm_06_warp_specialized(const HgemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache);
void hgemm_07_persistent(const HgemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache);
void hgemm_08_cluster_multicast(const HgemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache);
void hgemm_09_tma_store(const HgemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache);
void gemm_bias_gelu_10_fused(const BiasGeluArgs& args, cudaStream_t stream, HopperLaunchCache& cache);
// sm_80 and newer, M <= 64: K split over plan.splits CTAs per column block (plan_small_m_split_k,
// gemm_layout.hpp); `workspace` holds small_m_split_k_workspace_floats(plan, M, N) floats (may be
// null when the plan needs none).
void hgemm_11_small_m_split_k(const HgemmArgs& args, const SmallMSplitKPlan& plan, float* workspace,
                              cudaStream_t stream);
// sm_80 and newer, M <= 8 (kSmallMGemvMaxM): a GEMV on the CUDA cores, one launch, no workspace;
// the group size comes from choose_small_m_gemv_group (gemm_layout.hpp) and the current GPU's SMs.
void hgemm_12_small_m_gemv(const HgemmArgs& args, cudaStream_t stream);
// Rung 12 on up to kSmallMGemvMaxWeights weights of the same K that share A, in one launch (a
// layer's Q, K and V projections at decode): C_i = alpha.A.B_i^T + beta.C_i, A M x K, B_i n_i x K,
// C_i M x n_i, all dense.
struct SmallMGemvWeight {
  const bf16* b = nullptr;
  bf16* c = nullptr;
  int n = 0;
};
// With `norm_weight` (K elements), A goes through RMSNorm first, in the same pass:
// C_i = alpha.rmsnorm(A).B_i^T + beta.C_i, rmsnorm(A)[m] = A[m] . norm_weight / sqrt(mean(A[m]^2) + norm_eps).
// With `swiglu_a`, A is [gate | up] (M x 2K) and C_i = alpha.(silu(gate) . up).B_i^T + beta.C_i.
void hgemm_12_small_m_gemv_shared_a(int m, int k, float alpha, const bf16* a, const SmallMGemvWeight* weights,
                                    int count, float beta, cudaStream_t stream, const bf16* norm_weight = nullptr,
                                    float norm_eps = 0.f, bool swiglu_a = false);

// The baseline's second kernel: C[i][j] = gelu(C[i][j] + bias[j]) in place, C row-major M x N.
void bias_gelu_inplace(bf16* c, const bf16* bias, int m, int n, cudaStream_t stream);

}  // namespace kc::stage3
