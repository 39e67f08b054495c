// kc/stage1/sgemm.hpp — the FP32 SGEMM ladder: C = alpha.A.B + beta.C, row-major, A M x K,
// B K x N, C M x N. One launch function per rung; register_kernels() files them all under
// "stage1/sgemm/<rung>" for kc-bench and the conformance tests.
#pragma once

#include <cuda_runtime.h>

#include "kc/common/gemm.hpp"
#include "kc/common/registry.hpp"

namespace kc::stage1 {

using SgemmArgs = GemmArgs<float>;

// The "sgemm" op: FP32 in and out, B stored K x N, FP32 CUDA cores, baseline cuBLAS SGEMM
// with pedantic FP32 math.
OpSpec make_sgemm_op();

void sgemm_01_naive(const SgemmArgs& args, cudaStream_t stream);

// Adds the sgemm op (if missing) and every stage-1 rung.
void register_kernels(Registry& registry);

}  // namespace kc::stage1
