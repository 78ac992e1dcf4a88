// Sliding-window geometry shared by the convolution and pooling families: which outputs of a window op
// (kernel, stride, padding, dilation) read a given input element — the gather the backwards use.
#pragma once

#include <cstdint>

#include "mytorch/macros.h"

namespace mytorch {

// Calls f(i, j, y, x) for every kernel tap (i, j) and output (y, x) whose window reads input (h, w).
template <typename F>
MT_HOST_DEVICE inline void for_each_covering_output(int64_t h, int64_t w, int kh, int kw, int sh, int sw, int ph,
                                                    int pw, int dh, int dw, int64_t oh, int64_t ow, F&& f) {
  for (int i = 0; i < kh; ++i) {
    const int64_t ny = h + ph - int64_t(i) * dh;
    if (ny < 0 || ny % sh) continue;
    const int64_t y = ny / sh;
    if (y >= oh) continue;
    for (int j = 0; j < kw; ++j) {
      const int64_t nx = w + pw - int64_t(j) * dw;
      if (nx < 0 || nx % sw) continue;
      const int64_t x = nx / sw;
      if (x >= ow) continue;
      f(i, j, y, x);
    }
  }
}

} // namespace mytorch
