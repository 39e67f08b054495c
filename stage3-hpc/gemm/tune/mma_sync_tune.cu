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
//   kc-mma-sync-tune [--max-samples 10] [--target-ms 25]      (sm_80 or newer; well under a minute)
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
#include "mma_sync_variants.hpp"

namespace kc::stage3 {
namespace {

const char* const kUsage = "usage: kc-mma-sync-tune [--max-samples N] [--target-ms MS]\n";

// Checked on every configuration before anything is timed.
const std::vector<Problem>& check_problems() {
  static const std::vector<Problem> problems = {
      gemm_problem(kHgemmOp, {129, 131, 72}, DType::bf16, 1.0, 0.0),       // every block on an edge, a partial second K step
      gemm_problem(kHgemmOp, {1, 1, 8}, DType::bf16, 1.0, 0.0),            // one output, one partial K step
      gemm_problem(kHgemmOp, {257, 383, 1032}, DType::bf16, 1.5, -0.5),    // C read, K % 64 == 8
      gemm_problem(kHgemmOp, {1000, 1000, 1024}, DType::bf16, -0.5, 0.25), // interior blocks take the unchecked copies
      gemm_problem(kHgemmOp, {520, 1000, 256}, DType::bf16, 1.0, 0.0),     // N % 8 == 0: staged stores, edges in M and N
  };
  return problems;
}

const std::vector<std::int64_t> kTimedSides = {2048, 4096, 8192};

// "" when the variant passed every check problem, else what failed first.
std::string check_variant(const OpSpec& op, const MmaSyncVariant& variant, Context& context) {
  for (const Problem& problem : check_problems()) {
    const CheckOutcome outcome = variant.check(op, problem, 5, context);
    if (!outcome.passed()) return fmt::format("{}: {}", problem.label(), outcome.detail);
  }
  return {};
}

int run(int argc, char** argv) {
  TimingConfig timing;
  timing.max_samples = 10;
  timing.target_total_ms = 25.0;
  const auto set_samples = [&](const std::string& v) { timing.max_samples = parse_int("--max-samples", v); };
  const auto set_target = [&](const std::string& v) { timing.target_total_ms = parse_double("--target-ms", v); };
  if (!parse_flag_values(argc, argv, kUsage, {{"--max-samples", set_samples}, {"--target-ms", set_target}})) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  require(timing.max_samples >= 3, "--max-samples must be at least 3 (got {})", timing.max_samples);
  require(timing.target_total_ms > 0, "--target-ms must be positive (got {})", timing.target_total_ms);
  timing.min_samples = std::min(timing.min_samples, timing.max_samples);
  if (!gpu_visible_or_explain("kc-mma-sync-tune", "; the tuner times kernels on a GPU.")) return 2;
  Context context;
  std::printf("%s\n", context.device().summary().c_str());
  require(context.device().compute_capability() >= 80,
          "mma.sync bf16 and cp.async need compute capability 8.0 or newer (this GPU: {}.{})",
          context.device().cc_major, context.device().cc_minor);

  const OpSpec op = make_hgemm_op();
  const std::vector<MmaSyncVariant>& variants = mma_sync_variants();
  std::vector<bool> timed(variants.size(), false);
  bool any_failed = false;
  std::printf("checking %zu configurations\n", variants.size());
  for (std::size_t v = 0; v < variants.size(); ++v) {
    std::string verdict = "skipped: needs " + std::to_string(variants[v].shape.smem_bytes()) +
                          " bytes of shared memory per block";
    if (variants[v].fits(context.device().smem_per_block_optin)) {
      const std::string failure = check_variant(op, variants[v], context);
      timed[v] = failure.empty();
      any_failed = any_failed || !failure.empty();
      verdict = failure.empty() ? "ok" : "FAILED " + failure;
    }
    std::printf("  %-22s %s%s\n", variants[v].name().c_str(), verdict.c_str(), v == 0 ? "  (rung 03 now)" : "");
  }

  // pct[v][s]: % of cuBLAS of variant v at kTimedSides[s].
  std::vector<std::vector<double>> pct(variants.size(), std::vector<double>(kTimedSides.size(), 0.0));
  for (std::size_t s = 0; s < kTimedSides.size(); ++s) {
    const std::int64_t side = kTimedSides[s];
    const Problem problem = gemm_problem(kHgemmOp, {side, side, side}, DType::bf16, 1.0, 0.0);
    Operands operands = op.make_operands(problem, 11, context);
    const HgemmArgs args = gemm_args<bf16>(problem, operands, BLayout::n_by_k);
    const double flop = 2.0 * static_cast<double>(side) * side * side;
    std::printf("\n%s:\n  %-22s %9s %9s %9s %8s\n", problem.shape().c_str(), "configuration", "TFLOPS",
                "cuBLAS", "%cuBLAS", "spread");
    for (std::size_t v = 0; v < variants.size(); ++v) {
      if (!timed[v]) continue;
      const PairedTimingStats both = time_launches_paired(
          [&](cudaStream_t stream) { variants[v].launch(args, stream); },
          "stage3/hgemm/mma_sync_tune/" + variants[v].name(),
          [&](cudaStream_t) { op.baseline(problem, operands, context); }, "stage3/hgemm/mma_sync_tune/cublas",
          context.stream(), &context.scrubber(), timing);
      pct[v][s] = 100.0 * both.second.median_ms / both.first.median_ms;
      std::printf("  %-22s %9.1f %9.1f %8.1f%% %7.1f%%\n", variants[v].name().c_str(),
                  flop / (both.first.median_ms * 1e9), flop / (both.second.median_ms * 1e9), pct[v][s],
                  both.first.spread_percent());
    }
  }

  int best = -1;
  double best_geomean = 0.0;
  std::printf("\ngeometric mean of %% of cuBLAS over %zu shapes:\n", kTimedSides.size());
  for (std::size_t v = 0; v < variants.size(); ++v) {
    if (!timed[v]) continue;
    double log_sum = 0.0;
    for (const double p : pct[v]) log_sum += std::log(p);
    const double geomean = std::exp(log_sum / static_cast<double>(kTimedSides.size()));
    std::printf("  %-22s %6.1f%%\n", variants[v].name().c_str(), geomean);
    if (geomean > best_geomean) {
      best_geomean = geomean;
      best = static_cast<int>(v);
    }
  }
  if (best >= 0)
    std::printf("\nbest: %s. To run rung 03 with it, in stage3-hpc/gemm/03_cp_async.cuh:\n%s\n",
                variants[best].name().c_str(), variants[best].config_line().c_str());
  return any_failed ? 1 : 0;
}

}  // namespace
}  // namespace kc::stage3

int main(int argc, char** argv) {
  try {
    return kc::stage3::run(argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "kc-mma-sync-tune: %s\n", error.what());
    return 1;
  }
}
