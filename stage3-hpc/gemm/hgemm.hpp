// hgemm.hpp — the stage-3 tensor-core GEMM ladder: the arguments and one launch per rung.
//
// Every rung computes C = alpha.A.B^T + beta.C with A (M x K), B (N x K) and C (M x N) row-major
// BF16 and FP32 accumulation: B is stored N x K ("TN", the layout of an nn.Linear weight), so both
// operands are K-contiguous, which is what ldmatrix, TMA and WGMMA read without a transpose.
// Rung 10 computes C = gelu(alpha.A.B^T + beta.C + bias). An argument header: the kernels include
// it and nothing of the harness; kc/stage3/register.hpp describes the ops to kc-bench.
#pragma once

#include <cstddef>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "gemm_layout.hpp"
#include "kc/common/gemm_args.hpp"
#include "kc/stage3/small_m_gemv_knobs.hpp"

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
void hgemm_17_unaligned_k_clusters(const HgemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache);
void gemm_bias_gelu_10_fused(const BiasGeluArgs& args, cudaStream_t stream, HopperLaunchCache& cache);
// sm_80 and newer, M <= 64: K split over plan.splits CTAs per column block (plan_small_m_split_k,
// gemm_layout.hpp); `workspace` holds small_m_split_k_workspace_floats(plan, M, N) floats (may be
// null when the plan needs none).
void hgemm_11_small_m_split_k(const HgemmArgs& args, const SmallMSplitKPlan& plan, float* workspace,
                              cudaStream_t stream);
// What the small-M rungs that stream B with cp.async (11, 14) need of the operands, checked with a
// kc::Error that names `rung`: N, K >= 1 and K % 8 == 0, dense leading dimensions, A and B 16-byte
// aligned (defined with rung 11).
void require_small_m_streamed_operands(const HgemmArgs& args, const char* rung);
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
// With `written` (the RMSNorm prologue only): each block, once its outputs are stored, adds its
// columns of weight i to written[c / slice_columns[i]] with a release at GPU scope, for a kernel
// that reads them while this launch runs (Gemm::ColumnCounts, kc/stage3/gemm.hpp).
void hgemm_12_small_m_gemv_shared_a(int m, int k, float alpha, const bf16* a, const SmallMGemvWeight* weights,
                                    int count, float beta, cudaStream_t stream, const bf16* norm_weight = nullptr,
                                    float norm_eps = 0.f, bool swiglu_a = false, unsigned* written = nullptr,
                                    const int* slice_columns = nullptr);

// The MLP of a decode step in one launch of rung 12's two passes (12_small_m_gemv_mlp.cu), with a
// grid-wide barrier between them:
//   gate_up = rmsnorm(x).W_gate_up^T          (M x 2I; W_gate_up 2I x H, rows [0, I) gate, [I, 2I) up)
//   x += (silu(gate) . up).W_down^T           (W_down H x I)
// x (M x H) is read and then added to in place. `barrier`: two uint32 of device memory, zero
// before the first launch, used by one launch at a time (each launch leaves the count at zero).
// Returns false, launching nothing, where one CTA per block of the larger pass does not fit on the
// GPU at once (the barrier needs them all resident).
struct SmallMGemvMlp {
  int m = 0, hidden = 0, intermediate = 0;
  bf16* x = nullptr;
  const bf16* norm_weight = nullptr;
  float eps = 0.f;
  const bf16* gate_up_weight = nullptr;
  bf16* gate_up = nullptr;
  const bf16* down_weight = nullptr;
  std::uint32_t* barrier = nullptr;
};
bool hgemm_12_small_m_gemv_mlp(const SmallMGemvMlp& args, cudaStream_t stream);

// Rung 12's launch knobs (the L2 prefetch budget, the K loop's trip, the first trip before the wait):
// kc/stage3/small_m_gemv_knobs.hpp, public, as the engine's bench sets one.

// sm_80 and newer, M <= 64: rung 11's split of K with the operands of the MMA swapped (B as
// mma.sync's A, the rows of A as n8 token tiles) and the split-K reduction done by the last CTA of
// each column block, in the same launch. The plan comes from plan_small_m_weights_as_a
// (gemm_layout.hpp). With more than one split the workspace holds
// small_m_weights_as_a_partial_floats(plan) floats and small_m_weights_as_a_counters(plan)
// counters that are zero before the launch (zero them once when allocated: every launch leaves
// them at zero). One launch at a time per workspace (the counters are shared by its CTAs).
struct SmallMWeightsAsAWorkspace {
  float* partials = nullptr;
  std::uint32_t* counters = nullptr;
};
void hgemm_14_small_m_weights_as_a(const HgemmArgs& args, const SmallMWeightsAsAPlan& plan,
                                   const SmallMWeightsAsAWorkspace& workspace, cudaStream_t stream);
// The same kernel with one flaw, for the negative control stage3/hgemm/nc_split_k_partials_added_twice
// (tests/negative_controls): the last CTA of a column block adds split 0's partials twice.
void hgemm_14_small_m_weights_as_a_adds_a_split_twice(const HgemmArgs& args, const SmallMWeightsAsAPlan& plan,
                                                      const SmallMWeightsAsAWorkspace& workspace,
                                                      cudaStream_t stream);
// The launch checks rungs 14-16 share (M in 1..64, dense 16-byte-aligned operands, a plan of the
// swapped product's shape for this problem: token tiles, column blocks, K tiles, 1..K tiles
// splits); kc::Error naming `rung` and the rule.
void require_small_m_swapped_plan(const HgemmArgs& args, const SmallMWeightsAsAPlan& plan, const char* rung);
// The same and, where the plan splits K, a workspace (rungs 14 and 15).
void require_small_m_weights_as_a_launch(const HgemmArgs& args, const SmallMWeightsAsAPlan& plan,
                                         const SmallMWeightsAsAWorkspace& workspace, const char* rung);
// sm_90 only, M <= 64: rung 14's swapped product, plan and workspace on TMA and WGMMA (the weights
// as WGMMA's A, the tokens as its B, both from shared memory; a producer warp fills the ring).
void hgemm_15_small_m_tma_wgmma(const HgemmArgs& args, const SmallMWeightsAsAPlan& plan,
                                const SmallMWeightsAsAWorkspace& workspace, cudaStream_t stream,
                                HopperLaunchCache& cache);
// sm_90 only, M <= 64: rung 15's K slices with the splits of a column block launched as one
// cluster and added through distributed shared memory, no workspace. The plan comes from
// plan_small_m_cluster_split (at most kSmallMMaxClusterSplits splits); `workspace` is not used.
void hgemm_16_small_m_cluster_split(const HgemmArgs& args, const SmallMWeightsAsAPlan& plan,
                                    const SmallMWeightsAsAWorkspace& workspace, cudaStream_t stream,
                                    HopperLaunchCache& cache);
// The same kernel with one flaw, for the negative control stage3/hgemm/nc_cluster_split_reads_rank_0_twice
// (tests/negative_controls): the additions read rank 0's partial tile in place of the last rank's.
void hgemm_16_small_m_cluster_split_reads_rank_0_twice(const HgemmArgs& args, const SmallMWeightsAsAPlan& plan,
                                                       const SmallMWeightsAsAWorkspace& workspace,
                                                       cudaStream_t stream, HopperLaunchCache& cache);

// The baseline's second kernel: C[i][j] = gelu(C[i][j] + bias[j]) in place, C row-major M x N.
void bias_gelu_inplace(bf16* c, const bf16* bias, int m, int n, cudaStream_t stream);

}  // namespace kc::stage3
