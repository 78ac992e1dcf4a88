// Which variant of the sim hot loops runs (Note [Sim ISA variants] in sim_isa.h).
#include <cstdlib>
#include <cstring>

#include "mytorch/sim_isa.h"

namespace mytorch::sim {
namespace {

bool detect() {
#if MT_SIM_HAVE_AVX2
  const char* v = std::getenv("MYTORCH_SIM_ISA");
  if (v != nullptr && std::strcmp(v, "baseline") == 0) return false;
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#else
  return false;
#endif
}

} // namespace

bool sim_isa_avx2() {
  static const bool on = detect();
  return on;
}

const char* sim_isa_name() { return sim_isa_avx2() ? "avx2" : "baseline"; }

} // namespace mytorch::sim
