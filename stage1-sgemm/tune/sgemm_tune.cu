// kc-sgemm-tune — searches rung 10's space on the GPU at hand and prints the winners.
//
// 1. Checks every configuration of kSearchSpace, without and with split-K, against the sgemm
//    reference on two odd shapes (one with unaligned rows of B and C, one aligned with alpha and
//    beta). A configuration that fails is reported and never timed.
// 2. Times every (configuration, split-K factor) pair on representative shapes of each shape
//    class with kc::time_launches (L2 scrubbed before each launch, median of the samples), next to
//    cuBLAS on the same operands.
// 3. Picks per class the pair with the best geometric-mean TFLOPS over the class's shapes, prints
//    the timing table, the winners and a kShapeClassChoices initializer for sgemm_autotune.hpp,
//    and writes everything to the JSON file given by --json.
//
//   kc-sgemm-tune --json sgemm_tune.json [--class large] [--max-samples 30] [--target-ms 150]
#include <cmath>
#include <cstdio>
#include <exception>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kc/common/check.hpp"
#include "kc/common/context.hpp"
#include "kc/common/device.hpp"
#include "kc/common/text_io.hpp"
#include "kc/common/timing.hpp"
#include "kc/common/gemm.hpp"
#include "kc/stage1/sgemm.hpp"
#include "kc/stage1/register.hpp"
#include "kc/stage1/sgemm_autotune.hpp"

namespace kc::stage1 {
namespace {

struct TuneOptions {
  std::string json_path;
  std::string only_class;  // empty: every class
  int max_samples = 30;
  double target_ms = 150.0;
};

const char* const kUsage =
    "usage: kc-sgemm-tune [--json PATH] [--class small|long_k|skinny|large] [--max-samples N] "
    "[--target-ms MS]\n";

// Returns nullopt after printing the usage for --help.
std::optional<TuneOptions> parse_options(int argc, char** argv) {
  TuneOptions options;
  const bool run = parse_flag_values(
      argc, argv, kUsage,
      {{"--json", [&](const std::string& v) { options.json_path = v; }},
       {"--class", [&](const std::string& v) { options.only_class = v; }},
       {"--max-samples", [&](const std::string& v) { options.max_samples = parse_int("--max-samples", v); }},
       {"--target-ms", [&](const std::string& v) { options.target_ms = parse_double("--target-ms", v); }}});
  if (!run) {
    std::fputs(kUsage, stdout);
    return std::nullopt;
  }
  require(options.max_samples >= 5, "--max-samples must be at least 5 (got {})", options.max_samples);
  require(options.target_ms > 0, "--target-ms must be positive (got {})", options.target_ms);
  return options;
}

// The shapes each class is tuned on, and the split-K factors worth trying there.
struct ClassPlan {
  ShapeClass shape_class;
  std::vector<std::vector<std::int64_t>> shapes;
  std::vector<int> splits;
};

std::vector<ClassPlan> class_plans() {
  return {
      {ShapeClass::small, {{512, 512, 512}, {1024, 1024, 1024}}, {1, 2, 4}},
      {ShapeClass::long_k, {{128, 8192, 8192}}, {1, 2, 4, 8}},
      {ShapeClass::skinny, {{8192, 512, 4096}}, {1, 2, 4}},
      {ShapeClass::large, {{2048, 2048, 2048}, {4096, 4096, 4096}, {4093, 2049, 1031}, {8192, 8192, 8192}}, {1}},
  };
}

struct Timing {
  std::string shape_class, shape, config;
  int config_index = 0, splits = 1;
  double median_ms = 0, tflops = 0, pct_of_cublas = 0;
};

struct Winner {
  ShapeClass shape_class;
  int config = -1, splits = 1;
  double geomean_tflops = 0;
};

double tflops_of(const Problem& p, double ms) {
  return 2.0 * static_cast<double>(p.dims[0]) * static_cast<double>(p.dims[1]) *
         static_cast<double>(p.dims[2]) / (ms * 1e9);
}

// Step 1: which configurations compute the right result, split or not.
std::vector<bool> check_configurations(const OpSpec& op, Context& context) {
  const std::vector<Problem> problems = {
      gemm_problem("sgemm", {131, 257, 1031}, DType::f32, 1.0, 0.0),  // N odd: 4-byte copies of B, scalar stores of C
      gemm_problem("sgemm", {200, 384, 520}, DType::f32, 1.5, 0.5),   // aligned rows, partial tiles, C read
  };
  std::vector<bool> passed(kSearchSpaceSize, true);
  std::printf("checking %d configurations\n", kSearchSpaceSize);
  for (int config = 0; config < kSearchSpaceSize; ++config) {
    for (const int splits : {1, 3}) {
      for (const Problem& problem : problems) {
        const CheckOutcome outcome = check_run(
            op,
            [&](const Problem& p, Operands& o, Context& c) {
              sgemm_search_space_launch(config, splits, gemm_args<float>(p, o, BLayout::k_by_n), c.stream());
            },
            problem, 7, context);
        if (!outcome.passed()) {
          passed[config] = false;
          std::printf("  FAILED %-28s splits %d on %s: %s\n", config_name(kSearchSpace[config]).c_str(),
                      splits, problem.label().c_str(), outcome.detail.c_str());
        }
      }
    }
    if (passed[config]) std::printf("  ok     %s\n", config_name(kSearchSpace[config]).c_str());
  }
  return passed;
}

void write_json(const std::string& path, const Context& context, const std::vector<bool>& passed,
                const std::vector<Timing>& cublas, const std::vector<Timing>& timings,
                const std::vector<Winner>& winners) {
  std::string js = "{\n";
  js += fmt::format("  \"gpu\": {},\n", json_string(context.device().summary()));
  js += "  \"configs\": [";
  for (int i = 0; i < kSearchSpaceSize; ++i)
    js += fmt::format("{}\n    {{\"index\": {}, \"name\": {}, \"threads\": {}, \"smem_bytes\": {}, \"passed\": {}}}",
                      i ? "," : "", i, json_string(config_name(kSearchSpace[i])), kSearchSpace[i].threads(),
                      kSearchSpace[i].smem_bytes(), passed[i] ? "true" : "false");
  js += "\n  ],\n  \"cublas\": [";
  for (std::size_t i = 0; i < cublas.size(); ++i)
    js += fmt::format("{}\n    {{\"class\": {}, \"shape\": {}, \"median_ms\": {:.6f}, \"tflops\": {:.3f}}}",
                      i ? "," : "", json_string(cublas[i].shape_class), json_string(cublas[i].shape),
                      cublas[i].median_ms, cublas[i].tflops);
  js += "\n  ],\n  \"timings\": [";
  for (std::size_t i = 0; i < timings.size(); ++i) {
    const Timing& t = timings[i];
    js += fmt::format(
        "{}\n    {{\"class\": {}, \"shape\": {}, \"config\": {}, \"config_name\": {}, \"splits\": {}, "
        "\"median_ms\": {:.6f}, \"tflops\": {:.3f}, \"pct_of_cublas\": {:.2f}}}",
        i ? "," : "", json_string(t.shape_class), json_string(t.shape), t.config_index,
        json_string(t.config), t.splits, t.median_ms, t.tflops, t.pct_of_cublas);
  }
  js += "\n  ],\n  \"winners\": [";
  for (std::size_t i = 0; i < winners.size(); ++i)
    js += fmt::format("{}\n    {{\"class\": {}, \"config\": {}, \"config_name\": {}, \"splits\": {}, "
                      "\"geomean_tflops\": {:.3f}}}",
                      i ? "," : "", json_string(shape_class_name(winners[i].shape_class)), winners[i].config,
                      json_string(config_name(kSearchSpace[winners[i].config])), winners[i].splits,
                      winners[i].geomean_tflops);
  js += "\n  ]\n}\n";
  write_text_file(path, js);
  std::printf("wrote %s\n", path.c_str());
}

int run(const TuneOptions& options) {
  if (!gpu_visible_or_explain("kc-sgemm-tune", "; the tuner times kernels on a GPU.")) return 2;
  Context context;
  std::printf("%s\n", context.device().summary().c_str());
  const OpSpec op = make_sgemm_op();
  const std::vector<bool> passed = check_configurations(op, context);

  TimingConfig timing;
  timing.max_samples = options.max_samples;
  timing.target_total_ms = options.target_ms;
  std::vector<Timing> cublas, timings;
  std::vector<Winner> winners;
  for (const ClassPlan& plan : class_plans()) {
    const std::string class_name = shape_class_name(plan.shape_class);
    if (!options.only_class.empty() && options.only_class != class_name) continue;
    // log of TFLOPS summed over the class's shapes, per (config, splits)
    std::map<std::pair<int, int>, double> log_sum;
    for (const auto& dims : plan.shapes) {
      const Problem problem = gemm_problem("sgemm", dims, DType::f32);
      const ShapeClass actual = classify_shape(static_cast<int>(dims[0]), static_cast<int>(dims[1]),
                                               static_cast<int>(dims[2]));
      require(actual == plan.shape_class, "tuning shape {} is class {}, not {}", problem.shape(),
              shape_class_name(actual), class_name);
      Operands operands = op.make_operands(problem, 11, context);
      const SgemmArgs args = gemm_args<float>(problem, operands, BLayout::k_by_n);
      const TimingStats reference = time_launches(
          [&](cudaStream_t) { op.baseline(problem, operands, context); }, context.stream(),
          &context.scrubber(), timing, "stage1/sgemm/tune/cublas");
      const double cublas_tflops = tflops_of(problem, reference.median_ms);
      cublas.push_back({class_name, problem.shape(), "cublas", -1, 1, reference.median_ms, cublas_tflops, 100.0});
      std::printf("\n%s %s: cuBLAS %.3f ms, %.1f TFLOPS\n", class_name.c_str(), problem.shape().c_str(),
                  reference.median_ms, cublas_tflops);
      std::printf("  %-28s %6s %10s %8s %8s\n", "config", "splits", "ms", "TFLOPS", "%cuBLAS");
      for (int config = 0; config < kSearchSpaceSize; ++config) {
        if (!passed[config]) continue;
        for (const int splits : plan.splits) {
          const TimingStats stats = time_launches(
              [&](cudaStream_t stream) { sgemm_search_space_launch(config, splits, args, stream); },
              context.stream(), &context.scrubber(), timing,
              fmt::format("stage1/sgemm/tune/{}/split{}", config_name(kSearchSpace[config]), splits));
          Timing t{class_name, problem.shape(), config_name(kSearchSpace[config]), config, splits,
                   stats.median_ms, tflops_of(problem, stats.median_ms), 0.0};
          t.pct_of_cublas = 100.0 * reference.median_ms / stats.median_ms;
          std::printf("  %-28s %6d %10.4f %8.2f %7.1f%%\n", t.config.c_str(), splits, t.median_ms, t.tflops,
                      t.pct_of_cublas);
          log_sum[{config, splits}] += std::log(t.tflops);
          timings.push_back(std::move(t));
        }
      }
    }
    Winner best{plan.shape_class};
    for (const auto& [key, sum] : log_sum) {
      const double geomean = std::exp(sum / static_cast<double>(plan.shapes.size()));
      if (geomean > best.geomean_tflops) best = {plan.shape_class, key.first, key.second, geomean};
    }
    if (best.config >= 0) winners.push_back(best);
  }

  std::printf("\nwinners (geometric mean of TFLOPS over each class's shapes):\n");
  for (const Winner& w : winners)
    std::printf("  %-7s %-28s splits %d  %.2f TFLOPS\n", shape_class_name(w.shape_class),
                config_name(kSearchSpace[w.config]).c_str(), w.splits, w.geomean_tflops);
  std::printf("\nfor sgemm_autotune.hpp:\ninline constexpr ShapeClassChoice kShapeClassChoices[kShapeClassCount] = {\n");
  for (const Winner& w : winners)
    std::printf("    {ShapeClass::%s, %d, %d},  // %s\n", shape_class_name(w.shape_class), w.config, w.splits,
                config_name(kSearchSpace[w.config]).c_str());
  std::printf("};\n");
  if (!options.json_path.empty()) write_json(options.json_path, context, passed, cublas, timings, winners);
  for (bool ok : passed)
    if (!ok) return 1;
  return 0;
}

}  // namespace
}  // namespace kc::stage1

int main(int argc, char** argv) {
  try {
    const auto options = kc::stage1::parse_options(argc, argv);
    return options ? kc::stage1::run(*options) : 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "kc-sgemm-tune: %s\n", error.what());
    return 1;
  }
}
