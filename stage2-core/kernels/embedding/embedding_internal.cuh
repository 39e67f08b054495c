// embedding_internal.cuh — the id check both embedding rungs make before touching the table.
#pragma once

#include <cstdint>

#include "kc/stage2/embedding.hpp"

namespace kc::stage2 {

// True when `id` indexes a table row. Otherwise records `position` (the lowest bad position wins:
// the record starts at -1, i.e. 0xffffffff as unsigned) and the caller must not read the table.
__device__ __forceinline__ bool token_id_valid(int id, int vocab, std::int64_t position,
                                               int* error_record, bool records) {
  // One unsigned comparison rejects negative ids too.
  if (static_cast<unsigned>(id) < static_cast<unsigned>(vocab)) return true;
  if (records) atomicMin(reinterpret_cast<unsigned*>(error_record), static_cast<unsigned>(position));
  return false;
}

}  // namespace kc::stage2
