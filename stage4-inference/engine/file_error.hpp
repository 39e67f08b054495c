// engine/file_error.hpp (private to the readers) — how a malformed model file is reported.
#pragma once

#include <cstdint>
#include <string>

#include "kc/common/error.hpp"

namespace kc::engine::detail {

// kc::Error "<path>: at byte <offset>: <what>", the form every reader uses, so a learner can open
// the file in a hex viewer at the place named.
[[noreturn]] inline void throw_file_error(const std::string& path, std::uint64_t offset,
                                          const std::string& what) {
  throw Error(fmt::format("{}: at byte {}: {}", path, offset, what));
}

}  // namespace kc::engine::detail
