// Which variant of the sim hot loops runs (Note [Sim ISA variants] in sim_isa.h).
#include <cstdlib>
#include <cstring>

#include "mytorch/sim_isa.h"

namespace mytorch::sim {

// Whether the AVX-512 dense loops run (built, supported, the AVX2 variant running, not capped). Declared where it
// is used (the elementwise engine's dispatch), not in sim_isa.h, which every sim unit includes.
bool sim_isa_avx512();

namespace {

// MYTORCH_SIM_ISA: baseline or avx2 caps the variant; unset (or avx512) lets cpuid decide.
bool capped_at(const char* name) {
  const char* v = std::getenv("MYTORCH_SIM_ISA");
  if (v == nullptr) return false;
  if (std::strcmp(name, "avx2") == 0) return std::strcmp(v, "baseline") == 0 || std::strcmp(v, "avx2") == 0;
  return std::strcmp(v, "baseline") == 0;
}

bool detect_avx2() {
#if MT_SIM_HAVE_AVX2
  if (capped_at("baseline")) return false;
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#else
  return false;
#endif
}

bool detect_avx512() {
#if MT_SIM_HAVE_AVX512
  if (!sim_isa_avx2() || capped_at("avx2")) return false;
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#else
  return false;
#endif
}

} // namespace

bool sim_isa_avx2() {
  static const bool on = detect_avx2();
  return on;
}

bool sim_isa_avx512() {
  static const bool on = detect_avx512();
  return on;
}

const char* sim_isa_name() { return sim_isa_avx512() ? "avx512" : sim_isa_avx2() ? "avx2" : "baseline"; }

} // namespace mytorch::sim
