// Sim twin of cuda/random.cu.
#include "mytorch/random.h"

#include "mytorch/ops_math.h"
#include "mytorch/parallel.h"

namespace mytorch::sim {

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
      par::parallel_for(p.numel, par::grain_for(16), [&](int64_t b, int64_t e) {
        uint64_t have = 0, block = 0;
        PhiloxLane have_lane = PhiloxLane::Word, lane = PhiloxLane::Word;
        random_block_of<T>(p, offset, b, &have, &have_lane);
        Philox4x32 r(seed, have, static_cast<uint64_t>(have_lane));
        for (int64_t i = b; i < e; ++i) {
          random_block_of<T>(p, offset, i, &block, &lane);
          if (block != have || lane != have_lane) {
            r = Philox4x32(seed, block, static_cast<uint64_t>(lane));
            have = block, have_lane = lane;
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
