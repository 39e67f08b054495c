// The int4 GEMV's deliberately wrong kernels: rung 01 (stage3-hpc/quant/int4/01_group_scales.cu)
// with one mistake each in what makes a group-wise format work — the nibble order, which group's
// scale entry a group takes, the zero point, and the scale's place in the sum — and rung 03
// (quant/int4/03_batch.cu) centring each row on the zero point of the row 8 apart. Each must fail
// the op's check on some conformance problem (tests/harness/negative_controls_test.cpp), and
// GemvInt4Gpu.EachFlawFailsWhereItShows holds rung 01's to the problem that shows each.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kc/stage3/gemv_int4.hpp"
#include "kc/testing/negative_controls.hpp"
#include "src/gguf_batch_rung.hpp"

namespace kc::testing {
namespace {

struct Int4Control {
  const char* name;
  const char* flaw;
  stage3::Int4Flaw kind;
};

const Int4Control kInt4Controls[] = {
    {"nc_swapped_nibbles", "the two nibbles of each pair exchanged: weight 8t + 2i + 1 read where 8t + 2i is",
     stage3::Int4Flaw::swapped_nibbles},
    {"nc_next_group_scales",
     "each group multiplied by the scale and zero point of the next group of its chunk (a group index off by one; "
     "group sizes 32 and 64, where a chunk holds several groups)",
     stage3::Int4Flaw::next_group_scales},
    {"nc_zero_point_ignored", "every zero point read as 8, as if the weights were quantized symmetrically",
     stage3::Int4Flaw::zero_point_ignored},
    {"nc_scale_applied_twice", "each group's sum multiplied by its scale twice", stage3::Int4Flaw::scale_applied_twice},
};

constexpr const char* kSwappedZerosName = "nc_batch_swapped_zero_points";
constexpr const char* kSwappedZerosFlaw =
    "rung 03 (the batch rung) centres each row's nibbles on the zero point of the row 8 apart in its tile (group "
    "sizes of 128 and more)";

}  // namespace

std::vector<NegativeControl> gemv_int4_controls() {
  std::vector<NegativeControl> list;
  for (const Int4Control& c : kInt4Controls)
    list.push_back({std::string("stage3/") + stage3::kGemvInt4Op + "/" + c.name, c.flaw});
  list.push_back({std::string("stage3/") + stage3::kGemvInt4Op + "/" + kSwappedZerosName, kSwappedZerosFlaw});
  return list;
}

void register_gemv_int4_controls(Registry& registry) {
  if (!registry.has_op(stage3::kGemvInt4Op)) registry.add_op(stage3::make_gemv_int4_op());
  for (const Int4Control& c : kInt4Controls) {
    KernelEntry entry = negative_control_entry(std::string("stage3/") + stage3::kGemvInt4Op + "/" + c.name,
                                               stage3::kGemvInt4Op, c.flaw, {DType::bf16});
    entry.min_compute_capability = 80;
    const stage3::Int4Flaw kind = c.kind;
    entry.supports = [kind](const Problem& p) -> std::string {
      // Rung 01's own limit on rows: the flawed copies launch its kernel, which refuses more.
      if (std::string error = stage3::gemv_int4_rows_error(p, stage3::kInt4GemvMaxRows); !error.empty()) return error;
      if (kind == stage3::Int4Flaw::next_group_scales && stage3::gemv_int4_group_size(p) >= 128)
        return "a chunk of 128 weights holds one group at this group size: there is no next group to read";
      return "";
    };
    entry.launch = [kind](const Problem& problem, Operands& operands, cudaStream_t stream) {
      stage3::gemv_int4_01_flawed(stage3::gemv_int4_args(problem, operands), kind, stream);
    };
    registry.add_kernel(std::move(entry));
  }
  KernelEntry batch = negative_control_entry(std::string("stage3/") + stage3::kGemvInt4Op + "/" + kSwappedZerosName,
                                             stage3::kGemvInt4Op, kSwappedZerosFlaw, {DType::bf16});
  batch.min_compute_capability = 80;
  batch.supports = [](const Problem& p) -> std::string {
    if (std::string error = stage3::gemv_int4_shape_error(p); !error.empty()) return error;
    if (stage3::gemv_int4_group_size(p) < 128) return "the control is built for group sizes of 128 and more";
    return "";
  };
  auto rung = std::make_shared<stage3::Int4BatchRung>(&stage3::gemv_int4_03_swapped_zero_points,
                                                      &stage3::gemv_int4_03_ctas_per_sm);
  batch.launch = [rung](const Problem& problem, Operands& operands, cudaStream_t stream) {
    rung->run(stage3::gemv_int4_args(problem, operands), stream);
  };
  registry.add_kernel(std::move(batch));
}

}  // namespace kc::testing
