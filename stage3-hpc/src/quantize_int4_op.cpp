// The quantize_int4 op (kc/stage3/quantize_int4.hpp): operands, the host reference, problems, the
// public entry's checks, and the registration of its ladder.
#include "kc/stage3/quantize_int4.hpp"

#include <cuda_bf16.h>
#include <fmt/format.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <utility>

#include "kc/common/error.hpp"
#include "kc/common/op_builder.hpp"
#include "kc/stage3/gemv_int4.hpp"
#include "kc/stage3/register.hpp"

namespace kc::stage3 {
namespace {

std::int64_t rows_of(const Problem& p) { return p.dims[0]; }
std::int64_t k_of(const Problem& p) { return p.dims[1]; }
std::int64_t groups_of(const Problem& p) { return k_of(p) / gemv_int4_group_size(p); }

// x from the seed: uniform(-1, 1), with edge groups by their flat group index g: g % 61 == 5 all
// zeros, g % 67 == 7 one NaN, g % 71 == 9 one +Inf, g % 89 == 19 one -Inf, g % 73 == 11 every
// value times 2^-20, g % 79 == 13 every value times 3 x 10^6; and groups on a grid of their scale
// s = u / 8 (u = 1, 3, 5 or 6 by group): -8s and 7s first (so s is the group's scale and 8 its zero
// point), then k s / 2 for integers k in [-16, 14], whose quotients by s are halves — exact ties
// that rint rounds to even — when g % 7 == 3, and the same values one bf16 step closer to zero
// (just off the tie) when g % 7 == 4; the grid groups among the first 1024 only, so that a timed
// problem's groups are almost all random, as real weights are.
std::vector<__nv_bfloat16> draw_x(const Problem& p, std::uint64_t seed) {
  const int group_size = gemv_int4_group_size(p);
  std::vector<__nv_bfloat16> x(static_cast<std::size_t>(rows_of(p) * k_of(p)));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  std::uniform_int_distribution<int> half_steps(-16, 14);
  constexpr float kGridUnits[] = {1.f, 3.f, 5.f, 6.f};
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::size_t g = i / static_cast<std::size_t>(group_size);
    const std::size_t position = i % static_cast<std::size_t>(group_size);
    float v = uniform(rng);
    if (g < 1024 && (g % 7 == 3 || g % 7 == 4)) {
      const float s = kGridUnits[(g / 7) % 4] / 8.f;
      v = position == 0 ? -8.f * s : position == 1 ? 7.f * s : static_cast<float>(half_steps(rng)) * s / 2.f;
      if (g % 7 == 4 && position > 1 && v != 0.f) {
        __nv_bfloat16_raw raw = __float2bfloat16(v);  // exact: a few bits
        raw.x = static_cast<unsigned short>(raw.x - 1);  // one step toward zero
        x[i] = raw;
        continue;
      }
    }
    if (g % 61 == 5) v = 0.f;
    if (g % 67 == 7 && position == g % static_cast<std::size_t>(group_size)) v = std::numeric_limits<float>::quiet_NaN();
    if (g % 71 == 9 && position == 3 % static_cast<std::size_t>(group_size)) v = std::numeric_limits<float>::infinity();
    if (g % 89 == 19 && position == 5 % static_cast<std::size_t>(group_size)) v = -std::numeric_limits<float>::infinity();
    if (g % 73 == 11) v *= 0x1p-20f;
    if (g % 79 == 13) v *= 3e6f;
    x[i] = __float2bfloat16(v);
  }
  return x;
}

HostTensors host_reference(const Problem& p, const HostTensors& in) {
  const std::vector<double>& x = in.at("x");
  std::vector<float> values(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) values[i] = static_cast<float>(x[i]);  // bf16: exact
  const Int4GroupHost q = quantize_int4_groups_reference(values.data(), static_cast<int>(rows_of(p)),
                                                         static_cast<int>(k_of(p)), gemv_int4_group_size(p));
  const auto as_doubles = [](const std::uint8_t* bytes, std::size_t count) {
    std::vector<double> out(count);
    for (std::size_t i = 0; i < count; ++i) out[i] = static_cast<double>(static_cast<std::int8_t>(bytes[i]));
    return out;
  };
  HostTensors out;
  out["qweight"] = as_doubles(q.qweight.data(), q.qweight.size());
  out["scales"] = as_doubles(reinterpret_cast<const std::uint8_t*>(q.scales.data()), q.scales.size() * 2);
  out["zeros"] = as_doubles(q.zeros.data(), q.zeros.size());
  return out;
}

}  // namespace

std::string quantize_int4_shape_error(const Problem& p) { return int4_group_size_error(p, k_of(p)); }

QuantizeInt4Args quantize_int4_args(const Problem& p, Operands& o) {
  QuantizeInt4Args args;
  args.rows = rows_of(p);
  args.k = static_cast<int>(k_of(p));
  args.group_size = gemv_int4_group_size(p);
  args.x = o["x"].data<__nv_bfloat16>();
  args.qweight = reinterpret_cast<std::uint8_t*>(o["qweight"].raw());
  args.scales = reinterpret_cast<std::uint16_t*>(o["scales"].raw());
  args.zeros = reinterpret_cast<std::uint8_t*>(o["zeros"].raw());
  return args;
}

void check_quantize_int4_args(const QuantizeInt4Args& a) {
  check_int4_group_shape(a.rows, a.k, a.group_size, "quantize_int4");
  require(a.x != nullptr && a.qweight != nullptr && a.scales != nullptr && a.zeros != nullptr,
          "quantize_int4: x, qweight, scales and zeros must be non-null device addresses");
  require(reinterpret_cast<std::uintptr_t>(a.x) % 16 == 0 && reinterpret_cast<std::uintptr_t>(a.qweight) % 4 == 0,
          "quantize_int4: x must be 16-byte aligned and qweight 4-byte aligned (x at {}, qweight at {}): the kernel "
          "loads 16 bytes and stores 4 at a time",
          static_cast<const void*>(a.x), static_cast<const void*>(a.qweight));
  // At G = 32 a lane packs a whole group and stores its 16 bytes at once.
  require(a.group_size != 32 || reinterpret_cast<std::uintptr_t>(a.qweight) % 16 == 0,
          "quantize_int4: at group size 32 qweight must be 16-byte aligned (it is at {}): each group's 16 bytes are "
          "stored at once",
          static_cast<const void*>(a.qweight));
}

void quantize_int4_groups(const QuantizeInt4Args& args, cudaStream_t stream) {
  check_quantize_int4_args(args);
  // The fastest rung measured for each group size (stage-3 README, "The quantize's waits and its
  // long groups"): rung 04 up to 512 values a group, rung 06's CTA a group past that.
  if (int4_group_held_by_lanes(args.group_size))
    quantize_int4_04_corrected_quotient(args, stream);
  else
    quantize_int4_06_cta_per_long_group(args, stream);
}

OpSpec make_quantize_int4_op() {
  OpConfig op;
  op.name = kQuantizeInt4Op;
  op.description =
      "x [rows,K] bf16 -> 4-bit groups of G along K with a half scale and a 4-bit zero point each (GPTQ's min-max "
      "rule, round to nearest): qweight [rows,K/2], scales [rows,K/G], zeros [rows,K/G]";
  op.dim_names = {"rows", "K"};
  op.dtypes = {DType::bf16};
  op.params = {{"group_size", 128.0, "G: 32, 64 or a multiple of 128 that divides K"}};
  op.bound = Bound::memory;
  OperandSpec x = input("x", dims_at({0, 1}));
  x.initialize = [](const Problem& p, Tensor& t, std::uint64_t seed, cudaStream_t stream) {
    const std::vector<__nv_bfloat16> values = draw_x(p, seed);
    t.upload(values.data(), values.size() * sizeof(__nv_bfloat16), stream);
  };
  op.operands = {x, output("qweight", [](const Problem& p) { return Shape{rows_of(p), k_of(p) / 2}; }, DType::i8),
                 output("scales", [](const Problem& p) { return Shape{rows_of(p), 2 * groups_of(p)}; }, DType::i8),
                 output("zeros", [](const Problem& p) { return Shape{rows_of(p), groups_of(p)}; }, DType::i8)};
  op.host_reference = &host_reference;
  op.supports = &quantize_int4_shape_error;
  // Llama-3-8B's q/o (4096 x 4096), gate/up (14336 x 4096) and down (4096 x 14336) at G = 128; the
  // first at G = 32, 64 and 4096 (one group a row: the two-pass path).
  using P = ParamValues;
  for (const Shape& dims : std::vector<Shape>{{4096, 4096}, {14336, 4096}, {4096, 14336}}) op.bench.push_back({dims});
  for (const double g : {32.0, 64.0, 4096.0}) op.bench.push_back({{4096, 4096}, std::nullopt, P{{"group_size", g}}});
  // Every instance: G = 32, 64, 128, 256, 512 (values held in registers) and 384, 640, K (two
  // passes; rung 06: a CTA a group, 8320 past what it holds); odd row counts, one group, many
  // groups, a last CTA that ends inside a warp; and one refused (G does not divide K).
  const std::vector<std::pair<double, std::vector<Shape>>> conformance = {
      {32.0, {{1, 32}, {3, 96}, {17, 4128}, {1000, 96}}},
      {64.0, {{5, 192}, {127, 64}}},
      {128.0, {{7, 128}, {33, 4096}, {1, 1152}}},
      {256.0, {{3, 512}, {9, 768}}},
      {384.0, {{2, 1152}}},
      {512.0, {{4, 1024}}},
      {640.0, {{2, 1280}}},
      {4096.0, {{3, 4096}}},
      {8320.0, {{2, 8320}}},  // past the 8192 values rung 06 holds: its chunks past the eighth read twice
  };
  for (const auto& [g, shapes] : conformance)
    for (const Shape& dims : shapes) op.conformance.push_back({dims, std::nullopt, P{{"group_size", g}}});
  op.conformance.push_back({{5, 96}, std::nullopt, P{{"group_size", 64.0}}});
  op.copy_scratch = std::make_shared<CopyScratch>();
  return build_op(std::move(op));
}

std::vector<std::string> quantize_int4_refusals() {
  std::vector<std::string> labels;
  for (const Problem& problem : make_quantize_int4_op().conformance_problems)
    if (!quantize_int4_shape_error(problem).empty()) labels.push_back(problem.label());
  return labels;
}

void register_quantize_int4_kernels(Registry& registry) {
  if (!registry.has_op(kQuantizeInt4Op)) registry.add_op(make_quantize_int4_op());
  using Quantize = void (*)(const QuantizeInt4Args&, cudaStream_t);
  struct Rung {
    const char* name;
    int number;
    const char* summary;
    Quantize quantize;
  };
  const Rung rungs[] = {
      {"01_lanes_per_group", 1,
       "G / 8 lanes a group (16 from G = 128), 8 values a lane from one 16-byte load, the min and max folded by "
       "shuffles, 8 nibbles a lane stored as one word",
       &quantize_int4_01_lanes_per_group},
      {"02_reciprocal", 2,
       "one division a lane: each value w x (1 / scale) rounded by a fused add, the division only for a value near a "
       "tie; G / 32 lanes a group, four 16-byte chunks a lane",
       &quantize_int4_02_reciprocal},
      {"03_eight_chunks", 3,
       "rung 02 with eight 16-byte chunks a lane: G / 64 lanes a group, the per-group work (shuffles, three "
       "divisions) spread over 64 values",
       &quantize_int4_03_eight_chunks},
      {"04_corrected_quotient", 4,
       "rung 02 with each value's quotient corrected (q0 = w r, q = q0 + (w - q0 s) r: the rounded w / s) instead of "
       "tested for a tie: no branch, no rare path",
       &quantize_int4_04_corrected_quotient},
      {"05_next_group_in_flight", 5,
       "rung 04 on a grid the device holds at once: each lane walks groups a grid apart and loads its next group's "
       "chunks while it packs the current one",
       &quantize_int4_05_next_group_in_flight},
      {"06_cta_per_long_group", 6,
       "rung 05, with a CTA of 128 threads a group past 512 values: its chunks held in registers (read once up to "
       "8192 values), the range folded through shared memory",
       &quantize_int4_06_cta_per_long_group},
  };
  for (const Rung& r : rungs) {
    KernelEntry rung = rung_entry(kQuantizeInt4Op, r.name, r.number, r.summary, {DType::bf16}, "stage3-int4", 80);
    rung.constraints = "group_size 32, 64 or a multiple of 128, K % group_size == 0";
    rung.supports = &quantize_int4_shape_error;
    rung.refuses = quantize_int4_refusals();
    const Quantize quantize = r.quantize;
    rung.launch = [quantize](const Problem& problem, Operands& operands, cudaStream_t stream) {
      quantize(quantize_int4_args(problem, operands), stream);
    };
    registry.add_kernel(std::move(rung));
  }
}

}  // namespace kc::stage3
