// Vector math for the AVX2 variant of the sim hot loops (Note [Sim vector math]); the double functions the float
// forms call are sim_vmath_double.h's.
#pragma once

// Note [Sim vector math]
// The functors call std::exp, std::erf, std::tanh... (ops_math.h, ops_nn.h), one scalar call per element. In the
// AVX2 variant (Note [Sim ISA variants]) these declarations mark the C library's math functions as having SIMD
// variants, the OpenMP `declare simd` contract, so that GCC's vectoriser turns a dense loop over a functor into
// calls of glibc's libmvec (_ZGVdN8v_expf: 8 floats per call, within 4 ulp like the scalar libm; special values
// handled by libmvec itself) instead of a scalar call per element. One list here, not a vector form per op: every
// functor built on these functions vectorises where its loop does. Needs -fno-math-errno (a function that may set
// errno is not a pure function of its argument) and libmvec at link time; CMake defines MT_SIM_VMATH only when the
// toolchain links these symbols (glibc >= 2.35 for the list below), otherwise the loops keep the scalar calls.
// float only: float64 keeps the scalar libm, whose results the CPU's float64 kernels reproduce to the bit
// (test_training's float64 gradients compare bits; libmvec's double cos differs in the last place).
#if defined(MT_SIM_ISA_AVX2) && MT_SIM_VMATH

#define MT_VMATH_DECL(name) __attribute__((simd("notinbranch"))) float name##f(float) noexcept;

extern "C" {
MT_VMATH_DECL(exp)
MT_VMATH_DECL(exp2)
MT_VMATH_DECL(expm1)
MT_VMATH_DECL(log)
MT_VMATH_DECL(log2)
MT_VMATH_DECL(log10)
MT_VMATH_DECL(log1p)
MT_VMATH_DECL(sin)
MT_VMATH_DECL(cos)
MT_VMATH_DECL(tan)
MT_VMATH_DECL(sinh)
MT_VMATH_DECL(cosh)
MT_VMATH_DECL(tanh)
MT_VMATH_DECL(asin)
MT_VMATH_DECL(acos)
MT_VMATH_DECL(atan)
MT_VMATH_DECL(asinh)
MT_VMATH_DECL(acosh)
MT_VMATH_DECL(atanh)
MT_VMATH_DECL(erf)
MT_VMATH_DECL(erfc)
}

// two operands (atan2, hypot: glibc >= 2.35 as the list above). Not pow: libmvec's powf moved TorchTitan's
// qwen3 ep+converter losses (RoPE frequencies are a pow) outside the alignment rule, where the scalar powf keeps them.
#define MT_VMATH_DECL2(name) __attribute__((simd("notinbranch"))) float name##f(float, float) noexcept;
extern "C" {
MT_VMATH_DECL2(atan2)
MT_VMATH_DECL2(hypot)
}

#undef MT_VMATH_DECL2
#undef MT_VMATH_DECL
#endif
