// kc/stage1/sgemm.hpp — the FP32 SGEMM ladder: C = alpha.A.B + beta.C, row-major, A M x K,
// B K x N, C M x N. One launch function per rung. An argument header: the kernels include it and
// nothing of the harness; kc/stage1/register.hpp files the rungs for kc-bench and the tests.
#pragma once

#include <cuda_runtime.h>

#include "kc/common/gemm_args.hpp"

namespace kc::stage1 {

using SgemmArgs = GemmArgs<float>;

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

}  // namespace kc::stage1
