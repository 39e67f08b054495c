// kc/common/op_builder.hpp — the one way an op describes itself to the harness.
//
// An op is a few declarations: its dimensions, data types and named parameters; its operands
// (name, dtype, shape, how to fill them); a reference (on the CPU in double for small problems, on
// the GPU for large ones); how accurate each output must be (compare.hpp); its FLOP and byte
// counts; the shapes to time and to test; and its baseline. build_op() turns that into the
// OpSpec the registry, kc-bench and the tests use, with everything ops share written once:
// allocation with guard bytes, seeded fills, NaN poison, reference selection and upload, the byte
// count, the copy baseline of memory-bound ops.
//
// GEMM (common/gemm.hpp), the memory-bound ops of stage 2, attention and quantized GEMM all go
// through it.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kc/common/fill.hpp"
#include "kc/common/registry.hpp"

namespace kc {

using Shape = std::vector<std::int64_t>;
using ShapeFn = std::function<Shape(const Problem&)>;

enum class Role { input, output, input_output };

struct OperandSpec {
  std::string name;
  std::optional<DType> dtype;  // empty: the problem's dtype
  ShapeFn shape;
  Role role = Role::input;
  FillSpec fill = FillSpec::uniform(-1.0, 1.0);  // inputs (and input_outputs)
  // Replaces the random fill (or the poison of an output) when set: positions, tables, token ids,
  // error records.
  std::function<void(const Problem&, Tensor&, std::uint64_t seed, cudaStream_t)> initialize;
  // Only when the problem says so (e.g. C of a GEMM is read only when beta != 0); empty: always.
  // A skipped input is allocated and poisoned, so reading it shows.
  std::function<bool(const Problem&)> is_read;

  DType dtype_for(const Problem& p) const { return dtype.value_or(p.dtype); }
};

// The shape made of the problem's dimensions at `indices`: dims_at({0, 1}) is rows x cols.
ShapeFn dims_at(std::initializer_list<int> indices);

// Operands of the problem's dtype unless `dtype` says otherwise.
OperandSpec input(std::string name, ShapeFn shape, FillSpec fill = FillSpec::uniform(-1.0, 1.0),
                  std::optional<DType> dtype = std::nullopt);
OperandSpec output(std::string name, ShapeFn shape, std::optional<DType> dtype = std::nullopt);

// Host copies of tensors in double, by operand name.
using HostTensors = std::map<std::string, std::vector<double>>;
// Reference outputs (by output name) from the inputs' values (inputs and input_outputs).
using HostReference = std::function<HostTensors(const Problem&, const HostTensors& inputs)>;

// A problem to time or test: dims, a dtype (empty: one problem per dtype of the op) and the
// parameters that differ from their defaults.
struct ProblemSpec {
  Shape dims;
  std::optional<DType> dtype;
  ParamValues params;

  ProblemSpec(Shape problem_dims, std::optional<DType> problem_dtype = std::nullopt,
              ParamValues values = {})
      : dims(std::move(problem_dims)), dtype(problem_dtype), params(std::move(values)) {}
};

// A device-to-device copy of a problem's minimum bytes: the baseline of a memory-bound op. One
// scratch pair serves every op (only the largest copy's buffers are ever held), allocated on first
// use, in the untimed warm-up launches.
class CopyScratch {
 public:
  // Copies `bytes` bytes device to device (read `bytes`, write `bytes`).
  void copy(std::size_t bytes, cudaStream_t stream);

 private:
  DeviceBuffer<std::byte> source_;
  DeviceBuffer<std::byte> destination_;
};

struct OpConfig {
  std::string name;                    // "rmsnorm"
  std::string description;
  std::vector<std::string> dim_names;  // {"rows", "cols"}
  std::vector<DType> dtypes;           // the problem dtypes the op is defined for
  std::vector<ParamSpec> params;
  Bound bound = Bound::memory;
  MathUnit math = MathUnit::fp32_cuda_core;
  std::vector<OperandSpec> operands;

  // The references. At least one; with both, the host one serves problems whose
  // reference_work(problem) is at most Context::cpu_reference_limit and the device one the rest.
  HostReference host_reference;
  ReferenceFn device_reference;
  std::function<double(const Problem&)> reference_work;  // empty: elements of every output

  // Per output; empty: Accuracy{the output's dtype}.
  std::function<Accuracy(const Problem&, const std::string& output, DType output_dtype)> accuracy;
  // For outputs that are choices, not numbers: OpSpec::compare_choice.
  decltype(OpSpec::compare_choice) compare_choice;
  std::function<double(const Problem&)> flops;  // empty: 0
  // Minimum DRAM bytes; empty: every operand once, an input_output twice (operand_bytes).
  std::function<double(const Problem&)> bytes;
  SupportsFn supports;  // beyond "every dimension in [1, 2^31 - 1]"

  std::vector<ProblemSpec> bench;
  std::vector<ProblemSpec> conformance;

  // Empty: the copy baseline (needs copy_scratch). Otherwise a peer that computes the op and is
  // checked like a kernel.
  std::string baseline_name;
  std::function<void(const Problem&, Operands&, Context&)> baseline;
  std::function<std::string(const Problem&, Context&)> baseline_supports;  // see OpSpec
  std::shared_ptr<CopyScratch> copy_scratch;
  std::vector<OpSpec::Peer> peers;  // see OpSpec::peers
};

OpSpec build_op(OpConfig config);

// Minimum bytes of a problem: every operand once (twice for input_outputs).
double operand_bytes(const std::vector<OperandSpec>& operands, const Problem& problem);

// Host copies of the inputs (and input_outputs) as doubles (to_host_double: converted on several
// threads).
HostTensors host_inputs(const std::vector<OperandSpec>& specs, const Operands& operands,
                        cudaStream_t stream);

// Uploads host reference values to the device.
References upload_references(HostTensors host, cudaStream_t stream);

// The value `x` becomes when stored as `dtype` (round to nearest even): a reference that models
// an intermediate result the op's definition stores, e.g. the residual stream rounded to bf16.
double round_to(DType dtype, double x);

}  // namespace kc
