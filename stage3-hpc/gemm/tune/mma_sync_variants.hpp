// The tile configurations of rung 03's kernel that kc-mma-sync-tune times and the GPU tests
// check (host side: shapes, names and one launch per configuration; the kernels are instantiated
// in mma_sync_variants.cu).
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "gemm_layout.hpp"
#include "hgemm.hpp"
#include "kc/common/check.hpp"

namespace kc::stage3 {

struct MmaSyncVariant {
  MmaSyncShape shape;
  void (*launch)(const HgemmArgs& args, cudaStream_t stream);

  std::string name() const;         // "128x256 w2x4 s3": block tile, warps (M x N), stages
  std::string config_line() const;  // the line of 03_cp_async.cuh that makes rung 03 run it
  // Whether a GPU offering `smem_per_block_optin` bytes per block can run it (an A100 offers
  // 163 KiB: the 4-stage 128 x 256 tiles need H100/H200).
  bool fits(long long smem_per_block_optin) const { return shape.smem_bytes() <= smem_per_block_optin; }
  // Runs it once on fresh operands of `problem` (an hgemm problem of `op`) and compares C
  // with the reference (kc::check_run: C poisoned when beta == 0).
  CheckOutcome check(const OpSpec& op, const Problem& problem, std::uint64_t seed, Context& context) const;
};

// Variant 0 is what rung 03 runs now (Rung03Config); then the other candidates, at most six in all.
const std::vector<MmaSyncVariant>& mma_sync_variants();

}  // namespace kc::stage3
