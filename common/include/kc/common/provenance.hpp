// kc/common/provenance.hpp — where a published number came from: the date of the run and the
// commit of the source it ran. kc-bench's tables and the tuners' JSON both carry them.
#pragma once

#include <string>

namespace kc {

// "2026-12-01 17:22 UTC".
std::string utc_now();

// The source's commit: KC_GIT_COMMIT when set (a copy of the tree without .git, e.g. on a rented
// GPU, names its commit this way), otherwise `git describe --always --dirty --abbrev=12` in the
// source tree; "unknown" when neither answers. A tree with uncommitted changes ends in "-dirty".
std::string source_commit();

bool is_dirty_commit(const std::string& commit);

}  // namespace kc
