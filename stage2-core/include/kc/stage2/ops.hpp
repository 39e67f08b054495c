// kc/stage2/ops.hpp — the public entry points of stage 2: one call per op, the best rung inside.
//
// Stage 4 (and anything else outside this stage) calls the memory-bound ops through these
// functions, never through a rung. Each entry
//   1. validates its arguments on the host and throws kc::Error with a sentence the caller can act
//      on (which argument, what was wrong, what is accepted) — before any CUDA call, so on bad
//      input nothing is launched and nothing is written;
//   2. launches the rung that docs/benchmarks/h200/stage2.md measured fastest (the top of each
//      ladder, except where a comment in ops.cpp says otherwise and why);
//   3. returns the rung it launched, as "<op>/<rung>" (the file kernels/<op>/<rung>.cu; kc-bench
//      lists it as stage2/<op>_<dtype>/<rung>), so a caller can report what ran.
// A launch the CUDA runtime refuses throws kc::CudaError at the call. The launch is asynchronous
// on `stream`; only embedding_checked() waits for it.
//
// Every op exists for T = float, __half and __nv_bfloat16, reads and writes T and computes in
// float. Tensors are dense and row-major; the argument structs are those of the rungs
// (kc/stage2/kernels.hpp, kc/stage2/embedding.hpp). Rules common to all entries:
//   - every pointer the op uses must be non-null and aligned to its element (sizeof(T), 4 bytes for
//     int and float tables); 16-byte aligned pointers and row lengths that are a multiple of
//     16 bytes get 16-byte accesses, anything else the same rung's scalar path — never an error;
//   - sizes must be >= 1 (an empty call is the caller's to skip) and row lengths at most
//     kMaxRowLength: the rungs index within a row with 32-bit ints that step past its end by up
//     to one block's stride;
//   - inputs and outputs are not checked for overlap.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string_view>

#include "kc/stage2/embedding.hpp"
#include "kc/stage2/kernels.hpp"

namespace kc::stage2 {

// The longest row (cols, hidden) an entry accepts: 2^30 elements.
inline constexpr std::int64_t kMaxRowLength = std::int64_t{1} << 30;
// The most elements elementwise() accepts: 2^38. The map kernel gives a thread to each element (or
// each 16-byte vector) of one long row, in at most 2^31 - 1 blocks of 256 threads.
inline constexpr std::int64_t kMaxElementCount = std::int64_t{1} << 38;

// ---- norms -------------------------------------------------------------------------------------

// y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight, for each of `rows` rows of `cols` elements.
// x, y: rows x cols; weight: cols. Rung: rmsnorm/05_row_in_registers (a warp or a block per row,
// the row held in registers; rows too long to hold, over 4096 accesses, are streamed by the rung).
// Refuses: null x, weight or y; rows < 1; cols outside [1, kMaxRowLength]; eps not finite or <= 0.
template <typename T>
std::string_view rmsnorm(const RmsNormArgs<T>& args, cudaStream_t stream);

// sum = x + residual (rounded to T: the new residual stream) and y = rmsnorm(sum) * weight, in one
// pass. x, residual, sum, y: rows x cols; weight: cols. Rung:
// residual_rmsnorm/03_fused_in_registers. Refuses as rmsnorm(), and a null residual or sum.
template <typename T>
std::string_view residual_rmsnorm(const ResidualRmsNormArgs<T>& args, cudaStream_t stream);

// y[r] = (x[r] - mean) / sqrt(var + eps) * weight + bias, the variance taken around the mean.
// x, y: rows x cols; weight, bias: cols. Rung: layernorm/04_row_in_registers for rows that fill
// every slot of their row team (cols a multiple of 1024 bf16/fp16 or 512 float elements, as
// transformer hidden sizes are), layernorm/05_lean_two_pass for other rows (ops.cpp says why).
// Refuses: null x, weight, bias or y; rows < 1; cols outside [1, kMaxRowLength]; eps not finite
// or <= 0.
template <typename T>
std::string_view layernorm(const LayerNormArgs<T>& args, cudaStream_t stream);

// ---- softmax and row reductions ----------------------------------------------------------------

// y[r] = exp(x[r] - max) / sum(exp(x[r] - max)) per row. x, y: rows x cols. Rung:
// softmax/06_lean_exp. Refuses: null x or y; rows < 1; cols outside [1, kMaxRowLength].
template <typename T>
std::string_view softmax(const SoftmaxArgs<T>& args, cudaStream_t stream);

// out[r] = sum, max (NaN-propagating), mean or sum of squares of row r. x: rows x cols; out: rows.
// Rung: row_reduce/03_vectorized. Refuses: null x or out; rows < 1; cols outside
// [1, kMaxRowLength]; a `kind` that is not one of the four RowReduction values.
template <typename T>
std::string_view row_reduce(const RowReduceArgs<T>& args, cudaStream_t stream);

// ---- element-wise ------------------------------------------------------------------------------

// out = a + b (ElementwiseKind::add), alpha * a (scale), or activation(a) (activation: relu, silu,
// gelu_tanh, gelu_erf), over `count` elements. a, b, out: count elements (b only for add; out may
// be a or b: each element is read before it is written). Rung: elementwise/02_vectorized.
// Refuses: null a, out, or b for add; count outside [1, kMaxElementCount]; alpha not finite for
// scale; an unknown kind or activation.
template <typename T>
std::string_view elementwise(const ElementwiseArgs<T>& args, cudaStream_t stream);

// out[r][c] = activation(x[r][c] + bias[c]) in one pass. x, out: rows x cols; bias: cols.
// Rung: bias_activation/02_fused. Refuses: null x, bias or out; rows or cols < 1; an unknown
// activation.
template <typename T>
std::string_view bias_activation(const BiasActivationArgs<T>& args, cudaStream_t stream);

// out[r][h] = silu(gate_up[r][h]) * gate_up[r][hidden + h]: the gate and up halves of a fused
// projection [gate | up]. gate_up: rows x (2 * hidden); out: rows x hidden. Rung:
// swiglu/02_vectorized. Refuses: null gate_up or out; rows < 1; hidden outside
// [1, kMaxRowLength] (2 * hidden is an int in the rung).
template <typename T>
std::string_view swiglu(const SwigluArgs<T>& args, cudaStream_t stream);

// ---- rotary position embedding -----------------------------------------------------------------

// Rotates Q (tokens x q_heads x head_dim) and K (tokens x kv_heads x head_dim) in place: pair i
// of token t turns by the angle whose cos is cos_sin[positions[t]][i] and whose sin is
// cos_sin[positions[t]][head_dim / 2 + i] (layout: rotate_half pairs element i with
// i + head_dim / 2, interleaved pairs 2i with 2i + 1). `table_positions` is the number of rows of
// cos_sin (max_position): every positions[t] must lie in [0, table_positions). The positions live
// on the device and are not read back (that would cost a synchronization per step): the caller
// guarantees that range, as an engine does when it checks each sequence's length against its
// table before the step.
// Rung: rope/02_vectorized (a block per token, the cos/sin row read once for all heads). An
// interleaved Q or K that is aligned to one element but not to one (a, b) pair (2 * sizeof(T))
// goes to rope/01_naive, which moves single elements; rung 02 reads a pair as one access.
// Refuses: null q, k, positions or cos_sin; tokens, q_heads or kv_heads < 1; head_dim odd or < 2;
// (q_heads + kv_heads) * head_dim / 2 beyond 32-bit indexing; table_positions < 1; an unknown
// layout.
template <typename T>
std::string_view rope(const RopeArgs<T>& args, int table_positions, cudaStream_t stream);

// ---- embedding gather --------------------------------------------------------------------------

// out[t] = table[ids[t]]. ids: tokens (int); table: vocab x hidden; out: tokens x hidden.
// An id outside [0, vocab) is never used as an address: its row of out is zero-filled and its
// position recorded in *error_record (the lowest bad position wins). error_record must hold
// kNoBadToken before the launch (this entry does not reset it, so one record can collect a whole
// step); read it after the stream has finished, or use embedding_checked().
// Rung: embedding/02_vectorized. Refuses: null ids, table, out or error_record; tokens or vocab
// < 1; hidden outside [1, kMaxRowLength].
template <typename T>
std::string_view embedding(const EmbeddingArgs<T>& args, cudaStream_t stream);

// embedding() with the record reset first, then a wait for the stream, and kc::Error naming the
// first bad position, its id and the vocabulary range if an id was out of range (rows of bad ids
// are zero). For tests, tools and prefill; not capturable in a CUDA graph (it synchronizes).
// Refuses what embedding() refuses.
template <typename T>
std::string_view embedding_checked(const EmbeddingArgs<T>& args, cudaStream_t stream);

}  // namespace kc::stage2
