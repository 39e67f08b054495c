#include "kc/common/tuning.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kc/common/provenance.hpp"
#include "kc/common/text_io.hpp"

namespace kc::tuning {

TimingConfig Options::timing() const {
  TimingConfig config;
  config.max_samples = max_samples;
  config.min_samples = std::min(config.min_samples, max_samples);
  config.target_total_ms = target_ms;
  return config;
}

std::optional<Options> parse_options(int argc, char** argv, const std::string& usage, Options defaults,
                                     const FlagActions& extra) {
  Options options = std::move(defaults);
  FlagActions flags = extra;
  flags["--json"] = [&](const std::string& v) { options.json_path = v; };
  flags["--max-samples"] = [&](const std::string& v) { options.max_samples = parse_int("--max-samples", v); };
  flags["--target-ms"] = [&](const std::string& v) { options.target_ms = parse_double("--target-ms", v); };
  if (!parse_flag_values(argc, argv, usage, flags)) {
    std::fputs(usage.c_str(), stdout);
    return std::nullopt;
  }
  require(options.max_samples >= 3, "--max-samples must be at least 3 (got {})", options.max_samples);
  require(options.target_ms > 0, "--target-ms must be positive (got {})", options.target_ms);
  return options;
}

std::vector<std::string> check_candidates(const OpSpec& op, const std::vector<Candidate>& candidates,
                                          const std::vector<Problem>& problems, Context& context,
                                          std::uint64_t seed) {
  std::vector<std::string> failures(candidates.size());
  std::printf("checking %zu candidates on %zu problems\n", candidates.size(), problems.size());
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    for (const Problem& problem : problems) {
      const CheckOutcome outcome = check_run(op, candidates[i].run, problem, seed, context);
      if (!outcome.passed() && failures[i].empty())
        failures[i] = fmt::format("{}: {}", problem.label(), outcome.detail);
    }
    std::printf("  %-6s %-36s %s\n", failures[i].empty() ? "ok" : "FAILED", candidates[i].name.c_str(),
                failures[i].c_str());
  }
  return failures;
}

std::vector<Measurement> time_candidates(const OpSpec& op, const std::vector<Candidate>& candidates,
                                         const std::function<bool(int)>& timed, const Problem& problem,
                                         Context& context, const TimingConfig& timing,
                                         const std::string& nvtx_prefix) {
  const double flops = op.work(problem).flops;
  const auto tflops = [&](double ms) { return flops / (ms * 1e9); };
  std::vector<Measurement> measurements;
  Operands baseline_operands = op.make_operands(problem, 11, context);
  const Launch baseline = [&](cudaStream_t) { op.baseline(problem, baseline_operands, context); };
  const TimingStats alone = time_launches(baseline, context.stream(), &context.scrubber(), timing,
                                          nvtx_prefix + "/baseline");
  measurements.push_back({problem.label(), -1, alone.median_ms, tflops(alone.median_ms), alone.median_ms,
                          100.0, alone.spread_percent()});
  std::printf("\n%s: %s %.4f ms, %.1f TFLOPS\n  %-36s %10s %8s %12s %9s %7s\n", problem.label().c_str(),
              op.baseline_name.c_str(), alone.median_ms, measurements.back().tflops, "candidate", "ms",
              "TFLOPS", "baseline ms", "%baseline", "spread");
  Operands operands = op.make_operands(problem, 11, context);
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (!timed(static_cast<int>(i))) continue;
    const Candidate& candidate = candidates[i];
    const PairedTimingStats both = time_launches_paired(
        [&](cudaStream_t) { candidate.run(problem, operands, context); }, nvtx_prefix + "/" + candidate.name,
        baseline, nvtx_prefix + "/baseline/alongside", context.stream(), &context.scrubber(), timing);
    Measurement m{problem.label(), static_cast<int>(i), both.first.median_ms, tflops(both.first.median_ms),
                  both.second.median_ms, 100.0 * both.second.median_ms / both.first.median_ms,
                  both.first.spread_percent()};
    std::printf("  %-36s %10.4f %8.2f %12.4f %8.1f%% %6.1f%%\n", candidate.name.c_str(), m.median_ms, m.tflops,
                m.baseline_ms, m.pct_of_baseline, m.spread_percent);
    measurements.push_back(m);
  }
  return measurements;
}

std::vector<double> geometric_mean_pct(const std::vector<Measurement>& measurements,
                                       std::size_t candidates, const std::vector<std::string>& problems) {
  std::vector<double> log_sum(candidates, 0.0);
  std::vector<std::size_t> counted(candidates, 0);
  for (const Measurement& m : measurements) {
    if (m.candidate < 0) continue;
    if (std::find(problems.begin(), problems.end(), m.problem) == problems.end()) continue;
    log_sum[static_cast<std::size_t>(m.candidate)] += std::log(m.pct_of_baseline);
    ++counted[static_cast<std::size_t>(m.candidate)];
  }
  std::vector<double> geomeans(candidates, 0.0);
  for (std::size_t i = 0; i < candidates; ++i)
    if (!problems.empty() && counted[i] == problems.size())
      geomeans[i] = std::exp(log_sum[i] / static_cast<double>(problems.size()));
  return geomeans;
}

int best_of(const std::vector<double>& values) {
  int best = -1;
  for (std::size_t i = 0; i < values.size(); ++i)
    if (values[i] > 0.0 && (best < 0 || values[i] > values[static_cast<std::size_t>(best)]))
      best = static_cast<int>(i);
  return best;
}

std::string results_json(const std::string& tool, const Context& context,
                         const std::vector<Candidate>& candidates, const std::vector<std::string>& failures,
                         const std::vector<Measurement>& measurements, const std::vector<double>& geomeans,
                         const std::function<std::string(int)>& candidate_fields, const std::string& extra) {
  std::string js = "{\n";
  js += fmt::format("  \"tool\": {},\n  \"gpu\": {},\n  \"date\": {},\n  \"commit\": {},\n", json_string(tool),
                    json_string(context.device().summary()), json_string(utc_now()), json_string(source_commit()));
  js += "  \"candidates\": [";
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const std::string fields = candidate_fields ? candidate_fields(static_cast<int>(i)) : std::string();
    js += fmt::format("{}\n    {{\"index\": {}, \"name\": {}, \"passed\": {}, \"check_detail\": {}, "
                      "\"geomean_pct_of_baseline\": {:.2f}{}{}}}",
                      i ? "," : "", i, json_string(candidates[i].name), failures[i].empty() ? "true" : "false",
                      json_string(failures[i]), geomeans[i], fields.empty() ? "" : ", ", fields);
  }
  js += "\n  ],\n  \"measurements\": [";
  for (std::size_t i = 0; i < measurements.size(); ++i) {
    const Measurement& m = measurements[i];
    js += fmt::format("{}\n    {{\"problem\": {}, \"candidate\": {}, \"name\": {}, \"median_ms\": {:.6f}, "
                      "\"tflops\": {:.3f}, \"baseline_ms\": {:.6f}, \"pct_of_baseline\": {:.2f}, "
                      "\"spread_percent\": {:.2f}}}",
                      i ? "," : "", json_string(m.problem), m.candidate,
                      json_string(m.candidate < 0 ? std::string("baseline") : candidates[static_cast<std::size_t>(m.candidate)].name),
                      m.median_ms, m.tflops, m.baseline_ms, m.pct_of_baseline, m.spread_percent);
  }
  js += "\n  ]";
  if (!extra.empty()) js += ",\n  " + extra;
  js += "\n}\n";
  return js;
}

}  // namespace kc::tuning
