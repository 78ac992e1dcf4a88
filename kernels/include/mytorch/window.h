// Sliding-window geometry shared by the convolution and pooling families: which outputs of a window op
// (kernel, stride, padding, dilation) read a given input element — the gather the backwards use.
#pragma once

#include <cstdint>

#include "mytorch/macros.h"

namespace mytorch {

// The outputs [lo, hi] along one axis whose window (kernel k, stride s, dilation d) can read input position t
// (the input index plus the padding): those with t - y*s in [0, (k-1)*d].
MT_HOST_DEVICE inline void covering_range(int64_t t, int k, int s, int d, int64_t out, int64_t* lo, int64_t* hi) {
  const int64_t top = t / s;  // t >= 0
  const int64_t low_num = t - int64_t(k - 1) * d;
  const int64_t low = low_num <= 0 ? 0 : (low_num + s - 1) / s;
  *hi = top < out - 1 ? top : out - 1;
  *lo = low;
}

// Calls f(i, j, y, x) for every kernel tap (i, j) and output (y, x) whose window reads input (h, w), in the order of
// the taps (i, then j, ascending). The outputs are found from their range (about k*d/s candidates per axis, as
// ATen's pooling backwards do), not by trying every tap with a division.
template <typename F>
MT_HOST_DEVICE inline void for_each_covering_output(int64_t h, int64_t w, int kh, int kw, int sh, int sw, int ph,
                                                    int pw, int dh, int dw, int64_t oh, int64_t ow, F&& f) {
  const int64_t ty = h + ph, tx = w + pw;
  int64_t ylo, yhi, xlo, xhi;
  covering_range(ty, kh, sh, dh, oh, &ylo, &yhi);
  covering_range(tx, kw, sw, dw, ow, &xlo, &xhi);
  for (int64_t y = yhi; y >= ylo; --y) {  // y descending: tap i ascending
    const int64_t ry = ty - y * sh;
    if (dh != 1 && ry % dh) continue;
    const int i = static_cast<int>(dh == 1 ? ry : ry / dh);
    for (int64_t x = xhi; x >= xlo; --x) {
      const int64_t rx = tx - x * sw;
      if (dw != 1 && rx % dw) continue;
      f(i, static_cast<int>(dw == 1 ? rx : rx / dw), y, x);
    }
  }
}

} // namespace mytorch
