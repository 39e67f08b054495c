// The quantize_gguf op (kc/stage3/quantize_gguf.hpp): operands, references, problems, the public
// entry's checks, and the registration of its ladder.
#include "kc/stage3/quantize_gguf.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <memory>
#include <utility>

#include "kc/common/error.hpp"
#include "kc/common/op_builder.hpp"
#include "kc/core/vector_io.hpp"
#include "kc/stage3/gemv_gguf.hpp"
#include "kc/stage3/register.hpp"

namespace kc::stage3 {
namespace {

// A rung's launch function.
using QuantizeGgufFn = void (*)(const QuantizeGgufArgs&, cudaStream_t);

std::int64_t rows_of(const Problem& p) { return p.dims[0]; }
std::int64_t k_of(const Problem& p) { return p.dims[1]; }

Shape blocks_shape(const Problem& p) {
  return Shape{rows_of(p), k_of(p) / kGgufBlockWeights * gguf_block_bytes(gguf_block_type(p))};
}

HostTensors host_reference(const Problem& p, const HostTensors& in) {
  const std::vector<double>& x = in.at("x");
  std::vector<float> values(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) values[i] = static_cast<float>(x[i]);  // bf16: exact
  const std::vector<std::uint8_t> bytes = quantize_gguf_on_host(gguf_block_type(p), values.data(), values.size());
  std::vector<double> out(bytes.size());
  for (std::size_t i = 0; i < bytes.size(); ++i) out[i] = static_cast<double>(static_cast<std::int8_t>(bytes[i]));
  return HostTensors{{"blocks", std::move(out)}};
}

References device_reference(const Problem& p, const Operands& o, Context& context) {
  DeviceBuffer<double> out(o["blocks"].count());
  quantize_gguf_reference_on_device(gguf_block_type(p), o["x"].data<__nv_bfloat16>(), rows_of(p),
                                    static_cast<int>(k_of(p)), out.data(), context.stream());
  References references;
  references.emplace("blocks", std::move(out));
  return references;
}

}  // namespace

std::string quantize_gguf_shape_error(const Problem& p) {
  const double type = p.param("ggml_type");
  if (type != 2.0 && type != 3.0 && type != 8.0)
    return fmt::format("ggml_type must be 2 (q4_0), 3 (q4_1) or 8 (q8_0) (got {})", type);
  if (k_of(p) % kGgufBlockWeights != 0)
    return fmt::format("K must be a multiple of {} (got {}): ggml's blocks hold {} values of a row", kGgufBlockWeights,
                       k_of(p), kGgufBlockWeights);
  return "";
}

QuantizeGgufArgs quantize_gguf_args(const Problem& p, Operands& o) {
  QuantizeGgufArgs args;
  args.rows = rows_of(p);
  args.k = static_cast<int>(k_of(p));
  args.type = gguf_block_type(p);
  args.x = o["x"].data<__nv_bfloat16>();
  args.out = reinterpret_cast<std::uint8_t*>(o["blocks"].raw());
  return args;
}

void check_quantize_gguf_args(const QuantizeGgufArgs& args) {
  if (args.type != GgufBlockType::q4_0 && args.type != GgufBlockType::q4_1 && args.type != GgufBlockType::q8_0)
    throw Error(fmt::format("quantize_gguf: type {} is not q4_0 (2), q4_1 (3) or q8_0 (8)", static_cast<int>(args.type)));
  if (args.rows < 1) throw Error(fmt::format("quantize_gguf: rows must be at least 1 (got {})", args.rows));
  if (args.k < kGgufBlockWeights || args.k % kGgufBlockWeights != 0)
    throw Error(fmt::format("quantize_gguf: K must be a positive multiple of {} (got {}): a GGUF block holds {} "
                            "consecutive values of a row",
                            kGgufBlockWeights, args.k, kGgufBlockWeights));
  if (args.x == nullptr) throw Error("quantize_gguf: x is null; pass the device address of the bf16 [rows, K] input");
  if (args.out == nullptr)
    throw Error("quantize_gguf: out is null; pass a device buffer of rows x K / 32 blocks of the type's bytes");
  if (!core::is_aligned(args.x, core::kVectorBytes) || !core::is_aligned(args.out, core::kVectorBytes))
    throw Error(fmt::format("quantize_gguf: x and out must be 16-byte aligned (x at {}, out at {}): the kernel moves "
                            "them in 16-byte pieces",
                            static_cast<const void*>(args.x), static_cast<const void*>(args.out)));
}

void quantize_gguf(const QuantizeGgufArgs& args, cudaStream_t stream) {
  check_quantize_gguf_args(args);
  quantize_gguf_02_thread_per_block(args, stream);
}

OpSpec make_quantize_gguf_op() {
  OpConfig op;
  op.name = kQuantizeGgufOp;
  op.description =
      "x [rows,K] bf16 -> rows x K/32 GGUF blocks (q4_0, q4_1 or q8_0), byte for byte what ggml's reference "
      "quantizers write from the same floats";
  op.dim_names = {"rows", "K"};
  op.dtypes = {DType::bf16};
  op.params = {{"ggml_type", 2.0, "the block format: 2 q4_0, 3 q4_1, 8 q8_0"}};
  op.bound = Bound::memory;
  op.operands = {input("x", dims_at({0, 1})), output("blocks", &blocks_shape, DType::i8)};
  op.host_reference = &host_reference;
  op.device_reference = &device_reference;
  // The blocks are bytes (i8): compared exactly (compare.hpp's integer tolerance is 0).
  op.supports = &quantize_gguf_shape_error;
  // Llama-3-8B's weights: q, o (4096 x 4096), gate/up (14336 x 4096), down (4096 x 14336), the
  // output projection (128256 x 4096), and a small one (16 rows), in each type.
  using P = ParamValues;
  for (const double type : {2.0, 3.0, 8.0})
    for (const Shape& dims : std::vector<Shape>{{4096, 4096}, {14336, 4096}, {4096, 14336}, {128256, 4096}, {16, 4096}})
      op.bench.push_back({dims, std::nullopt, P{{"ggml_type", type}}});
  // One block, odd row counts, K of one block, three blocks and 129 blocks (CTAs that end inside a
  // row, a last CTA with a short run of blocks), rows across many CTAs; and one refused (K % 32).
  for (const double type : {2.0, 3.0, 8.0})
    for (const Shape& dims : std::vector<Shape>{{1, 32}, {3, 96}, {17, 4128}, {1000, 96}, {1, 4128}, {127, 32},
                                                {1000, 4128}})
      op.conformance.push_back({dims, std::nullopt, P{{"ggml_type", type}}});
  op.conformance.push_back({{5, 100}});
  op.copy_scratch = std::make_shared<CopyScratch>();
  return build_op(std::move(op));
}

std::vector<std::string> quantize_gguf_refusals() {
  std::vector<std::string> labels;
  for (const Problem& problem : make_quantize_gguf_op().conformance_problems)
    if (!quantize_gguf_shape_error(problem).empty()) labels.push_back(problem.label());
  return labels;
}

void register_quantize_gguf_kernels(Registry& registry) {
  if (!registry.has_op(kQuantizeGgufOp)) registry.add_op(make_quantize_gguf_op());
  const auto add = [&registry](const char* name, int number, const char* idea, QuantizeGgufFn quantize) {
    KernelEntry rung = rung_entry(kQuantizeGgufOp, name, number, idea, {DType::bf16}, "stage3-quant", 80);
    rung.constraints = "K % 32 == 0";
    rung.supports = &quantize_gguf_shape_error;
    rung.refuses = quantize_gguf_refusals();
    rung.launch = [quantize](const Problem& problem, Operands& operands, cudaStream_t stream) {
      quantize(quantize_gguf_args(problem, operands), stream);
    };
    registry.add_kernel(std::move(rung));
  };
  add("01_quad_per_block", 1,
      "four lanes per block of 32: 16-byte loads, the max/min by ordered shuffles, ggml's float arithmetic, blocks "
      "staged in shared memory and written with 16-byte stores",
      &quantize_gguf_01_quad_per_block);
  add("02_thread_per_block", 2,
      "a thread per block: the max/min in the reference's order, one division pair a block, no per-value range "
      "checks where ggml's special cases cannot apply; rung 01's staging and 16-byte stores",
      &quantize_gguf_02_thread_per_block);
}

}  // namespace kc::stage3
