// kc/stage1/sgemm.hpp — the FP32 SGEMM ladder: C = alpha.A.B + beta.C, row-major, A M x K,
// B K x N, C M x N. One launch function per rung; register_kernels() files them all under
// "stage1/sgemm/<rung>" for kc-bench and the conformance tests.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "kc/common/gemm.hpp"
#include "kc/common/registry.hpp"

namespace kc::stage1 {

using SgemmArgs = GemmArgs<float>;

// The "sgemm" op: FP32 in and out, B stored K x N, FP32 CUDA cores, baseline cuBLAS SGEMM
// with pedantic FP32 math.
OpSpec make_sgemm_op();

void sgemm_01_naive(const SgemmArgs& args, cudaStream_t stream);
void sgemm_02_coalesced(const SgemmArgs& args, cudaStream_t stream);
void sgemm_03_smem_tiling(const SgemmArgs& args, cudaStream_t stream);
void sgemm_04_blocktile_1d(const SgemmArgs& args, cudaStream_t stream);
void sgemm_05_blocktile_2d(const SgemmArgs& args, cudaStream_t stream);
void sgemm_06_vectorized(const SgemmArgs& args, cudaStream_t stream);       // K, N multiples of 4
void sgemm_07_bank_conflict_free(const SgemmArgs& args, cudaStream_t stream);  // K, N multiples of 4
void sgemm_08_warptile(const SgemmArgs& args, cudaStream_t stream);
void sgemm_09_cp_async(const SgemmArgs& args, cudaStream_t stream);
void sgemm_10_autotuned(const SgemmArgs& args, cudaStream_t stream);
void sgemm_11_stream_k(const SgemmArgs& args, cudaStream_t stream);

// Runs entry `config` of rung 10's search space (kSearchSpace in sgemm_autotune.hpp) with
// `splits` blocks per C tile along K (1 = no split-K). Rungs 09 and 10 and kc-sgemm-tune go
// through it. Throws kc::Error for an unknown config or splits < 1.
void sgemm_search_space_launch(int config, int splits, const SgemmArgs& args, cudaStream_t stream);

// True when rung 11 has a stream-K kernel for search-space entry `config`: the entries its
// `skinny` and `large` shape classes pick (other classes use split-K or fill the GPU in one wave).
bool has_stream_k_kernel(int config);

// Rung 11 with the tiles of search-space entry `config` and no split-K, taking `resident_blocks`
// as the number of blocks the GPU holds at once (0: the occupancy API's figure, as
// sgemm_11_stream_k uses). Tests force small values so that the stream-K tail runs on small
// shapes. Where plan_stream_k (kc/stage1/stream_k.hpp) finds no tail to stream, it launches
// rung 10's kernel. Throws kc::Error when has_stream_k_kernel(config) is false or
// resident_blocks < 0.
void sgemm_stream_k_launch(int config, int resident_blocks, const SgemmArgs& args, cudaStream_t stream);

// The constraint of rungs 06 and 07 as a kernel `supports` function: "" when K and N are
// multiples of 4, otherwise a sentence saying why the rung refuses the shape.
std::string float4_rows_constraint(const Problem& problem);

// Adds the sgemm op (if missing) and every stage-1 rung.
void register_kernels(Registry& registry);

}  // namespace kc::stage1
