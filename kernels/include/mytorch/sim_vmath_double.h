// Double math for the float forms that compute in double (Note [lgamma in float] and Note [pow in float] in
// ops_math.h), a companion of sim_vmath.h (Note [Sim vector math]) kept apart from it:
// ops_math.h includes this file, and every kernel that includes ops_math.h would otherwise take sim_vmath.h's float
// declarations too.
#pragma once

// exp, log and sin under names of their own, declared with SIMD variants in the AVX2 and AVX-512 variants (the asm
// label binds them to libm's symbols, so a vectorised loop calls _ZGVdN4v_log or _ZGVeN8v_log, the scalar
// remainder libm's log). The float64 functors keep std::exp and the rest, whose declarations carry no SIMD
// variant, so float64 results stay the scalar libm's. Elsewhere (the baseline variant, CUDA) the plain functions.
#if defined(MT_SIM_ISA_AVX2) && MT_SIM_VMATH && !defined(__CUDACC__)
#define MT_VMATH_DOUBLE(name) \
  __attribute__((simd("notinbranch"), const)) double mt_vmath_##name(double) noexcept __asm__(#name);
extern "C" {
MT_VMATH_DOUBLE(exp)
MT_VMATH_DOUBLE(log)
MT_VMATH_DOUBLE(sin)
}
#undef MT_VMATH_DOUBLE
#else
#include <cmath>

#include "mytorch/macros.h"
MT_HOST_DEVICE inline double mt_vmath_exp(double x) { return std::exp(x); }
MT_HOST_DEVICE inline double mt_vmath_log(double x) { return std::log(x); }
MT_HOST_DEVICE inline double mt_vmath_sin(double x) { return std::sin(x); }
#endif
