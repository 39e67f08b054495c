// kc/stage3/attention_decode.hpp — the attention_decode_paged op: decoding attention over a paged
// KV cache. What it computes, how the cache is laid out, how bad tables are refused, its reference,
// and the op the decode kernels register against.
//
// A decode step runs one new token per sequence (or a few, Sq <= 8, when a draft model's tokens
// are verified at once) against everything the sequence has cached. The keys and values do not
// sit in one [B, Hkv, S, D] tensor: the engine stores them in fixed-size blocks ("pages") of one
// pool, hands each sequence blocks as it grows, and records which ones in a block table.
//
// Layout (row-major, contiguous):
//   Q           [B, Hq, Sq, D]                       problem dtype (bf16 or f16)
//   K_cache     [num_blocks, Hkv, block_size, D]     problem dtype: the pool of key blocks
//   V_cache     [num_blocks, Hkv, block_size, D]     problem dtype: the pool of value blocks
//   block_table [B, max_blocks]                      int32: block ids, max_blocks = ceil(Sk / block_size)
//   seq_lens    [B]                                  int32: keys of each sequence, new tokens included
//   O           [B, Hq, Sq, D]                       problem dtype
//   LSE         [B, Hq, Sq]                          f32
// Problem dimensions, in attention_fwd's order: B, Hq, Hkv, Sq, Sk, D ("64x32x8x1x8192x128"), Sk
// the longest sequence's length; attention_scale() reads the `scale` parameter as for attention_fwd.
// Parameters: block_size (16, 32 or 64 tokens a block), lengths (how the sequences' lengths are
// drawn, below), scale (0: 1/sqrt(D)).
//
// Definition, for sequence b, query head h and new token t (0 <= t < Sq), with L = seq_lens[b]:
//   key j of sequence b   the row (j mod block_size) of head kv of block block_table[b][j / block_size]:
//                         K_cache[block_table[b][j / block_size], kv, j mod block_size, :], V alike
//   kv head               h / (Hq / Hkv)            (grouped-query attention; Hq a multiple of Hkv)
//   visible keys          j < L - (Sq - 1 - t)       (the new tokens are the last Sq of the L keys:
//                                                     causal among themselves, every older key visible;
//                                                     the last token sees all L)
//   s_j = scale * Q[b,h,t,:] . K_j,  O[b,h,t,:] = sum_j exp(s_j - m) V_j / sum_j exp(s_j - m),
//   LSE[b,h,t] = m + log(sum_j exp(s_j - m)),  m = max_j s_j       (natural log), as attention_fwd.
// A row that sees no key (L < Sq - t; L = 0 is an empty batch slot, e.g. padding of a batch
// captured in a CUDA graph) has O = 0 and LSE = -inf. Block-table slots at and past
// ceil(L / block_size) are never read (kc's operands hold kNoBlock there), nor are the rows of a
// sequence's last block at and past L mod block_size: the engine leaves stale values there, kc's
// operands NaN, and none may reach the output (a kernel that loads a whole page must zero what it
// masks, V included, since 0 * NaN is NaN).
//
// Why this cache layout. A decode kernel works on one (sequence, kv head) at a time: it multiplies
// the Hq/Hkv x Sq query rows of the group with every key of that head, so all query heads of a kv
// head share each page read. With [block, head, row, D] ("HND", one of FlashInfer's two layouts),
// the page of one kv head is a single contiguous block_size x D x 2-byte stretch (4 KiB for 16
// rows of D = 128): one TMA box or a run of 16-byte cp.async copies, and exactly the [rows, D]
// tile the prefill kernels read from K and V ([S, D] per head), so the same ldmatrix paths serve
// Q.K^T and P.V. The alternatives: [block, row, head, D] ("NHD": FlashAttention's
// flash_attn_with_kvcache, vLLM's FlashAttention backend, FlashInfer's default) interleaves the kv
// heads, so one head's page is block_size rows of D elements strided by Hkv x D (256-byte pieces,
// whole DRAM sectors but a 3-D box for TMA); vLLM's original kernel splits K as [block, head,
// D/x, row, x] and stores V transposed [block, head, D, row], shaped for CUDA-core dot products
// by thread groups, not for tensor-core tiles. Appending a token writes Hkv rows of D elements
// (256 bytes each at D = 128) at one row offset in its block, instead of one contiguous Hkv x D
// row: the same number of whole sectors, and one token per step against the whole context read.
// K and V are separate pools indexed by the same block ids, so one table serves both, and an
// engine can give every layer its own pair of pools under the same ids (one allocation
// [layers][2][num_blocks][Hkv][block_size][D] is such a pair per layer). The table is dense
// [B, max_blocks] with int32 ids (vLLM's and FlashAttention's form, not FlashInfer's CSR
// indptr/indices): a CUDA graph captures fixed-size arguments, and a sequence's slot s is read
// without a prefix sum. Block ids may repeat across sequences (shared prefixes).
//
// How a kernel is expected to run it (flash-decoding): one CTA per (sequence, kv head, split of
// the context), the group's Hq/Hkv x Sq query rows as the rows of the MMA tile, each split
// writing its partial O (FP32) and LSE, then a combine O = sum_s exp(LSE_s - LSE) O_s with
// LSE = log sum_s exp(LSE_s). The tolerance allows one rounding of O: partials stay in FP32.
//
// The lengths of a problem (parameter `lengths`; they set its FLOPs and bytes, so they depend on
// the problem only, never on the seed):
//   0 (full)    every sequence has Sk keys: the benchmark shapes.
//   1 (ragged)  sequence 0 has Sk keys, then 1, block_size - 1, block_size + 1, 0 (an empty slot),
//               block_size, and from sequence 6 on lengths hashed from (b, Sk) in [1, Sk]; each
//               clamped to [0, Sk].
// The block placement is seeded: kc's operands give the blocks of all sequences a shuffled order
// in the pool in which no block follows its logical predecessor, so a kernel that assumes
// contiguous pages reads another sequence's keys and fails the check.
#pragma once

#ifdef KC_KERNEL_SOURCE
#error "a kernel (rung) file includes kc/stage3/attention_decode.hpp, the op's harness side: kernels include argument headers only"
#endif

#include <cstdint>
#include <string>
#include <vector>

#include "kc/common/op_builder.hpp"
#include "kc/common/registry.hpp"

namespace kc::stage3 {

inline constexpr const char* kAttentionDecodeOp = "attention_decode_paged";

// The id kc's operands put in block-table slots a sequence does not use (never read).
inline constexpr std::int32_t kNoBlock = -1;
// At most this many new tokens per sequence: more is a prefill (attention_fwd).
inline constexpr std::int64_t kMaxDecodeQueries = 8;

enum class DecodeLengths { full = 0, ragged = 1 };

struct DecodeShape {
  std::int64_t batch = 0, q_heads = 0, kv_heads = 0, q_len = 0, max_len = 0, head_dim = 0, block_size = 0;
  DecodeLengths lengths = DecodeLengths::full;
  std::int64_t group() const { return q_heads / kv_heads; }
  // Block-table slots per sequence: ceil(Sk / block_size).
  std::int64_t max_blocks() const { return (max_len + block_size - 1) / block_size; }
};

// Throws kc::Error unless the problem has the op's 6 dimensions.
DecodeShape decode_shape(const Problem& problem);

// Blocks a sequence of `length` keys occupies: ceil(length / block_size).
std::int64_t blocks_for(std::int64_t length, std::int64_t block_size);

// The key count of every sequence (`lengths` above).
std::vector<std::int32_t> decode_seq_lens(const DecodeShape& shape);

// Keys query t of a sequence of `length` keys sees: clamp(length - (Sq - 1 - t), 0, length).
std::int64_t decode_visible_keys(std::int64_t length, std::int64_t q_len, std::int64_t query);

// A paged cache's bookkeeping on the host: what block_table and seq_lens hold.
struct PagedKvLayout {
  std::int64_t batch = 0, max_blocks = 0, block_size = 0, num_blocks = 0;
  std::vector<std::int32_t> seq_lens;     // [batch]
  std::vector<std::int32_t> block_table;  // [batch, max_blocks]; kNoBlock in unused slots
  std::int32_t block(std::int64_t sequence, std::int64_t slot) const {
    return block_table[static_cast<std::size_t>(sequence * max_blocks + slot)];
  }
};

// The layout kc's operands use for `problem`: the pool holds exactly the blocks the sequences
// need (sum of blocks_for(seq_lens[b])), handed out in an order shuffled by `seed` in which no
// block id is its logical predecessor's + 1.
PagedKvLayout decode_layout(const Problem& problem, std::uint64_t seed);

// Blocks in the pool of `problem`'s operands (independent of the seed).
std::int64_t decode_num_blocks(const Problem& problem);

// Validation of a cache's bookkeeping, on host copies, before any launch. Throws kc::Error naming
// the sequence, the slot and the value when a length is negative or exceeds its table row
// (max_blocks x block_size keys), or a used slot (s < ceil(seq_lens[b] / block_size)) holds an id
// outside [0, num_blocks). Unused slots are not looked at.
struct PagedKvTableView {
  const std::int32_t* seq_lens = nullptr;     // [batch]
  const std::int32_t* block_table = nullptr;  // [batch, max_blocks]
  std::int64_t batch = 0, max_blocks = 0, block_size = 0, num_blocks = 0;
};
void validate_seq_lens(const PagedKvTableView& table);  // the lengths only (block_table unused)
void validate_paged_kv(const PagedKvTableView& table);
PagedKvTableView table_view(const PagedKvLayout& layout);

// "" when the op defines `problem` (Hq a multiple of Hkv, Sq <= kMaxDecodeQueries, block_size 16,
// 32 or 64, lengths 0 or 1, a table of at most 2^31 - 1 slots), otherwise why not.
std::string attention_decode_shape_error(const Problem& problem);

// The definition above in double on the host: each sequence's pages gathered into a contiguous
// [Hkv, L, D] K and V, then attention_fwd's reference with the causal (bottom-right) mask.
// q and o [B, Hq, Sq, D], caches [num_blocks, Hkv, block_size, D], lse [B, Hq, Sq].
void attention_decode_reference(const DecodeShape& shape, double scale, const PagedKvLayout& layout,
                                const double* q, const double* k_cache, const double* v_cache, double* o,
                                double* lse);

// Sum over sequences and new tokens of the keys each sees, times Hq: the (query, key) pairs.
double decode_visible_pairs(const DecodeShape& shape);

// The attention_decode_paged op: dtypes bf16 and f16; fills as attention_fwd's (Q, K ~ normal(0,
// 1.5), V ~ uniform(-1, 1)), the table and lengths from decode_layout(), the rows of last blocks
// past a sequence's length NaN. References: the host one for small problems; for the rest each
// sequence's pages gathered into FP64 on the GPU and attention_fwd's FP64 device reference. Bytes:
// the K/V rows the sequences hold (sum of seq_lens x Hkv x D x 2 elements), Q, O, LSE, the
// lengths and the used table slots. Baseline: a copy of that many bytes (the op is memory-bound).
OpSpec make_attention_decode_op();

// ---- attention_decode_paged_rope: decode with the new tokens' RoPE and cache write ---------------
//
// What a decode step's attention does when nothing has rotated the new token yet (decode rung 06
// runs it in one launch; unfused, it is stage 2's RoPE on q and k, a cache write, and
// attention_decode_paged). The dimensions and parameters are attention_decode_paged's. For new
// token t of sequence b, at position p = L - Sq + t (L = seq_lens[b]; a token with p < 0 sees no
// key and has no row):
//   Q      [B, Hq, Sq, D]     before RoPE; the attention uses it rotated by p (rotate_half: element
//                             i pairs with i + D/2 at the angle whose cos is cos_sin[p][i] and sin
//                             cos_sin[p][D/2 + i]) and rounded to the dtype, as stage 2's RoPE stores it
//   K_new,
//   V_new  [B, Sq, Hkv, D]    the new tokens' keys (before RoPE) and values, token-major
//   cos_sin [Sk + 1, D] f32   stage 2's table (rope_cos_sin_table, base kDecodeRopeBase)
//   K_cache, V_cache          inputs and outputs: the rows of position p (block block_table[b][p / bs],
//                             row p mod bs, every kv head) become K_new rotated and V_new; every
//                             other row is left as it was. kc's operands hold NaN in those rows
//                             before the launch.
//   block_table, seq_lens, O, LSE as attention_decode_paged (L counts the new tokens).
// The reference is on the host (the rotation, the rows written, then attention_decode_reference).
inline constexpr const char* kAttentionDecodeRopeOp = "attention_decode_paged_rope";
inline constexpr double kDecodeRopeBase = 10000.0;
// Rows of the op's cos/sin table: Sk + 1 (a row past the longest sequence's last position).
std::int64_t decode_rope_positions(const Problem& problem);
OpSpec make_attention_decode_rope_op();

}  // namespace kc::stage3
