// kc/stage3/attention_varlen.hpp — the attention_fwd_varlen op: attention_fwd on the packed
// variable-length form, what continuous batching hands attention. How its problems choose the
// sequences' lengths, its reference, and the op its rungs register against.
//
// Layout (kc/stage3/attention.hpp has it next to the dense one): B sequences, sequence b with Sq_b
// queries and Sk_b keys, their tokens one after the other.
//   Q            [total_q, Hq,  D]   problem dtype (bf16 or f16), total_q = sum of Sq_b
//   K, V         [total_k, Hkv, D]   problem dtype, total_k = sum of Sk_b
//   cu_seqlens_q [B + 1]             int32: 0, Sq_0, Sq_0 + Sq_1, ..., total_q
//   cu_seqlens_k [B + 1]             int32: 0, Sk_0, ..., total_k
//   O            [total_q, Hq,  D]   problem dtype
//   LSE          [Hq x total_q]      f32: sequence b's [Hq, Sq_b] block at element cu_seqlens_q[b] . Hq
// Problem dimensions, in attention_fwd's order: B, Hq, Hkv, Sq, Sk, D ("9x8x2x300x500x128"), Sq and
// Sk the longest Sq_b and Sk_b (max_seqlen_q, max_seqlen_k). Parameters: causal and scale as
// attention_fwd's, and lengths (how the Sq_b and Sk_b are chosen, below).
//
// Definition: attention_fwd's, for each sequence on its own with Sq_b and Sk_b in place of Sq and
// Sk — query row i of sequence b and head h sees its keys j < Sk_b, or with causal = 1 the keys
// j <= i + Sk_b - Sq_b (the mask aligned bottom-right in every sequence); grouped-query heads
// (kv head h / (Hq / Hkv)); a row that sees no key has O = 0 and LSE = -inf. No row sees another
// sequence's keys.
//
// The lengths of a problem (parameter `lengths`). They set its FLOPs, so they depend on the
// problem only, never on the seed (as attention_decode_paged's do):
//   0 (full)    every sequence has Sq queries and Sk keys: the dense problem, packed.
//   1 (ragged)  sequence 0 has (Sq, Sk), then (1, 1), (0, 0) (an empty sequence), (1, Sk) (one
//               query over a whole context, as in decoding), (Sq, 0) (rows that see no key), (0, Sk)
//               (keys and no query), and from sequence 6 on Sq_b in [1, Sq] and Sk_b in [1, Sk]
//               hashed from (b, Sq, Sk), independently, so Sq_b > Sk_b and Sq_b < Sk_b both occur.
//               Each is clamped to [0, Sq] x [0, Sk]; a batch of fewer than 6 keeps the first B.
#pragma once

#ifdef KC_KERNEL_SOURCE
#error "a kernel (rung) file includes kc/stage3/attention_varlen.hpp, the op's harness side: kernels include the argument headers in stage3-hpc/attention/"
#endif

#include <cstdint>
#include <string>
#include <vector>

#include "kc/common/op_builder.hpp"
#include "kc/common/registry.hpp"
#include "kc/stage3/attention.hpp"

namespace kc::stage3 {

inline constexpr const char* kAttentionVarlenOp = "attention_fwd_varlen";

enum class VarlenLengths { full = 0, ragged = 1 };

struct VarlenShape {
  std::int64_t batch = 0, q_heads = 0, kv_heads = 0, max_q_len = 0, max_kv_len = 0, head_dim = 0;
  VarlenLengths lengths = VarlenLengths::full;
  // Query heads per kv head.
  std::int64_t group() const { return q_heads / kv_heads; }
};

// Throws kc::Error unless the problem has the op's 6 dimensions.
VarlenShape varlen_shape(const Problem& problem);

// The queries and keys of every sequence (`lengths` above): q[b] = Sq_b, kv[b] = Sk_b.
struct VarlenLengthsOf {
  std::vector<std::int32_t> q, kv;
};
VarlenLengthsOf varlen_lengths(const VarlenShape& shape);

// Sequence b alone as an attention_fwd problem: (1, Hq, Hkv, q_len, kv_len, D).
AttentionShape varlen_sequence_shape(const VarlenShape& shape, std::int64_t q_len, std::int64_t kv_len);

// Sum over the sequences of attention_fwd's visible_pairs: the (query, key) pairs computed.
double varlen_visible_pairs(const VarlenShape& shape, bool causal);

// "" when the op defines `problem` (Hq a multiple of Hkv, lengths 0 or 1, total_q and total_k
// below 2^31), otherwise why not.
std::string attention_varlen_shape_error(const Problem& problem);

// The definition above in double on the host: each sequence's rows gathered into the dense
// [1, H, S, D] layout, attention_reference, the result scattered back. q, o [total_q, Hq, D];
// k, v [total_k, Hkv, D]; lse as above; cu_seqlens_q/k host copies of B + 1 offsets, checked with
// validate_cu_seqlens (kc/stage3/attention_ops.hpp) against the shape's longest lengths.
void attention_varlen_reference(const VarlenShape& shape, double scale, bool causal, const std::int32_t* cu_seqlens_q,
                                const std::int32_t* cu_seqlens_k, const double* q, const double* k, const double* v,
                                double* o, double* lse);

// The attention_fwd_varlen op: dtypes bf16 and f16; fills as attention_fwd's (Q, K ~ normal(0,
// 1.5), V ~ uniform(-1, 1)), cu_seqlens_q/k from varlen_lengths. References: the host one above
// for small problems; for the rest each sequence's rows converted to FP64 and gathered on the GPU,
// and attention_fwd's FP64 device reference. FLOPs: 4 D per visible (query, key) pair, summed over
// the sequences (exact under the causal mask), as attention_fwd counts them. Baseline: the dense
// public entry attention_forward (kc/stage3/attention_ops.hpp) called once per sequence on its
// rows of the packed tensors — what a runtime without the packed form does, B launches (the Hopper
// rung it picks on an H100/H200, rung 05 elsewhere); a sequence with Sq_b > 0 and Sk_b = 0 gets its O = 0 and
// LSE = -inf by copies.
OpSpec make_attention_varlen_op();

}  // namespace kc::stage3
