// kc/bench/runner.hpp — kc-bench: check, then time, every registered kernel against its baseline.
//
// Built on Google Benchmark: each (kernel, problem) is one benchmark named
// "<kernel id>/<shape>" with manual time (the median of CUDA-event samples) and counters for
// TFLOPS, GB/s, % of baseline and % of ceiling, so --benchmark_filter, --benchmark_repetitions,
// --benchmark_format=json and --benchmark_out work as usual. kc's own flags are listed by usage().
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "kc/bench/all_stages.hpp"
#include "kc/bench/report.hpp"
#include "kc/common/check.hpp"
#include "kc/common/provenance.hpp"
#include "kc/common/registry.hpp"
#include "kc/common/timing.hpp"

namespace kc::bench {

struct Options {
  bool list = false;
  bool help = false;
  bool check_only = false;
  bool include_negative_controls = false;
  bool paired_baseline = true;                // --solo turns it off: see usage()
  bool allow_dirty = false;                   // --markdown from a tree with uncommitted changes
  std::string filter;                         // regex searched in kernel ids
  std::vector<std::string> shapes;            // overrides each op's documented shapes
  std::vector<DType> dtypes;                  // --dtype: only problems of these types
  ParamValues params;                         // --param name=value, applied to every problem
  std::optional<std::string> markdown_dir;    // "auto": <source>/docs/benchmarks/<gpu slug>
  std::string peers_file;                     // TSV of outside peer timings to merge (bench/peers/)
  std::uint64_t seed = 2026;
  int seeds = 1;                              // --check-only: seeds checked per problem
  TimingConfig timing;
};

// Takes kc's flags out of `args` (args[0] is the program) and leaves the rest for Google
// Benchmark. Throws kc::Error on a malformed value.
Options parse_options(std::vector<std::string>& args);
std::string usage();

// The --list table: id, rung, dtype, minimum capability, constraints and idea of each kernel.
std::string list_kernels(const Registry& registry, const std::string& filter);

RunInfo collect_run_info(Context& context, const std::string& command);

// The commit and date a table carries: kc::source_commit() and kc::utc_now() (kc/common/provenance.hpp).
using kc::is_dirty_commit;

class Session {
 public:
  Session(const Registry& registry, Context& context, const Options& options);
  // Registers one Google Benchmark per (selected kernel, problem), each op's baseline first.
  // Throws kc::Error when nothing matches the filter or shapes.
  void register_benchmarks();
  // Correctness only, no timing, no Google Benchmark: one line per (kernel, problem).
  void check_all();
  // Adds rows for outside peers timed on this machine (bench/peers/), for the problems (op, shape,
  // dtype and parameters) this run measured, with rates from kc's own FLOP/byte count. Returns
  // warnings for rows that matched nothing.
  std::vector<std::string> merge_peers(const std::vector<PeerTiming>& timings);
  const std::vector<Result>& results() const { return results_; }
  bool any_failed() const;
  std::string summary() const;

 private:
  // One row of the tables: a kernel, the op's baseline or one of its peers, on one problem.
  struct Item {
    const OpSpec* op;
    const KernelEntry* kernel;     // null for the baseline and the peers
    const OpSpec::Peer* peer;      // set for a peer
    Problem problem;
    std::string name() const;      // kernel id, baseline name or peer name
    bool computes_op() const;      // false only for a baseline that bounds the op (a copy)
  };
  std::vector<Item> plan() const;
  std::vector<Problem> problems_of(const OpSpec& op) const;
  void run_item(const Item& item, benchmark::State& state);
  Result& result_for(const Item& item);
  CheckOutcome check_once(const Item& item, std::uint64_t seed);
  // Fills `result` with the check outcome; returns true when the item may be timed.
  bool check_item(const Item& item, Result& result);
  // Times `item` (in alternation with the baseline unless --solo), then checks the output of its
  // last timed launch; fills `result`.
  void time_item(const Item& item, Result& result, benchmark::State& state);

  const Registry& registry_;
  Context& context_;
  Options options_;
  std::vector<Result> results_;
  std::map<std::string, std::vector<double>> samples_;  // pooled across repetitions
  std::string context_lost_;  // set after a sticky CUDA error: the rest cannot run
  ReferenceCache references_; // every rung of a problem is checked against one reference
};

// The whole program; returns the exit code (0 all good, 1 a kernel failed or bad arguments,
// 2 no GPU). `register_negative_controls` adds the deliberately wrong kernels that
// --include-negative-controls asks for.
int run_main(int argc, char** argv, const std::function<void(Registry&)>& register_negative_controls);

}  // namespace kc::bench
