// register_helpers.hpp — the small pieces every stage-2 op description and ladder shares.
//
// Every stage-2 op is defined for bf16, f16 and f32 (the problem's dtype). A ladder is a table of
// rungs; each rung names its launch function once, as a generic lambda, which the helper
// instantiates for the three types: adding a rung is its kernel file, its declaration in
// kc/stage2/kernels.hpp and one line in the table.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kc/common/op_builder.hpp"
#include "kc/common/registry.hpp"

namespace kc::stage2::detail {

inline const std::vector<DType> kStage2Dtypes = {DType::bf16, DType::f16, DType::f32};

// Names the element type T for a make_args lambda: [](const Problem&, Operands&, auto type) {
// using T = typename decltype(type)::type; ... }.
template <typename T>
struct TypeTag {
  using type = T;
};

// Elements of a problem's dimensions multiplied together.
inline double elements(const Problem& p) {
  double count = 1.0;
  for (std::int64_t d : p.dims) count *= static_cast<double>(d);
  return count;
}

// One rung of a ladder whose launch functions take Args<T>, for the three element types.
template <template <class> class Args>
struct TypedRung {
  std::string name;  // "05_row_in_registers"
  int rung = 0;
  std::string idea;
  std::function<void(const Args<__nv_bfloat16>&, cudaStream_t)> bf16;
  std::function<void(const Args<__half>&, cudaStream_t)> f16;
  std::function<void(const Args<float>&, cudaStream_t)> f32;
};

// rung<RmsNormArgs>("05_row_in_registers", 5, "idea",
//                   [](const auto& args, cudaStream_t s) { rmsnorm_05_row_in_registers(args, s); })
template <template <class> class Args, typename Launch>
TypedRung<Args> rung(std::string name, int number, std::string idea, Launch launch) {
  return {std::move(name), number, std::move(idea), launch, launch, launch};
}

// Files every rung of an op's ladder: kernel id stage2/<op>/<rung name>, dtypes bf16, f16, f32,
// launched with the arguments `make_args` pulls out of the operands for the problem's dtype.
template <template <class> class Args, typename MakeArgs>
void add_ladder(Registry& registry, const std::string& op, MakeArgs make_args,
                const std::vector<TypedRung<Args>>& rungs) {
  for (const TypedRung<Args>& r : rungs) {
    KernelEntry entry;
    entry.id = "stage2/" + op + "/" + r.name;
    entry.op = op;
    entry.rung = r.rung;
    entry.idea = r.idea;
    entry.dtypes = kStage2Dtypes;
    entry.min_compute_capability = 80;
    entry.launch = [make_args, r, op](const Problem& p, Operands& o, cudaStream_t stream) {
      switch (p.dtype) {
        case DType::bf16: r.bf16(make_args(p, o, TypeTag<__nv_bfloat16>{}), stream); return;
        case DType::f16: r.f16(make_args(p, o, TypeTag<__half>{}), stream); return;
        case DType::f32: r.f32(make_args(p, o, TypeTag<float>{}), stream); return;
        default: break;
      }
      throw Error(fmt::format("{}: no {} instantiation", op, dtype_name(p.dtype)));
    };
    registry.add_kernel(std::move(entry));
  }
}

// The parts every stage-2 op shares: dims, the three dtypes, the copy baseline.
OpConfig memory_op(std::string name, std::string description, std::vector<std::string> dim_names,
                   const std::shared_ptr<CopyScratch>& scratch);

// rows x cols shapes: cols 1, 31, 1000, 4097 with rows 1, 3, 257, plus 64x4096, 7x8192 (vector
// fast paths), 5x1024 and 3x512 (a warp team or a small block with every slot full), 5x2050
// (scalar block path) and 2x40000 (longer than a block can hold); every dtype.
std::vector<ProblemSpec> row_op_conformance_problems();

// The documented shapes are what `kc-bench --filter stage2` runs, each kernel checked against a
// CPU reference before it is timed, and a check holds every operand and output as doubles on the
// host: its cost grows with the shape. The targets of the norms and softmax are judged in bf16 at
// 32768 x 4096 and 32768 x 8192; every other row op and dtype gets one shape, 16384 x 4096:
// 128 MiB or more per tensor (twice the L2 and more), and 16384 rows, more than 15 waves of blocks
// on an H200.
enum class BenchTarget { headline, other };
std::vector<ProblemSpec> row_op_bench_problems(BenchTarget target);

// The accuracy of a row op's output: `terms` values summed into each result (compare.hpp).
std::function<Accuracy(const Problem&, const std::string&, DType)> summing(
    std::function<double(const Problem&)> terms);

// Each family registers its ops and their ladders.
void register_norm_ops(Registry& registry, const std::shared_ptr<CopyScratch>& scratch);
void register_softmax_and_reduction_ops(Registry& registry, const std::shared_ptr<CopyScratch>& scratch);
void register_elementwise_ops(Registry& registry, const std::shared_ptr<CopyScratch>& scratch);
void register_rope_and_embedding_ops(Registry& registry, const std::shared_ptr<CopyScratch>& scratch);

}  // namespace kc::stage2::detail
