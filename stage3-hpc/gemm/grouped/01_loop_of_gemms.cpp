// Grouped GEMM, rung 01 — a loop of GEMMs, one per expert.
//
// Idea: a mixture-of-experts layer is G GEMMs, C_g = A_g . B_g^T over expert g's rows of A, so
// the plainest code calls a GEMM G times. This rung does exactly that through stage 3's public
// entry (kc::stage3::Gemm::run, kc/stage3/gemm.hpp), the one the inference engine calls: for each
// expert with rows, the expert's rows of A and C and its weight B_g as a dense M_g x N x K problem.
// The entry checks each call and picks its path per shape, as it would for any GEMM: rung 09 or
// rung 03 for large experts, rung 12 for an expert with one row, cuBLAS where no kc kernel is at
// parity (1 < M <= 64, K % 8 != 0). Any K runs.
//
// What changed: nothing yet — the starting point of the grouped ladder, and what a learner sees a
// loop over experts cost. Every expert is a launch of its own, issued one after another on one
// stream: a small expert's launch has few output tiles to spread over the SMs (32 rows are a
// single row of tiles), its last wave leaves SMs idle before the next expert's GEMM starts, and
// each call pays its launch and the entry's host work. With 64 experts that is 64 launches in a
// row where the whole layer would fill the GPU many times over.
//
// Expected limiter: launches and idle SMs between them at small experts (the per-launch cost
// times G, and the tail of each launch); at large experts, the kernels the entry picks. Rung 02
// puts every expert's tiles into one launch.
//
// SASS to look for: none of this file's own (host code); the kernels it launches are the
// entry's: stage3/hgemm/09_tma_store, 03_cp_async, 12_small_m_gemv or cuBLAS's. nsys shows the
// launches one after another: nsys profile build/ci/bench/kc-bench --filter stage3/grouped_gemm/01_loop_of_gemms
//
// Run just this rung:
//   build/ci/bench/kc-bench --filter stage3/grouped_gemm/01_loop_of_gemms
#include <cuda_runtime.h>

#include <memory>

#include "kc/common/error.hpp"
#include "kc/stage3/gemm.hpp"
#include "kc/stage3/grouped_gemm.hpp"

namespace kc::stage3 {
namespace {

// What the rung keeps between launches: the GEMM entry (made on the first launch, on the current
// device, so that registering the rung needs no GPU) and the routing of the last problem.
class LoopOfGemmsRung {
 public:
  void run(const Problem& problem, Operands& operands, cudaStream_t stream) {
    if (!gemm_) gemm_ = make_gemm_on_current_device();
    routing_.update(problem);
    const int n = static_cast<int>(problem.dims[1]), k = static_cast<int>(problem.dims[2]);
    const bf16* a = operands["A"].data<bf16>();
    const bf16* b = operands["B"].data<bf16>();
    bf16* c = operands["C"].data<bf16>();
    for (std::size_t g = 0; g < routing_.counts.size(); ++g) {
      if (routing_.counts[g] == 0) continue;  // an expert without tokens: nothing to launch
      const auto first_row = static_cast<std::size_t>(routing_.row_starts[g]);
      HgemmArgs expert;
      expert.m = static_cast<int>(routing_.counts[g]);
      expert.n = n;
      expert.k = k;
      expert.a = a + first_row * k;
      expert.b = b + g * n * k;
      expert.c = c + first_row * n;
      expert.lda = k;
      expert.ldb = k;
      expert.ldc = n;
      gemm_->run(expert, stream);
    }
  }

 private:
  std::unique_ptr<Gemm> gemm_;
  GroupedRouting routing_;
};

}  // namespace

LaunchFn grouped_gemm_01_loop_of_gemms() { return launch_of_rung<LoopOfGemmsRung>(); }

}  // namespace kc::stage3
