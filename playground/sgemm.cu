// Playground — your SGEMM rung: C = alpha.A.B + beta.C, FP32, row-major, A M x K, B K x N.
//
// Write a kernel below, launch it from my_sgemm(), and make my_sgemm_written() return true. Then
//   kc-bench --filter playground/sgemm/my_sgemm --check-only     # is it right? (odd shapes too)
//   kc-bench --filter playground/sgemm/my_sgemm                  # how fast, next to cuBLAS
//   ctest --test-dir build/ci -L playground                      # the conformance test, 3 seeds
// The harness checks it like every rung (NaN-poisoned C, guard bytes, fresh random inputs) and
// times it in alternation with cuBLAS SGEMM. Until written() returns true it is a template:
// kc-bench refuses it and the tests skip it.
//
// Rules the check enforces: every element of C written; C not read when beta == 0 (it holds NaN);
// any M, N, K >= 1 (or refuse shapes in playground/src/register.cpp with a sentence saying why).
// Start from stage1-sgemm/kernels/02_coalesced.cu and climb.
#include "kc/playground/playground.hpp"

namespace kc::playground {
namespace {

__global__ void my_sgemm_kernel(stage1::SgemmArgs args) {
  // TODO: one output per thread to start with: row = ..., col = ...; acc = sum over k of
  // args.a[row * args.lda + k] * args.b[k * args.ldb + col]; then
  // args.c[row * args.ldc + col] = args.beta == 0.f ? args.alpha * acc : args.alpha * acc + args.beta * c.
  (void)args;
}

}  // namespace

bool my_sgemm_written() { return false; }

void my_sgemm(const stage1::SgemmArgs& args, cudaStream_t stream) {
  const dim3 block(32, 8);
  const dim3 grid((args.n + block.x - 1) / block.x, (args.m + block.y - 1) / block.y);
  my_sgemm_kernel<<<grid, block, 0, stream>>>(args);
}

}  // namespace kc::playground
