// The sim's row loops (Note [Sim row loops]): conversion of a row to opmath and back, and sums, maxima and dot
// products over contiguous rows in a fixed lane order. Compiled into each ISA variant (Note [Sim ISA variants]).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "mytorch/sim_isa.h"

#if defined(MT_SIM_ISA_AVX2)
#include <immintrin.h>
#endif

namespace mytorch::sim::MT_SIM_ISA_NS::vec {

// Note [Sim row loops]
// The sim kernels that work on rows (softmax, norms, losses, attention, optimizers) share these loops instead of
// writing a vector form each: a row is first converted to its opmath type in a buffer (in the AVX2 variant half with
// F16C and bfloat16 with integer shifts, 8 per step, 16 in the AVX-512 compile: the same bits as c10's
// conversions), then summed, maximised or dotted in kLanes interleaved lanes combined by a fixed halving tree. The lane order depends on the length only, so a
// row's result does not depend on the thread that computes it (Note [Sim parallelism]), and the lanes are what
// lets the compiler keep them in vector registers (a single accumulator is a dependency chain it may not
// reorder). Error: like a pairwise sum of kLanes leaves, n / kLanes additions each.
constexpr int kLanes = 32;

// d[0, n) := s[0, n) in A (the opmath type).
template <typename T, typename A>
inline void to_opmath(const T* s, A* d, int64_t n) {
  if constexpr (std::is_same_v<T, A>) {
    std::memcpy(d, s, static_cast<size_t>(n) * sizeof(A));
  } else {
    int64_t i = 0;
#if defined(MT_SIM_ISA_AVX512)
    if constexpr (std::is_same_v<T, c10::Half> && std::is_same_v<A, float>) {
      for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(d + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i))));
    }
    if constexpr (std::is_same_v<T, c10::BFloat16> && std::is_same_v<A, float>) {
      for (; i + 16 <= n; i += 16) {
        const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i)));
        _mm512_storeu_ps(d + i, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
      }
    }
#endif
#if defined(MT_SIM_ISA_AVX2)
    if constexpr (std::is_same_v<T, c10::Half> && std::is_same_v<A, float>) {
      for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
    }
    if constexpr (std::is_same_v<T, c10::BFloat16> && std::is_same_v<A, float>) {
      for (; i + 8 <= n; i += 8) {  // the bits in the upper half of a float
        const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
        _mm256_storeu_ps(d + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
      }
    }
#endif
    for (; i < n; ++i) d[i] = static_cast<A>(s[i]);
  }
}

// The row s[0, n) in A: s itself when T is A, else converted into buf.
template <typename T, typename A>
inline const A* as_opmath(const T* s, A* buf, int64_t n) {
  if constexpr (std::is_same_v<T, A>) return s;
  else {
    to_opmath(s, buf, n);
    return buf;
  }
}

// d[0, n) := s[0, n) rounded to T (to nearest even, as c10's conversions: the same bits).
template <typename A, typename T>
inline void from_opmath(const A* s, T* d, int64_t n) {
  if constexpr (std::is_same_v<T, A>) {
    std::memcpy(d, s, static_cast<size_t>(n) * sizeof(A));
  } else {
    int64_t i = 0;
#if defined(MT_SIM_ISA_AVX512)
    if constexpr (std::is_same_v<T, c10::Half> && std::is_same_v<A, float>) {
      for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
    }
    if constexpr (std::is_same_v<T, c10::BFloat16> && std::is_same_v<A, float>) {
      // the AVX2 loop's rounding below, 16 at a time; vpmovdw packs (every value fits in 16 bits)
      const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1), qnan = _mm512_set1_epi32(0x7fc0);
      for (; i + 16 <= n; i += 16) {
        const __m512 f = _mm512_loadu_ps(s + i);
        const __m512i b = _mm512_castps_si512(f);
        const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(b, 16), one);
        __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(b, bias), lsb), 16);
        r = _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q), r, qnan);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), _mm512_cvtepi32_epi16(r));
      }
    }
#endif
#if defined(MT_SIM_ISA_AVX2)
    if constexpr (std::is_same_v<T, c10::Half> && std::is_same_v<A, float>) {
      for (; i + 8 <= n; i += 8)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
    }
    if constexpr (std::is_same_v<T, c10::BFloat16> && std::is_same_v<A, float>) {
      // c10's rounding: to nearest even (bits + 0x7fff + the kept lowest bit), every NaN to 0x7fc0
      const __m256i bias = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1), qnan = _mm256_set1_epi32(0x7fc0);
      for (; i + 8 <= n; i += 8) {
        const __m256 f = _mm256_loadu_ps(s + i);
        const __m256i b = _mm256_castps_si256(f);
        const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), one);
        __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(b, bias), lsb), 16);
        r = _mm256_blendv_epi8(r, qnan, _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q)));
        const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), _mm256_castsi256_si128(packed));
      }
    }
#endif
    for (; i < n; ++i) d[i] = static_cast<T>(s[i]);
  }
}

// One bfloat16 as bits, to float and back with c10's rounding (to nearest even, every NaN to 0x7fc0): the scalar
// form of the vector conversions above, for loops GCC vectorises whole (Note [Sim AVX-512 dense loops]).
inline float bf16_bits_to_float(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline uint16_t float_to_bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return f != f ? uint16_t(0x7fc0) : static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// The L lanes combined: lane k with lane k + w, w = L/2, ..., 1 (each width a constant: the steps unroll into
// vector operations).
template <int L = kLanes, typename A, typename F>
inline A fold(A* lane, F f) {
  if constexpr (L > 1) {
    for (int k = 0; k < L / 2; ++k) lane[k] = f(lane[k], lane[k + L / 2]);
    return fold<L / 2>(lane, f);
  }
  return lane[0];
}

// Rows up to kShort elements are summed in sequence instead: as the CPU's scalar loops add them (the bits of short
// rows, the alignment suite's samples, stay the CPU's), and lanes would mostly add zeros there.
constexpr int64_t kShort = 2 * kLanes;

// Rows longer than kBlock are summed a block at a time and the blocks' sums added: each lane's running sum adds at
// most kBlock / kLanes terms, however long the row (a 9.4M-element LayerNorm row summed in 32 float lanes was
// 5.4e-5 off, the CPU's cascade sum 2.4e-7; PyTorch's test_LayerNorm_numeric). Fixed by the sizes: deterministic.
constexpr int64_t kBlock = 1 << 15;

// L lanes: kLanes by default; a row of a few vectors (softmax's backward, rows of 17..64) takes 8 (its tail and
// fold of 32 lanes cost more than the row).
template <typename A, int L = kLanes, typename G>
inline A lane_sum(int64_t b, int64_t n, const G& g) {
  A lane[L] = {};
  int64_t i = 0;
  for (; i + L <= n; i += L)
    for (int k = 0; k < L; ++k) lane[k] += g(b + i + k);
  for (int k = 0; i + k < n; ++k) lane[k] += g(b + i + k);
  return fold<L>(lane, [](A x, A y) { return x + y; });
}

// sum over i of g(i), in lanes (g reads the row: a value, a product, a square...).
template <typename A, typename G>
inline A sum_of(int64_t n, G g) {
  if (n <= kShort) {
    A s = 0;
    for (int64_t i = 0; i < n; ++i) s += g(i);
    return s;
  }
  if (n <= kBlock) return lane_sum<A>(0, n, g);
  A total = 0;
  for (int64_t b = 0; b < n; b += kBlock) total += lane_sum<A>(b, n - b < kBlock ? n - b : kBlock, g);
  return total;
}

// sum over i of g(i) in lanes at every length: a row of up to kShort in 8 lanes, where sum_of adds it in sequence
// (the CPU's order for its scalar short rows). For the kernels that keep no CPU order on short rows, where a chain of
// n dependent additions is only slower (softmax's backward over rows of 60 at 0.2x the CPU, batch norm's statistics
// over planes of 60 at 0.4x).
template <typename A, typename G>
inline A lanes_sum_of(int64_t n, G g) {
  return n <= kShort ? lane_sum<A, 8>(0, n, g) : sum_of<A>(n, g);
}

template <typename A>
inline A sum(const A* x, int64_t n) {
  return sum_of<A>(n, [x](int64_t i) { return x[i]; });
}

template <typename A>
inline A dot(const A* x, const A* y, int64_t n) {
  return sum_of<A>(n, [x, y](int64_t i) { return x[i] * y[i]; });
}

// The maximum, NaN if any element is NaN (as ATen's max reductions). 64 lanes: a select is a longer dependency
// chain than an add.
template <typename A>
inline A max_nan(const A* x, int64_t n) {
  constexpr int L = 2 * kLanes;
  auto mx = [](A a, A b) { return (b != b || b > a) ? b : a; };
  A lane[L];
  for (int k = 0; k < L; ++k) lane[k] = -INFINITY;
  int64_t i = 0;
  for (; i + L <= n; i += L)
    for (int k = 0; k < L; ++k) lane[k] = mx(lane[k], x[i + k]);
  for (int k = 0; i + k < n; ++k) lane[k] = mx(lane[k], x[i + k]);
  return fold<L>(lane, mx);
}

// out[i] = exp(x[i] - shift) for rows of scores (softmax, attention), whose masked entries are -inf; out may be x.
// A float result below the normal range (x - shift < -87.3, -inf included) is 0: libmvec computes such lanes on a
// slow scalar path (a causally masked softmax ran 4x slower), and a probability below 1.2e-38 is 0 within any
// tolerance. Three loops through memory: written as one, the compiler proves the clamp redundant under the final
// select and drops it. (A polynomial exp of our own, Cody-Waite reduction and a degree-7 Taylor polynomial, measured
// 0.51 ns an element against libmvec's 0.29: libmvec stays.)
// The C library's scalar exp, through a pointer the vectoriser cannot replace by libmvec's (Note [Sim vector math]):
// for short rows, whose bits should be the CPU's scalar loops'.
template <typename A>
inline A scalar_exp(A v) {
  if constexpr (std::is_same_v<A, float>) {
    static float (*volatile const f)(float) = &::expf;
    return f(v);
  } else {
    return std::exp(v);
  }
}

template <typename A>
inline void exp_shifted(const A* x, A shift, A* out, int64_t n) {
  if (n <= kShort) {
    for (int64_t i = 0; i < n; ++i) out[i] = scalar_exp(x[i] - shift);
    return;
  }
  if constexpr (std::is_same_v<A, float>) {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] - shift < -87.3f ? -87.3f : x[i] - shift;
    for (int64_t i = 0; i < n; ++i) out[i] = std::exp(out[i]);
    for (int64_t i = 0; i < n; ++i) out[i] = out[i] < 1.3e-38f ? 0.f : out[i];
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = std::exp(x[i] - shift);
  }
}

// Copies n elements of es bytes from src to dst, stepping ss and ds bytes: memmove when both are contiguous, else
// typed loads and stores of the element's width (the copy kernels, gathers).
inline void copy_elems(char* dst, int64_t ds, const char* src, int64_t ss, int64_t n, int64_t es) {
  if (ds == es && ss == es) {
    std::memmove(dst, src, static_cast<size_t>(n * es));
    return;
  }
  auto run = [&](auto tag) {
    using W = decltype(tag);
    constexpr int64_t w = sizeof(W);
    if (ds == w && ss == -w) {  // a reversed run (flip of the last dimension): constant strides vectorise
      for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * w, src - i * w, sizeof(W));
      return;
    }
    for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * ds, src + i * ss, sizeof(W));
  };
  switch (es) {
    case 1: run(uint8_t{}); break;
    case 2: run(uint16_t{}); break;
    case 4: run(uint32_t{}); break;
    case 8: run(uint64_t{}); break;
    default:
      for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * ds, src + i * ss, static_cast<size_t>(es));
  }
}

} // namespace mytorch::sim::MT_SIM_ISA_NS::vec
