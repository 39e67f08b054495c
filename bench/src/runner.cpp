#include "kc/bench/runner.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <memory>

#include "kc/common/provenance.hpp"
#include "kc/common/check.hpp"
#include "kc/common/text_io.hpp"

#ifndef KC_SOURCE_DIR
#define KC_SOURCE_DIR "."
#endif

namespace kc::bench {
namespace {

// `result` after a CUDA error while checking or timing it: Status::too_large when the GPU could not
// allocate the problem's buffers (with_baseline: the baseline's were alongside), a harness error
// otherwise. Returns whether the error is sticky: the CUDA context is then lost for the session.
bool record_cuda_error(Result& result, const CudaError& e, bool with_baseline) {
  if (e.code() == cudaErrorMemoryAllocation) {
    result.status = Status::too_large;
    result.detail = fmt::format("its buffers do not fit in this GPU's free memory{}: {}",
                                with_baseline ? " with the baseline's alongside (--solo times the kernel alone)" : "",
                                e.what());
    return false;
  }
  result.status = Status::harness_error;
  result.detail = e.what();
  return e.is_sticky();
}

bool take_flag(const std::string& arg, const std::string& name, std::optional<std::string>& value) {
  if (arg == name) {
    value = std::nullopt;
    return true;
  }
  if (arg.rfind(name + "=", 0) == 0) {
    value = arg.substr(name.size() + 1);
    return true;
  }
  return false;
}

std::uint64_t parse_seed(const std::string& text) {
  std::uint64_t value = 0;
  const auto [end, status] = std::from_chars(text.data(), text.data() + text.size(), value);
  require(!text.empty() && status == std::errc() && end == text.data() + text.size(),
          "--seed expects a non-negative whole number, got '{}'", text);
  return value;
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    std::size_t end = text.find(separator, begin);
    if (end == std::string::npos) end = text.size();
    if (end > begin) parts.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return parts;
}

// The key repetitions pool a row's samples under: op, kernel and problem. The op is part of it
// because one name serves several ops: every memory-bound op's baseline is "copy of the same bytes
// (cudaMemcpy)", and e.g. rmsnorm and residual_rmsnorm both run 32768x4096 bf16 while copying 2 and
// 4 matrices' worth of bytes. Keyed on kernel and problem alone, their copies pooled into one
// median, and residual_rmsnorm's copy read above the DRAM peak (docs/notes/2026-12-01-stage2-activations.md).
std::string item_key(const std::string& op, const std::string& kernel, const Problem& p) {
  return op + "/" + kernel + "/" + p.label();
}

// "causal=1 scale=0.5" (Problem::params_text's form) -> {{"causal", 1}, {"scale", 0.5}}.
ParamValues parse_param_values(const std::string& text) {
  ParamValues values;
  std::istringstream words(text);
  std::string word;
  while (words >> word) {
    const std::size_t equals = word.find('=');
    require(equals != std::string::npos && equals > 0, "parameter '{}' is not name=value", word);
    const std::string number = word.substr(equals + 1);
    char* end = nullptr;
    const double value = std::strtod(number.c_str(), &end);
    require(!number.empty() && *end == '\0', "parameter '{}': '{}' is not a number", word, number);
    values.emplace_back(word.substr(0, equals), value);
  }
  return values;
}

std::vector<ReportedParam> reported_params(const Problem& p) {
  std::vector<ReportedParam> params;
  for (const Param& param : p.params) params.push_back({param.name, param.value, param.is_default()});
  return params;
}

}  // namespace

std::string usage() {
  return R"(kc-bench — check, then time, kc kernels against their baselines on this GPU.

  kc-bench [kc flags] [Google Benchmark flags]

  --list                 list the registered kernels (works without a GPU) and exit
  --filter=REGEX         kernels whose id matches, e.g. stage1, stage1/sgemm, 05_
  --shapes=S[,S...]      problems to run instead of each op's documented shapes, e.g. 4096x4096x4096
                         (each in the dtypes of the op's documented problems, or --dtype)
  --dtype=T[,T...]       only problems of these dtypes (bf16, f16, f32, ...)
  --param NAME=VALUE     set a parameter of every problem, e.g. --param alpha=1.5 --param beta=0.5
                         or --param causal=1 (repeatable; set on the selected ops that have the
                         parameter, an error if none has it)
  --markdown [DIR]       write DIR/<group>.md and .json (default: docs/benchmarks/<gpu>); refused
                         on a tree with uncommitted changes unless --allow-dirty (then marked)
  --peers=FILE           merge outside peer timings (TSV from bench/peers/*.py) into the tables
  --check-only           check correctness on the problems, time nothing
  --seeds=N              with --check-only: check every problem with N seeds (default 1)
  --solo                 time each kernel alone and compare it with the baseline's own row
                         (default: each kernel is timed in alternation with the baseline, sample
                         by sample, and % of baseline compares those two medians)
  --seed=N               seed of the random inputs (default 2026)
  --min-samples=N --max-samples=N --target-ms=T
                         timed launches per problem: about T ms worth, clamped to [N, N]
  --include-negative-controls
                         also run the deliberately wrong kernels (they must be reported FAILED)
  --help                 this text

Every kernel is checked on fresh random inputs before it is timed; a wrong kernel is reported
FAILED and never timed. Exit status: 0 all good, 1 a kernel failed, 2 no GPU.
)";
}

Options parse_options(std::vector<std::string>& args) {
  Options options;
  std::vector<std::string> rest;
  if (!args.empty()) rest.push_back(args.front());
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    std::optional<std::string> value;
    // Flags that take a value accept "--flag=value" and "--flag value".
    const auto required_value = [&](const std::string& flag) {
      if (value) return *value;
      require(i + 1 < args.size(), "{} needs a value", flag);
      return args[++i];
    };
    if (arg == "--list") {
      options.list = true;
    } else if (arg == "--help" || arg == "-h") {
      options.help = true;
    } else if (arg == "--check-only") {
      options.check_only = true;
    } else if (arg == "--solo") {
      options.paired_baseline = false;
    } else if (arg == "--include-negative-controls") {
      options.include_negative_controls = true;
    } else if (arg == "--allow-dirty") {
      options.allow_dirty = true;
    } else if (take_flag(arg, "--filter", value)) {
      options.filter = required_value("--filter");
    } else if (take_flag(arg, "--shapes", value)) {
      options.shapes = split(required_value("--shapes"), ',');
      for (const std::string& s : options.shapes) (void)parse_shape(s);  // fail early
    } else if (take_flag(arg, "--dtype", value)) {
      for (const std::string& name : split(required_value("--dtype"), ','))
        options.dtypes.push_back(parse_dtype(name));
    } else if (take_flag(arg, "--param", value)) {
      options.params.push_back(parse_param(required_value("--param")));
    } else if (arg == "--alpha" || arg == "--beta" || arg.rfind("--alpha=", 0) == 0 ||
               arg.rfind("--beta=", 0) == 0) {
      throw Error(fmt::format("'{}': problem parameters are set with --param now, e.g. --param "
                              "alpha=1.5 --param beta=0.5",
                              arg));
    } else if (take_flag(arg, "--markdown", value)) {
      // The folder is optional: "--markdown", "--markdown=DIR" or "--markdown DIR".
      if (!value && i + 1 < args.size() && args[i + 1].rfind("-", 0) != 0) value = args[++i];
      options.markdown_dir = value ? *value : std::string("auto");
    } else if (take_flag(arg, "--peers", value)) {
      options.peers_file = required_value("--peers");
    } else if (take_flag(arg, "--seeds", value)) {
      options.seeds = parse_int("--seeds", required_value("--seeds"));
      require(options.seeds >= 1, "--seeds needs at least 1 (got {})", options.seeds);
    } else if (take_flag(arg, "--seed", value)) {
      options.seed = parse_seed(required_value("--seed"));
    } else if (take_flag(arg, "--min-samples", value)) {
      options.timing.min_samples = parse_int("--min-samples", required_value("--min-samples"));
    } else if (take_flag(arg, "--max-samples", value)) {
      options.timing.max_samples = parse_int("--max-samples", required_value("--max-samples"));
    } else if (take_flag(arg, "--target-ms", value)) {
      options.timing.target_total_ms = parse_double("--target-ms", required_value("--target-ms"));
    } else if (arg.rfind("--benchmark_", 0) == 0) {
      rest.push_back(arg);
    } else {
      throw Error(fmt::format("unknown argument '{}'; `kc-bench --help` lists the flags", arg));
    }
  }
  require(options.timing.min_samples >= 1 && options.timing.max_samples >= options.timing.min_samples,
          "need 1 <= --min-samples <= --max-samples (got {} and {})", options.timing.min_samples,
          options.timing.max_samples);
  args = std::move(rest);
  return options;
}

std::string list_kernels(const Registry& registry, const std::string& filter) {
  std::string text = fmt::format("{:<44} {:>4}  {:<12} {:>5}  {}\n", "kernel", "rung", "dtypes", "sm>=", "idea [constraints]");
  for (const KernelEntry* k : registry.select(filter)) {
    text += fmt::format("{:<44} {:>4}  {:<12} {:>5}  {}{}\n", k->id, k->rung, k->dtypes_text(),
                        k->min_compute_capability, k->idea,
                        k->constraints.empty() ? "" : " [" + k->constraints + "]");
    if (!k->unwritten.empty()) text += fmt::format("{:<44} (template, not written yet)\n", "");
  }
  return text;
}

RunInfo collect_run_info(Context& context, const std::string& command) {
  const DeviceInfo& d = context.device();
  RunInfo info;
  info.gpu = d.name;
  info.gpu_details = fmt::format("sm_{}{}, {} SMs, {} MiB L2, {:.0f} GiB", d.cc_major, d.cc_minor,
                                 d.sm_count, d.l2_bytes >> 20, d.global_memory_bytes / 1073741824.0);
  info.driver = fmt::format("{}{}", d.driver_release.empty() ? "" : d.driver_release + ", ",
                            "supports CUDA " + cuda_version_string(d.driver_version));
  info.cuda_runtime = cuda_version_string(d.runtime_version);
  info.cublas = fmt::format("{}.{}.{}", d.cublas_version / 10000, (d.cublas_version / 100) % 100,
                            d.cublas_version % 100);
  info.peak_sm_clock_mhz = d.max_sm_clock_khz / 1000;
  info.copy_gbps = context.copy_bandwidth_gbps();
  info.date = utc_now();
  info.commit = source_commit();
  info.command = command;
  return info;
}

Session::Session(const Registry& registry, Context& context, const Options& options)
    : registry_(registry), context_(context), options_(options) {}

std::string Session::Item::name() const {
  return kernel ? kernel->id : peer ? peer->name : op->baseline_name;
}

bool Session::Item::computes_op() const { return kernel || peer || op->baseline_computes_op; }

std::vector<Problem> Session::problems_of(const OpSpec& op) const {
  const auto wanted = [&](DType t) {
    return options_.dtypes.empty() ||
           std::find(options_.dtypes.begin(), options_.dtypes.end(), t) != options_.dtypes.end();
  };
  std::vector<Problem> problems;
  if (options_.shapes.empty()) {
    for (const Problem& p : op.bench_problems)
      if (wanted(p.dtype)) problems.push_back(p);
  } else {
    // Each shape in the dtypes of the op's documented problems (or --dtype's, where the op has them).
    std::vector<DType> dtypes;
    for (const Problem& p : op.bench_problems)
      if (std::find(dtypes.begin(), dtypes.end(), p.dtype) == dtypes.end()) dtypes.push_back(p.dtype);
    if (!options_.dtypes.empty()) {
      dtypes.clear();
      for (DType t : options_.dtypes)
        if (op.has_dtype(t)) dtypes.push_back(t);
    }
    for (const std::string& text : options_.shapes) {
      std::vector<std::int64_t> dims = parse_shape(text);
      if (dims.size() != op.dim_names.size()) continue;
      for (DType t : dtypes) problems.push_back(op.problem(dims, t));
    }
  }
  // A parameter is set where the op has it (plan() refuses one that no selected op has), so that one
  // run can time ops with different parameters on the same shapes.
  for (Problem& p : problems)
    for (const auto& [name, value] : options_.params)
      if (p.has_param(name)) p.set(name, value);
  // Parameters can make documented problems equal: keep each once.
  std::vector<Problem> unique;
  for (Problem& p : problems)
    if (std::none_of(unique.begin(), unique.end(), [&](const Problem& u) { return u.label() == p.label(); }))
      unique.push_back(std::move(p));
  return unique;
}

std::vector<Session::Item> Session::plan() const {
  std::vector<const KernelEntry*> selected = registry_.select(options_.filter);
  require(!selected.empty(), "no kernel id matches --filter '{}'; `kc-bench --list` shows them",
          options_.filter);
  // Unwritten playground templates only refuse: they are run (to say what to do) when the filter
  // names the playground, and left out of every other run and its tables.
  if (options_.filter.find("playground") == std::string::npos) {
    const KernelEntry* a_template = selected.front();
    selected.erase(std::remove_if(selected.begin(), selected.end(),
                                  [](const KernelEntry* k) { return !k->unwritten.empty(); }),
                   selected.end());
    require(!selected.empty(), "--filter '{}' matches only unwritten playground templates: {}",
            options_.filter, a_template->unwritten);
  }
  std::vector<std::string> ops;
  for (const KernelEntry* k : selected)
    if (std::find(ops.begin(), ops.end(), k->op) == ops.end()) ops.push_back(k->op);
  for (const auto& [name, value] : options_.params) {
    (void)value;
    const auto has_it = [&](const std::string& op) { return registry_.op(op).has_param(name); };
    require(std::any_of(ops.begin(), ops.end(), has_it),
            "--param {}: none of the selected ops ({}) has that parameter (`kc-bench --list` names each op's)", name,
            fmt::join(ops, ", "));
  }
  std::vector<Item> items;
  for (const std::string& name : ops) {
    const OpSpec& op = registry_.op(name);
    for (const Problem& problem : problems_of(op)) {
      std::vector<Item> kernels;
      for (const KernelEntry* k : selected)
        if (k->op == name && k->runs_dtype(problem.dtype)) kernels.push_back({&op, k, nullptr, problem});
      if (kernels.empty()) continue;
      if (op.baseline) items.push_back({&op, nullptr, nullptr, problem});
      for (const OpSpec::Peer& peer : op.peers) items.push_back({&op, nullptr, &peer, problem});
      items.insert(items.end(), kernels.begin(), kernels.end());
    }
  }
  require(!items.empty(), "nothing to run: no selected kernel runs the problems that --shapes and "
          "--dtype describe (check the dimension count and the kernels' dtypes with --list)");
  return items;
}

Result& Session::result_for(const Item& item) {
  const std::string name = item.name();
  const std::string label = item.problem.label();
  for (Result& r : results_)
    if (r.kernel == name && r.op == item.op->name && r.label == label) return r;
  Result& r = results_.emplace_back();
  r.kernel = name;
  r.is_baseline = item.kernel == nullptr && item.peer == nullptr;
  r.is_peer = item.peer != nullptr;
  r.rung = item.kernel ? item.kernel->rung : 0;
  r.group = item.kernel ? item.kernel->report_group() : "";
  r.op = item.op->name;
  r.op_description = item.op->description;
  r.dtype = std::string(dtype_name(item.problem.dtype));
  r.shape = item.problem.shape();
  r.params = reported_params(item.problem);
  r.label = label;
  r.compute_bound = item.op->bound == Bound::compute;
  r.baseline = item.op->baseline_name;
  if (item.op->bound == Bound::compute) {
    r.ceiling = fmt::format("{}, {:.1f} TFLOPS (SMs × FLOP/clock × peak clock)",
                            math_unit_name(item.op->math), peak_tflops(context_.device(), item.op->math));
  } else {
    r.ceiling = fmt::format("device-to-device copy, {:.0f} GB/s measured in this run",
                            context_.copy_bandwidth_gbps());
  }
  return r;
}

CheckOutcome Session::check_once(const Item& item, std::uint64_t seed) {
  if (item.kernel) return check_kernel(registry_, *item.kernel, item.problem, seed, context_, &references_);
  if (item.peer) return check_run(*item.op, item.peer->run, item.problem, seed, context_, &references_);
  return check_baseline(*item.op, item.problem, seed, context_, &references_);
}

bool Session::check_item(const Item& item, Result& result) {
  if (!context_lost_.empty()) {
    result.status = Status::skipped;
    result.detail = context_lost_;
    return false;
  }
  const CheckOutcome outcome = check_once(item, options_.seed);
  result.detail = outcome.detail;
  result.rel_frobenius = outcome.worst_rel_frobenius;
  if (item.kernel != nullptr && item.kernel->note && outcome.status != CheckOutcome::Status::unsupported) {
    Operands operands = item.op->make_operands(item.problem, options_.seed, context_);
    result.note = item.kernel->note(item.problem, operands);
  }
  switch (outcome.status) {
    case CheckOutcome::Status::passed: result.status = Status::ok; return true;
    case CheckOutcome::Status::failed: result.status = Status::failed; return false;
    case CheckOutcome::Status::unsupported: result.status = Status::refused; return false;
  }
  return false;
}

void Session::time_item(const Item& item, Result& result, benchmark::State& state) {
  const OpSpec& op = *item.op;
  const Problem& problem = item.problem;
  const std::uint64_t seed = options_.seed;
  // The operands the check used (same seed, so the cached reference is theirs), computed before
  // the launches below change any input that is also an output.
  Operands operands = op.make_operands(problem, seed, context_);
  const References* reference =
      item.computes_op() ? &references_.get(op, problem, seed, operands, context_) : nullptr;

  const std::string nvtx_name = item.kernel ? item.kernel->id : item.peer ? "peer/" + op.name + "/" + item.peer->name
                                                                          : "baseline/" + op.name;
  const auto run_on = [&](Operands& o) -> Launch {
    if (item.kernel)
      return [&](cudaStream_t stream) {
        item.kernel->launch(problem, o, stream);
        KC_CHECK_LAUNCH();
      };
    if (item.peer) return [&](cudaStream_t) { item.peer->run(problem, o, context_); };
    return [&](cudaStream_t) { op.baseline(problem, o, context_); };
  };
  const Launch launch = run_on(operands);
  const Launch restore = [&](cudaStream_t) { op.reset_operands(problem, operands, seed, context_); };

  // Repetitions (--benchmark_repetitions) pool their samples under `key`.
  const auto pool = [&](const std::string& key, const std::vector<double>& samples) {
    std::vector<double>& pooled = samples_[key];
    pooled.insert(pooled.end(), samples.begin(), samples.end());
    return summarize_samples(pooled);
  };
  // A row's baseline: the baseline's own (solo) row of this problem, if it passed its check.
  const bool is_baseline = item.kernel == nullptr && item.peer == nullptr;
  const auto baseline_row =
      is_baseline ? results_.end()
                  : std::find_if(results_.begin(), results_.end(), [&](const Result& r) {
                      return r.is_baseline && r.op == result.op && r.label == result.label &&
                             r.status == Status::ok;
                    });
  const bool has_baseline = baseline_row != results_.end();
  // A kernel is timed in alternation with its baseline (time_launches_paired), so that its % of
  // baseline compares two launches at the same clocks; the baseline runs on operands of its own,
  // so the kernel's last output survives to be checked. The baseline's own row is its solo run.
  const bool paired = has_baseline && options_.paired_baseline;
  TimingStats stats;
  if (paired) {
    Operands baseline_operands = op.make_operands(problem, seed, context_);
    const Launch baseline_launch = [&](cudaStream_t) { op.baseline(problem, baseline_operands, context_); };
    const PairedTimingStats both = time_launches_paired(
        launch, nvtx_name, baseline_launch, "baseline/" + op.name + "/alongside", context_.stream(),
        &context_.scrubber(), options_.timing, reference ? restore : Launch());
    stats = both.first;
    result.baseline_ms = pool("alongside/" + item_key(op.name, result.kernel, problem), both.second.samples_ms).median_ms;
    result.baseline_paired = true;
  } else {
    stats = time_launches(launch, context_.stream(), &context_.scrubber(), options_.timing, nvtx_name,
                          reference ? restore : Launch());
    if (has_baseline) result.baseline_ms = baseline_row->median_ms;
  }
  if (reference != nullptr) {
    const CheckOutcome last = judge_outputs(op, problem, operands, *reference, context_);
    if (!last.passed()) {
      result.status = Status::failed;
      result.detail = "the output of the last timed launch is wrong (the first check passed): " + last.detail;
      state.SkipWithError(result.detail.c_str());
      return;
    }
  }
  const TimingStats all = pool(item_key(op.name, result.kernel, problem), stats.samples_ms);
  const Work work = op.work(problem);
  const Achieved rate = achieved(work, all.median_ms);
  check_plausible(rate, work, context_.device(), op.math, result.kernel);

  result.median_ms = all.median_ms;
  result.p10_ms = all.p10_ms;
  result.p90_ms = all.p90_ms;
  result.samples = static_cast<int>(all.samples_ms.size());
  result.tflops = rate.tflops;
  result.gbps = rate.gbps;
  if (op.bound == Bound::compute) {
    const double peak = peak_tflops(context_.device(), op.math);
    result.pct_of_ceiling = peak > 0 ? 100.0 * rate.tflops / peak : 0.0;
  } else {
    result.pct_of_ceiling = 100.0 * rate.gbps / context_.copy_bandwidth_gbps();
  }
  if (has_baseline) result.pct_of_baseline = 100.0 * result.baseline_ms / all.median_ms;
  for (auto _ : state) state.SetIterationTime(stats.median_ms * 1e-3);
  state.counters["TFLOPS"] = rate.tflops;
  state.counters["GB/s"] = rate.gbps;
  state.counters["%ceiling"] = result.pct_of_ceiling;
  if (result.baseline_ms > 0) state.counters["%baseline"] = result.pct_of_baseline;
  state.counters["spread%"] = all.spread_percent();
}

void Session::run_item(const Item& item, benchmark::State& state) {
  Result& result = result_for(item);
  try {
    if (result.samples == 0 && !check_item(item, result)) {
      state.SkipWithError(fmt::format("{}: {}", status_name(result.status), result.detail).c_str());
      return;
    }
    if (result.status != Status::ok) {  // a repetition of something that already failed
      state.SkipWithError(status_name(result.status));
      return;
    }
    time_item(item, result, state);
  } catch (const HarnessError& e) {
    result.status = Status::harness_error;
    result.detail = e.what();
    state.SkipWithError(e.what());
  } catch (const CudaError& e) {
    if (record_cuda_error(result, e, options_.paired_baseline && !result.is_baseline))
      context_lost_ =
          fmt::format("not run: the CUDA context was lost when {} failed ({})", result.kernel, e.what());
    state.SkipWithError(result.detail.c_str());
  } catch (const std::exception& e) {
    result.status = Status::harness_error;
    result.detail = e.what();
    state.SkipWithError(e.what());
  }
}

void Session::register_benchmarks() {
  for (const Item& item : plan()) {
    const std::string prefix = item.kernel ? item.kernel->id
                               : item.peer ? "peer/" + item.op->name + "/" + item.peer->name
                                           : "baseline/" + item.op->name;
    const std::string name = prefix + "/" + item.problem.label();
    benchmark::RegisterBenchmark(name.c_str(), [this, item](benchmark::State& state) {
      run_item(item, state);
    })
        ->UseManualTime()
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond);
  }
}

void Session::check_all() {
  const std::vector<Item> items = plan();
  // Seeds outermost within each problem, so that every item of a problem is checked against the
  // same cached reference before the next seed's is computed.
  std::size_t begin = 0;
  while (begin < items.size()) {
    std::size_t end = begin;
    while (end < items.size() && items[end].op == items[begin].op &&
           items[end].problem.label() == items[begin].problem.label())
      ++end;
    for (int s = 0; s < options_.seeds; ++s) {
      const std::uint64_t seed = options_.seed + static_cast<std::uint64_t>(s);
      for (std::size_t i = begin; i < end; ++i) {
        const Item& item = items[i];
        Result& result = result_for(item);
        if (s > 0 && result.status != Status::ok) continue;  // a failure stands; a refusal repeats
        try {
          if (!context_lost_.empty()) {
            result.status = Status::skipped;
            result.detail = context_lost_;
          } else {
            const CheckOutcome outcome = check_once(item, seed);
            result.detail = outcome.detail;
            result.rel_frobenius = std::max(result.rel_frobenius, outcome.worst_rel_frobenius);
            result.status = outcome.status == CheckOutcome::Status::passed   ? Status::ok
                            : outcome.status == CheckOutcome::Status::failed ? Status::failed
                                                                             : Status::refused;
          }
        } catch (const CudaError& e) {
          if (record_cuda_error(result, e, /*with_baseline=*/false))
            context_lost_ = fmt::format("not run: the CUDA context was lost ({})", e.what());
        } catch (const std::exception& e) {
          result.status = Status::harness_error;
          result.detail = e.what();
        }
        fmt::print("{:<8} {:<48} {:<28} seed {:<6} {}\n", status_name(result.status), result.kernel,
                   item.problem.label(), seed, result.detail);
        std::fflush(stdout);
      }
    }
    begin = end;
  }
}

std::vector<std::string> Session::merge_peers(const std::vector<PeerTiming>& timings) {
  std::vector<std::string> warnings;
  for (const PeerTiming& t : timings) {
    const std::string what = fmt::format("peer '{}' for {} {} {}{}{}", t.peer, t.op, t.dtype, t.shape,
                                         t.params.empty() ? "" : " ", t.params);
    if (!registry_.has_op(t.op)) {
      warnings.push_back(fmt::format("{} ignored: kc has no op '{}'", what, t.op));
      continue;
    }
    const OpSpec& op = registry_.op(t.op);
    // The problem the peer timed, labelled as kc labels its own: parameters at their defaults
    // unless the line names them.
    Problem problem;
    try {
      problem = op.problem(parse_shape(t.shape), parse_dtype(t.dtype), parse_param_values(t.params));
    } catch (const Error& e) {
      warnings.push_back(fmt::format("{} ignored: {}", what, e.what()));
      continue;
    }
    const std::string label = problem.label();
    const auto measured = std::find_if(results_.begin(), results_.end(), [&](const Result& r) {
      return !r.peer_outside && r.op == t.op && r.label == label;
    });
    if (measured == results_.end()) {
      warnings.push_back(fmt::format("{} ignored: this run measured no such problem", what));
      continue;
    }
    Result peer = *measured;  // op, problem, description, ceiling, baseline name
    peer.kernel = t.peer;
    peer.is_baseline = false;
    peer.is_peer = true;
    peer.peer_outside = true;
    peer.rung = 0;
    peer.group.clear();
    peer.status = Status::ok;
    peer.detail = "timed by a bench/peers script on this machine; not checked by kc";
    peer.rel_frobenius = 0.0;
    peer.median_ms = peer.p10_ms = peer.p90_ms = t.median_ms;
    peer.samples = 0;
    peer.baseline_paired = false;
    const Achieved rate = achieved(op.work(problem), t.median_ms);
    peer.tflops = rate.tflops;
    peer.gbps = rate.gbps;
    peer.pct_of_ceiling = op.bound == Bound::compute
                              ? 100.0 * rate.tflops / peak_tflops(context_.device(), op.math)
                              : 100.0 * rate.gbps / context_.copy_bandwidth_gbps();
    const auto baseline = std::find_if(results_.begin(), results_.end(), [&](const Result& r) {
      return r.is_baseline && r.op == t.op && r.label == measured->label && r.status == Status::ok;
    });
    peer.baseline_ms = baseline != results_.end() ? baseline->median_ms : 0.0;
    peer.pct_of_baseline = peer.baseline_ms > 0 ? 100.0 * peer.baseline_ms / t.median_ms : 0.0;
    results_.push_back(std::move(peer));
  }
  return warnings;
}

bool Session::any_failed() const {
  return std::any_of(results_.begin(), results_.end(), [](const Result& r) {
    return r.status == Status::failed || r.status == Status::harness_error || r.status == Status::skipped;
  });
}

std::string Session::summary() const {
  std::string text = fmt::format("\n{:<48} {:<30} {:>8} {:>10} {:>10} {:>9}\n", "kernel", "problem",
                                 "status", "TFLOPS", "GB/s", "%base");
  for (const Result& r : results_) {
    if (r.status == Status::ok)
      text += fmt::format("{:<48} {:<30} {:>8} {:>10.2f} {:>10.0f} {:>9}{}\n", r.kernel, r.label, "ok",
                          r.tflops, r.gbps, r.baseline_ms > 0 ? fmt::format("{:.1f}%", r.pct_of_baseline) : "–",
                          r.note.empty() ? "" : "  " + r.note);
    else
      text += fmt::format("{:<48} {:<30} {:>8}  {}\n", r.kernel, r.label, status_name(r.status), r.detail);
  }
  return text;
}

int run_main(int argc, char** argv, const std::function<void(Registry&)>& register_negative_controls) {
  std::vector<std::string> args(argv, argv + argc);
  std::string command = "kc-bench";
  for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
  try {
    Options options = parse_options(args);
    if (options.help) {
      fmt::print("{}", usage());
      return 0;
    }
    Registry registry;
    register_all_stages(registry);
    if (options.include_negative_controls && register_negative_controls)
      register_negative_controls(registry);
    if (options.list) {
      fmt::print("{}", list_kernels(registry, options.filter));
      return 0;
    }
    if (options.markdown_dir) {
      // Published tables name the commit whose kernels they measured: a tree with uncommitted
      // changes has no such commit.
      const std::string commit = source_commit();
      require(options.allow_dirty || !is_dirty_commit(commit),
              "refusing to write tables from a tree with uncommitted changes ({}): commit first, or "
              "pass --allow-dirty to write them with the commit marked dirty",
              commit);
    }
    // Read the peer timings before the run, not after it: a wrong path must not cost the whole run.
    // A malformed file is refused here, too.
    std::vector<PeerTiming> peer_timings;
    if (!options.peers_file.empty()) {
      std::ifstream file(options.peers_file);
      require(static_cast<bool>(file), "cannot read --peers file '{}' (write it first with "
              "bench/peers/torch_peers.py --out FILE)", options.peers_file);
      std::stringstream text;
      text << file.rdbuf();
      peer_timings = parse_peer_timings(text.str());
    }
    if (!gpu_visible_or_explain("kc-bench", ", so nothing can be checked or timed; `kc-bench --list` shows "
                                            "the kernels."))
      return 2;
    Context context;
    Session session(registry, context, options);
    fmt::print("kc-bench on {}\n", context.device().summary());
    if (options.check_only) {
      session.check_all();
      return session.any_failed() ? 1 : 0;
    }
    // Google Benchmark takes the flags kc did not.
    std::vector<char*> benchmark_argv;
    for (std::string& a : args) benchmark_argv.push_back(a.data());
    int benchmark_argc = static_cast<int>(benchmark_argv.size());
    benchmark::Initialize(&benchmark_argc, benchmark_argv.data());
    session.register_benchmarks();
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    if (!options.peers_file.empty())
      for (const std::string& warning : session.merge_peers(peer_timings))
        fmt::print(stderr, "kc-bench: {}\n", warning);
    fmt::print("{}", session.summary());
    if (options.markdown_dir) {
      RunInfo info = collect_run_info(context, command);
      const std::string directory = *options.markdown_dir == "auto"
                                        ? std::string(KC_SOURCE_DIR) + "/docs/benchmarks/" +
                                              context.device().slug()
                                        : *options.markdown_dir;
      for (const std::string& path : write_reports(directory, info, session.results()))
        fmt::print("wrote {}\n", path);
    }
    return session.any_failed() ? 1 : 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "kc-bench: {}\n", e.what());
    return 1;
  }
}

}  // namespace kc::bench
