// Instruction-set variants of the sim runtime's hot loops (Note [Sim ISA variants]).
#pragma once

// Note [Sim ISA variants]
// The sim build compiles its hot translation units (kernels/sim/elementwise.cpp, reduce.cpp) twice: a portable
// baseline (x86-64 SSE2; the strided loops, parallel) and, on x86-64 with GCC or Clang, an AVX2 + FMA + F16C
// variant with the dense fast paths (vectorised loops over contiguous floating operands).
// Each compile puts its code in its own namespace (sim::base, sim::avx2: MT_SIM_ISA_NS) and the baseline compile
// defines the entry point, which picks the variant once per process: cpuid, unless MYTORCH_SIM_ISA=baseline
// (sim_isa_name() says which runs). The AVX2 objects are built with hidden visibility and their hidden symbols made
// local (ld -r, objcopy --localize-hidden: CMakeLists.txt), so that no inline function or template instantiated
// there with AVX2 instructions can stand in for the baseline's copy at link time. Every flavour has both (the same
// objects, shared through ccache: Note [One glue for every flavour], launch.h); MYTORCH_SIM_ISA=baseline picks the
// portable one.
//
// A third compile, AVX-512 (F, BW, VL, DQ; 512-bit vectors), holds only the elementwise engine's dense loops over
// float, half and bfloat16 operands (kernels/sim/elementwise.cpp, Note [Sim AVX-512 dense loops]): twice the lanes
// per instruction, libmvec's 16-wide math (_ZGVeN16v_expf...) and 16-wide conversions. It defines MT_SIM_ISA_AVX2
// too (its code is a superset: every AVX2 path compiles there), and the entry points it does not hold stay the AVX2
// variant's. cpuid picks it where the CPU has those four extensions, unless MYTORCH_SIM_ISA is avx2 or baseline.
#if defined(MT_SIM_ISA_AVX512)
#define MT_SIM_ISA_NS avx512
#define MT_SIM_FAST 1
#define MT_SIM_ENTRY __attribute__((visibility("default")))
#elif defined(MT_SIM_ISA_AVX2)
#define MT_SIM_ISA_NS avx2
#define MT_SIM_FAST 1
#define MT_SIM_ENTRY __attribute__((visibility("default")))
#else
#define MT_SIM_ISA_NS base
#define MT_SIM_FAST 0
#define MT_SIM_ENTRY
#endif

namespace mytorch::sim {
// Whether the AVX2 variant runs in this process (built, supported by the CPU, not overridden).
bool sim_isa_avx2();
const char* sim_isa_name();  // "avx512" (the AVX-512 dense loops run), "avx2" or "baseline"
} // namespace mytorch::sim

// In the baseline compile: the entry point sim::name, which calls the variant the CPU runs.
#if defined(MT_SIM_ISA_AVX2)
#define MT_SIM_DISPATCH(R, name, params, args)
#elif MT_SIM_HAVE_AVX2
#define MT_SIM_DISPATCH(R, name, params, args) \
  namespace avx2 {                             \
  R name params;                               \
  }                                            \
  R name params { return sim_isa_avx2() ? avx2::name args : base::name args; }
#else
#define MT_SIM_DISPATCH(R, name, params, args) \
  R name params { return base::name args; }
#endif
