// Rung 01 — the unfused path: S = scale.Q.K^T with cuBLAS, a masked softmax kernel, O = P.V with
// cuBLAS. The reference point of the FlashAttention ladder (and the op's baseline today).
//
// Idea: attention as the three steps of its definition, each by the best tool for it. Per chunk
// of (batch, kv head) groups, a strided-batched cuBLAS GEMM writes S = scale.Q.K^T in FP32 (the
// query heads of a group are stacked as rows, so grouped-query heads share their K without a
// copy); a row-wise kernel (attention_softmax.cu) reads S, applies the bottom-right causal mask,
// writes P in the input type and the LSE; a second GEMM computes O = P.V. The GEMMs run on the
// tensor cores near their peak. The cost is S itself: Sq x Sk FP32 scores written and read, and P
// written and read again, per head — 6 bytes per (query, key) pair of memory traffic against
// 4 D FLOPs, plus the scratch memory to hold them (kAttentionScratchLimit caps it, the path works
// through the groups in chunks that fit).
//
// What changed: nothing yet — the starting point. The masked-out keys of a causal problem are
// still multiplied (cuBLAS computes the whole S), and the softmax passes over each row of S
// three times (max, sum, write) from global memory.
//
// Expected limiter: memory — at Sk in the thousands the S and P traffic outweighs the Q, K, V
// and O bytes by two orders of magnitude (analysis: 6 Sk bytes per query row against 8 D), and
// the softmax kernel between the GEMMs is purely bandwidth-bound. Rung 02 never writes S.
//
// SASS to look for: cuBLAS's own kernels (not in this repository) and masked_softmax_kernel in
// attention_softmax.cu: LDG/STG, MUFU.EX2, block reductions; no HMMA of ours.
//
// Run just this rung:
//   build/ci/bench/kc-bench --filter stage3/attention_fwd/01_naive_unfused
#include <memory>

#include "kc/stage3/attention.hpp"
#include "src/register_attention.hpp"

namespace kc::stage3 {
namespace {

// What the rung keeps between launches: its cuBLAS handle (created on the first launch, so that
// registering the rung needs no GPU) and the scratch that holds S and P.
class UnfusedRung {
 public:
  void run(const Problem& problem, Operands& operands, cudaStream_t stream) {
    if (!cublas_) cublas_ = std::make_unique<CublasHandle>();
    attention_unfused(problem, operands, cublas_->get(), stream, scratch_);
  }

 private:
  std::unique_ptr<CublasHandle> cublas_;
  DeviceScratch scratch_;
};

}  // namespace

LaunchFn attention_01_naive_unfused() {
  auto rung = std::make_shared<UnfusedRung>();
  return [rung](const Problem& problem, Operands& operands, cudaStream_t stream) {
    rung->run(problem, operands, stream);
  };
}

}  // namespace kc::stage3
