// Sim twin of cuda/random.cu.
#include "mytorch/random.h"
#include "mytorch/randperm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <type_traits>

#include "mytorch/ops_math.h"
#include "mytorch/parallel.h"
#include "mytorch/sim_isa.h"
#include "mytorch/sim_vmath.h"

namespace mytorch::sim::MT_SIM_ISA_NS {

namespace {

// Note [Vectorised normals]
// random_value's float normals (Box-Muller on a Philox block's first two words: rad cos and rad sin, each element
// taking the one its parity picks, as random_value does), a chunk of kChunk blocks at a time: the chunk's Philox
// words in one loop, its normals in another that the AVX2 variant vectorises over libmvec's logf, sinf and cosf
// (Note [Sim vector math]), then the elements whose blocks the chunk holds. Chunks are aligned to the absolute block
// index and always computed whole, so an element's value depends on (seed, offset + i) alone, never on where a
// worker's range or the call starts (a DTensor shard draws the slice of the replicated tensor). The vector
// functions are within 4 ulp of the scalar libm, whose calls one element at a time ran at 0.32x the CPU's randn
// (docs/speed.md at c1b68db): the same Philox stream, values that can differ from the scalar form's in the last
// bits (and from the CUDA build's, which uses CUDA's own sinf and cosf).
constexpr int64_t kChunk = 64;

MT_FORCE_INLINE void chunk_normals(uint64_t seed, uint64_t base, float* zc, float* zs) {
  float u1[kChunk], u2[kChunk];
  for (int64_t j = 0; j < kChunk; ++j) {
    const Philox4x32 r(seed, base + static_cast<uint64_t>(j), static_cast<uint64_t>(PhiloxLane::NormalFloat));
    u1[j] = 1.0f - u32_to_unit_float(r.c[0]);  // (0, 1], box_muller_float's
    u2[j] = u32_to_unit_float(r.c[1]);
  }
  // rad in u1's place, the angle in u2's (box_muller_float's arithmetic: calling it in the loop above, log and sqrt
  // joined the Philox loop and randn took 10% longer, 2.21-2.26 -> 2.40-2.54 ms for 1M float32); cos and sin in
  // loops of their own: in one, GCC joined them into a scalar sincosf, which has no vector form
  for (int64_t j = 0; j < kChunk; ++j) {
    u1[j] = sqrtf(-2.0f * logf(u1[j]));
    u2[j] = 6.2831853f * u2[j];
  }
  for (int64_t j = 0; j < kChunk; ++j) zc[j] = u1[j] * cosf(u2[j]);
  for (int64_t j = 0; j < kChunk; ++j) zs[j] = u1[j] * sinf(u2[j]);
}

template <typename T>
void normal_float(const RandomArgs& p, uint64_t seed, uint64_t offset, T* out) {
  if (p.numel <= 0) return;
  const float mean = static_cast<float>(p.a), sd = static_cast<float>(p.b);
  const uint64_t first = offset / 2 / kChunk, last = (offset + static_cast<uint64_t>(p.numel) - 1) / 2 / kChunk;
  const auto chunks = static_cast<int64_t>(last - first + 1);
  par::parallel_for(chunks, par::grain_for(2 * kChunk * 32), [&](int64_t cb, int64_t ce) {
    alignas(64) float zc[kChunk], zs[kChunk];
    for (int64_t c = cb; c < ce; ++c) {
      const uint64_t base = (first + static_cast<uint64_t>(c)) * kChunk;  // the chunk's first block
      chunk_normals(seed, base, zc, zs);
      // elements i with (offset + i) / 2 in [base, base + kChunk)
      const int64_t lo = 2 * base > offset ? static_cast<int64_t>(2 * base - offset) : 0;
      const int64_t hi = std::min<int64_t>(p.numel, static_cast<int64_t>(2 * (base + kChunk) - offset));
      for (int64_t i = lo; i < hi; ++i) {
        const int64_t k = static_cast<int64_t>((offset + static_cast<uint64_t>(i)) / 2 - base);
        out[i] = mt_cast<T, float>(mean + sd * ((i % 2) != 0 ? zs[k] : zc[k]));
      }
    }
  });
}

} // namespace

MT_SIM_ENTRY rt::Status random(const RandomArgs& p, rt::Stream) {
  if (p.dtype == DType::ComplexFloat || p.dtype == DType::ComplexDouble) {
    return rt::report(rt::Status::InvalidValue, "random: complex outputs are not supported by the kernel");
  }
  bool ok = dispatch_dtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!is_complex_t<T>::value) {
      // random_element's values, split over the workers (each element's value is its own), each Philox block
      // computed once for the elements that share it (4 uniforms, 2 normals: Note [Philox layout]).
      T* out = static_cast<T*>(p.data);
      uint64_t seed = p.seed, offset = p.offset;
      philox_resolve(p.philox_dev, seed, offset);
      if constexpr (!std::is_same_v<T, double> && !std::is_integral_v<T>) {
        if (p.dist == Distribution::Normal) return normal_float<T>(p, seed, offset, out);
      }
      PhiloxLane lane = PhiloxLane::Word;
      const int shift = random_per_block<T>(p, &lane) == 4 ? 2 : 1;  // random_block_of's division by 4 or 2
      par::parallel_for(p.numel, par::grain_for(16), [&](int64_t b, int64_t e) {
        uint64_t have = (offset + static_cast<uint64_t>(b)) >> shift;
        Philox4x32 r(seed, have, static_cast<uint64_t>(lane));
        for (int64_t i = b; i < e; ++i) {
          const uint64_t block = (offset + static_cast<uint64_t>(i)) >> shift;
          if (block != have) {
            r = Philox4x32(seed, block, static_cast<uint64_t>(lane));
            have = block;
          }
          out[i] = random_value<T>(p, i, r);
        }
      });
    }
  });
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "random: unsupported element type");
}

// Note [Fused dropout]: blocks of 4 elements, split over the sim's workers (each block's draws are its own).
MT_SIM_ENTRY rt::Status dropout(const DropoutArgs& p, rt::Stream) {
  const bool ok = dispatch_floating(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    using O = ew::opmath_t<T>;
    const T* in = static_cast<const T*>(p.in);
    T* out = static_cast<T*>(p.out);
    const int64_t blocks = (p.numel + 3) / 4;
    par::parallel_for(blocks, par::grain_for(16), [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t i0 = 4 * b, n = p.numel - i0 < 4 ? p.numel - i0 : 4;
        O x[4] = {}, y[4];
        bool m[4];
        for (int j = 0; j < n; ++j) x[j] = static_cast<O>(in[i0 + j]);
        dropout_block<O>(p, b, x, y, m);
        for (int j = 0; j < n; ++j) {
          out[i0 + j] = mt_cast<T, O>(y[j]);
          p.mask[i0 + j] = m[j];
        }
      }
    });
  });
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "dropout: not a floating dtype");
}

namespace {

// Philox4x32's ten rounds (random.h) on nb <= kChunk consecutive blocks from b0 at once, lane by lane across the
// blocks so that the 32x32->64 products vectorise (Philox4x32 one block at a time does not); words[4 j + q] is
// word q of block b0 + j, bit for bit Philox4x32(seed, b0 + j, lane).c[q].
MT_FORCE_INLINE void philox_blocks(uint64_t seed, PhiloxLane lane, uint64_t b0, int64_t nb, uint32_t* words) {
  alignas(64) uint32_t c0[kChunk], c1[kChunk], c2[kChunk], c3[kChunk];
  for (int64_t j = 0; j < nb; ++j) {
    const uint64_t b = b0 + static_cast<uint64_t>(j);
    c0[j] = static_cast<uint32_t>(b);
    c1[j] = static_cast<uint32_t>(b >> 32);
    c2[j] = static_cast<uint32_t>(lane);
    c3[j] = 0;
  }
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    for (int64_t j = 0; j < nb; ++j) {
      const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0[j], p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2[j];
      const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1[j] ^ k0,
                     n2 = static_cast<uint32_t>(p0 >> 32) ^ c3[j] ^ k1;
      c0[j] = n0;
      c1[j] = static_cast<uint32_t>(p1);
      c2[j] = n2;
      c3[j] = static_cast<uint32_t>(p0);
    }
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  for (int64_t j = 0; j < nb; ++j) {
    words[4 * j] = c0[j];
    words[4 * j + 1] = c1[j];
    words[4 * j + 2] = c2[j];
    words[4 * j + 3] = c3[j];
  }
}

// Words [w0, w0 + count) of a lane's stream (word w: block w / 4, word w % 4), kChunk blocks a loop.
void stream_words(uint64_t seed, PhiloxLane lane, uint64_t w0, int64_t count, uint32_t* out) {
  const uint64_t end = w0 + static_cast<uint64_t>(count);
  alignas(64) uint32_t words[4 * kChunk];
  for (uint64_t w = w0; w < end;) {
    const uint64_t b0 = w / 4, nb = std::min<uint64_t>(kChunk, (end + 3) / 4 - b0);
    philox_blocks(seed, lane, b0, static_cast<int64_t>(nb), words);
    const uint64_t take = std::min(end, 4 * (b0 + nb)) - w;
    std::memcpy(out, words + (w - 4 * b0), take * sizeof(uint32_t));
    out += take;
    w += take;
  }
}

} // namespace

// Note [Random permutation] on the sim: each of T chunks of the elements (T by the thread count: a stable counting
// sort's result does not depend on it) draws its elements' buckets and counts them; the chunks' runs of each bucket
// are placed in (bucket, chunk) order; then the buckets are shuffled in parallel, each from its own PermSwap words.
MT_SIM_ENTRY rt::Status randperm(const RandpermArgs& a, rt::Stream) {
  const int64_t n = a.n;
  if (n <= 0) return rt::Status::Success;
  uint64_t seed = a.seed, offset = a.offset;
  philox_resolve(a.philox_dev, seed, offset);
  const int64_t buckets = perm_buckets(n);
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(par::threads(), n / par::kGrain));
  const int64_t per = (n + chunks - 1) / chunks;
  // plain arrays: std::vector's growth functions instantiated in the AVX2 compile would be exported weak with AVX2
  // code (test_sim_isa: the variant objects export only their entry points)
  const std::unique_ptr<uint32_t[]> bucket(new uint32_t[static_cast<size_t>(n)]);
  // per (chunk, bucket): the count, then the first position of the chunk's run of the bucket
  const std::unique_ptr<int64_t[]> place(new int64_t[static_cast<size_t>(chunks * buckets)]());
  par::parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t lo = c * per, hi = std::min(n, lo + per);
      uint32_t* ids = bucket.get() + lo;
      stream_words(seed, PhiloxLane::PermBucket, offset + static_cast<uint64_t>(lo), hi - lo, ids);
      int64_t* count = place.get() + c * buckets;
      for (int64_t i = 0; i < hi - lo; ++i) {
        ids[i] = perm_below(ids[i], static_cast<uint64_t>(buckets));
        ++count[ids[i]];
      }
    }
  });
  const std::unique_ptr<int64_t[]> start(new int64_t[static_cast<size_t>(buckets + 1)]);
  int64_t at = 0;
  for (int64_t b = 0; b < buckets; ++b) {
    start[b] = at;
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t k = place[c * buckets + b];
      place[c * buckets + b] = at;
      at += k;
    }
  }
  start[buckets] = n;
  int64_t largest = 0;  // the largest bucket: each task's buffer of swap words
  for (int64_t b = 0; b < buckets; ++b) largest = std::max(largest, start[b + 1] - start[b]);
  par::parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      int64_t* next = place.get() + c * buckets;
      for (int64_t i = c * per, hi = std::min(n, (c + 1) * per); i < hi; ++i) a.out[next[bucket[i]]++] = i;
    }
  });
  par::parallel_for(buckets, par::grain_for(kPermBucket / 4), [&](int64_t b0, int64_t b1) {
    const std::unique_ptr<uint32_t[]> words(new uint32_t[static_cast<size_t>(largest)]);
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t s = start[b], e = start[b + 1];
      stream_words(seed, PhiloxLane::PermSwap, offset + static_cast<uint64_t>(s), e - s, words.get());
      perm_shuffle_run(a.out, s, e, [&](int64_t k) { return words[k]; });
    }
  });
  return rt::Status::Success;
}

} // namespace mytorch::sim::MT_SIM_ISA_NS

#if !defined(MT_SIM_ISA_AVX2)
namespace mytorch::sim {
MT_SIM_DISPATCH(rt::Status, random, (const RandomArgs& p, rt::Stream s), (p, s))
MT_SIM_DISPATCH(rt::Status, dropout, (const DropoutArgs& p, rt::Stream s), (p, s))
MT_SIM_DISPATCH(rt::Status, randperm, (const RandpermArgs& a, rt::Stream s), (a, s))
} // namespace mytorch::sim
#endif
