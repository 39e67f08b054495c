// Files the playground's templates with the registry, one line each: the learner's kernel is then
// a rung like any other, checked on the op's conformance problems and timed beside its baseline.
#include <string>
#include <utility>

#include "kc/common/gemm.hpp"
#include "kc/playground/playground.hpp"
#include "kc/playground/register.hpp"
#include "kc/stage3/register.hpp"

namespace kc::playground {
namespace {

// The entry of template playground/<op>/my_<op>: `written` says whether the learner has written
// it; until then it refuses every problem with a sentence saying what to do.
KernelEntry template_entry(const std::string& op, DType dtype, bool written, std::string idea, LaunchFn launch) {
  KernelEntry entry;
  entry.id = "playground/" + op + "/my_" + op;
  entry.op = op;
  entry.rung = 1;
  entry.idea = std::move(idea);
  entry.dtypes = {dtype};
  entry.min_compute_capability = 80;
  entry.report = "playground";
  if (!written)
    entry.unwritten = "playground/" + op + ".cu is a template: write the kernel there, make my_" + op +
                      "_written() return true, rebuild and run again";
  entry.launch = std::move(launch);
  return entry;
}

}  // namespace

void register_kernels(Registry& registry) {
  registry.add_kernel(template_entry(
      "sgemm", DType::f32, my_sgemm_written(), "your SGEMM (playground/sgemm.cu)",
      [](const Problem& p, Operands& o, cudaStream_t s) { my_sgemm(gemm_args<float>(p, o, BLayout::k_by_n), s); }));

  registry.add_kernel(template_entry("softmax", DType::f32, my_softmax_written(), "your softmax (playground/softmax.cu)",
                                     [](const Problem& p, Operands& o, cudaStream_t s) {
                                       stage2::SoftmaxArgs<float> a;
                                       a.rows = static_cast<int>(p.dims[0]);
                                       a.cols = static_cast<int>(p.dims[1]);
                                       a.x = o["x"].data<float>();
                                       a.y = o["y"].data<float>();
                                       my_softmax(a, s);
                                     }));

  registry.add_kernel(template_entry("row_sum", DType::f32, my_row_sum_written(), "your row sum (playground/row_sum.cu)",
                                     [](const Problem& p, Operands& o, cudaStream_t s) {
                                       stage2::RowReduceArgs<float> a;
                                       a.kind = stage2::RowReduction::sum;
                                       a.rows = static_cast<int>(p.dims[0]);
                                       a.cols = static_cast<int>(p.dims[1]);
                                       a.x = o["x"].data<float>();
                                       a.out = o["out"].data<float>();
                                       my_row_sum(a, s);
                                     }));

  // The ladder's shape rule holds here too: rows of A and B in 16-byte pieces need K % 8 == 0.
  KernelEntry hgemm = template_entry(
      stage3::kHgemmOp, DType::bf16, my_hgemm_written(), "your tensor-core GEMM (playground/hgemm.cu)",
      [](const Problem& p, Operands& o, cudaStream_t s) {
        my_hgemm(gemm_args<__nv_bfloat16>(p, o, BLayout::n_by_k), s);
      });
  hgemm.constraints = "K % 8 == 0";
  hgemm.supports = &stage3::hgemm_shape_error;
  hgemm.refuses = stage3::hgemm_refusals();
  registry.add_kernel(std::move(hgemm));
}

}  // namespace kc::playground
