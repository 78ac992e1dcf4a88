// Sim twin of cuda/copy.cu: strided copy with conversion, and fill, in runs split over the threads (Note [Sim
// parallelism]). Compiled for each ISA variant (Note [Sim ISA variants]): conversions vectorise, half with F16C.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "mytorch/copy.h"
#include "mytorch/parallel.h"
#include "mytorch/sim_isa.h"
#include "mytorch/sim_vec.h"
#include "mytorch/sim_walk.h"

namespace mytorch::sim::MT_SIM_ISA_NS {
namespace {

// Every element in runs along dimension 0 (the shared walker, Note [Sim strided walks]), the elements split over the
// threads: inner(offset0, offset1, count, stride0, stride1), each run writing its own elements.
template <typename Inner>
void for_each_run(const StridedShape& s, const int64_t* st0, const int64_t* st1, Inner inner) {
  if (s.numel == 0) return;
  const int64_t* st[2] = {st0, st1};
  par::parallel_for(s.numel, par::grain_for(1), [&](int64_t b, int64_t e) {
    walk::for_each_run(s, st, 2, b, e, [&](const int64_t* off, int64_t n, const int64_t* in) {
      inner(off[0], off[1], n, in[0], in[1]);
    });
  });
}

template <typename To, typename From>
void cast_run(char* dst, const char* src, int64_t n, int64_t sd, int64_t ss) {
  const bool aligned =
      reinterpret_cast<uintptr_t>(dst) % alignof(To) == 0 && reinterpret_cast<uintptr_t>(src) % alignof(From) == 0;
  if (aligned && sd == int64_t(sizeof(To)) && ss == int64_t(sizeof(From))) {
    To* d = reinterpret_cast<To*>(dst); // contiguous run: a typed loop the compiler vectorises
    const From* s = reinterpret_cast<const From*>(src);
    if constexpr (std::is_same_v<To, float> && (std::is_same_v<From, c10::Half> || std::is_same_v<From, c10::BFloat16>))
      vec::to_opmath(s, d, n);  // F16C for half (Note [Sim row loops])
    else if constexpr (std::is_same_v<From, float> &&
                       (std::is_same_v<To, c10::Half> || std::is_same_v<To, c10::BFloat16>))
      vec::from_opmath(s, d, n);
    else
      for (int64_t i = 0; i < n; ++i) d[i] = mt_cast<To, From>(mt_load(s + i));
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    From v;
    if constexpr (std::is_same_v<From, bool>) v = mt_load(reinterpret_cast<const bool*>(src + i * ss));
    else std::memcpy(&v, src + i * ss, sizeof(From));
    To out = mt_cast<To, From>(v);
    std::memcpy(dst + i * sd, &out, sizeof(To));
  }
}

// A transposing copy in tiles (Note [Sim strided walks]): tile(d, s, n0, n1) copies the n0 x n1 tile at d and s
// (dimension 0 inner). False: the layout is not one for tiles.
template <typename Tile>
bool tiled(const CopyArgs& p, char* dst, const char* src, const Tile& tile) {
  const int64_t* st[2] = {p.dst.strides, p.src.strides};
  const int es[2] = {p.dst.elem_size, p.src.elem_size};
  if (!walk::wants_tiles(p.shape, st, es, 2)) return false;
  walk::for_each_tile(p.shape, st, 2, 1,
                      [&](const int64_t* off, int64_t n0, int64_t n1) { tile(dst + off[0], src + off[1], n0, n1); });
  return true;
}

// Tiles copied one element at a time: elem(d, s) copies (or converts) one element.
template <typename Elem>
bool tiled_elems(const CopyArgs& p, char* dst, const char* src, Elem elem) {
  const int64_t d0 = p.dst.strides[0], d1 = p.dst.strides[1], s0 = p.src.strides[0], s1 = p.src.strides[1];
  return tiled(p, dst, src, [&](char* d, const char* s, int64_t n0, int64_t n1) {
    for (int64_t j = 0; j < n1; ++j)
      for (int64_t i = 0; i < n0; ++i) elem(d + j * d1 + i * d0, s + j * s1 + i * s0);
  });
}

#if defined(MT_SIM_ISA_AVX2)
// Note [Transposing copy in registers]
// A tile read along rows 4 KiB apart (a 1024 x 1024 float transpose) puts all 32 of its lines in one L1 set, which
// holds 8 to 12: one element at a time through memcpy (the loop above) took 0.9 ms against the CPU's 0.4. Where the
// destination is contiguous along dimension 0 and the source along dimension 1, 8 x 8 blocks go through registers
// instead: 8 rows loaded, transposed by unpack/shuffle/permute, 8 columns stored (only moves: the bits are kept, NaN
// payloads included), so a block touches 8 source lines at a time.
inline void block8x8(char* d, int64_t ds, const char* s, int64_t ss, uint32_t) {
  __m256 r[8], t[8], u[8];
  for (int k = 0; k < 8; ++k) r[k] = _mm256_loadu_ps(reinterpret_cast<const float*>(s + k * ss));
  for (int k = 0; k < 8; k += 2) {
    t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
    t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
  }
  for (int k = 0; k < 8; k += 4) {
    u[k] = _mm256_shuffle_ps(t[k], t[k + 2], 0x44);
    u[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], 0xEE);
    u[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0x44);
    u[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0xEE);
  }
  for (int k = 0; k < 4; ++k) {
    _mm256_storeu_ps(reinterpret_cast<float*>(d + k * ds), _mm256_permute2f128_ps(u[k], u[k + 4], 0x20));
    _mm256_storeu_ps(reinterpret_cast<float*>(d + (k + 4) * ds), _mm256_permute2f128_ps(u[k], u[k + 4], 0x31));
  }
}
inline void block8x8(char* d, int64_t ds, const char* s, int64_t ss, uint16_t) {
  __m128i a[8], b[8], c[8];
  for (int k = 0; k < 8; ++k) a[k] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + k * ss));
  for (int k = 0; k < 8; k += 2) {
    b[k] = _mm_unpacklo_epi16(a[k], a[k + 1]);
    b[k + 1] = _mm_unpackhi_epi16(a[k], a[k + 1]);
  }
  for (int k = 0; k < 8; k += 4) {
    c[k] = _mm_unpacklo_epi32(b[k], b[k + 2]);
    c[k + 1] = _mm_unpackhi_epi32(b[k], b[k + 2]);
    c[k + 2] = _mm_unpacklo_epi32(b[k + 1], b[k + 3]);
    c[k + 3] = _mm_unpackhi_epi32(b[k + 1], b[k + 3]);
  }
  for (int k = 0; k < 4; ++k) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 2 * k * ds), _mm_unpacklo_epi64(c[k], c[k + 4]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + (2 * k + 1) * ds), _mm_unpackhi_epi64(c[k], c[k + 4]));
  }
}

// The tiles of a same-dtype copy of 2- or 4-byte elements whose destination is contiguous along dimension 0 and
// source along dimension 1, in 8 x 8 register blocks (edges element by element). False: not this layout.
template <typename W>
bool transposed_in_blocks(const CopyArgs& p, char* dst, const char* src) {
  constexpr int64_t w = sizeof(W);
  if (p.dst.strides[0] != w || p.src.strides[1] != w) return false;
  const int64_t d1 = p.dst.strides[1], s0 = p.src.strides[0];
  return tiled(p, dst, src, [&](char* d, const char* s, int64_t n0, int64_t n1) {
    const int64_t b0 = n0 / 8 * 8, b1 = n1 / 8 * 8;
    for (int64_t j = 0; j < b1; j += 8)
      for (int64_t i = 0; i < b0; i += 8) block8x8(d + i * w + j * d1, d1, s + i * s0 + j * w, s0, W{});
    for (int64_t j = 0; j < n1; ++j)
      for (int64_t i = j < b1 ? b0 : 0; i < n0; ++i) std::memcpy(d + i * w + j * d1, s + i * s0 + j * w, w);
  });
}
#endif

template <typename W>
struct CopyWord {
  void operator()(char* d, const char* s) const { std::memcpy(d, s, sizeof(W)); }
};

// A same-dtype copy whose runs along dimension 0 are shorter than 8 elements (unfold's windows of 3, a permute that
// ends in a short dimension): one walker call per run of dimension 1, copying its short rows in a two-level typed
// loop, instead of one call per run of a few elements (unfold_copy of 60^3 in windows of 3: 2.5x the CPU's time).
template <typename W>
bool short_runs(const CopyArgs& p, char* dst, const char* src) {
  const StridedShape& s = p.shape;
  if (s.ndim < 2 || s.sizes[0] >= 8 || s.numel == 0) return false;
  StridedShape outer;
  outer.ndim = s.ndim - 1;
  outer.numel = s.numel / s.sizes[0];
  int64_t dst_st[kMaxDims] = {}, src_st[kMaxDims] = {};
  for (int d = 1; d < s.ndim; ++d) {
    outer.sizes[d - 1] = s.sizes[d];
    dst_st[d - 1] = p.dst.strides[d];
    src_st[d - 1] = p.src.strides[d];
  }
  const int64_t n0 = s.sizes[0], d0 = p.dst.strides[0], s0 = p.src.strides[0];
  for_each_run(outer, dst_st, src_st, [&](int64_t od, int64_t os, int64_t n, int64_t d1, int64_t s1) {
    for (int64_t j = 0; j < n; ++j) {
      char* dr = dst + od + j * d1;
      const char* sr = src + os + j * s1;
      for (int64_t i = 0; i < n0; ++i) std::memcpy(dr + i * d0, sr + i * s0, sizeof(W));
    }
  });
  return true;
}

} // namespace

MT_SIM_ENTRY rt::Status copy(const CopyArgs& p, rt::Stream) {
  char* dst = static_cast<char*>(p.dst.data);
  const char* src = static_cast<const char*>(p.src.data);
  if (p.dst.dtype == p.src.dtype && p.dst.elem_size == p.src.elem_size) {
    const int es = p.dst.elem_size;
#if defined(MT_SIM_ISA_AVX2)
    if ((es == 4 && transposed_in_blocks<uint32_t>(p, dst, src)) ||
        (es == 2 && transposed_in_blocks<uint16_t>(p, dst, src)))
      return rt::Status::Success;
#endif
    if ((es == 1 && tiled_elems(p, dst, src, CopyWord<uint8_t>{})) ||
        (es == 2 && tiled_elems(p, dst, src, CopyWord<uint16_t>{})) ||
        (es == 4 && tiled_elems(p, dst, src, CopyWord<uint32_t>{})) ||
        (es == 8 && tiled_elems(p, dst, src, CopyWord<uint64_t>{})))
      return rt::Status::Success;
    if ((es == 1 && short_runs<uint8_t>(p, dst, src)) || (es == 2 && short_runs<uint16_t>(p, dst, src)) ||
        (es == 4 && short_runs<uint32_t>(p, dst, src)) || (es == 8 && short_runs<uint64_t>(p, dst, src)))
      return rt::Status::Success;
    for_each_run(p.shape, p.dst.strides, p.src.strides, [&](int64_t o0, int64_t o1, int64_t n, int64_t s0, int64_t s1) {
      vec::copy_elems(dst + o0, s0, src + o1, s1, n, es);
    });
    return rt::Status::Success;
  }
  bool ok = dispatch_dtype(p.dst.dtype, [&](auto to) {
    using To = decltype(to);
    dispatch_dtype(p.src.dtype, [&](auto from) {
      using From = decltype(from);
      auto cast = [](char* d, const char* s) {
        From v;
        if constexpr (std::is_same_v<From, bool>) v = mt_load(reinterpret_cast<const bool*>(s));
        else std::memcpy(&v, s, sizeof(From));
        const To out = mt_cast<To, From>(v);
        std::memcpy(d, &out, sizeof(To));
      };
      if (tiled_elems(p, dst, src, cast)) return;
      for_each_run(p.shape, p.dst.strides, p.src.strides,
                   [&](int64_t o0, int64_t o1, int64_t n, int64_t s0, int64_t s1) {
                     cast_run<To, From>(dst + o0, src + o1, n, s0, s1);
                   });
    });
  });
  if (!ok || p.src.dtype == DType::Other) {
    return rt::report(rt::Status::InvalidValue,
                      "copy: conversion between these element types is not supported by the kernel");
  }
  return rt::Status::Success;
}

MT_SIM_ENTRY rt::Status fill(const FillArgs& p, rt::Stream) {
  char* dst = static_cast<char*>(p.dst.data);
  const int64_t es = p.dst.elem_size;
  auto typed = [&](auto tag) {
    using T = decltype(tag);
    T v;
    std::memcpy(&v, p.value, sizeof(T));
    for_each_run(p.shape, p.dst.strides, nullptr, [&](int64_t o0, int64_t, int64_t n, int64_t s0, int64_t) {
      char* base = dst + o0;
      if (s0 == int64_t(sizeof(T)) && reinterpret_cast<uintptr_t>(base) % alignof(T) == 0) {
        std::fill_n(reinterpret_cast<T*>(base), n, v);
      } else {
        for (int64_t i = 0; i < n; ++i) std::memcpy(base + i * s0, &v, sizeof(T));
      }
    });
  };
  switch (es) {
    case 1: typed(uint8_t{}); break;
    case 2: typed(uint16_t{}); break;
    case 4: typed(uint32_t{}); break;
    case 8: typed(uint64_t{}); break;
    default:
      for_each_run(p.shape, p.dst.strides, nullptr, [&](int64_t o0, int64_t, int64_t n, int64_t s0, int64_t) {
        for (int64_t i = 0; i < n; ++i) std::memcpy(dst + o0 + i * s0, p.value, static_cast<size_t>(es));
      });
  }
  return rt::Status::Success;
}

MT_SIM_ENTRY rt::Status iota(const IotaArgs& p, rt::Stream) {
  bool ok = dispatch_dtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!is_complex_t<T>::value && !std::is_same_v<T, bool>) {
      T* out = static_cast<T*>(p.data);
      for (int64_t i = 0; i < p.numel; ++i) out[i] = iota_value<T>(p, i);
    }
  });
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "iota: unsupported dtype");
}

} // namespace mytorch::sim::MT_SIM_ISA_NS

#if !defined(MT_SIM_ISA_AVX2)
namespace mytorch::sim {
MT_SIM_DISPATCH(rt::Status, copy, (const CopyArgs& p, rt::Stream s), (p, s))
MT_SIM_DISPATCH(rt::Status, fill, (const FillArgs& p, rt::Stream s), (p, s))
MT_SIM_DISPATCH(rt::Status, iota, (const IotaArgs& p, rt::Stream s), (p, s))
} // namespace mytorch::sim
#endif
