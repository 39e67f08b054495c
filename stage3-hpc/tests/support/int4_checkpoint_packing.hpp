// Test support: a 4-bit group weight's stored form (kc/stage3/int4_groups.hpp) packed into a GPTQ
// (v1, v2) or AWQ checkpoint's tensors, by the formulas of int4_groups.hpp written out here on
// their own, not through the reader's code: the stage-3 round trips and the engine's loader tests
// (which write these tensors into safetensors files) both use it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kc/stage3/int4_groups.hpp"

namespace kc::stage3::test_support {

struct PackedCheckpoint {
  std::vector<std::int32_t> qweight, qzeros;
  std::vector<std::uint16_t> scales;
  Int4CheckpointTensors tensors(int k, int n, int group_size) const {
    Int4CheckpointTensors t;
    t.qweight = qweight.data();
    t.qzeros = qzeros.data();
    t.scales = scales.data();
    t.k = k;
    t.n = n;
    t.group_size = group_size;
    return t;
  }
};

// q of row (output column) `column` at `kk` in the stored form.
inline int stored_q(const Int4GroupHost& w, int column, int kk) {
  const std::uint8_t byte = w.qweight[static_cast<std::size_t>(column) * static_cast<std::size_t>(w.k / 2) +
                                      static_cast<std::size_t>(kk / 2)];
  return kk % 2 == 0 ? byte & 15 : byte >> 4;
}

// The checkpoint's qweight ([K / 8, N] GPTQ, [K, N / 8] AWQ), qzeros [K / G, N / 8] and scales
// [K / G, N] of `w` (a GPTQ v1 zero point is stored minus one: w must have none of 0).
inline PackedCheckpoint pack_checkpoint(const Int4GroupHost& w, Int4CheckpointFormat format) {
  static constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  const int groups = w.k / w.group_size;
  const bool awq = format == Int4CheckpointFormat::awq;
  PackedCheckpoint p;
  p.qweight.assign(static_cast<std::size_t>(w.k) * static_cast<std::size_t>(w.n) / 8, 0);
  p.qzeros.assign(static_cast<std::size_t>(groups) * static_cast<std::size_t>(w.n) / 8, 0);
  p.scales.resize(static_cast<std::size_t>(groups) * static_cast<std::size_t>(w.n));
  const auto put = [](std::int32_t& word, int i, int value) {
    word = static_cast<std::int32_t>(static_cast<std::uint32_t>(word) | (static_cast<std::uint32_t>(value & 15) << (4 * i)));
  };
  for (int kk = 0; kk < w.k; ++kk)
    for (int column = 0; column < w.n; ++column) {
      if (awq) {
        // AWQ: row k, word column / 8, at the nibble whose slot in kAwqOrder names this column.
        for (int i = 0; i < 8; ++i)
          if (kAwqOrder[i] == column % 8)
            put(p.qweight[static_cast<std::size_t>(kk) * (w.n / 8) + column / 8], i, stored_q(w, column, kk));
      } else {
        // GPTQ: word row k / 8, column n, nibble k % 8.
        put(p.qweight[static_cast<std::size_t>(kk / 8) * w.n + column], kk % 8, stored_q(w, column, kk));
      }
    }
  for (int u = 0; u < groups; ++u)
    for (int column = 0; column < w.n; ++column) {
      const std::size_t entry = static_cast<std::size_t>(column) * groups + u;
      int i = column % 8;
      if (awq)
        for (int slot = 0; slot < 8; ++slot)
          if (kAwqOrder[slot] == column % 8) i = slot;
      put(p.qzeros[static_cast<std::size_t>(u) * (w.n / 8) + column / 8], i,
          w.zeros[entry] - (format == Int4CheckpointFormat::gptq_v1 ? 1 : 0));
      p.scales[static_cast<std::size_t>(u) * w.n + column] = w.scales[entry];
    }
  return p;
}

}  // namespace kc::stage3::test_support
