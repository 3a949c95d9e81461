#include "pact/core/simd_dispatch.hpp"

#include <algorithm>
#include <mutex>

namespace pact::simd {

namespace {
struct Registry {
  std::mutex mutex;
  std::vector<Family> families;
};
Registry& registry() {
  static Registry r;
  return r;
}
}  // namespace

void register_family(const Family& family) {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  r.families.push_back(family);
}

std::vector<Family> families() {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  std::vector<Family> out = r.families;
  std::sort(out.begin(), out.end(), [](const Family& a, const Family& b) { return a.name < b.name; });
  return out;
}

}  // namespace pact::simd
