// Keys' cubic convolution (A = -0.75, ATen's choice), the one copy used by bicubic upsampling's weights
// (csrc/aten/spatial/Interpolate.cpp) and grid_sample's bicubic mode (grid_sample.h).
#pragma once

#include "mytorch/macros.h"

namespace mytorch::cubic {

// The four taps' weights at fraction t in [0, 1) of the way from tap 1 to tap 2 (taps at -1, 0, 1, 2).
template <typename A>
MT_HOST_DEVICE inline void coefficients(A t, A c[4]) {
  const A a = A(-0.75);
  const auto near = [a](A x) { return ((a + 2) * x - (a + 3)) * x * x + 1; };              // |x| <= 1
  const auto far = [a](A x) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; };          // 1 < |x| < 2
  c[0] = far(t + 1);
  c[1] = near(t);
  c[2] = near(A(1) - t);
  c[3] = far(A(2) - t);
}

// d c[k] / d t, in ATen's form (grid_sample's backward subtracts these: they are the derivatives with respect to
// the tap's distance, which falls as t grows).
template <typename A>
MT_HOST_DEVICE inline void coefficients_grad(A t, A c[4]) {
  const A a = A(-0.75);
  A x = -1 - t;
  c[0] = (-3 * a * x - 10 * a) * x - 8 * a;
  x = -t;
  c[1] = (-3 * (a + 2) * x - 2 * (a + 3)) * x;
  x = 1 - t;
  c[2] = (3 * (a + 2) * x - 2 * (a + 3)) * x;
  x = 2 - t;
  c[3] = (3 * a * x - 10 * a) * x + 8 * a;
}

} // namespace mytorch::cubic
