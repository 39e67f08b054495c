// kc/common/registry.hpp — every kernel, described once, found by one runner.
//
// An OpSpec says what an op computes and how to judge it: how to make its operands, its reference,
// its tolerance, its FLOP/byte count and its baseline (cuBLAS, or the copy bandwidth); ops are
// described through the one builder in op_builder.hpp. A KernelEntry is one implementation of an
// op: a rung of a ladder, for one or more dtypes. Each stage exposes
// `void kc::stageN::register_kernels(kc::Registry&)`, an explicit call (a static library drops
// self-registering static objects).
#pragma once

#ifdef KC_KERNEL_SOURCE
#error "a kernel (rung) file includes the registry: kernels include argument headers only (kc/common/gemm_args.hpp, kc/stage1/sgemm.hpp, kc/stage2/kernels.hpp, stage 3's hgemm.hpp); the registration lives in src/"
#endif

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "kc/common/compare.hpp"
#include "kc/common/context.hpp"
#include "kc/common/problem.hpp"
#include "kc/common/roofline.hpp"

namespace kc {

// Returns "" when the problem is supported, otherwise a sentence saying why not
// ("K must be a multiple of 8 (got 1031)").
using SupportsFn = std::function<std::string(const Problem&)>;
using LaunchFn = std::function<void(const Problem&, Operands&, cudaStream_t)>;
// What a kernel says about one problem beside its numbers, on the operands it runs on: the path a
// dispatching entry takes ("path: cuBLAS GemmEx (fallback: K % 8 != 0)"). Reads; launches nothing
// and writes no operand.
using NoteFn = std::function<std::string(const Problem&, Operands&)>;
// The reference values of each output, by operand name, in device memory as doubles: computed on
// the GPU (FP64 cuBLAS, reference kernels) or on the CPU and uploaded (op_builder.hpp decides).
using References = std::map<std::string, DeviceBuffer<double>>;
using ReferenceFn = std::function<References(const Problem&, const Operands&, Context&)>;

struct OpSpec {
  std::string name;                    // "sgemm", "rmsnorm"
  std::string description;             // "C = alpha.A.B + beta.C, FP32, row-major"
  std::vector<std::string> dim_names;  // {"M", "N", "K"}
  std::vector<DType> dtypes;           // the data types the op is defined for
  std::vector<ParamSpec> params;       // named parameters, with defaults, in label order
  Bound bound = Bound::compute;        // which ceiling the % of ceiling refers to
  MathUnit math = MathUnit::fp32_cuda_core;
  std::function<Work(const Problem&)> work;
  SupportsFn supports;  // limits that hold for every kernel of the op (may be empty)
  // Allocates every operand, fills inputs with seeded random values, poisons outputs and writes
  // the guard bytes (problem.hpp).
  std::function<Operands(const Problem&, std::uint64_t seed, Context&)> make_operands;
  // Gives operands made by make_operands for `problem` the values make_operands(problem, seed)
  // would, in place: how the output of a timed launch is checked after its repeats.
  std::function<void(const Problem&, Operands&, std::uint64_t seed, Context&)> reset_operands;
  // Reference values of each output, from the untouched operands.
  ReferenceFn reference;
  // How accurate each output must be (compare.hpp).
  std::function<Accuracy(const Problem&, const Tensor& output)> accuracy;
  // For an output that is a choice rather than a number (a sampled token id), the comparison the
  // op makes itself in place of the tolerance table: the output against its reference values, with
  // the operands at hand (e.g. to accept a neighbour where two choices are within rounding). Empty:
  // compare_on_device with `accuracy` (every op but those).
  std::function<CompareResult(const Problem&, const Tensor& output, const DeviceBuffer<double>& reference,
                              const Operands& operands, cudaStream_t)>
      compare_choice;
  // The peer every kernel is compared with, run on the same operands.
  std::string baseline_name;           // "cuBLAS SGEMM (FP32, pedantic)"
  std::function<void(const Problem&, Operands&, Context&)> baseline;
  // False when the baseline does not compute the op but bounds it, e.g. a device-to-device copy
  // of the op's minimum bytes for a memory-bound op: its output is then not checked.
  bool baseline_computes_op = true;
  // "" when the baseline runs `problem`, otherwise why not (a library that implements part of the
  // op's definition, e.g. cuDNN's attention); empty: it runs every problem the op supports. A
  // refused baseline is reported as such, and kernels on that problem have no % of baseline.
  std::function<std::string(const Problem&, Context&)> baseline_supports;
  // Other implementations kc-bench times beside the baseline, on the same operands, each checked
  // like a kernel (cuBLAS in another math mode, cuDNN): rows of their own in the tables.
  struct Peer {
    std::string name;
    std::function<void(const Problem&, Operands&, Context&)> run;
  };
  std::vector<Peer> peers;
  std::vector<Problem> bench_problems;        // the documented shapes kc-bench times by default
  std::vector<Problem> conformance_problems;  // odd shapes and edge cases the tests check

  // A problem of this op: its parameters at their defaults, then `values`.
  Problem problem(std::vector<std::int64_t> dims, DType dtype, const ParamValues& values = {}) const;
  bool has_dtype(DType dtype) const;
  bool has_param(std::string_view param_name) const;  // one of `params`
};

struct KernelEntry {
  std::string id;           // "stage1/sgemm/01_naive": <stage>/<op>/<name>; "playground/sgemm/my_sgemm"
  std::string op;           // "sgemm"
  int rung = 0;             // position in its ladder
  std::string idea;         // one line: what this rung teaches
  std::vector<DType> dtypes = {DType::f32};  // the problem dtypes it runs
  int min_compute_capability = 80;
  // 0: any newer GPU too. 90 for code built only for sm_90a (wgmma, setmaxnreg): arch-specific
  // machine code does not run on later architectures.
  int max_compute_capability = 0;
  std::string constraints;  // human-readable shape constraints, "" if any shape works
  SupportsFn supports;      // the same constraints as code (may be empty)
  // The conformance problems (Problem::label()) this kernel must refuse; it must run every other
  // one its dtypes and architecture allow. The conformance tests hold it to this list, so a
  // constraint cannot widen or narrow unnoticed.
  std::vector<std::string> refuses;
  LaunchFn launch;
  // Optional: kc-bench calls it once per problem the kernel runs and shows the text in the report
  // (the Details table's note column, the JSON's "note"). Empty: no note.
  NoteFn note;
  std::string report;       // docs table this kernel belongs in; empty = its stage ("stage1")
  // Non-empty for a playground template the learner has not written yet: the sentence saying what
  // to do. Such a kernel refuses every problem with it; kc-bench runs it only when --filter names
  // the playground, and the conformance tests skip it.
  std::string unwritten;

  std::string stage() const;         // "stage1", "playground"
  std::string report_group() const;  // report, or stage()
  bool runs_dtype(DType dtype) const;
  std::string dtypes_text() const;   // "bf16,f16,f32"
};

class Registry {
 public:
  // Throws kc::Error on a duplicate name or an incomplete spec.
  void add_op(OpSpec op);
  // Throws kc::Error unless the id is "<stageN>/<op>/<name>" (or "playground/<op>/<name>"),
  // unique, its op is registered and its launch function is set.
  void add_kernel(KernelEntry kernel);

  bool has_op(std::string_view name) const;
  const OpSpec& op(std::string_view name) const;
  const KernelEntry& kernel(std::string_view id) const;
  // Kernels in registration order.
  const std::vector<KernelEntry>& kernels() const { return kernels_; }
  const std::vector<OpSpec>& ops() const { return ops_; }
  // Kernels whose id matches `pattern` (ECMAScript regex, searched anywhere in the id; "" = all).
  std::vector<const KernelEntry*> select(const std::string& pattern) const;

 private:
  std::vector<OpSpec> ops_;
  std::vector<KernelEntry> kernels_;
};

// "" when `kernel` can run `problem` (on `device`, when given), otherwise the reason.
std::string unsupported_reason(const Registry& registry, const KernelEntry& kernel,
                               const Problem& problem, const DeviceInfo* device);

}  // namespace kc
