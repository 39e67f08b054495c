#include "kc/stage2/memory_op.hpp"

#include <fmt/format.h>

#include "kc/common/fill.hpp"
#include "kc/stage2/parallel.hpp"

namespace kc::stage2 {

void CopyScratch::copy(std::size_t bytes, cudaStream_t stream) {
  if (source_.size() < bytes) {
    source_ = DeviceBuffer<std::byte>();  // free before allocating the larger pair
    destination_ = DeviceBuffer<std::byte>();
    source_ = DeviceBuffer<std::byte>(bytes);
    destination_ = DeviceBuffer<std::byte>(bytes);
    // Copy written data, never untouched memory, as every kc input is. (An open question about
    // this baseline's rates: docs/notes/2026-12-01-source-measurements.md.)
    fill_random(source_.data(), DType::i8, bytes, 99, FillSpec::uniform(-127, 127), stream);
  }
  KC_CUDA_CHECK(cudaMemcpyAsync(destination_.data(), source_.data(), bytes,
                                cudaMemcpyDeviceToDevice, stream));
}

double operand_bytes(const std::vector<OperandSpec>& operands, const Problem& problem) {
  double bytes = 0.0;
  for (const OperandSpec& spec : operands) {
    std::size_t count = 1;
    for (std::int64_t d : spec.shape(problem)) count *= static_cast<std::size_t>(d);
    const double once = static_cast<double>(dtype_bytes(spec.dtype, count));
    bytes += spec.role == Role::input_output ? 2.0 * once : once;
  }
  return bytes;
}

std::string op_name(const std::string& base, DType dtype) {
  return base + "_" + std::string(dtype_name(dtype));
}

std::vector<double> host_values(const Tensor& tensor, cudaStream_t stream) {
  const std::size_t count = tensor.count();
  std::vector<double> values(count);
  if (count == 0) return values;
  PinnedBuffer<std::byte> staging(dtype_bytes(tensor.dtype, count));
  KC_CUDA_CHECK(cudaMemcpyAsync(staging.data(), tensor.raw(), dtype_bytes(tensor.dtype, count),
                                cudaMemcpyDeviceToHost, stream));
  KC_CUDA_CHECK(cudaStreamSynchronize(stream));
  const std::byte* bytes = staging.data();
  parallel_for(static_cast<std::int64_t>(count), 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i)
      values[static_cast<std::size_t>(i)] =
          decode_element(bytes, tensor.dtype, static_cast<std::size_t>(i));
  });
  return values;
}

HostTensors host_inputs(const std::vector<OperandSpec>& specs, const Operands& operands,
                        cudaStream_t stream) {
  HostTensors inputs;
  for (const OperandSpec& spec : specs)
    if (spec.role != Role::output) inputs[spec.name] = host_values(operands[spec.name], stream);
  return inputs;
}

std::vector<Problem> row_op_conformance_problems(const std::string& op) {
  std::vector<Problem> problems;
  for (std::int64_t cols : {1, 31, 1000, 4097})
    for (std::int64_t rows : {1, 3, 257}) problems.push_back({op, {rows, cols}});
  for (const auto& [rows, cols] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {64, 4096}, {7, 8192}, {5, 1024}, {3, 512}, {5, 2050}, {2, 40000}})
    problems.push_back({op, {rows, cols}});
  return problems;
}

std::vector<Problem> row_op_bench_problems(const std::string& op, DType dtype, BenchTarget target) {
  if (target == BenchTarget::issue_target && dtype == DType::bf16)
    return {{op, {32768, 4096}}, {op, {32768, 8192}}};
  return {{op, {16384, 4096}}};
}

OpSpec make_memory_op(MemoryOpConfig config, std::shared_ptr<CopyScratch> scratch) {
  require(!config.name.empty() && !config.operands.empty() && static_cast<bool>(config.reference),
          "a memory-bound op needs a name, operands and a reference");
  OpSpec op;
  op.name = config.name;
  op.description = config.description;
  op.dim_names = config.dim_names;
  op.bound = Bound::memory;
  op.math = MathUnit::fp32_cuda_core;
  const auto operands = std::make_shared<const std::vector<OperandSpec>>(std::move(config.operands));

  op.work = [operands, flops = config.flops, bytes = config.bytes](const Problem& p) {
    Work work;
    work.flops = flops ? flops(p) : 0.0;
    work.bytes = bytes ? bytes(p) : operand_bytes(*operands, p);
    return work;
  };

  const std::string name = config.name;
  const std::size_t dims = config.dim_names.size();
  op.supports = [name, dims, extra = config.supports](const Problem& p) -> std::string {
    if (p.dims.size() != dims) return fmt::format("{} takes {} dimensions, got {}", name, dims, p.shape());
    for (std::int64_t d : p.dims)
      if (d < 1 || d > INT32_MAX)
        return fmt::format("{}: every dimension must be in [1, 2^31 - 1] (got {})", name, p.shape());
    return extra ? extra(p) : std::string();
  };

  op.make_operands = [operands](const Problem& p, std::uint64_t seed, Context& context) {
    Operands result;
    const cudaStream_t stream = context.stream();
    std::uint64_t index = 0;
    for (const OperandSpec& spec : *operands) {
      Tensor& tensor = result.add(spec.name, spec.dtype, spec.shape(p), spec.role != Role::input);
      const std::uint64_t operand_seed = seed * 16 + index++;
      if (spec.initialize)
        spec.initialize(p, tensor, operand_seed, stream);
      else if (spec.role == Role::output)
        poison(tensor.raw(), tensor.dtype, tensor.count(), stream);
      else
        fill_random(tensor.raw(), tensor.dtype, tensor.count(), operand_seed, spec.fill, stream);
    }
    return result;
  };

  op.reference = [operands, reference = config.reference](const Problem& p, const Operands& o,
                                                          Context& context) {
    return reference(p, host_inputs(*operands, o, context.stream()));
  };

  op.accuracy = [dtype = config.dtype, scale = config.tolerance_scale](const Problem& p,
                                                                       const Tensor& output) {
    return Accuracy{tolerance_for(output.dtype == DType::i32 ? DType::i32 : dtype),
                    scale ? scale(p, output.name) : 1.0};
  };

  if (config.baseline) {
    op.baseline_name = config.baseline_name;
    op.baseline = config.baseline;
    op.baseline_computes_op = true;
  } else {
    op.baseline_name = "copy of the same bytes (cudaMemcpy)";
    op.baseline = [operands, bytes = config.bytes, scratch](const Problem& p, Operands&,
                                                             Context& context) {
      const double total = bytes ? bytes(p) : operand_bytes(*operands, p);
      // A copy reads and writes: half the op's traffic each way.
      scratch->copy(static_cast<std::size_t>(total / 2.0), context.stream());
    };
    op.baseline_computes_op = false;
  }
  op.bench_problems = std::move(config.bench_problems);
  op.conformance_problems = std::move(config.conformance_problems);
  return op;
}

}  // namespace kc::stage2
