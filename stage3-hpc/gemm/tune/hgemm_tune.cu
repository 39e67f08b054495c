// kc-hgemm-tune — measures variants of the warp-specialized Hopper kernel (rungs 07-10) against
// cuBLAS, so that rungs 09 and 10 can run with the best one (TmaStoreConfig in
// warp_specialized_config.cuh).
//
// The knobs (see WarpSpecializedConfig): clusters of 1 or 2 CTAs with B multicast, 3 or 4
// pipeline stages, store passes of 128 or 256 columns (a 256-column pass needs the shared memory
// of a stage), and the height of the grouped raster bands (4, 8 or 16 tile rows; a launch
// argument, so one compiled kernel serves every band). All variants use the TMA-store epilogue.
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
// at most ~2 ms each, and 24 checks against a cuBLAS FP64 reference.
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
#include "warp_specialized_gemm.cuh"

namespace kc::stage3 {
namespace {

struct TuneOptions {
  std::string json_path;
  int max_samples = 10;
  double target_ms = 25.0;
};

const char* const kUsage = "usage: kc-hgemm-tune [--json PATH] [--max-samples N] [--target-ms MS]\n";

// Returns nullopt after printing the usage for --help.
std::optional<TuneOptions> parse_options(int argc, char** argv) {
  TuneOptions options;
  const bool run = parse_flag_values(
      argc, argv, kUsage,
      {{"--json", [&](const std::string& v) { options.json_path = v; }},
       {"--max-samples", [&](const std::string& v) { options.max_samples = parse_int("--max-samples", v); }},
       {"--target-ms", [&](const std::string& v) { options.target_ms = parse_double("--target-ms", v); }}});
  if (!run) {
    std::fputs(kUsage, stdout);
    return std::nullopt;
  }
  require(options.max_samples >= 3, "--max-samples must be at least 3 (got {})", options.max_samples);
  require(options.target_ms > 0, "--target-ms must be positive (got {})", options.target_ms);
  return options;
}

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

  std::string name() const {
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

// Variant 0 is what rungs 09 and 10 run now (TmaStoreConfig); the others vary each knob, with
// three raster bands on the two 4-stage kernels and two on the one-pass kernels: six more
// kernels, twelve variants in all.
std::vector<Variant> variants() {
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
  };
}

// ---- step 1: correctness ----------------------------------------------------------------------------
RunFn variant_run(const Variant& v, HopperLaunchCache& cache) {
  return [&v, &cache](const Problem& p, Operands& o, Context& c) {
    v.launch(gemm_args<bf16>(p, o, BLayout::n_by_k), v.raster_band, c.stream(), cache);
  };
}

std::vector<std::string> check_variants(const OpSpec& op, const std::vector<Variant>& all,
                                        HopperLaunchCache& cache, Context& context) {
  // N % 8 == 0 in both, so the TMA-store epilogue (not its direct-store fallback) is what runs.
  const std::vector<Problem> problems = {
      // 23 tile rows (the second CTA of a cluster's last strip has no tile), 9 tile columns (the
      // last 8 wide), 207 tiles (more than one wave), a K tail of 8
      gemm_problem(kHgemmOp, {2900, 2056, 520}, DType::bf16, 1.0, 0.0),
      // C read (beta != 0), alpha scaling, partial tiles everywhere
      gemm_problem(kHgemmOp, {1000, 776, 1032}, DType::bf16, 1.5, -0.5),
  };
  std::vector<std::string> failures(all.size());
  std::printf("checking %zu variants\n", all.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    for (const Problem& problem : problems) {
      const CheckOutcome outcome = check_run(op, variant_run(all[i], cache), problem, 7, context);
      if (!outcome.passed() && failures[i].empty())
        failures[i] = fmt::format("{}: {}", problem.label(), outcome.detail);
    }
    std::printf("  %-6s %-32s %s\n", failures[i].empty() ? "ok" : "FAILED", all[i].name().c_str(),
                failures[i].c_str());
  }
  return failures;
}

// ---- step 2: timing ---------------------------------------------------------------------------------
struct Timing {
  std::string shape;
  int variant = -1;  // -1: cuBLAS
  double median_ms = 0, tflops = 0, pct_of_cublas = 0, spread_percent = 0;
};

double tflops_of(const Problem& p, double ms) {
  return 2.0 * static_cast<double>(p.dims[0]) * static_cast<double>(p.dims[1]) *
         static_cast<double>(p.dims[2]) / (ms * 1e9);
}

const std::vector<std::vector<std::int64_t>>& tuning_shapes() {
  static const std::vector<std::vector<std::int64_t>> shapes = {
      {2048, 2048, 2048}, {4096, 4096, 4096}, {8192, 8192, 8192},
      {8192, 14336, 4096},  // Llama-3-8B MLP up/gate projection, 8192 tokens
      {8192, 4096, 14336},  // ... and its down projection
  };
  return shapes;
}

// ---- step 3: report -------------------------------------------------------------------------------------
struct Summary {
  std::vector<int> best_per_shape;  // variant index per tuning shape, -1 if none passed
  int overall = -1;                 // best geometric mean of % of cuBLAS
  std::vector<double> geomean_pct;  // per variant, 0 if not timed
};

Summary summarize(const std::vector<Variant>& all, const std::vector<Timing>& timings) {
  Summary summary;
  summary.geomean_pct.assign(all.size(), 0.0);
  std::vector<double> log_sum(all.size(), 0.0);
  std::vector<int> counted(all.size(), 0);
  for (const auto& dims : tuning_shapes()) {
    const std::string shape = gemm_problem(kHgemmOp, dims, DType::bf16).shape();
    int best = -1;
    double best_pct = 0;
    for (const Timing& t : timings) {
      if (t.shape != shape || t.variant < 0) continue;
      log_sum[t.variant] += std::log(t.pct_of_cublas);
      ++counted[t.variant];
      if (t.pct_of_cublas > best_pct) {
        best = t.variant;
        best_pct = t.pct_of_cublas;
      }
    }
    summary.best_per_shape.push_back(best);
  }
  const int shapes = static_cast<int>(tuning_shapes().size());
  for (std::size_t v = 0; v < all.size(); ++v) {
    if (counted[v] != shapes) continue;  // failed its check: never timed
    summary.geomean_pct[v] = std::exp(log_sum[v] / shapes);
    if (summary.overall < 0 || summary.geomean_pct[v] > summary.geomean_pct[summary.overall])
      summary.overall = static_cast<int>(v);
  }
  return summary;
}

void print_summary(const std::vector<Variant>& all, const std::vector<Timing>& timings,
                   const Summary& summary) {
  std::printf("\n%% of cuBLAS (same run, same operands):\n  %-32s", "variant");
  for (const auto& dims : tuning_shapes())
    std::printf(" %16s", gemm_problem(kHgemmOp, dims, DType::bf16).shape().c_str());
  std::printf(" %8s\n", "geomean");
  for (std::size_t v = 0; v < all.size(); ++v) {
    if (summary.geomean_pct[v] == 0) continue;
    std::printf("  %-32s", all[v].name().c_str());
    for (const auto& dims : tuning_shapes()) {
      const std::string shape = gemm_problem(kHgemmOp, dims, DType::bf16).shape();
      for (const Timing& t : timings)
        if (t.shape == shape && t.variant == static_cast<int>(v)) std::printf(" %15.1f%%", t.pct_of_cublas);
    }
    std::printf(" %7.1f%%%s\n", summary.geomean_pct[v], v == 0 ? "  (rungs 09/10 now)" : "");
  }
  std::printf("\nbest per shape:\n");
  for (std::size_t s = 0; s < tuning_shapes().size(); ++s) {
    const int best = summary.best_per_shape[s];
    if (best < 0) continue;
    const std::string shape = gemm_problem(kHgemmOp, tuning_shapes()[s], DType::bf16).shape();
    for (const Timing& t : timings)
      if (t.shape == shape && t.variant == best)
        std::printf("  %-16s %-32s %8.1f TFLOPS %6.1f%% of cuBLAS\n", shape.c_str(),
                    all[best].name().c_str(), t.tflops, t.pct_of_cublas);
  }
  if (summary.overall >= 0) {
    const Variant& w = all[summary.overall];
    std::printf("\nbest over all shapes (geometric mean %.1f%% of cuBLAS): %s\n",
                summary.geomean_pct[summary.overall], w.name().c_str());
    std::printf("to run rungs 09 and 10 with it, in stage3-hpc/gemm/warp_specialized_config.cuh:\n"
                "template <class Activation>\n%s\n",
                w.config_line().c_str());
  }
}

void write_json(const std::string& path, const Context& context, const std::vector<Variant>& all,
                const std::vector<std::string>& failures, const std::vector<Timing>& timings,
                const Summary& summary) {
  std::string js = "{\n";
  js += fmt::format("  \"gpu\": {},\n", json_string(context.device().summary()));
  js += "  \"variants\": [";
  for (std::size_t i = 0; i < all.size(); ++i) {
    const Variant& v = all[i];
    js += fmt::format(
        "{}\n    {{\"index\": {}, \"name\": {}, \"cluster_m\": {}, \"stages\": {}, "
        "\"store_pass_columns\": {}, \"raster_band\": {}, \"smem_bytes\": {}, \"passed\": {}, "
        "\"check_detail\": {}, \"geomean_pct_of_cublas\": {:.2f}}}",
        i ? "," : "", i, json_string(v.name()), v.cluster_m, v.stages, v.store_pass_columns,
        v.raster_band, v.smem_bytes, failures[i].empty() ? "true" : "false", json_string(failures[i]),
        summary.geomean_pct[i]);
  }
  js += "\n  ],\n  \"timings\": [";
  for (std::size_t i = 0; i < timings.size(); ++i) {
    const Timing& t = timings[i];
    js += fmt::format(
        "{}\n    {{\"shape\": {}, \"variant\": {}, \"name\": {}, \"median_ms\": {:.6f}, "
        "\"tflops\": {:.3f}, \"pct_of_cublas\": {:.2f}, \"spread_percent\": {:.2f}}}",
        i ? "," : "", json_string(t.shape), t.variant,
        json_string(t.variant < 0 ? std::string("cublas") : all[t.variant].name()), t.median_ms,
        t.tflops, t.pct_of_cublas, t.spread_percent);
  }
  js += "\n  ],\n  \"best_per_shape\": [";
  for (std::size_t s = 0; s < summary.best_per_shape.size(); ++s)
    js += fmt::format("{}\n    {{\"shape\": {}, \"variant\": {}}}", s ? "," : "",
                      json_string(gemm_problem(kHgemmOp, tuning_shapes()[s], DType::bf16).shape()),
                      summary.best_per_shape[s]);
  js += "\n  ],\n";
  js += fmt::format("  \"overall\": {{\"variant\": {}, \"config_line\": {}}}\n}}\n", summary.overall,
                    json_string(summary.overall >= 0 ? all[summary.overall].config_line() : ""));
  write_text_file(path, js);
  std::printf("wrote %s\n", path.c_str());
}

int run(const TuneOptions& options) {
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
  const std::vector<std::string> failures = check_variants(op, all, cache, context);

  TimingConfig timing;
  timing.max_samples = options.max_samples;
  timing.min_samples = std::min(timing.min_samples, options.max_samples);
  timing.target_total_ms = options.target_ms;
  std::vector<Timing> timings;
  for (const auto& dims : tuning_shapes()) {
    const Problem problem = gemm_problem(kHgemmOp, dims, DType::bf16);
    Operands operands = op.make_operands(problem, 11, context);
    const HgemmArgs args = gemm_args<bf16>(problem, operands, BLayout::n_by_k);
    const TimingStats reference = time_launches(
        [&](cudaStream_t) { op.baseline(problem, operands, context); }, context.stream(),
        &context.scrubber(), timing, "stage3/hgemm/tune/cublas");
    timings.push_back({problem.shape(), -1, reference.median_ms, tflops_of(problem, reference.median_ms),
                       100.0, reference.spread_percent()});
    std::printf("\n%s: cuBLAS %.4f ms, %.1f TFLOPS\n", problem.shape().c_str(), reference.median_ms,
                timings.back().tflops);
    std::printf("  %-32s %10s %8s %12s %8s %7s\n", "variant", "ms", "TFLOPS", "cuBLAS ms", "%cuBLAS", "spread");
    for (std::size_t v = 0; v < all.size(); ++v) {
      if (!failures[v].empty()) continue;
      const Variant& variant = all[v];
      const PairedTimingStats both = time_launches_paired(
          [&](cudaStream_t stream) { variant.launch(args, variant.raster_band, stream, cache); },
          fmt::format("stage3/hgemm/tune/{}", variant.name()),
          [&](cudaStream_t) { op.baseline(problem, operands, context); }, "stage3/hgemm/tune/cublas/alongside",
          context.stream(), &context.scrubber(), timing);
      Timing t{problem.shape(), static_cast<int>(v), both.first.median_ms, tflops_of(problem, both.first.median_ms),
               100.0 * both.second.median_ms / both.first.median_ms, both.first.spread_percent()};
      std::printf("  %-32s %10.4f %8.1f %12.4f %7.1f%% %6.1f%%\n", variant.name().c_str(), t.median_ms, t.tflops,
                  both.second.median_ms, t.pct_of_cublas, t.spread_percent);
      timings.push_back(t);
    }
  }

  const Summary summary = summarize(all, timings);
  print_summary(all, timings, summary);
  if (!options.json_path.empty()) write_json(options.json_path, context, all, failures, timings, summary);
  for (const std::string& failure : failures)
    if (!failure.empty()) return 1;
  return 0;
}

}  // namespace
}  // namespace kc::stage3

int main(int argc, char** argv) {
  try {
    const auto options = kc::stage3::parse_options(argc, argv);
    return options ? kc::stage3::run(*options) : 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "kc-hgemm-tune: %s\n", error.what());
    return 1;
  }
}
