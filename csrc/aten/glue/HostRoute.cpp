// See HostRoute.h, Note [Sim host route].
#include "csrc/aten/glue/HostRoute.h"

#include <atomic>

#include "csrc/core/Graph.h"
#include "csrc/core/Runtime.h"

namespace mytorch {
namespace {

constexpr int kFamilies = static_cast<int>(HostRoute::Count);
constexpr const char* kNames[kFamilies] = {"gemm", "grouped_gemm", "solver", "fft", "embedding_bag", "conv"};
std::atomic<int64_t> g_calls[kFamilies];

} // namespace

bool simHostRoute(HostRoute family) {
  if (!onSim()) return false;
  // Only the GEMMs record their host route (runOrRecord, Note [Graph capture]); the others compute at once.
  if (family != HostRoute::Gemm && capturing())
    refuseDuringCapture((std::string("the sim's host route for ") + kNames[static_cast<int>(family)]).c_str());
  g_calls[static_cast<int>(family)].fetch_add(1, std::memory_order_relaxed);
  return true;
}

std::map<std::string, int64_t> hostRouteStats() {
  std::map<std::string, int64_t> stats;
  for (int i = 0; i < kFamilies; ++i) {
    const int64_t n = g_calls[i].load(std::memory_order_relaxed);
    if (n) stats[kNames[i]] = n;
  }
  return stats;
}

void resetHostRouteStats() {
  for (auto& c : g_calls) c.store(0, std::memory_order_relaxed);
}

} // namespace mytorch
