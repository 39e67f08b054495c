#include "kc/bench/runner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <memory>

#include "kc/common/check.hpp"
#include "kc/common/text_io.hpp"
#include "kc/stage1/register.hpp"
#include "kc/stage2/register.hpp"
#include "kc/stage3/register.hpp"
#include "kc/stage4/register.hpp"

#ifndef KC_SOURCE_DIR
#define KC_SOURCE_DIR "."
#endif

namespace kc::bench {
namespace {

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

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::array<char, 32> text{};
  std::strftime(text.data(), text.size(), "%Y-%m-%d %H:%M UTC", &utc);
  return text.data();
}

std::string run_command(const std::string& command) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), &pclose);
  if (!pipe) return {};
  std::string output;
  std::array<char, 256> buffer{};
  while (std::fgets(buffer.data(), buffer.size(), pipe.get()) != nullptr) output += buffer.data();
  while (!output.empty() && (output.back() == '\n' || output.back() == '\r')) output.pop_back();
  return output;
}

std::string item_key(const std::string& kernel, const Problem& p) { return kernel + "/" + p.label(); }

}  // namespace

std::string usage() {
  return R"(kc-bench — check, then time, kc kernels against their baselines on this GPU.

  kc-bench [kc flags] [Google Benchmark flags]

  --list                 list the registered kernels (works without a GPU) and exit
  --filter=REGEX         kernels whose id matches, e.g. stage1, stage1/sgemm, 05_
  --shapes=S[,S...]      problems to run instead of each op's documented shapes, e.g. 4096x4096x4096
  --alpha=X --beta=Y     scalars for --shapes problems (default 1 and 0)
  --markdown [DIR]       write DIR/<group>.md and .json (default: docs/benchmarks/<gpu>)
  --peers=FILE           merge outside peer timings (TSV from bench/peers/*.py) into the tables
  --check-only           check correctness on the problems, time nothing
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
    } else if (take_flag(arg, "--filter", value)) {
      options.filter = required_value("--filter");
    } else if (take_flag(arg, "--shapes", value)) {
      options.shapes = split(required_value("--shapes"), ',');
      for (const std::string& s : options.shapes) (void)parse_shape(s);  // fail early
    } else if (take_flag(arg, "--alpha", value)) {
      options.alpha = parse_double("--alpha", required_value("--alpha"));
    } else if (take_flag(arg, "--beta", value)) {
      options.beta = parse_double("--beta", required_value("--beta"));
    } else if (take_flag(arg, "--markdown", value)) {
      // The folder is optional: "--markdown", "--markdown=DIR" or "--markdown DIR".
      if (!value && i + 1 < args.size() && args[i + 1].rfind("-", 0) != 0) value = args[++i];
      options.markdown_dir = value ? *value : std::string("auto");
    } else if (take_flag(arg, "--peers", value)) {
      options.peers_file = required_value("--peers");
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

void register_all_stages(Registry& registry) {
  stage1::register_kernels(registry);
  stage2::register_kernels(registry);
  stage3::register_kernels(registry);
  stage4::register_kernels(registry);
}

std::string list_kernels(const Registry& registry, const std::string& filter) {
  std::string text = fmt::format("{:<40} {:>4}  {:<6} {:>5}  {}\n", "kernel", "rung", "dtype", "sm>=", "idea [constraints]");
  for (const KernelEntry* k : registry.select(filter)) {
    text += fmt::format("{:<40} {:>4}  {:<6} {:>5}  {}{}\n", k->id, k->rung, dtype_name(k->dtype),
                        k->min_compute_capability, k->idea,
                        k->constraints.empty() ? "" : " [" + k->constraints + "]");
  }
  return text;
}

std::string current_commit() {
  if (const char* env = std::getenv("KC_GIT_COMMIT"); env != nullptr && *env != '\0') return env;
  const std::string described = run_command(
      "git -C '" KC_SOURCE_DIR "' describe --always --dirty --abbrev=12 2>/dev/null");
  return described.empty() ? "unknown" : described;
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
  info.commit = current_commit();
  info.command = command;
  return info;
}

Session::Session(const Registry& registry, Context& context, const Options& options)
    : registry_(registry), context_(context), options_(options) {}

std::vector<Session::Item> Session::plan() const {
  const std::vector<const KernelEntry*> selected = registry_.select(options_.filter);
  require(!selected.empty(), "no kernel id matches --filter '{}'; `kc-bench --list` shows them",
          options_.filter);
  std::vector<std::string> ops;
  for (const KernelEntry* k : selected)
    if (std::find(ops.begin(), ops.end(), k->op) == ops.end()) ops.push_back(k->op);
  std::vector<Item> items;
  for (const std::string& name : ops) {
    const OpSpec& op = registry_.op(name);
    std::vector<Problem> problems;
    if (options_.shapes.empty()) {
      problems = op.bench_problems;
    } else {
      for (const std::string& text : options_.shapes) {
        std::vector<std::int64_t> dims = parse_shape(text);
        if (dims.size() == op.dim_names.size())
          problems.push_back({op.name, std::move(dims), options_.alpha, options_.beta});
      }
    }
    for (const Problem& problem : problems) {
      if (op.baseline) items.push_back({&op, nullptr, problem});
      for (const KernelEntry* k : selected)
        if (k->op == name) items.push_back({&op, k, problem});
    }
  }
  require(!items.empty(), "none of --shapes fits the selected ops' dimensions");
  return items;
}

Result& Session::result_for(const Item& item) {
  const std::string name = item.kernel ? item.kernel->id : item.op->baseline_name;
  for (Result& r : results_)
    if (r.kernel == name && r.op == item.op->name && r.shape == item.problem.shape() &&
        r.alpha == item.problem.alpha && r.beta == item.problem.beta)
      return r;
  Result& r = results_.emplace_back();
  r.kernel = name;
  r.is_baseline = item.kernel == nullptr;
  r.rung = item.kernel ? item.kernel->rung : 0;
  r.group = item.kernel ? item.kernel->report_group() : "";
  r.op = item.op->name;
  r.op_description = item.op->description;
  r.dtype = item.kernel ? std::string(dtype_name(item.kernel->dtype)) : "";
  r.shape = item.problem.shape();
  r.alpha = item.problem.alpha;
  r.beta = item.problem.beta;
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

bool Session::check_item(const Item& item, Result& result) {
  if (!context_lost_.empty()) {
    result.status = Status::skipped;
    result.detail = context_lost_;
    return false;
  }
  const CheckOutcome outcome =
      item.kernel ? check_kernel(registry_, *item.kernel, item.problem, options_.seed, context_, &references_)
                  : check_baseline(*item.op, item.problem, options_.seed, context_, &references_);
  result.detail = outcome.detail;
  result.rel_frobenius = outcome.worst_rel_frobenius;
  switch (outcome.status) {
    case CheckOutcome::Status::passed: result.status = Status::ok; return true;
    case CheckOutcome::Status::failed: result.status = Status::failed; return false;
    case CheckOutcome::Status::unsupported: result.status = Status::refused; return false;
  }
  return false;
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
    Operands operands = item.op->make_operands(item.problem, options_.seed + 1, context_);
    const std::string nvtx_name = item.kernel ? item.kernel->id : "baseline/" + item.op->name;
    const Launch baseline_launch = [&](cudaStream_t) { item.op->baseline(item.problem, operands, context_); };
    const Launch launch = item.kernel ? Launch([&](cudaStream_t stream) {
      item.kernel->launch(item.problem, operands, stream);
      KC_CHECK_LAUNCH();
    })
                                      : baseline_launch;
    // Repetitions (--benchmark_repetitions) pool their samples under `key`.
    const auto pool = [&](const std::string& key, const std::vector<double>& samples) {
      std::vector<double>& pooled = samples_[key];
      pooled.insert(pooled.end(), samples.begin(), samples.end());
      return summarize_samples(pooled);
    };
    // A kernel's baseline: the baseline's own (solo) row of this problem, if it passed its check.
    const auto baseline_row =
        item.kernel == nullptr ? results_.end()
                               : std::find_if(results_.begin(), results_.end(), [&](const Result& r) {
                                   return r.is_baseline && r.op == result.op && r.shape == result.shape &&
                                          r.alpha == result.alpha && r.beta == result.beta &&
                                          r.status == Status::ok;
                                 });
    const bool has_baseline = baseline_row != results_.end();
    // A kernel is timed in alternation with its baseline (time_launches_paired), so that its % of
    // baseline compares two launches at the same clocks; the baseline's own row is its solo run.
    const bool paired = has_baseline && options_.paired_baseline;
    TimingStats stats;
    if (paired) {
      const PairedTimingStats both =
          time_launches_paired(launch, nvtx_name, baseline_launch, "baseline/" + item.op->name + "/alongside",
                               context_.stream(), &context_.scrubber(), options_.timing);
      stats = both.first;
      result.baseline_ms = pool("alongside/" + item_key(result.kernel, item.problem), both.second.samples_ms).median_ms;
      result.baseline_paired = true;
    } else {
      stats = time_launches(launch, context_.stream(), &context_.scrubber(), options_.timing, nvtx_name);
      if (has_baseline) result.baseline_ms = baseline_row->median_ms;
    }
    const TimingStats all = pool(item_key(result.kernel, item.problem), stats.samples_ms);
    const Work work = item.op->work(item.problem);
    const Achieved rate = achieved(work, all.median_ms);
    check_plausible(rate, work, context_.device(), item.op->math, result.kernel);

    result.median_ms = all.median_ms;
    result.p10_ms = all.p10_ms;
    result.p90_ms = all.p90_ms;
    result.samples = static_cast<int>(all.samples_ms.size());
    result.tflops = rate.tflops;
    result.gbps = rate.gbps;
    if (item.op->bound == Bound::compute) {
      const double peak = peak_tflops(context_.device(), item.op->math);
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
  } catch (const HarnessError& e) {
    result.status = Status::harness_error;
    result.detail = e.what();
    state.SkipWithError(e.what());
  } catch (const CudaError& e) {
    result.status = Status::harness_error;
    result.detail = e.what();
    if (e.is_sticky())
      context_lost_ = fmt::format("not run: the CUDA context was lost when {} failed ({})",
                                  result.kernel, e.what());
    state.SkipWithError(e.what());
  } catch (const std::exception& e) {
    result.status = Status::harness_error;
    result.detail = e.what();
    state.SkipWithError(e.what());
  }
}

void Session::register_benchmarks() {
  for (const Item& item : plan()) {
    const std::string name =
        (item.kernel ? item.kernel->id : "baseline/" + item.op->name) + "/" + item.problem.label();
    benchmark::RegisterBenchmark(name.c_str(), [this, item](benchmark::State& state) {
      run_item(item, state);
    })
        ->UseManualTime()
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond);
  }
}

void Session::check_all() {
  for (const Item& item : plan()) {
    Result& result = result_for(item);
    try {
      check_item(item, result);
    } catch (const CudaError& e) {
      result.status = Status::harness_error;
      result.detail = e.what();
      if (e.is_sticky()) context_lost_ = fmt::format("not run: the CUDA context was lost ({})", e.what());
    } catch (const std::exception& e) {
      result.status = Status::harness_error;
      result.detail = e.what();
    }
    fmt::print("{:<8} {:<40} {:<22} {}\n", status_name(result.status), result.kernel,
               item.problem.label(), result.detail);
    std::fflush(stdout);
  }
}

std::vector<std::string> Session::merge_peers(const std::vector<PeerTiming>& timings) {
  std::vector<std::string> warnings;
  for (const PeerTiming& t : timings) {
    const auto measured = std::find_if(results_.begin(), results_.end(), [&](const Result& r) {
      return !r.is_peer && r.op == t.op && r.shape == t.shape && r.alpha == 1.0 && r.beta == 0.0;
    });
    if (measured == results_.end()) {
      warnings.push_back(fmt::format("peer '{}' for {} {} ignored: this run measured no such problem",
                                     t.peer, t.op, t.shape));
      continue;
    }
    const OpSpec& op = registry_.op(t.op);
    const Problem problem{t.op, parse_shape(t.shape)};
    Result peer = *measured;  // op, shape, description, ceiling, baseline name
    peer.kernel = t.peer;
    peer.is_baseline = false;
    peer.is_peer = true;
    peer.rung = 0;
    peer.group.clear();
    peer.dtype.clear();
    peer.status = Status::ok;
    peer.detail = "timed by a bench/peers script on this machine; not checked by kc";
    peer.rel_frobenius = 0.0;
    peer.median_ms = peer.p10_ms = peer.p90_ms = t.median_ms;
    peer.samples = 0;
    const Achieved rate = achieved(op.work(problem), t.median_ms);
    peer.tflops = rate.tflops;
    peer.gbps = rate.gbps;
    peer.pct_of_ceiling = op.bound == Bound::compute
                              ? 100.0 * rate.tflops / peak_tflops(context_.device(), op.math)
                              : 100.0 * rate.gbps / context_.copy_bandwidth_gbps();
    const auto baseline = std::find_if(results_.begin(), results_.end(), [&](const Result& r) {
      return r.is_baseline && r.op == t.op && r.shape == t.shape && r.status == Status::ok;
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
  std::string text = fmt::format("\n{:<44} {:<18} {:>8} {:>10} {:>10} {:>9}\n", "kernel", "shape",
                                 "status", "TFLOPS", "GB/s", "%base");
  for (const Result& r : results_) {
    if (r.status == Status::ok)
      text += fmt::format("{:<44} {:<18} {:>8} {:>10.2f} {:>10.0f} {:>9}\n", r.kernel, r.shape, "ok",
                          r.tflops, r.gbps, r.baseline_ms > 0 ? fmt::format("{:.1f}%", r.pct_of_baseline) : "–");
    else
      text += fmt::format("{:<44} {:<18} {:>8}  {}\n", r.kernel, r.shape, status_name(r.status), r.detail);
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
    if (!options.peers_file.empty()) {
      std::ifstream file(options.peers_file);
      require(static_cast<bool>(file), "cannot read --peers file '{}'", options.peers_file);
      std::stringstream text;
      text << file.rdbuf();
      for (const std::string& warning : session.merge_peers(parse_peer_timings(text.str())))
        fmt::print(stderr, "kc-bench: {}\n", warning);
    }
    fmt::print("{}", session.summary());
    if (options.markdown_dir) {
      const RunInfo info = collect_run_info(context, command);
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
