// The environment every core test runs in: the engine's persistent cache is
// off, so that compile counts do not depend on what an earlier run of the
// tests left on disk (disk_cache_test drives the tiers on directories of its
// own).
#include <cstdlib>

namespace {
const bool kNoDiskCache = [] { return setenv("TORCH_PJRT_CACHE_DIR", "off", 1) == 0; }();
}  // namespace
