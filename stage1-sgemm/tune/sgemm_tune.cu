// kc-sgemm-tune — searches rung 10's space on the GPU at hand and prints the winners.
//
// 1. Checks every configuration of kSearchSpace, without and with split-K, against the sgemm
//    reference on two odd shapes (one with unaligned rows of B and C, one aligned with alpha and
//    beta). A configuration that fails is reported and never timed.
// 2. Times every (configuration, split-K factor) pair on representative shapes of each shape
//    class in alternation with cuBLAS (the op's baseline, each on operands of its own; kc::tuning,
//    as the stage-3 tuners do: L2 scrubbed before each launch, median of the samples).
// 3. Picks per class the pair with the best geometric mean of % of cuBLAS over the class's shapes,
//    prints the winners and a kShapeClassChoices initializer for sgemm_autotune.hpp, and writes
//    everything to the JSON file given by --json.
//
//   kc-sgemm-tune --json sgemm_tune.json [--class large] [--max-samples 30] [--target-ms 150]
#include <algorithm>
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
#include "kc/common/tuning.hpp"
#include "kc/common/gemm.hpp"
#include "kc/stage1/sgemm.hpp"
#include "kc/stage1/register.hpp"
#include "kc/stage1/sgemm_autotune.hpp"

namespace kc::stage1 {
namespace {

const char* const kUsage =
    "usage: kc-sgemm-tune [--json PATH] [--class small|long_k|skinny|large] [--max-samples N] "
    "[--target-ms MS]\n";

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

struct Winner {
  ShapeClass shape_class;
  int config = -1, splits = 1;
  double geomean_pct = 0;
};

// One (configuration, split-K factor) pair of the search space as a tuning candidate.
struct Pair {
  int config = 0, splits = 1;
};

tuning::Candidate candidate_of(Pair pair) {
  return {fmt::format("{}/split{}", config_name(kSearchSpace[pair.config]), pair.splits),
          [pair](const Problem& p, Operands& o, Context& c) {
            sgemm_search_space_launch(pair.config, pair.splits, gemm_args<float>(p, o, BLayout::k_by_n), c.stream());
          }};
}

// Step 1: which configurations compute the right result, split (3 ways) or not.
std::vector<bool> check_configurations(const OpSpec& op, Context& context) {
  const std::vector<Problem> problems = {
      gemm_problem("sgemm", {131, 257, 1031}, DType::f32, 1.0, 0.0),  // N odd: 4-byte copies of B, scalar stores of C
      gemm_problem("sgemm", {200, 384, 520}, DType::f32, 1.5, 0.5),   // aligned rows, partial tiles, C read
  };
  std::vector<tuning::Candidate> candidates;
  for (int config = 0; config < kSearchSpaceSize; ++config)
    for (const int splits : {1, 3}) candidates.push_back(candidate_of({config, splits}));
  const std::vector<std::string> failures = tuning::check_candidates(op, candidates, problems, context);
  std::vector<bool> passed(kSearchSpaceSize, true);
  for (std::size_t i = 0; i < candidates.size(); ++i)
    if (!failures[i].empty()) passed[i / 2] = false;
  return passed;
}

int run(const tuning::Options& options, const std::string& only_class) {
  if (!gpu_visible_or_explain("kc-sgemm-tune", "; the tuner times kernels on a GPU.")) return 2;
  Context context;
  std::printf("%s\n", context.device().summary().c_str());
  const OpSpec op = make_sgemm_op();
  const std::vector<bool> passed = check_configurations(op, context);

  // Every pair any class times; a class times those with its split-K factors.
  std::vector<Pair> pairs;
  for (int config = 0; config < kSearchSpaceSize; ++config)
    for (const int splits : {1, 2, 4, 8}) pairs.push_back({config, splits});
  std::vector<tuning::Candidate> candidates;
  std::vector<std::string> failures;
  for (const Pair& pair : pairs) {
    candidates.push_back(candidate_of(pair));
    failures.push_back(passed[pair.config] ? "" : "failed its check (see above)");
  }

  std::vector<tuning::Measurement> measurements;
  std::vector<Winner> winners;
  for (const ClassPlan& plan : class_plans()) {
    const std::string class_name = shape_class_name(plan.shape_class);
    if (!only_class.empty() && only_class != class_name) continue;
    const auto in_class = [&](int i) {
      const Pair& pair = pairs[static_cast<std::size_t>(i)];
      return passed[pair.config] &&
             std::find(plan.splits.begin(), plan.splits.end(), pair.splits) != plan.splits.end();
    };
    std::vector<std::string> labels;
    for (const auto& dims : plan.shapes) {
      const Problem problem = gemm_problem("sgemm", dims, DType::f32);
      const ShapeClass actual = classify_shape(static_cast<int>(dims[0]), static_cast<int>(dims[1]),
                                               static_cast<int>(dims[2]));
      require(actual == plan.shape_class, "tuning shape {} is class {}, not {}", problem.shape(),
              shape_class_name(actual), class_name);
      labels.push_back(problem.label());
      std::printf("\n[%s]", class_name.c_str());
      const auto timed = tuning::time_candidates(op, candidates, in_class, problem, context, options.timing(),
                                                 "stage1/sgemm/tune");
      measurements.insert(measurements.end(), timed.begin(), timed.end());
    }
    const std::vector<double> geomeans = tuning::geometric_mean_pct(measurements, candidates.size(), labels);
    const int best = tuning::best_of(geomeans);
    if (best >= 0)
      winners.push_back({plan.shape_class, pairs[static_cast<std::size_t>(best)].config,
                         pairs[static_cast<std::size_t>(best)].splits, geomeans[static_cast<std::size_t>(best)]});
  }

  std::printf("\nwinners (geometric mean of %% of cuBLAS over each class's shapes):\n");
  for (const Winner& w : winners)
    std::printf("  %-7s %-28s splits %d  %.1f%%\n", shape_class_name(w.shape_class),
                config_name(kSearchSpace[w.config]).c_str(), w.splits, w.geomean_pct);
  std::printf("\nfor sgemm_autotune.hpp:\ninline constexpr ShapeClassChoice kShapeClassChoices[kShapeClassCount] = {\n");
  for (const Winner& w : winners)
    std::printf("    {ShapeClass::%s, %d, %d},  // %s\n", shape_class_name(w.shape_class), w.config, w.splits,
                config_name(kSearchSpace[w.config]).c_str());
  std::printf("};\n");
  if (!options.json_path.empty()) {
    std::string extra = "\"winners\": [";
    for (std::size_t i = 0; i < winners.size(); ++i)
      extra += fmt::format("{}{{\"class\": {}, \"config\": {}, \"config_name\": {}, \"splits\": {}, "
                           "\"geomean_pct_of_baseline\": {:.2f}}}",
                           i ? ", " : "", json_string(shape_class_name(winners[i].shape_class)), winners[i].config,
                           json_string(config_name(kSearchSpace[winners[i].config])), winners[i].splits,
                           winners[i].geomean_pct);
    extra += "]";
    // Geometric means per class are in the winners; the candidates' own field is left at 0.
    const std::vector<double> no_overall(candidates.size(), 0.0);
    write_text_file(options.json_path,
                    tuning::results_json("kc-sgemm-tune", context, candidates, failures, measurements, no_overall,
                                         [&](int i) {
                                           const Pair& pair = pairs[static_cast<std::size_t>(i)];
                                           return fmt::format("\"config\": {}, \"splits\": {}, \"threads\": {}, "
                                                              "\"smem_bytes\": {}",
                                                              pair.config, pair.splits,
                                                              kSearchSpace[pair.config].threads(),
                                                              kSearchSpace[pair.config].smem_bytes());
                                         },
                                         extra));
    std::printf("wrote %s\n", options.json_path.c_str());
  }
  for (bool ok : passed)
    if (!ok) return 1;
  return 0;
}

}  // namespace
}  // namespace kc::stage1

int main(int argc, char** argv) {
  try {
    std::string only_class;
    const auto options = kc::tuning::parse_options(
        argc, argv, kc::stage1::kUsage, {"", 30, 150.0},
        {{"--class", [&](const std::string& v) { only_class = v; }}});
    return options ? kc::stage1::run(*options, only_class) : 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "kc-sgemm-tune: %s\n", error.what());
    return 1;
  }
}
