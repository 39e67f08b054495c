// kc/playground/playground.hpp — the learner's kernels: one template per op, registered beside
// the ladders so that kc-bench and the conformance tests judge them exactly as they judge a rung.
//
// Each template file (playground/<op>.cu) defines my_<op>(), which launches the learner's kernel,
// and my_<op>_written(), which returns false until the learner has written it. An unwritten
// template is registered but refuses every problem with a sentence saying what to do; kc-bench
// runs it only when --filter names the playground, and its conformance test is skipped.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kc/common/gemm_args.hpp"
#include "kc/stage1/sgemm.hpp"
#include "kc/stage2/kernels.hpp"

namespace kc::playground {

// sgemm: C = alpha.A.B + beta.C, FP32, B stored K x N (stage 1's op).
void my_sgemm(const stage1::SgemmArgs& args, cudaStream_t stream);
bool my_sgemm_written();

// softmax over each row, FP32 (stage 2's op, its f32 problems).
void my_softmax(const stage2::SoftmaxArgs<float>& args, cudaStream_t stream);
bool my_softmax_written();

// row_sum: out[r] = sum of row r, FP32 (stage 2's op, its f32 problems).
void my_row_sum(const stage2::RowReduceArgs<float>& args, cudaStream_t stream);
bool my_row_sum_written();

// hgemm: C = alpha.A.B^T + beta.C, bf16, B stored N x K, K % 8 == 0 (stage 3's op).
void my_hgemm(const GemmArgs<__nv_bfloat16>& args, cudaStream_t stream);
bool my_hgemm_written();

}  // namespace kc::playground
