// kc/stage3/attention.hpp — the attention_fwd op: what attention computes, its reference, and the
// op the FlashAttention ladder registers against.
//
// Layout (row-major, contiguous, the layout of FlashAttention's and PyTorch SDPA's [B, H, S, D]):
//   Q   [B, Hq,  Sq, D]   problem dtype (bf16 or f16)
//   K   [B, Hkv, Sk, D]   problem dtype
//   V   [B, Hkv, Sk, D]   problem dtype
//   O   [B, Hq,  Sq, D]   problem dtype
//   LSE [B, Hq,  Sq]      f32
// Problem dimensions, in this order: B, Hq, Hkv, Sq, Sk, D ("4x32x8x4096x4096x128").
//
// The packed variable-length form (op attention_fwd_varlen, kc/stage3/attention_varlen.hpp; in the
// kernels' arguments, AttentionArgs with cu_seqlens_q and cu_seqlens_k set): B sequences with
// lengths of their own, Sq_b queries and Sk_b keys, their tokens one after the other, no padding
// (FlashAttention's varlen layout; [tokens, heads, D] is also how the projections hand Q, K and V
// over, and how the output projection reads O):
//   cu_seqlens_q  [B + 1]            int32: 0, Sq_0, Sq_0 + Sq_1, ... (total_q = the last)
//   cu_seqlens_k  [B + 1]            int32: 0, Sk_0, Sk_0 + Sk_1, ... (total_k = the last)
//   Q   [total_q, Hq,  D]   sequence b's queries are rows cu_seqlens_q[b] .. cu_seqlens_q[b + 1] - 1
//   K   [total_k, Hkv, D]   its keys rows cu_seqlens_k[b] .. cu_seqlens_k[b + 1] - 1
//   V   [total_k, Hkv, D]
//   O   [total_q, Hq,  D]
//   LSE per sequence a [Hq, Sq_b] block at element cu_seqlens_q[b] . Hq (f32), row h for head h:
//       with every Sq_b = Sq that is the dense [B, Hq, Sq] above (FlashAttention's varlen LSE
//       is [Hq, total_q] instead; kc keeps each sequence's block whole, so that one sequence's
//       LSE is where a dense call for it alone would put it)
// There Sq and Sk of the problem are the longest Sq_b and Sk_b (max_seqlen_q and max_seqlen_k),
// and the batch strides are not used: a sequence starts at its offset. The definition below holds
// for each sequence on its own, with Sq_b and Sk_b for Sq and Sk (the causal mask aligned
// bottom-right in every sequence). A sequence may be empty: Sq_b = 0 has no rows to compute;
// Sk_b = 0 gives each of its rows O = 0 and LSE = -inf.
//
// Definition, for batch b, query head h and query row i:
//   kv head      h / (Hq / Hkv)            (grouped-query attention; Hq a multiple of Hkv; MQA is Hkv = 1)
//   visible keys j < visible_keys(i)       (every key; with causal = 1 the keys j <= i + Sk - Sq:
//                                           the mask is aligned bottom-right, so the last query
//                                           sees every key, as in decoding after a prefix)
//   s_j   = scale * Q[b,h,i,:] . K[b,kv,j,:]     (scale = the `scale` parameter, 1/sqrt(D) when 0)
//   O[b,h,i,:] = sum_j exp(s_j - m) V[b,kv,j,:] / sum_j exp(s_j - m),  m = max_j s_j
//   LSE[b,h,i] = m + log(sum_j exp(s_j - m))     (natural log)
// A row with no visible key (causal and i < Sq - Sk) has O = 0 and LSE = -inf. The keys a row does
// not see do not reach its scores: a NaN or Inf in K there does not reach its output.
// Non-finite inputs follow the formula's IEEE arithmetic, row by row:
//   - a NaN in Q[i] makes row i NaN (O and LSE);
//   - a NaN in K[j] makes the rows that see key j NaN; an Inf in K[j] gives those rows a score of
//     +Inf or -Inf (or NaN, as 0 x Inf) by the sign of the Q element it meets: +Inf or NaN makes
//     the row NaN, -Inf weighs key j 0 (exp(-Inf)) and leaves the row finite;
//   - a NaN or Inf in V[j][c] reaches column c of O in the rows that see key j (Inf stays Inf:
//     its weight is positive), not their LSE or other columns. In the rows that do not see key j
//     it is not defined: a kernel multiplies a whole tile of V by the tile's weights, 0 at the
//     masked keys, and 0 x NaN is NaN.
#pragma once

#ifdef KC_KERNEL_SOURCE
#error "a kernel (rung) file includes kc/stage3/attention.hpp, the op's harness side: kernels include the argument headers in stage3-hpc/attention/"
#endif

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kc/common/buffer.hpp"
#include "kc/common/op_builder.hpp"
#include "kc/common/registry.hpp"

namespace kc::stage3 {

inline constexpr const char* kAttentionFwdOp = "attention_fwd";

struct AttentionShape {
  std::int64_t batch = 0, q_heads = 0, kv_heads = 0, q_len = 0, kv_len = 0, head_dim = 0;
  // Query heads per kv head.
  std::int64_t group() const { return q_heads / kv_heads; }
};

AttentionShape attention_shape(const Problem& problem);
// The softmax scale a problem asks for: its `scale` parameter, or 1/sqrt(D) when that is 0.
double attention_scale(const Problem& problem);
bool attention_causal(const Problem& problem);

// How many keys query row i sees: Sk, or with the causal mask clamp(i + Sk - Sq + 1, 0, Sk).
std::int64_t visible_keys(const AttentionShape& shape, bool causal, std::int64_t query);
// Sum of visible_keys over every row of every head and batch: the (query, key) pairs computed.
double visible_pairs(const AttentionShape& shape, bool causal);

// The fill of V in attention_fwd and its packed form: uniform(-kAttentionVMax, kAttentionVMax).
// It bounds |O| and the error that rounding P makes.
inline constexpr double kAttentionVMax = 1.0;

// What an attention output is held to, for attention_fwd and its packed form (`input` the
// problem's dtype, `kv_terms` the most keys a row sums). O sums up to kv_terms products in FP32
// and is rounded once to the output type. Before that, the kernels (as FlashAttention does) round
// the probabilities P to the input type to multiply them with V on the tensor cores: each term
// p_j.v_j may then be off by u.p_j.|v_j|, at most u.max|V| in all, an absolute error however small
// O is (it averages V values of both signs). That is the intermediate error. The LSE is FP32
// throughout.
Accuracy attention_output_accuracy(DType input, const std::string& output, DType output_dtype,
                                   std::int64_t kv_terms);

// A piece of the work of the unfused path and of the FP64 reference, which materialize S: `groups`
// (batch, kv head) groups from `first_group` on, and of each group's (Hq/Hkv) x Sq rows of S the
// `rows` from `first_row` on. Whole groups are batched while their S fits the scratch; a group
// whose S alone does not is cut into blocks of rows.
struct AttentionChunk {
  std::int64_t first_group = 0, groups = 0, first_row = 0, rows = 0;
};
// The chunks covering every row of every group once, each holding at most `limit` bytes of S at
// `bytes_per_score` bytes per score. Throws kc::Error when one row of S alone exceeds `limit`.
std::vector<AttentionChunk> attention_chunks(const AttentionShape& shape, std::int64_t bytes_per_score,
                                             std::size_t limit);

// The definition above, in double, on the host. q, k, v, o as laid out above; lse [B, Hq, Sq].
void attention_reference(const AttentionShape& shape, double scale, bool causal, const double* q,
                         const double* k, const double* v, double* o, double* lse);

// The same definition in FP64 on the GPU (the op's reference for problems too large for the
// host): q, k, v, o and lse doubles in device memory, laid out as above. cuBLAS DGEMM for
// S = scale.Q.K^T and O = P.V, the FP64 masked softmax between them, in chunks of at most 2 GiB of
// S. Assumes finite K and V (masked keys are multiplied by P = 0).
void attention_reference_on_device(const AttentionShape& shape, double scale, bool causal, const double* q,
                                   const double* k, const double* v, double* o, double* lse,
                                   cublasHandle_t cublas, cudaStream_t stream);

// "" when the shape is one the op defines (Hq a multiple of Hkv), otherwise why not.
std::string attention_shape_error(const Problem& problem);

// The attention_fwd op: dtypes bf16 and f16, parameters causal (0) and scale (0: 1/sqrt(D)).
// Inputs Q, K ~ normal(0, 1.5) (scores with a standard deviation of about 2.3 at scale 1/sqrt(D):
// a few keys dominate each row, so a key wrongly masked or dropped moves the output far beyond
// the tolerance), V ~ uniform(-1, 1). References: the host one above for small problems, FP64
// cuBLAS products and an FP64 masked softmax on the GPU for the rest. Baseline: the unfused
// cuBLAS path (S = scale.Q.K^T in FP32, a masked softmax writing P in the problem's dtype and the
// LSE, O = P.V), which materializes S.
OpSpec make_attention_fwd_op();

// The most S and P bytes the unfused path holds at once; it works through the (batch, kv head)
// groups in chunks that fit, and refuses a problem one group of which does not.
inline constexpr std::size_t kAttentionScratchLimit = std::size_t{8} << 30;

// The unfused path the baseline runs: per chunk of (batch, kv head) groups, cuBLAS strided-batched
// S = scale.Q.K^T (FP32 out), the masked softmax (P in the problem's dtype, LSE), cuBLAS
// O = P.V; FP32 accumulation throughout. Exposed for the tests.
void attention_unfused(const Problem& problem, Operands& operands, Context& context,
                       DeviceScratch& scratch);
// The same on a given cuBLAS handle and stream (the ladder's rung 01 runs it as a kernel entry,
// which is handed a stream only).
void attention_unfused(const Problem& problem, Operands& operands, cublasHandle_t cublas, cudaStream_t stream,
                       DeviceScratch& scratch);

}  // namespace kc::stage3
