// kc/stage3/attention_cudnn.hpp — cuDNN's fused attention (SDPA through the cudnn-frontend graph
// API) as the attention_fwd op's baseline: the library implementation the best rung is judged
// against.
//
// cuDNN is optional (CMake option KC_WITH_CUDNN, found automatically). Where the build has it, the
// op's baseline is cuDNN SDPA on kc's exact layout (Q [B,Hq,Sq,D], K/V [B,Hkv,Sk,D], O, and LSE
// from cuDNN's softmax statistics, a natural-log log-sum-exp like kc's); where it does not, the
// baseline stays the unfused cuBLAS path and its name says that cuDNN was not available.
//
// cuDNN computes a subset of kc's definition; the baseline refuses the rest with cuDNN's reason
// instead of failing the check:
//   - the causal mask with Sq > Sk: the first Sq - Sk query rows see no key (kc defines O = 0 and
//     LSE = -inf there); cuDNN's bottom-right causal mask rejects max_s_q > max_s_kv;
//   - D not a multiple of 8, or D > 256 (the limits of its FP16/BF16 flash-attention engines);
//   - whatever else the loaded cuDNN version reports as unsupported when the graph is built.
#pragma once

#ifdef KC_KERNEL_SOURCE
#error "a kernel (rung) file includes kc/stage3/attention_cudnn.hpp, the op's harness side"
#endif

#include <memory>
#include <string>

#include "kc/common/op_builder.hpp"
#include "kc/common/registry.hpp"

namespace kc::stage3 {

// True when this build links cuDNN (KC_WITH_CUDNN found it).
bool cudnn_attention_built();
// "cuDNN 9.19.0 (built against 9.19.0), cudnn-frontend 1.32.0", or why there is none.
std::string cudnn_attention_versions();

// cuDNN SDPA forward on kc's layout. Builds one graph (and its execution plan and workspace) per
// (shape, dtype, causal, scale) on first use, in kc-bench's untimed check, and caches it, so a
// timed call only executes the plan.
class CudnnAttention {
 public:
  CudnnAttention();
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // "" when cuDNN runs `problem`, otherwise why not. Checks kc's known limits first (no GPU
  // needed); on a GPU it then builds (and caches) the graph, and cuDNN's refusal is the reason.
  std::string unsupported_reason(const Problem& problem, Context& context);
  // O and LSE of `problem`. Throws kc::Error with the reason for a problem cuDNN does not run,
  // and with cuDNN's message when a cuDNN call fails.
  void run(const Problem& problem, Operands& operands, Context& context);

  // kc's own limits of the cuDNN path, checked without cuDNN or a GPU: "" or the reason.
  static std::string known_limits(const Problem& problem);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Makes cuDNN SDPA the baseline of the attention_fwd op described by `op` (baseline_name,
// baseline, baseline_supports) where the build has cuDNN; otherwise keeps the op's unfused
// baseline and appends to its name that cuDNN was not available.
void use_cudnn_attention_baseline(OpConfig& op);

}  // namespace kc::stage3
