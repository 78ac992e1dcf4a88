// Sim twin of cuda/random.cu.
#include "mytorch/random.h"

#include <cmath>
#include <type_traits>

#include "mytorch/ops_math.h"
#include "mytorch/parallel.h"

namespace mytorch::sim {

namespace {

// random_value's float normals, a Philox block's two at once: the block's box_muller_float computed once for both
// of its normals (rad cos, rad sin), each element taking the one its parity picks, as random_value does (the same
// calls on the same values: the same numbers; randn of 1M float32 9.0 -> 6.2 ms).
template <typename T>
void normal_float(const RandomArgs& p, uint64_t seed, uint64_t offset, T* out) {
  const float mean = static_cast<float>(p.a), sd = static_cast<float>(p.b);
  par::parallel_for(p.numel, par::grain_for(32), [&](int64_t b, int64_t e) {
    uint64_t have = ~uint64_t(0);
    float zc = 0, zs = 0;
    for (int64_t i = b; i < e; ++i) {
      const uint64_t block = (offset + static_cast<uint64_t>(i)) / 2;
      if (block != have) {
        const BoxMullerFloat bm =
            box_muller_float(Philox4x32(seed, block, static_cast<uint64_t>(PhiloxLane::NormalFloat)));
        zc = bm.rad * cosf(bm.angle);
        zs = bm.rad * sinf(bm.angle);
        have = block;
      }
      out[i] = mt_cast<T, float>(mean + sd * ((i % 2) != 0 ? zs : zc));
    }
  });
}

} // namespace

rt::Status random(const RandomArgs& p, rt::Stream) {
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
rt::Status dropout(const DropoutArgs& p, rt::Stream) {
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

} // namespace mytorch::sim
