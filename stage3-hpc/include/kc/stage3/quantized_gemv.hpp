// kc/stage3/quantized_gemv.hpp — the public entry of stage 3's weight-only quantized GEMV:
// y = x . w^T for the few rows of a decode step, w in llama.cpp's GGUF blocks as a file stores them
// or prepared once at load time for the tensor-core rung.
//
// Stage 4 calls it through this header, never through a rung. What it computes and the block
// layouts (q4_0, q4_1, q8_0; 32 weights a block along K) are those of the gemv_gguf op
// (kc/stage3/gemv_gguf_args.hpp): x [M, K] and y [M, N] bf16, dense and row-major; w [N, K] as N
// rows of K / 32 consecutive blocks, packed, no padding; FP32 accumulation, y rounded to bf16 (not
// added to: a caller that needs y += x . w^T adds it itself).
//
// An entry, on every call:
//   1. checks the arguments (check_quantized_gemv_args) and throws kc::Error naming the argument
//      and the rule before any CUDA call: on bad input nothing runs and nothing is written;
//   2. runs the rung for the weight's layout and returns which one ran (QuantizedGemvKernel), so
//      the engine can name it: w as stored (args.w) runs stage3/gemv_gguf/01_warp_per_column (a
//      warp per output column, the blocks decoded where they are read); w prepared by
//      quantized_gemv_prepare (args.quants and args.scales, args.w null) runs
//      stage3/gemv_gguf/06_bulk_stream at M <= 8 on a Hopper GPU (mma.sync with the weights as the
//      A operand, layout=3 of gemv_gguf_args.hpp, the weights streamed into shared memory by the
//      copy engine), the fast one, and stage3/gemv_gguf/05_weights_as_a (the same products, the
//      weights loaded into registers; the same bits) at M > 8 and on other GPUs. All take every
//      type and every M in 1..16.
// A decode step's chain calls quantized_gemv_link instead where it runs (below): rung 07 or 08
// with the RMSNorm or SwiGLU before the projection inside it, y += where the residual stream takes
// it.
// The launch is asynchronous on `stream`, allocates nothing and never synchronizes: it can be
// captured in a CUDA graph. The build holds code for sm_80 and sm_90a; an older GPU gets the
// runtime's kc::CudaError at the launch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string_view>

#include "kc/stage3/gemv_gguf_args.hpp"
#include "kc/stage3/gemv_int4_args.hpp"

namespace kc::stage3 {

// What ran.
enum class QuantizedGemvKernel {
  gemv_gguf_01_warp_per_column,  // stage3/gemv_gguf/01_warp_per_column (w as stored)
  gemv_gguf_03_mma,              // stage3/gemv_gguf/03_mma (not chosen by the entry; named for completeness)
  gemv_gguf_04_cp_async,         // stage3/gemv_gguf/04_cp_async (not chosen by the entry; named for completeness)
  gemv_gguf_05_weights_as_a,     // stage3/gemv_gguf/05_weights_as_a (w prepared, a GPU other than Hopper)
  gemv_gguf_06_bulk_stream,      // stage3/gemv_gguf/06_bulk_stream (w prepared by quantized_gemv_prepare, Hopper)
  gemv_gguf_07_x_resident,       // stage3/gemv_gguf/07_x_resident (quantized_gemv_link)
  gemv_gguf_08_x_f16,            // stage3/gemv_gguf/08_x_f16 (quantized_gemv_link)
  gemv_gguf_11_x_in_step,        // stage3/gemv_gguf/11_x_in_step (quantized_gemv_link with the rung named)
  gemv_gguf_12_x_cluster_staged,  // stage3/gemv_gguf/12_x_cluster_staged (quantized_gemv_link with the rung named)
};

// "stage3/gemv_gguf/01_warp_per_column": the kc-bench id of the rung.
std::string_view quantized_gemv_kernel_name(QuantizedGemvKernel kernel);
// "q4_0", "q4_1", "q8_0" ("unknown" for any other value).
std::string_view gguf_block_type_name(GgufBlockType type);

// The arguments are the rungs' (kc/stage3/gemv_gguf_args.hpp): m, n, k; type; x [M, K] bf16; y
// [M, N] bf16, 2-byte aligned; and the weight either as stored — w, N rows of K / 32 blocks of
// `type`, 4-byte aligned, x 4-byte aligned — or prepared — quants and scales as
// quantized_gemv_prepare wrote them, x, quants and scales 16-byte aligned. Exactly one of the two.
using QuantizedGemvArgs = GgufGemvArgs;

// The device bytes quantized_gemv_prepare writes for an N x K weight of `type` (quants, then
// scales; tiles of 16 rows x 128 k, so N pads to a multiple of 16 and K to one of 128).
std::size_t quantized_gemv_prepared_quant_bytes(GgufBlockType type, int n, int k);
std::size_t quantized_gemv_prepared_scale_bytes(GgufBlockType type, int n, int k);

// Once at load time: the N x K / 32 blocks at `blocks` (device memory, as a file stores them)
// rewritten for the tensor-core rung into `quants` and `scales` (device, 16-byte aligned, of the
// sizes above). Checks its arguments like quantized_gemv (kc::Error before any CUDA call);
// asynchronous on `stream`.
void quantized_gemv_prepare(GgufBlockType type, const std::uint8_t* blocks, int n, int k, std::uint8_t* quants,
                            void* scales, cudaStream_t stream);

// Throws kc::Error unless `args` describe a call the rung can run: type q4_0, q4_1 or q8_0; M in
// [1, kGgufGemvMaxRows] (16: a decode step; more rows are a GEMM's work); N >= 1; K a positive
// multiple of 32 (whole blocks); w, x and y non-null and aligned as above. No CUDA call.
void check_quantized_gemv_args(const QuantizedGemvArgs& args);

// The rung quantized_gemv runs for a prepared weight of M rows on the current GPU:
// gemv_gguf_06_bulk_stream for M <= 8 on a Hopper GPU with sm_90a code in the build,
// gemv_gguf_05_weights_as_a otherwise (more rows of x crowd rung 06's shared-memory ring: at M = 16
// it measured slower than rung 05 on the H200, stage-3 README).
QuantizedGemvKernel quantized_gemv_prepared_kernel(int m);

// y = x . w^T on `stream`, after check_quantized_gemv_args; returns the rung that ran.
QuantizedGemvKernel quantized_gemv(const QuantizedGemvArgs& args, cudaStream_t stream);

// A decode step's projection as one link of its chain of kernels (rung 07,
// stage3/gemv_gguf/07_x_resident, or rung 08, stage3/gemv_gguf/08_x_f16, as
// quantized_gemv_link_kernel chooses): y_w = prologue(x) . w^T + beta y_w for up to
// kGgufGemvLinkMaxWeights prepared weights that share x and K (q, k and v), the prologue an
// RMSNorm (x [M, K] and the norm's weight) or SwiGLU (x [M, 2K] = [gate | up]) or none
// (kc/stage3/gemv_gguf_args.hpp, GgufGemvLinkArgs). Launched as a programmatic dependent inside a
// kc::core::ProgrammaticLaunchScope (the weights start before the kernel ahead ends).
using QuantizedGemvLinkArgs = GgufGemvLinkArgs;

// Whether quantized_gemv_link runs M rows of K for blocks of `type` here: a Hopper GPU, a build
// with sm_90a code, and x's M rows next to the rung's ring in its shared memory. No launch.
bool quantized_gemv_link_runs(GgufBlockType type, int m, int k);

// The rung quantized_gemv_link runs for `args` (where quantized_gemv_link_runs): rung 08 for one
// row of q4_0 or q4_1 whose x and block sums fit next to the ring (gemv_gguf_08_fits) when the
// link has more tiles of 16 columns than rung 08 runs CTAs at once — where its CTAs take more than
// one tile each, so that its second pass over x (the fp16 conversion and the sums) is paid back by
// the tiles after the first; rung 07 otherwise, q8_0 included (the stage-3 README's
// measurements). Checks the arguments as quantized_gemv_link does; no launch.
QuantizedGemvKernel quantized_gemv_link_kernel(const QuantizedGemvLinkArgs& args);

// The link on `stream`. kc::Error before any launch where it cannot run (quantized_gemv_link_runs
// false: the caller runs the norm or activation and quantized_gemv instead) or for bad arguments
// (each weight's as check_quantized_gemv_args says; norm_weight for the RMSNorm; beta any float).
QuantizedGemvKernel quantized_gemv_link(const QuantizedGemvLinkArgs& args, cudaStream_t stream);

// The same with the link rung named instead of chosen — gemv_gguf_07_x_resident, gemv_gguf_08_x_f16,
// gemv_gguf_11_x_in_step (rung 11: rung 07 with x staged in step with the weights, which
// quantized_gemv_link_kernel does not choose: measured slower, stage-3 README) or
// gemv_gguf_12_x_cluster_staged (rung 12: rung 07 with x staged once a cluster of 4 CTAs, which
// quantized_gemv_link_kernel does not choose either: measured slower) — for a caller
// comparing them (kc-engine-bench --gguf-link-rung). kc::Error for another kernel, and where that rung cannot run
// the link (the quantized_gemv_link_runs overload below); the rest as above.
bool quantized_gemv_link_runs(GgufBlockType type, int m, int k, QuantizedGemvKernel rung);
QuantizedGemvKernel quantized_gemv_link(const QuantizedGemvLinkArgs& args, QuantizedGemvKernel rung,
                                        cudaStream_t stream);

// ---- 4-bit groups with a scale and a zero point (GPTQ/AWQ; kc/stage3/gemv_int4_args.hpp) ----
// The same kind of entry for the int4 group format: y = x . w^T for the M <= 16 rows of a decode
// step, w prepared by prepare_int4_groups_on_device (kc/stage3/gemv_int4_args.hpp) from the stored
// form that quantize_int4_groups (kc/stage3/quantize_int4.hpp) or int4_groups_from_checkpoint
// (kc/stage3/gemv_int4.hpp) gives. Checks first (kc::Error, nothing runs), then the rung
// int4_gemv_kernel names; asynchronous, allocates nothing, capturable. Batches of 17-64 rows run
// rung 03 (stage3/gemv_int4/03_batch), which needs a workspace and is not behind this entry yet.
enum class Int4GemvKernel {
  gemv_int4_01_group_scales,  // stage3/gemv_int4/01_group_scales
  gemv_int4_02_bulk_stream,   // stage3/gemv_int4/02_bulk_stream (Hopper)
  gemv_int4_04_x_resident,    // stage3/gemv_int4/04_x_resident (Hopper; int4_gemv_link)
  gemv_int4_05_x_f16,         // stage3/gemv_int4/05_x_f16 (Hopper; int4_gemv_link with the rung named)
};

// "stage3/gemv_int4/01_group_scales": the kc-bench id of the rung.
std::string_view int4_gemv_kernel_name(Int4GemvKernel kernel);

// Throws kc::Error unless `args` describe a call the entry runs: M in [1, kInt4GemvMaxRows]; N and
// K >= 1; a group size of 32, 64 or a multiple of 128 that divides K; x, quants, scales and y
// non-null; x, quants and scales 16-byte aligned, y 2-byte aligned. No CUDA call.
void check_int4_gemv_args(const Int4GemvArgs& args);

// The rung int4_gemv runs for M rows: rung 01 at every M (1 to kInt4GemvMaxRows). Measured on
// the H200 against rungs 02 and 04 at M = 1, 2, 4, 8 and 16 on Llama-3-8B's widths (stage-3
// README, "4-bit groups with scales and zero points"): rung 01 ahead or within a few percent
// everywhere, where the GGUF GEMV's rule (rung 02's bulk stream at M <= 8 on Hopper) had been
// carried over before the int4 rungs had rows of their own. Rungs 02, 04 and 05 stay reachable
// through kc-bench and (04, 05) through int4_gemv_link.
Int4GemvKernel int4_gemv_kernel(int m);

// y = x . w^T on `stream`, after check_int4_gemv_args; returns the rung that ran.
Int4GemvKernel int4_gemv(const Int4GemvArgs& args, cudaStream_t stream);

// A decode step's projection on 4-bit groups as one link of its chain of kernels (rung 04,
// stage3/gemv_int4/04_x_resident, the GGUF rung 07 frame): y_w = prologue(x) . w^T + beta y_w for
// up to kGgufGemvLinkMaxWeights prepared weights that share x, K and the group size, the prologue
// an RMSNorm or SwiGLU or none, as quantized_gemv_link's (Int4GemvLinkArgs in
// kc/stage3/gemv_int4_args.hpp). Launched as a programmatic dependent inside a
// kc::core::ProgrammaticLaunchScope.

// Whether int4_gemv_link runs M rows of K in groups of `group_size` here: a Hopper GPU, a build with
// sm_90a code, M in [1, kInt4GemvMaxRows], a group size the layout takes that divides K, and x's M
// rows next to the ring of the rung int4_gemv_link_kernel chooses (rung 04: gemv_int4_04_fits), or
// of `rung` (04 or 05: gemv_int4_05_fits; anything else: false). No launch.
bool int4_gemv_link_runs(int m, int k, int group_size);
bool int4_gemv_link_runs(int m, int k, int group_size, Int4GemvKernel rung);

// The link rung int4_gemv_link runs for `args`: rung 04 (stage3/gemv_int4/04_x_resident). Rung 05
// (x in fp16, 05_x_f16) is not chosen until it has been timed against rung 04 on the decode
// shapes (stage-3 README, "Rung 05"); the overload below runs it by name.
Int4GemvKernel int4_gemv_link_kernel(const Int4GemvLinkArgs& args);

// The link on `stream`; returns the rung that ran. kc::Error before any launch where it cannot run
// (int4_gemv_link_runs false: the caller runs the norm or activation and int4_gemv instead) or for
// bad arguments (each weight's as check_int4_gemv_args says; norm_weight for the RMSNorm). The
// second form runs `rung` (04 or 05; any other is refused) instead of int4_gemv_link_kernel's.
Int4GemvKernel int4_gemv_link(const Int4GemvLinkArgs& args, cudaStream_t stream);
Int4GemvKernel int4_gemv_link(const Int4GemvLinkArgs& args, Int4GemvKernel rung, cudaStream_t stream);

}  // namespace kc::stage3
