// register_helpers.hpp — the small pieces every stage-2 op description and ladder shares.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kc/common/registry.hpp"
#include "kc/stage2/memory_op.hpp"

namespace kc::stage2::detail {

using Shape = std::vector<std::int64_t>;
using ShapeFn = std::function<Shape(const Problem&)>;

// The shape made of the problem's dimensions at `indices`: dims_at({0, 1}) is rows x cols.
inline ShapeFn dims_at(std::initializer_list<int> indices) {
  return [picked = std::vector<int>(indices)](const Problem& p) {
    Shape shape;
    for (int i : picked) shape.push_back(p.dims[static_cast<std::size_t>(i)]);
    return shape;
  };
}

inline OperandSpec input(std::string name, DType dtype, ShapeFn shape,
                         FillSpec fill = FillSpec::uniform(-1.0, 1.0)) {
  OperandSpec spec;
  spec.name = std::move(name);
  spec.dtype = dtype;
  spec.shape = std::move(shape);
  spec.role = Role::input;
  spec.fill = fill;
  return spec;
}

inline OperandSpec output(std::string name, DType dtype, ShapeFn shape) {
  OperandSpec spec;
  spec.name = std::move(name);
  spec.dtype = dtype;
  spec.shape = std::move(shape);
  spec.role = Role::output;
  return spec;
}

// Elements of a problem's dimensions multiplied together.
inline double elements(const Problem& p) {
  double count = 1.0;
  for (std::int64_t d : p.dims) count *= static_cast<double>(d);
  return count;
}

struct Rung {
  std::string name;  // "05_row_in_registers"
  int rung = 0;
  std::string idea;
};

// Files every rung of an op's ladder: kernel id stage2/<op>/<rung name>, the launch function
// called with the arguments `make_args` pulls out of the operands.
template <typename Args>
void add_ladder(Registry& registry, const std::string& op, DType dtype,
                const std::function<Args(const Problem&, Operands&)>& make_args,
                const std::vector<std::pair<Rung, void (*)(const Args&, cudaStream_t)>>& rungs) {
  for (const auto& [rung, launch] : rungs) {
    KernelEntry entry;
    entry.id = "stage2/" + op + "/" + rung.name;
    entry.op = op;
    entry.rung = rung.rung;
    entry.idea = rung.idea;
    entry.dtype = dtype;
    entry.min_compute_capability = 80;
    entry.launch = [make_args, launch = launch](const Problem& p, Operands& o, cudaStream_t stream) {
      launch(make_args(p, o), stream);
    };
    registry.add_kernel(std::move(entry));
  }
}

// Each family registers its ops (one per dtype) and their ladders.
void register_norm_ops(Registry& registry, const std::shared_ptr<CopyScratch>& scratch);
void register_softmax_and_reduction_ops(Registry& registry, const std::shared_ptr<CopyScratch>& scratch);
void register_elementwise_ops(Registry& registry, const std::shared_ptr<CopyScratch>& scratch);
void register_rope_and_embedding_ops(Registry& registry, const std::shared_ptr<CopyScratch>& scratch);

}  // namespace kc::stage2::detail
