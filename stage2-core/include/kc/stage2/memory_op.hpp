// kc/stage2/memory_op.hpp — one factory for the OpSpecs of memory-bound ops.
//
// A memory-bound op is judged by how close it comes to the copy bandwidth, so most of its OpSpec
// is the same for every op: allocate and fill the operands, count the bytes (each input read
// once, each output written once), compare with a CPU double reference, and time a
// device-to-device copy of the same number of bytes as the baseline. An op supplies only what is
// its own: operands (names, shapes, dtypes, fills), the reference, the tolerance scale, FLOPs and
// its shapes. row_op_problems() / elementwise_op_problems() give the shared shape sets.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kc/common/buffer.hpp"
#include "kc/common/fill.hpp"
#include "kc/common/registry.hpp"

namespace kc::stage2 {

enum class Role { input, output, input_output };

struct OperandSpec {
  std::string name;
  DType dtype = DType::f32;
  std::function<std::vector<std::int64_t>(const Problem&)> shape;
  Role role = Role::input;
  FillSpec fill = FillSpec::uniform(-1.0, 1.0);
  // Replaces the random fill when set: positions, tables, token ids, error records.
  std::function<void(const Problem&, Tensor&, std::uint64_t seed, cudaStream_t)> initialize;
};

// Host copies of tensors in double, by operand name.
using HostTensors = std::map<std::string, std::vector<double>>;

// Reference outputs (by output name) from the inputs' values (inputs and input_outputs).
using HostReference = std::function<HostTensors(const Problem&, const HostTensors& inputs)>;

struct MemoryOpConfig {
  std::string name;                    // the full op name, dtype included: "rmsnorm_bf16"
  std::string description;
  DType dtype = DType::f32;            // the op's storage type: tolerance class and kernel dtype
  std::vector<std::string> dim_names;  // {"rows", "cols"}
  std::vector<OperandSpec> operands;
  HostReference reference;
  std::function<double(const Problem&)> flops;  // empty: 0
  // Minimum DRAM bytes; empty: every input once, every output once, an input_output twice.
  std::function<double(const Problem&)> bytes;
  // Multiplies atol (see compare.hpp), per output; empty: 1.
  std::function<double(const Problem&, const std::string& output)> tolerance_scale;
  SupportsFn supports;                 // beyond "every dimension >= 1"
  std::vector<Problem> bench_problems;
  std::vector<Problem> conformance_problems;
  // Empty: the copy baseline. Otherwise a peer that computes the op and is checked like a kernel.
  std::string baseline_name;
  std::function<void(const Problem&, Operands&, Context&)> baseline;
};

// Device scratch for the copy baseline, shared by every op so that only the largest copy's
// buffers are ever held. Allocated on first use (in the untimed warm-up launches).
class CopyScratch {
 public:
  // Copies `bytes` bytes device to device (read `bytes`, write `bytes`).
  void copy(std::size_t bytes, cudaStream_t stream);

 private:
  DeviceBuffer<std::byte> source_;
  DeviceBuffer<std::byte> destination_;
};

// Minimum bytes of a problem: every operand once (twice for input_outputs).
double operand_bytes(const std::vector<OperandSpec>& operands, const Problem& problem);

OpSpec make_memory_op(MemoryOpConfig config, std::shared_ptr<CopyScratch> scratch);

// rows x cols shapes: cols 1, 31, 1000, 4097 with rows 1, 3, 257, plus 64x4096, 7x8192 (vector
// fast paths), 5x1024 and 3x512 (a warp team or a small block with every slot full), 5x2050
// (scalar block path) and 2x40000 (longer than a block can hold).
std::vector<Problem> row_op_conformance_problems(const std::string& op);

// The documented shapes are what `kc-bench --filter stage2` runs, each kernel checked against a
// CPU reference before it is timed, and a check holds every operand and output as doubles on the
// host: its cost grows with the shape. The issue's targets (RMSNorm, LayerNorm, softmax,
// residual + RMSNorm) are judged in bf16 at 32768 x 4096 and 32768 x 8192; every other row op
// and dtype gets one shape, 16384 x 4096: 128 MiB or more per tensor (twice the L2 and more), and
// 16384 rows, more than 15 waves of blocks on an H200.
enum class BenchTarget { issue_target, other };
std::vector<Problem> row_op_bench_problems(const std::string& op, DType dtype, BenchTarget target);

// A view of operands as host doubles (converted on several threads).
HostTensors host_inputs(const std::vector<OperandSpec>& specs, const Operands& operands,
                        cudaStream_t stream);
std::vector<double> host_values(const Tensor& tensor, cudaStream_t stream);

// The op name with its dtype: op_name("rmsnorm", DType::bf16) == "rmsnorm_bf16".
std::string op_name(const std::string& base, DType dtype);

}  // namespace kc::stage2
