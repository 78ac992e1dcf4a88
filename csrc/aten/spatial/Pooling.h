// 3-D adaptive average pooling by the spatial family's direct windows (Note [Spatial family], Pooling.cpp), for
// Interpolate.cpp, which checks the arguments and picks these or its GEMMs (Note [Adaptive average pooling in 3-D]).
#pragma once

#include <ATen/core/Tensor.h>

namespace mytorch {

// Fills `out` (the meta kernel's shape and layout) with the pooled `self` (floating, checked); returns it.
at::Tensor adaptiveAvgPool3dWindows(const at::Tensor& self, at::IntArrayRef output_size, at::Tensor out);
// The gradient of self from the output's gradient (both non-empty, of self's dtype).
at::Tensor adaptiveAvgPool3dWindowsBackward(const at::Tensor& grad, const at::Tensor& self);

} // namespace mytorch
