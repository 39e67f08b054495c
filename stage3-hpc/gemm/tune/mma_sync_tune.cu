// kc-mma-sync-tune — checks and times the tile configurations of rung 03's cp.async kernel
// (tune/mma_sync_variants.cu) against cuBLAS, so that rung 03 runs the best one (Rung03Config in
// 03_cp_async.cuh).
//
// 1. Checks every configuration with kc::check_run on odd problems (partial tiles in M, N and K,
//    K = 8, C read with beta != 0, interior blocks on the unchecked copy path next to edge blocks
//    on the checked one). A configuration that fails is reported and never timed; one that needs
//    more shared memory than the GPU offers is skipped.
// 2. Times each of them in alternation with cuBLAS (the op's baseline, cublasGemmEx, on the same
//    operands) at 2048^3, 4096^3 and 8192^3 with kc::time_launches_paired: L2 scrubbed before each
//    launch, median of at most --max-samples samples each. Alternation matters here: with cuBLAS
//    timed once per shape and the configurations one after the other, the later ones in the list
//    run on a hotter, slower-clocked GPU and come out slower for that alone (the run that showed
//    it: stage3-hpc/README.md, "Rung 03 and the mma.sync ceiling").
// 3. Prints TFLOPS and % of cuBLAS, and the configuration with the best geometric mean of % of
//    cuBLAS over the shapes as the one-line edit of 03_cp_async.cuh. Exits 1 if a check failed.
//
//   kc-mma-sync-tune [--json PATH] [--max-samples 10] [--target-ms 25]   (sm_80 or newer)
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "hgemm.hpp"
#include "kc/common/gemm.hpp"
#include "kc/stage3/register.hpp"
#include "kc/common/check.hpp"
#include "kc/common/context.hpp"
#include "kc/common/device.hpp"
#include "kc/common/text_io.hpp"
#include "kc/common/timing.hpp"
#include "kc/common/tuning.hpp"
#include "mma_sync_variants.hpp"

namespace kc::stage3 {
namespace {

const char* const kUsage = "usage: kc-mma-sync-tune [--json PATH] [--max-samples N] [--target-ms MS]\n";

// Checked on every configuration before anything is timed.
std::vector<Problem> check_problems() {
  return {
      gemm_problem(kHgemmOp, {129, 131, 72}, DType::bf16, 1.0, 0.0),       // every block on an edge, a partial second K step
      gemm_problem(kHgemmOp, {1, 1, 8}, DType::bf16, 1.0, 0.0),            // one output, one partial K step
      gemm_problem(kHgemmOp, {257, 383, 1032}, DType::bf16, 1.5, -0.5),    // C read, K % 64 == 8
      gemm_problem(kHgemmOp, {1000, 1000, 1024}, DType::bf16, -0.5, 0.25), // interior blocks take the unchecked copies
      gemm_problem(kHgemmOp, {520, 1000, 256}, DType::bf16, 1.0, 0.0),     // N % 8 == 0: staged stores, edges in M and N
  };
}

const std::vector<std::int64_t> kTimedSides = {2048, 4096, 8192};

int run(const tuning::Options& options) {
  if (!gpu_visible_or_explain("kc-mma-sync-tune", "; the tuner times kernels on a GPU.")) return 2;
  Context context;
  std::printf("%s\n", context.device().summary().c_str());
  require(context.device().compute_capability() >= 80,
          "mma.sync bf16 and cp.async need compute capability 8.0 or newer (this GPU: {}.{})",
          context.device().cc_major, context.device().cc_minor);

  const OpSpec op = make_hgemm_op();
  // The configurations this GPU can run (an A100 offers less shared memory per block than the
  // 4-stage 128 x 256 tiles need).
  std::vector<const MmaSyncVariant*> variants;
  std::vector<tuning::Candidate> candidates;
  for (const MmaSyncVariant& v : mma_sync_variants()) {
    if (!v.fits(context.device().smem_per_block_optin)) {
      std::printf("  skipped %s: needs %lld bytes of shared memory per block\n", v.name().c_str(),
                  static_cast<long long>(v.shape.smem_bytes()));
      continue;
    }
    variants.push_back(&v);
    candidates.push_back({v.name() + (&v == &mma_sync_variants().front() ? " (rung 03 now)" : ""),
                          [&v](const Problem& p, Operands& o, Context& c) {
                            v.launch(gemm_args<bf16>(p, o, BLayout::n_by_k), c.stream());
                          }});
  }
  const std::vector<std::string> failures = tuning::check_candidates(op, candidates, check_problems(), context, 5);

  std::vector<tuning::Measurement> measurements;
  std::vector<std::string> labels;
  for (const std::int64_t side : kTimedSides) {
    const Problem problem = gemm_problem(kHgemmOp, {side, side, side}, DType::bf16);
    labels.push_back(problem.label());
    const auto timed = tuning::time_candidates(
        op, candidates, [&](int i) { return failures[static_cast<std::size_t>(i)].empty(); }, problem, context,
        options.timing(), "stage3/hgemm/mma_sync_tune");
    measurements.insert(measurements.end(), timed.begin(), timed.end());
  }
  const std::vector<double> geomeans = tuning::geometric_mean_pct(measurements, candidates.size(), labels);
  std::printf("\ngeometric mean of %% of cuBLAS over %zu shapes:\n", labels.size());
  for (std::size_t i = 0; i < candidates.size(); ++i)
    if (geomeans[i] > 0) std::printf("  %-36s %6.1f%%\n", candidates[i].name.c_str(), geomeans[i]);
  const int best = tuning::best_of(geomeans);
  if (best >= 0)
    std::printf("\nbest: %s. To run rung 03 with it, in stage3-hpc/gemm/03_cp_async.cuh:\n%s\n",
                variants[static_cast<std::size_t>(best)]->name().c_str(),
                variants[static_cast<std::size_t>(best)]->config_line().c_str());
  if (!options.json_path.empty()) {
    write_text_file(options.json_path,
                    tuning::results_json("kc-mma-sync-tune", context, candidates, failures, measurements, geomeans,
                                         [&](int i) {
                                           const MmaSyncVariant& v = *variants[static_cast<std::size_t>(i)];
                                           return fmt::format("\"smem_bytes\": {}, \"config_line\": {}",
                                                              v.shape.smem_bytes(), json_string(v.config_line()));
                                         }));
    std::printf("wrote %s\n", options.json_path.c_str());
  }
  for (const std::string& failure : failures)
    if (!failure.empty()) return 1;
  return 0;
}

}  // namespace
}  // namespace kc::stage3

int main(int argc, char** argv) {
  try {
    const auto options = kc::tuning::parse_options(argc, argv, kc::stage3::kUsage, {"", 10, 25.0});
    return options ? kc::stage3::run(*options) : 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "kc-mma-sync-tune: %s\n", error.what());
    return 1;
  }
}
