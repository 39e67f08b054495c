// kc-hgemm-tune — measures variants of the warp-specialized Hopper kernel (rungs 07-10) against
// cuBLAS, so that rungs 09 and 10 can run with the best one (TmaStoreConfig in
// warp_specialized_config.cuh).
//
// The knobs (see WarpSpecializedConfig): clusters of 1 or 2 CTAs with B multicast, 3 or 4
// pipeline stages, store passes of 128 or 256 columns (a 256-column pass needs the shared memory
// of a stage), and the height of the grouped raster bands (4, 8 or 16 tile rows; a launch
// argument, so one compiled kernel serves every band). All variants use the TMA-store epilogue,
// except the last: rung 07's own configuration (direct stores, bands of 8), timed in the same run
// as a reference and never chosen, so that the run separates rung 09's two changes — the
// TMA-store epilogue (rung 07 against cluster1/stages4/pass128/band8) and the band (band8
// against band16).
//
// 1. Checks every variant with kc::check_run on two odd problems (partial tiles in M, N and K, an
//    odd number of tile rows, more tiles than SMs, alpha/beta with C read). A variant that fails
//    is reported and never timed.
// 2. Times each variant that passed in alternation with cuBLAS (cublasGemmEx, the op's baseline,
//    on the same operands) on 2048^3, 4096^3, 8192^3, 8192x14336x4096 and 8192x4096x14336 with
//    kc::time_launches_paired: L2 scrubbed before each launch, median of at most --max-samples
//    samples each, and % of cuBLAS from the two medians of the pair (timed one after the other,
//    later variants in the list run on a hotter, slower-clocked GPU; see kc-mma-sync-tune). The
//    cuBLAS line of each shape is its own run, for reference.
// 3. Prints TFLOPS and % of cuBLAS per shape, the best variant per shape, the variant with the
//    best geometric mean of % of cuBLAS over the shapes, and the TmaStoreConfig line that adopts
//    it; --json PATH writes everything. Exits 1 if a variant failed its check.
//
//   kc-hgemm-tune [--json hgemm_tune.json] [--max-samples 10] [--target-ms 25]
//
// Needs an sm_90 GPU (H100/H200) and a build with sm_90a code (CMAKE_CUDA_ARCHITECTURES
// containing 90a). Expected to take about two minutes on an H200: about 1500 timed launches of
// at most ~2 ms each, and 26 checks against a cuBLAS FP64 reference.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "arch/sm90/tma_descriptor.hpp"
#include "hgemm.hpp"
#include "kc/common/gemm.hpp"
#include "kc/stage3/register.hpp"
#include "kc/common/check.hpp"
#include "kc/common/context.hpp"
#include "kc/common/device.hpp"
#include "kc/common/text_io.hpp"
#include "kc/common/timing.hpp"
#include "kc/common/tuning.hpp"
#include "warp_specialized_gemm.cuh"

namespace kc::stage3 {
namespace {

const char* const kUsage = "usage: kc-hgemm-tune [--json PATH] [--max-samples N] [--target-ms MS]\n";

// ---- the variants ---------------------------------------------------------------------------------
using VariantLaunch = void (*)(const HgemmArgs&, int raster_band, cudaStream_t, HopperLaunchCache&);

template <int kClusterM, int kStages, int kStorePassColumns>
using TunedConfig =
    WarpSpecializedConfig<kClusterM, EpilogueKind::tma_store, Identity, kStages, kStorePassColumns>;

template <class Config>
void launch_variant(const HgemmArgs& args, int raster_band, cudaStream_t stream,
                    HopperLaunchCache& cache) {
  launch_warp_specialized<Config>(args, Identity{}, Schedule::persistent, stream, cache, raster_band);
}

struct Variant {
  int cluster_m, stages, store_pass_columns, raster_band;
  int smem_bytes;
  VariantLaunch launch;
  bool reference_only = false;  // rung 07's direct-store configuration: measured, never chosen

  std::string name() const {
    if (reference_only) return fmt::format("rung07/direct_store/band{}", raster_band);
    return fmt::format("cluster{}/stages{}/pass{}/band{}", cluster_m, stages, store_pass_columns,
                       raster_band);
  }
  // The line of warp_specialized_config.cuh that makes rungs 09 and 10 run this variant.
  std::string config_line() const {
    return fmt::format(
        "using TmaStoreConfig = WarpSpecializedConfig</*kClusterM=*/{}, EpilogueKind::tma_store, "
        "Activation, /*kStages=*/{}, /*kStorePassColumns=*/{}, /*kRasterBandTileRows=*/{}>;",
        cluster_m, stages, store_pass_columns, raster_band);
  }
};

template <class Config>
Variant variant_of(int raster_band = Config::kRasterBandTileRows) {
  return {Config::kClusterM, Config::kStages, Config::kStorePassColumns, raster_band,
          Config::kSmemBytes, &launch_variant<Config>};
}

// Rung 07's configuration (stage3-hpc/gemm/07_persistent.cu): direct stores, bands of 8.
Variant rung07_reference() {
  using Config = WarpSpecializedConfig<1, EpilogueKind::direct_store, Identity>;
  Variant v = variant_of<Config>(8);
  v.reference_only = true;
  return v;
}

// Variant 0 is what rungs 09 and 10 run now (TmaStoreConfig: cluster 1, 4 stages, 128-column
// passes, bands of 8); the others vary each knob, with the other two raster bands (4, 16) on that
// kernel, three on the cluster-2 4-stage kernel and two on the one-pass kernels: six more
// kernels, twelve variants, and rung 07's configuration last as the reference. (Variant 0 takes
// its band from TmaStoreConfig: when that changes, the list here must name the band it left.)
std::vector<Variant> variants() {
  static_assert(TmaStoreConfig<Identity>::kRasterBandTileRows == 8,
                "variants 1 and 2 are the bands rungs 09/10 do not use: update them with TmaStoreConfig");
  return {
      variant_of<TmaStoreConfig<Identity>>(),
      variant_of<TunedConfig<1, 4, 128>>(4),
      variant_of<TunedConfig<1, 4, 128>>(16),
      variant_of<TunedConfig<1, 3, 128>>(8),
      variant_of<TunedConfig<1, 3, 256>>(8),
      variant_of<TunedConfig<1, 3, 256>>(16),
      variant_of<TunedConfig<2, 4, 128>>(8),
      variant_of<TunedConfig<2, 4, 128>>(4),
      variant_of<TunedConfig<2, 4, 128>>(16),
      variant_of<TunedConfig<2, 3, 128>>(8),
      variant_of<TunedConfig<2, 3, 256>>(8),
      variant_of<TunedConfig<2, 3, 256>>(16),
      rung07_reference(),
  };
}

// The geometric means with the reference variant left out: what "best" chooses from.
std::vector<double> choosable(const std::vector<Variant>& all, std::vector<double> geomeans) {
  for (std::size_t v = 0; v < all.size(); ++v)
    if (all[v].reference_only) geomeans[v] = 0.0;
  return geomeans;
}

// ---- the candidates, the problems --------------------------------------------------------------
std::vector<tuning::Candidate> candidates_of(const std::vector<Variant>& all, HopperLaunchCache& cache) {
  std::vector<tuning::Candidate> candidates;
  for (const Variant& v : all)
    candidates.push_back({v.name(), [&v, &cache](const Problem& p, Operands& o, Context& c) {
                            v.launch(gemm_args<bf16>(p, o, BLayout::n_by_k), v.raster_band, c.stream(), cache);
                          }});
  return candidates;
}

// N % 8 == 0 in both, so the TMA-store epilogue (not its direct-store fallback) is what runs.
std::vector<Problem> check_problems() {
  return {
      // 23 tile rows (the second CTA of a cluster's last strip has no tile), 9 tile columns (the
      // last 8 wide), 207 tiles (more than one wave), a K tail of 8
      gemm_problem(kHgemmOp, {2900, 2056, 520}, DType::bf16, 1.0, 0.0),
      // C read (beta != 0), alpha scaling, partial tiles everywhere
      gemm_problem(kHgemmOp, {1000, 776, 1032}, DType::bf16, 1.5, -0.5),
  };
}

std::vector<Problem> tuning_problems() {
  std::vector<Problem> problems;
  for (const std::vector<std::int64_t>& dims : std::vector<std::vector<std::int64_t>>{
           {2048, 2048, 2048}, {4096, 4096, 4096}, {8192, 8192, 8192},
           {8192, 14336, 4096},  // Llama-3-8B MLP up/gate projection, 8192 tokens
           {8192, 4096, 14336}})  // ... and its down projection
    problems.push_back(gemm_problem(kHgemmOp, dims, DType::bf16));
  return problems;
}

// ---- the report ------------------------------------------------------------------------------------
// The fastest candidate on each problem (index, or -1).
std::vector<int> best_per_problem(const std::vector<Variant>& all, const std::vector<tuning::Measurement>& measurements,
                                  const std::vector<std::string>& problems) {
  std::vector<int> best;
  for (const std::string& label : problems) {
    int winner = -1;
    double winner_pct = 0.0;
    for (const tuning::Measurement& m : measurements)
      if (m.problem == label && m.candidate >= 0 && !all[static_cast<std::size_t>(m.candidate)].reference_only &&
          m.pct_of_baseline > winner_pct) {
        winner = m.candidate;
        winner_pct = m.pct_of_baseline;
      }
    best.push_back(winner);
  }
  return best;
}

void print_summary(const std::vector<Variant>& all, const std::vector<tuning::Measurement>& measurements,
                   const std::vector<std::string>& problems, const std::vector<double>& geomeans,
                   const std::vector<int>& best) {
  std::printf("\n%% of cuBLAS (same run, alternating):\n  %-32s", "variant");
  for (const std::string& label : problems) std::printf(" %20s", label.c_str());
  std::printf(" %8s\n", "geomean");
  for (std::size_t v = 0; v < all.size(); ++v) {
    if (geomeans[v] == 0) continue;
    std::printf("  %-32s", all[v].name().c_str());
    for (const std::string& label : problems)
      for (const tuning::Measurement& m : measurements)
        if (m.problem == label && m.candidate == static_cast<int>(v)) std::printf(" %19.1f%%", m.pct_of_baseline);
    std::printf(" %7.1f%%%s\n", geomeans[v],
                v == 0 ? "  (rungs 09/10 now)" : all[v].reference_only ? "  (rung 07, reference)" : "");
  }
  std::printf("\nbest per problem:\n");
  for (std::size_t s = 0; s < problems.size(); ++s)
    if (best[s] >= 0) std::printf("  %-20s %s\n", problems[s].c_str(), all[static_cast<std::size_t>(best[s])].name().c_str());
  const int overall = tuning::best_of(choosable(all, geomeans));
  if (overall >= 0) {
    const Variant& w = all[static_cast<std::size_t>(overall)];
    std::printf("\nbest over all problems (geometric mean %.1f%% of cuBLAS): %s\n", geomeans[static_cast<std::size_t>(overall)],
                w.name().c_str());
    std::printf("to run rungs 09 and 10 with it, in stage3-hpc/gemm/warp_specialized_config.cuh:\n"
                "template <class Activation>\n%s\n",
                w.config_line().c_str());
  }
}

int run(const tuning::Options& options) {
  if (!gpu_visible_or_explain("kc-hgemm-tune", "; the tuner times kernels on a GPU.")) return 2;
  Context context;
  std::printf("%s\n", context.device().summary().c_str());
  if (context.device().compute_capability() != 90) {
    std::fprintf(stderr,
                 "kc-hgemm-tune: the tuned kernel uses sm_90a instructions (wgmma, setmaxnreg, "
                 "multicast) and runs on compute capability 9.0 only (H100/H200); this GPU is %d.%d.\n",
                 context.device().cc_major, context.device().cc_minor);
    return 2;
  }
  const OpSpec op = make_hgemm_op();
  const std::vector<Variant> all = variants();
  HopperLaunchCache cache;
  const std::vector<tuning::Candidate> candidates = candidates_of(all, cache);
  const std::vector<std::string> failures = tuning::check_candidates(op, candidates, check_problems(), context);

  std::vector<tuning::Measurement> measurements;
  std::vector<std::string> labels;
  for (const Problem& problem : tuning_problems()) {
    labels.push_back(problem.label());
    const auto timed = tuning::time_candidates(
        op, candidates, [&](int i) { return failures[static_cast<std::size_t>(i)].empty(); }, problem, context,
        options.timing(), "stage3/hgemm/tune");
    measurements.insert(measurements.end(), timed.begin(), timed.end());
  }
  const std::vector<double> geomeans = tuning::geometric_mean_pct(measurements, candidates.size(), labels);
  const std::vector<int> best = best_per_problem(all, measurements, labels);
  print_summary(all, measurements, labels, geomeans, best);
  if (!options.json_path.empty()) {
    const int overall = tuning::best_of(choosable(all, geomeans));
    std::string extra = "\"best_per_problem\": [";
    for (std::size_t s = 0; s < labels.size(); ++s)
      extra += fmt::format("{}{{\"problem\": {}, \"candidate\": {}}}", s ? ", " : "", json_string(labels[s]), best[s]);
    extra += fmt::format("],\n  \"overall\": {{\"candidate\": {}, \"config_line\": {}}}", overall,
                         json_string(overall >= 0 ? all[static_cast<std::size_t>(overall)].config_line() : ""));
    write_text_file(options.json_path,
                    tuning::results_json("kc-hgemm-tune", context, candidates, failures, measurements, geomeans,
                                         [&](int i) {
                                           const Variant& v = all[static_cast<std::size_t>(i)];
                                           return fmt::format("\"cluster_m\": {}, \"stages\": {}, "
                                                              "\"store_pass_columns\": {}, \"raster_band\": {}, "
                                                              "\"smem_bytes\": {}, \"epilogue\": \"{}\", "
                                                              "\"reference_only\": {}",
                                                              v.cluster_m, v.stages, v.store_pass_columns,
                                                              v.raster_band, v.smem_bytes,
                                                              v.reference_only ? "direct_store" : "tma_store",
                                                              v.reference_only ? "true" : "false");
                                         },
                                         extra));
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
    std::fprintf(stderr, "kc-hgemm-tune: %s\n", error.what());
    return 1;
  }
}
