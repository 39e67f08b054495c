// kc/stage2/kernels.hpp — the launch functions of every stage-2 rung, by op.
//
// Each ladder is one template per rung, instantiated for float, __half and __nv_bfloat16 in its
// kernels/<op>/NN_name.cu file. Arguments are plain pointers into dense row-major tensors; every
// kernel computes in float. Host-safe: no device code here.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace kc::stage2 {

// ---- RMSNorm: y = x / sqrt(mean(x^2) + eps) * weight, per row ------------------------------------
inline constexpr float kRmsNormEps = 1e-6f;  // Llama's

template <typename T>
struct RmsNormArgs {
  int rows = 0, cols = 0;
  const T* x = nullptr;       // rows x cols
  const T* weight = nullptr;  // cols
  T* y = nullptr;             // rows x cols
  float eps = kRmsNormEps;
};

template <typename T> void rmsnorm_01_naive(const RmsNormArgs<T>& args, cudaStream_t stream);
template <typename T> void rmsnorm_02_block_smem_tree(const RmsNormArgs<T>& args, cudaStream_t stream);
template <typename T> void rmsnorm_03_warp_shuffle(const RmsNormArgs<T>& args, cudaStream_t stream);
template <typename T> void rmsnorm_04_vectorized(const RmsNormArgs<T>& args, cudaStream_t stream);
template <typename T> void rmsnorm_05_row_in_registers(const RmsNormArgs<T>& args, cudaStream_t stream);

// ---- residual add + RMSNorm: sum = x + residual; y = rmsnorm(sum) * weight -----------------------
template <typename T>
struct ResidualRmsNormArgs {
  int rows = 0, cols = 0;
  const T* x = nullptr;         // rows x cols: the sublayer's output
  const T* residual = nullptr;  // rows x cols: the residual stream
  const T* weight = nullptr;    // cols
  T* sum = nullptr;             // rows x cols: x + residual, rounded to T (the new residual stream)
  T* y = nullptr;               // rows x cols: RMSNorm of the rounded sum
  float eps = kRmsNormEps;
};

template <typename T> void residual_rmsnorm_01_unfused(const ResidualRmsNormArgs<T>& args, cudaStream_t stream);
template <typename T> void residual_rmsnorm_02_fused_streaming(const ResidualRmsNormArgs<T>& args, cudaStream_t stream);
template <typename T> void residual_rmsnorm_03_fused_in_registers(const ResidualRmsNormArgs<T>& args, cudaStream_t stream);

// ---- LayerNorm: y = (x - mean) / sqrt(var + eps) * weight + bias, per row -------------------------
inline constexpr float kLayerNormEps = 1e-5f;  // torch.nn.LayerNorm's default

template <typename T>
struct LayerNormArgs {
  int rows = 0, cols = 0;
  const T* x = nullptr;
  const T* weight = nullptr;
  const T* bias = nullptr;
  T* y = nullptr;
  float eps = kLayerNormEps;
};

template <typename T> void layernorm_01_naive(const LayerNormArgs<T>& args, cudaStream_t stream);
template <typename T> void layernorm_02_warp_shuffle(const LayerNormArgs<T>& args, cudaStream_t stream);
template <typename T> void layernorm_03_vectorized(const LayerNormArgs<T>& args, cudaStream_t stream);
template <typename T> void layernorm_04_row_in_registers(const LayerNormArgs<T>& args, cudaStream_t stream);
template <typename T> void layernorm_05_lean_two_pass(const LayerNormArgs<T>& args, cudaStream_t stream);

// ---- softmax over each row -----------------------------------------------------------------------
template <typename T>
struct SoftmaxArgs {
  int rows = 0, cols = 0;
  const T* x = nullptr;
  T* y = nullptr;
};

template <typename T> void softmax_01_naive_3pass(const SoftmaxArgs<T>& args, cudaStream_t stream);
template <typename T> void softmax_02_block_3pass(const SoftmaxArgs<T>& args, cudaStream_t stream);
template <typename T> void softmax_03_online(const SoftmaxArgs<T>& args, cudaStream_t stream);
template <typename T> void softmax_04_online_vectorized(const SoftmaxArgs<T>& args, cudaStream_t stream);
template <typename T> void softmax_05_row_in_registers(const SoftmaxArgs<T>& args, cudaStream_t stream);
template <typename T> void softmax_06_lean_exp(const SoftmaxArgs<T>& args, cudaStream_t stream);

// ---- row reductions: out[r] = sum / max / mean / sum of squares of row r ------------------------
enum class RowReduction { sum, max, mean, sum_squares };

template <typename T>
struct RowReduceArgs {
  RowReduction kind = RowReduction::sum;
  int rows = 0, cols = 0;
  const T* x = nullptr;  // rows x cols
  T* out = nullptr;      // rows
};

template <typename T> void row_reduce_01_naive(const RowReduceArgs<T>& args, cudaStream_t stream);
template <typename T> void row_reduce_02_warp_shuffle(const RowReduceArgs<T>& args, cudaStream_t stream);
template <typename T> void row_reduce_03_vectorized(const RowReduceArgs<T>& args, cudaStream_t stream);
// The peer: a cub::BlockReduce kernel, one block per row.
template <typename T> void row_reduce_cub(const RowReduceArgs<T>& args, cudaStream_t stream);

// ---- element-wise ---------------------------------------------------------------------------------
enum class Activation { relu, silu, gelu_tanh, gelu_erf };

// out = a + b (add) or out = alpha * a (scale, b unused) or out = act(a) (activation, b unused).
enum class ElementwiseKind { add, scale, activation };

template <typename T>
struct ElementwiseArgs {
  ElementwiseKind kind = ElementwiseKind::add;
  Activation activation = Activation::relu;
  std::int64_t count = 0;
  float alpha = 1.f;
  const T* a = nullptr;
  const T* b = nullptr;
  T* out = nullptr;
};

template <typename T> void elementwise_01_scalar(const ElementwiseArgs<T>& args, cudaStream_t stream);
template <typename T> void elementwise_02_vectorized(const ElementwiseArgs<T>& args, cudaStream_t stream);

// out[r][c] = act(x[r][c] + bias[c])
template <typename T>
struct BiasActivationArgs {
  Activation activation = Activation::gelu_tanh;
  int rows = 0, cols = 0;
  const T* x = nullptr;     // rows x cols
  const T* bias = nullptr;  // cols
  T* out = nullptr;         // rows x cols
};

template <typename T> void bias_activation_01_unfused(const BiasActivationArgs<T>& args, cudaStream_t stream);
template <typename T> void bias_activation_02_fused(const BiasActivationArgs<T>& args, cudaStream_t stream);

// ---- SwiGLU: out = silu(gate) * up, from the fused projection [gate | up] -------------------------
template <typename T>
struct SwigluArgs {
  int rows = 0, hidden = 0;
  const T* gate_up = nullptr;  // rows x (2 * hidden): gate in columns [0, hidden), up after it
  T* out = nullptr;            // rows x hidden
};

template <typename T> void swiglu_01_naive(const SwigluArgs<T>& args, cudaStream_t stream);
template <typename T> void swiglu_02_vectorized(const SwigluArgs<T>& args, cudaStream_t stream);

// ---- rotary position embedding, in place on Q and K ------------------------------------------------
// rotate_half (Llama / HF): element i pairs with i + head_dim/2.
// interleaved (RoFormer, GPT-J): element 2i pairs with 2i + 1.
// Pair i at position p turns by the angle p * base^(-2i / head_dim):
//   (a, b) -> (a cos - b sin, b cos + a sin).
enum class RopeLayout { rotate_half, interleaved };
inline constexpr double kRopeBase = 10000.0;

template <typename T>
struct RopeArgs {
  RopeLayout layout = RopeLayout::rotate_half;
  int tokens = 0, q_heads = 0, kv_heads = 0, head_dim = 0;  // head_dim even
  T* q = nullptr;                    // tokens x q_heads x head_dim, rotated in place
  T* k = nullptr;                    // tokens x kv_heads x head_dim, rotated in place
  const int* positions = nullptr;    // tokens: the position of each token
  const float* cos_sin = nullptr;    // max_position x head_dim: cos of pair i at [p][i], sin at [p][head_dim/2 + i]
};

template <typename T> void rope_01_naive(const RopeArgs<T>& args, cudaStream_t stream);
template <typename T> void rope_02_vectorized(const RopeArgs<T>& args, cudaStream_t stream);

}  // namespace kc::stage2
