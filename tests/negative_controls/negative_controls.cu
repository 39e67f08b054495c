// The deliberately wrong kernels. Each is the naive SGEMM with exactly one flaw, so a failure can
// only come from that flaw.
#include <cuda_fp16.h>

#include <cmath>

#include "kc/common/gemm.hpp"
#include "kc/stage1/sgemm.hpp"
#include "kc/stage1/register.hpp"
#include "kc/testing/negative_controls.hpp"

namespace kc::testing {
namespace {

using stage1::SgemmArgs;

enum class Flaw { none, skips_edge_tile, rounds_through_fp16, drops_last_k, reads_c_when_beta_zero };

constexpr int kTile = 16;

template <Flaw flaw>
__global__ void flawed_sgemm_kernel(SgemmArgs args) {
  const int row = blockIdx.y * kTile + threadIdx.y;
  const int col = blockIdx.x * kTile + threadIdx.x;
  if (row >= args.m || col >= args.n) return;
  if (flaw == Flaw::skips_edge_tile) {
    // Forgets the partial tile at the bottom and right edges.
    const bool full_rows = (blockIdx.y + 1) * kTile <= static_cast<unsigned>(args.m);
    const bool full_cols = (blockIdx.x + 1) * kTile <= static_cast<unsigned>(args.n);
    if (!full_rows || !full_cols) return;
  }
  const int k_end = flaw == Flaw::drops_last_k ? args.k - 1 : args.k;
  float acc = 0.f;
  for (int p = 0; p < k_end; ++p) {
    float a = args.a[row * args.lda + p];
    float b = args.b[p * args.ldb + col];
    if (flaw == Flaw::rounds_through_fp16) {
      a = __half2float(__float2half(a));
      b = __half2float(__float2half(b));
    }
    acc += a * b;
  }
  float* c = &args.c[row * args.ldc + col];
  if (flaw == Flaw::reads_c_when_beta_zero)
    *c = args.alpha * acc + args.beta * *c;  // NaN * 0 is NaN: C must not be read when beta == 0
  else
    *c = args.beta == 0.f ? args.alpha * acc : args.alpha * acc + args.beta * *c;
}

__global__ void plant_nan_kernel(SgemmArgs args) {
  args.c[(args.m / 2) * args.ldc + args.n / 2] = nanf("");
}

template <Flaw flaw>
void launch_flawed(const SgemmArgs& args, cudaStream_t stream) {
  const dim3 block(kTile, kTile);
  const dim3 grid((args.n + kTile - 1) / kTile, (args.m + kTile - 1) / kTile);
  flawed_sgemm_kernel<flaw><<<grid, block, 0, stream>>>(args);
}

void writes_nothing(const SgemmArgs&, cudaStream_t) {}

void returns_nan(const SgemmArgs& args, cudaStream_t stream) {
  launch_flawed<Flaw::none>(args, stream);
  plant_nan_kernel<<<1, 1, 0, stream>>>(args);
}

struct Control {
  const char* name;
  const char* flaw;
  void (*launch)(const SgemmArgs&, cudaStream_t);
};

const Control kControls[] = {
    {"nc_writes_nothing", "launches nothing: C keeps its NaN poison", &writes_nothing},
    {"nc_skips_edge_tile", "skips the last partial tile in M and N",
     &launch_flawed<Flaw::skips_edge_tile>},
    {"nc_rounds_through_fp16", "rounds A and B to fp16 before multiplying",
     &launch_flawed<Flaw::rounds_through_fp16>},
    {"nc_returns_nan", "correct, then writes NaN into one element", &returns_nan},
    {"nc_drops_last_k", "stops the K loop one step early", &launch_flawed<Flaw::drops_last_k>},
    {"nc_reads_c_when_beta_zero", "computes beta*C even when beta == 0 (NaN*0 = NaN)",
     &launch_flawed<Flaw::reads_c_when_beta_zero>},
};

}  // namespace

std::vector<NegativeControl> negative_controls() {
  std::vector<NegativeControl> list;
  for (const Control& c : kControls) list.push_back({std::string("stage1/sgemm/") + c.name, c.flaw});
  return list;
}

void register_negative_controls(Registry& registry) {
  if (!registry.has_op("sgemm")) registry.add_op(stage1::make_sgemm_op());
  for (const Control& c : kControls) {
    KernelEntry entry;
    entry.id = std::string("stage1/sgemm/") + c.name;
    entry.op = "sgemm";
    entry.rung = 0;
    entry.idea = std::string("NEGATIVE CONTROL: ") + c.flaw;
    entry.report = "negative-controls";
    const auto launch = c.launch;
    entry.launch = [launch](const Problem& problem, Operands& operands, cudaStream_t stream) {
      launch(gemm_args<float>(problem, operands, BLayout::k_by_n), stream);
    };
    registry.add_kernel(std::move(entry));
  }
}

}  // namespace kc::testing
