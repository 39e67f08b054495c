// kc/bench/report.hpp — what one kc-bench run measured, and the tables it writes.
//
// Pure host code: the Markdown and JSON writers are tested on machines without a GPU.
#pragma once

#include <string>
#include <vector>

namespace kc::bench {

// Where and when the numbers were taken. Every table is headed by this.
struct RunInfo {
  std::string gpu;            // "NVIDIA H200"
  std::string gpu_details;    // "sm_90, 132 SMs, 60 MiB L2, 140 GiB"
  std::string driver;         // "580.159.04 (CUDA 13.0)"
  std::string cuda_runtime;   // "13.0"
  std::string cublas;         // "13.1.0"
  int peak_sm_clock_mhz = 0;
  double copy_gbps = 0.0;     // measured cudaMemcpy D2D bandwidth, 0 if not measured
  std::string date;           // "2026-11-29 15:04 UTC"
  std::string commit;         // "3f2a9c1d0b7e"
  std::string command;        // the kc-bench command line
};

enum class Status {
  ok,             // checked, then timed
  failed,         // wrong result: never timed
  refused,        // shape not supported by the kernel; the reason says which constraint
  harness_error,  // the measurement is impossible (above peak) or the run broke
  skipped,        // not run (e.g. the CUDA context was lost earlier)
  too_large,      // its buffers do not fit in the GPU's free memory (the baseline's alongside
                  // when timed in alternation): a limit of this GPU, not a failure of the kernel
};
const char* status_name(Status status);

// A named parameter of the problem, as reported: every parameter the op declares, defaults too.
struct ReportedParam {
  std::string name;
  double value = 0.0;
  bool is_default = true;
};

struct Result {
  std::string kernel;         // "stage1/sgemm/01_naive", or the baseline's or peer's name
  bool is_baseline = false;
  bool is_peer = false;       // another implementation timed beside the baseline: the op's peers,
                              // or outside peers (bench/peers/) merged with --peers
  bool peer_outside = false;  // the latter: timed by a script, not checked by kc
  int rung = 0;
  std::string group;          // report table: "stage1"
  std::string op;             // "sgemm"
  std::string op_description;
  std::string dtype;          // the problem's dtype: "f32"
  std::string shape;          // "4096x4096x4096"
  std::vector<ReportedParam> params;
  std::string label;          // Problem::label(): shape, dtype, parameters off their defaults
  Status status = Status::skipped;
  std::string detail;         // check summary, refusal reason or error
  std::string note;           // what the kernel says about this problem (KernelEntry::note), or ""
  double rel_frobenius = 0.0;
  bool compute_bound = true;  // which of TFLOPS / GB/s is the headline
  // Timing (valid when status == ok).
  double median_ms = 0.0, p10_ms = 0.0, p90_ms = 0.0;
  int samples = 0;
  double tflops = 0.0, gbps = 0.0;
  std::string baseline;       // name of the peer this row is compared with
  double baseline_ms = 0.0;   // 0 when the baseline was not timed in this run
  bool baseline_paired = false;  // baseline_ms was timed in alternation with this kernel
  double pct_of_baseline = 0.0;
  std::string ceiling;        // "FP32 CUDA cores, 66.9 TFLOPS"
  double pct_of_ceiling = 0.0;

  double spread_percent() const { return median_ms > 0 ? 100.0 * (p90_ms - p10_ms) / median_ms : 0.0; }
};

// "4096³" for cubes, "4093×2049×1031" otherwise.
std::string pretty_shape(const std::string& shape);
// The parameters off their defaults: "alpha=1.5 beta=0.5", or "".
std::string params_text(const std::vector<ReportedParam>& params);

std::string render_markdown(const RunInfo& info, const std::string& group,
                            const std::vector<Result>& results);
std::string render_json(const RunInfo& info, const std::string& group,
                        const std::vector<Result>& results);

// Writes <directory>/<group>.md and <group>.json for every group present in `results`
// (baseline rows go with the groups whose kernels share their op and shape). Returns the paths.
std::vector<std::string> write_reports(const std::string& directory, const RunInfo& info,
                                       const std::vector<Result>& results);

// One timing from an outside peer (bench/peers/*.py), as read from a --peers TSV file.
struct PeerTiming {
  std::string op;     // kc op name, e.g. "rmsnorm"
  std::string dtype;  // "bf16"
  std::string shape;  // Problem::shape(), e.g. "32768x4096"
  std::string peer;   // "torch.compile"
  double median_ms = 0.0;
  // The problem's parameters that differ from their defaults, as Problem::params_text() writes
  // them ("causal=1", "causal=1 scale=0.5"); "" for the defaults.
  std::string params;
};

// Parses "op<TAB>dtype<TAB>shape<TAB>peer<TAB>median_ms[<TAB>params]" lines (params optional: the
// defaults when absent or empty); a header line starting with "op" and lines starting with '#'
// are skipped. Throws kc::Error naming the line of anything malformed.
std::vector<PeerTiming> parse_peer_timings(const std::string& text);


}  // namespace kc::bench
