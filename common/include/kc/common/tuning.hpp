// kc/common/tuning.hpp — what kc's tuners share: the options, the check of every candidate, its
// timing in alternation with the op's baseline, the geometric mean that ranks the candidates, and
// the JSON that is committed next to the tables.
//
// A tuner (kc-sgemm-tune, kc-hgemm-tune, kc-mma-sync-tune) is a list of candidates — compiled
// configurations of one kernel — and a list of problems. Each candidate is checked with
// kc::check_run on odd problems before anything is timed (a wrong candidate is reported and never
// timed), then timed on each tuning problem in alternation with the op's baseline, sample by
// sample (time_launches_paired: both at the same clocks), each on operands of its own; the
// candidates are ranked by the geometric mean of their % of baseline over the problems.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kc/common/check.hpp"
#include "kc/common/timing.hpp"

namespace kc::tuning {

struct Options {
  std::string json_path;   // --json PATH: where the results go ("" none)
  int max_samples = 10;    // --max-samples N: timed launches per candidate and problem, at most
  double target_ms = 25.0; // --target-ms MS: about this much timed work per candidate and problem
  TimingConfig timing() const;
};

// Parses --json, --max-samples and --target-ms, and the tool's own flags in `extra` (each flag
// takes one value). Returns nullopt after printing `usage` for --help; throws kc::Error on a bad
// flag or value.
using FlagActions = std::map<std::string, std::function<void(const std::string&)>>;
std::optional<Options> parse_options(int argc, char** argv, const std::string& usage, Options defaults,
                                     const FlagActions& extra = {});

struct Candidate {
  std::string name;
  RunFn run;  // computes the op on the operands, like a registered kernel's launch
};

// Checks every candidate on every problem; prints a line per candidate. Returns, per candidate,
// "" when it passed everything or what failed first.
std::vector<std::string> check_candidates(const OpSpec& op, const std::vector<Candidate>& candidates,
                                          const std::vector<Problem>& problems, Context& context,
                                          std::uint64_t seed = 7);

struct Measurement {
  std::string problem;        // Problem::label()
  int candidate = -1;         // index into the candidates; -1: the baseline on its own
  double median_ms = 0.0;
  double tflops = 0.0;
  double baseline_ms = 0.0;   // the baseline's median alongside (its own median for the -1 row)
  double pct_of_baseline = 100.0;
  double spread_percent = 0.0;
};

// Times the baseline on its own, then each candidate `timed` lets through in alternation with it,
// on `problem`; prints a table. NVTX ranges are named "<nvtx_prefix>/<candidate>".
std::vector<Measurement> time_candidates(const OpSpec& op, const std::vector<Candidate>& candidates,
                                         const std::function<bool(int)>& timed, const Problem& problem,
                                         Context& context, const TimingConfig& timing,
                                         const std::string& nvtx_prefix);

// Per candidate, the geometric mean of its % of baseline over `problems` (labels); 0 for a
// candidate not measured on every one of them.
std::vector<double> geometric_mean_pct(const std::vector<Measurement>& measurements,
                                       std::size_t candidates, const std::vector<std::string>& problems);

// The index of the largest positive value, or -1.
int best_of(const std::vector<double>& values);

// {"tool", "gpu", "candidates": [{"index", "name", "passed", "check_detail", "geomean_pct_of_baseline",
// <extra fields>}], "measurements": [...], <extra top-level fields>}. `candidate_fields(i)` and
// `extra` are JSON members without braces ("\"stages\": 4, ..."), empty for none.
std::string results_json(const std::string& tool, const Context& context,
                         const std::vector<Candidate>& candidates, const std::vector<std::string>& failures,
                         const std::vector<Measurement>& measurements, const std::vector<double>& geomeans,
                         const std::function<std::string(int)>& candidate_fields = {},
                         const std::string& extra = "");

}  // namespace kc::tuning
