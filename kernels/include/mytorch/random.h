// Random family: Philox4x32-10 counter-based generation. The numbers depend only on (seed, offset,
// element index), never on the launch shape, so sim and cuda produce the same stream for a seed.
//
// Note [Philox layout]
// A call's offset counts elements: element i of a call at offset o is element o + i of one stream per layout
// (a "lane", the counter's high word), so a call at offset o + d gives the elements from d on of a call at o
// with the same seed (what DTensor's offset-based RNG tracker relies on: a shard drawn at offset
// base + shard_index * shard_size is the matching slice of the whole tensor drawn at base, as on CUDA). Lanes:
// uniform and bernoulli for 32-bit-or-narrower types use one 32-bit word (block (o+i)/4, word i%4); double
// uniforms and 64-bit integers two words (block (o+i)/2); normals come in Box-Muller pairs (block (o+i)/2,
// words 0-1 for float types, all four for double); attention's dropout one block per score. Each call advances
// the generator's offset by its element count rounded up to 4 (offsets stay multiples of 4), so calls never
// share a counter; lanes keep layouts that pack differently apart.
#pragma once

#include <cmath>
#include <cstdint>

#include "mytorch/dtype.h"
#include "mytorch/macros.h"
#include "mytorch/launch.h"

namespace mytorch {

struct Philox4x32 {
  uint32_t c[4];
  MT_HOST_DEVICE static uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t* hi) {
    uint64_t p = static_cast<uint64_t>(a) * b;
    *hi = static_cast<uint32_t>(p >> 32);
    return static_cast<uint32_t>(p);
  }
  // Ten rounds of Philox4x32 on counter (ctr_lo, ctr_hi) with key `seed`.
  MT_HOST_DEVICE Philox4x32(uint64_t seed, uint64_t block, uint64_t offset) {
    uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
    c[0] = static_cast<uint32_t>(block);
    c[1] = static_cast<uint32_t>(block >> 32);
    c[2] = static_cast<uint32_t>(offset);
    c[3] = static_cast<uint32_t>(offset >> 32);
    for (int r = 0; r < 10; ++r) {
      uint32_t hi0, hi1;
      uint32_t lo0 = mulhilo(0xD2511F53u, c[0], &hi0);
      uint32_t lo1 = mulhilo(0xCD9E8D57u, c[2], &hi1);
      uint32_t n0 = hi1 ^ c[1] ^ k0, n2 = hi0 ^ c[3] ^ k1;
      c[0] = n0;
      c[1] = lo1;
      c[2] = n2;
      c[3] = lo0;
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
  }
};

enum class Distribution : int { Uniform, Normal, Integer, Bernoulli, Exponential };

struct RandomArgs {
  void* data = nullptr; // contiguous output
  DType dtype = DType::Float;
  int64_t numel = 0;
  uint64_t seed = 0;
  uint64_t offset = 0;
  Distribution dist = Distribution::Uniform;
  double a = 0, b = 1;  // uniform [a, b); normal mean a, std b; bernoulli p = a; exponential rate a
  int64_t low = 0;      // integer: low + (r mod range)
  uint64_t range = 0;
  const uint64_t* philox_dev = nullptr;  // a CUDA graph's per-replay Philox state (Note [Random numbers in a
                                         // captured graph]), read when offset is a captured one
};

MT_HOST_DEVICE inline float u32_to_unit_float(uint32_t x) { return (x >> 8) * (1.0f / 16777216.0f); }
MT_HOST_DEVICE inline double u64_to_unit_double(uint32_t hi, uint32_t lo) {
  uint64_t v = (static_cast<uint64_t>(hi) << 32) | lo;
  return (v >> 11) * (1.0 / 9007199254740992.0);
}

// A captured offset (rt::detail::kCapturedOffset: generator slot and offset within the capture) resolved from the
// replay's state in device memory, [seed, base] per slot (CUDA graphs; the sim patches its records instead).
MT_HOST_DEVICE inline void philox_resolve(const uint64_t* dev, uint64_t& seed, uint64_t& offset) {
  if (dev == nullptr || !(offset & rt::detail::kCapturedOffset)) return;
  const uint64_t slot = (offset & ~rt::detail::kCapturedOffset) >> rt::detail::kCapturedSlotShift;
  seed = dev[2 * slot];
  offset = dev[2 * slot + 1] + (offset & ((uint64_t(1) << rt::detail::kCapturedSlotShift) - 1));
}

// The lanes of Note [Philox layout] (the counter's high word), and element i's block in one.
enum class PhiloxLane : uint32_t {
  Word = 1,
  Pair = 2,
  NormalFloat = 3,
  NormalDouble = 4,
  Attention = 5,
  PermBucket = 6,
  PermSwap = 7
};
MT_HOST_DEVICE inline Philox4x32 philox_block(uint64_t seed, uint64_t offset, int64_t i, int per_block,
                                              PhiloxLane lane) {
  return Philox4x32(seed, (offset + static_cast<uint64_t>(i)) / static_cast<uint64_t>(per_block),
                    static_cast<uint64_t>(lane));
}

// How many elements of a call share a Philox block (4 or 2), and in which lane they draw (Note [Philox layout]).
template <typename T>
MT_HOST_DEVICE inline int random_per_block(const RandomArgs& p, PhiloxLane* lane) {
  constexpr bool dbl = std::is_same_v<T, double>, wide = dbl || std::is_same_v<T, int64_t>;
  int per = 4;
  PhiloxLane l = PhiloxLane::Word;
  switch (p.dist) {
    case Distribution::Uniform:
    case Distribution::Exponential:
      if (dbl) per = 2, l = PhiloxLane::Pair;
      break;
    case Distribution::Normal: per = 2, l = dbl ? PhiloxLane::NormalDouble : PhiloxLane::NormalFloat; break;
    case Distribution::Integer:
      if (wide || p.range > (uint64_t(1) << 32)) per = 2, l = PhiloxLane::Pair;
      break;
    case Distribution::Bernoulli: break;
  }
  *lane = l;
  return per;
}

// The Philox block element i of a call at (resolved) `offset` draws from, in its lane (Note [Philox layout]).
template <typename T>
MT_HOST_DEVICE inline void random_block_of(const RandomArgs& p, uint64_t offset, int64_t i, uint64_t* block,
                                           PhiloxLane* lane) {
  const int per = random_per_block<T>(p, lane);
  *block = (offset + static_cast<uint64_t>(i)) / static_cast<uint64_t>(per);
}

// A float normal's Box-Muller pair from its block r: the radius sqrt(-2 log u1) and the angle 2 pi u2; the block's
// even element is rad cos(angle), its odd one rad sin(angle) (random_value; the sim's normal_float takes both).
struct BoxMullerFloat { float rad, angle; };
MT_HOST_DEVICE inline BoxMullerFloat box_muller_float(const Philox4x32& r) {
  const float u1 = 1.0f - u32_to_unit_float(r.c[0]);  // (0, 1]
  const float u2 = u32_to_unit_float(r.c[1]);
  return {sqrtf(-2.0f * logf(u1)), 6.2831853f * u2};
}

// The value of element i from its block r (random_block_of), computed identically on both runtimes.
template <typename T>
MT_HOST_DEVICE inline T random_value(const RandomArgs& p, int64_t i, const Philox4x32& r) {
  constexpr bool wide = std::is_same_v<T, double> || std::is_same_v<T, int64_t>;
  switch (p.dist) {
    case Distribution::Uniform: {
      if constexpr (std::is_same_v<T, double>) {
        int w = static_cast<int>(i % 2) * 2;
        return p.a + (p.b - p.a) * u64_to_unit_double(r.c[w], r.c[w + 1]);
      } else {
        float u = u32_to_unit_float(r.c[i % 4]);
        float v = static_cast<float>(p.a) + (static_cast<float>(p.b) - static_cast<float>(p.a)) * u;
        return mt_cast<T, float>(v);
      }
    }
    case Distribution::Normal: {
      const bool second = (i % 2) != 0;
      if constexpr (std::is_same_v<T, double>) {
        double u1 = 1.0 - u64_to_unit_double(r.c[0], r.c[1]); // (0, 1]
        double u2 = u64_to_unit_double(r.c[2], r.c[3]);
        double rad = std::sqrt(-2.0 * std::log(u1));
        double z = second ? rad * std::sin(6.283185307179586 * u2) : rad * std::cos(6.283185307179586 * u2);
        return p.a + p.b * z;
      } else {
        const BoxMullerFloat bm = box_muller_float(r);
        const float z = second ? bm.rad * sinf(bm.angle) : bm.rad * cosf(bm.angle);
        return mt_cast<T, float>(static_cast<float>(p.a) + static_cast<float>(p.b) * z);
      }
    }
    case Distribution::Integer: {
      uint64_t v;
      if (wide || p.range > (uint64_t(1) << 32)) {
        int w = static_cast<int>(i % 2) * 2;
        v = (static_cast<uint64_t>(r.c[w]) << 32) | r.c[w + 1];
      } else {
        v = r.c[i % 4];
      }
      // both within 32 bits (the usual randint), the same remainder from a 32-bit division, several times faster
      const uint64_t m = !p.range ? v
                         : (v >> 32) == 0 && (p.range >> 32) == 0
                             ? static_cast<uint32_t>(v) % static_cast<uint32_t>(p.range)
                             : v % p.range;
      int64_t out = p.low + static_cast<int64_t>(m);
      return mt_cast<T, int64_t>(out);
    }
    case Distribution::Bernoulli: {
      float u = u32_to_unit_float(r.c[i % 4]);
      return mt_cast<T, int>(static_cast<double>(u) < p.a ? 1 : 0);
    }
    case Distribution::Exponential: {  // -log(u) / rate with u in (0, 1]: finite, >= 0
      if constexpr (std::is_same_v<T, double>) {
        int w = static_cast<int>(i % 2) * 2;
        return -std::log(1.0 - u64_to_unit_double(r.c[w], r.c[w + 1])) / p.a;
      } else {
        float u = 1.0f - u32_to_unit_float(r.c[i % 4]);
        return mt_cast<T, float>(-logf(u) / static_cast<float>(p.a));
      }
    }
  }
  return T{};
}

// The value of element i, computed identically on both runtimes (see Note [Philox layout]).
template <typename T>
MT_HOST_DEVICE inline T random_element(const RandomArgs& p, int64_t i) {
  uint64_t seed = p.seed, offset = p.offset, block = 0;
  philox_resolve(p.philox_dev, seed, offset);
  PhiloxLane lane = PhiloxLane::Word;
  random_block_of<T>(p, offset, i, &block, &lane);
  return random_value<T>(p, i, Philox4x32(seed, block, static_cast<uint64_t>(lane)));
}

// Fills a contiguous buffer with p.numel values of p.dtype (real types only).
// Capture: a replay draws from the generator's Philox state of that replay (Note [Random numbers in a captured
// graph]).
inline void capture_replay_fix(RandomArgs& a) { rt::detail::philox_replay_fix(a.seed, a.offset); }
MT_LAUNCHER(random, (const RandomArgs& p, rt::Stream stream), (p, stream))

// Note [Fused dropout]
// native_dropout in one pass: a thread (cuda) or loop step (sim) per Philox block of 4 elements, its four words
// the four draws, in the Bernoulli layout of Note [Philox layout]: the mask is bit for bit bernoulli_(keep) for the
// same generator state, and out = (x * mask) * scale in opmath as ATen's input.mul(mask).mul(scale) computes it
// (a dropped NaN or inf stays NaN, as there). One read of x, one write of out and of the mask.
struct DropoutArgs {
  const void* in = nullptr;  // contiguous
  void* out = nullptr;       // contiguous, in's dtype
  bool* mask = nullptr;      // contiguous
  DType dtype = DType::Float;
  int64_t numel = 0;
  uint64_t seed = 0, offset = 0;
  const uint64_t* philox_dev = nullptr;  // as RandomArgs::philox_dev
  double keep = 1;   // 1 - p
  double scale = 1;  // 1 / (1 - p), 0 when p = 1
};

// Block b's draws (elements 4b .. 4b + 3) applied to their values x (opmath O), results y and m.
template <typename O>
MT_HOST_DEVICE inline void dropout_block(const DropoutArgs& p, int64_t b, const O* x, O* y, bool* m) {
  uint64_t seed = p.seed, offset = p.offset;
  philox_resolve(p.philox_dev, seed, offset);
  const Philox4x32 r = philox_block(seed, offset, 4 * b, 4, PhiloxLane::Word);
  const O scale = static_cast<O>(p.scale);
  for (int j = 0; j < 4; ++j) {
    m[j] = static_cast<double>(u32_to_unit_float(r.c[j])) < p.keep;
    y[j] = (x[j] * static_cast<O>(m[j])) * scale;
  }
}

inline void capture_replay_fix(DropoutArgs& a) { rt::detail::philox_replay_fix(a.seed, a.offset); }
MT_LAUNCHER(dropout, (const DropoutArgs& p, rt::Stream stream), (p, stream))

} // namespace mytorch
