// Convolution family: im2col and col2im for 2-D convolutions (1-D ones run as height-1 2-D).
//
// Note [Convolution family]
// A convolution is im2col + GEMM: columns [N, C*kh*kw, OH*OW] built from the input, multiplied by the
// weight [Cout, C*kh*kw] (per group) through the GEMM family; its input gradient is the transposed GEMM
// followed by col2im, which *gathers* for each input element the column entries that read it (no
// atomics: deterministic). That is the sim path and the reference. On cuda the glue prefers cuDNN
// (`convolution` below: forward, backward data, backward filter through cuDNN's convolution API, opened with
// dlopen at first use like cuBLASLt, algorithms from its heuristics, deterministic ones when PyTorch asks),
// and uses im2col + GEMM only when cuDNN cannot be loaded. sim's `convolution` runs the passes itself, one image
// at a time (Note [Sim convolution] in sim/conv.cpp).
#pragma once

#include <cstdint>

#include "mytorch/dtype.h"
#include "mytorch/macros.h"
#include "mytorch/launch.h"
#include "mytorch/window.h"

namespace mytorch {

struct Im2ColArgs {
  bool col2im = false;
  DType dtype = DType::Float;
  int64_t n = 0, c = 0, ih = 0, iw = 0, oh = 0, ow = 0;
  int kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  const void* in = nullptr;  // im2col: image [n, c, ih, iw]; col2im: columns [n, c*kh*kw, oh*ow]
  void* out = nullptr;       // im2col: columns; col2im: image
};

namespace conv {

// Column element e (row-major over [n, c*kh*kw, oh*ow]).
template <typename T>
MT_HOST_DEVICE inline void im2col(const Im2ColArgs& a, int64_t e) {
  const int64_t l = a.oh * a.ow, k = int64_t(a.kh) * a.kw;
  const int64_t pos = e % l, row = (e / l) % (a.c * k), n = e / (l * a.c * k);
  const int64_t ch = row / k, i = (row % k) / a.kw, j = row % a.kw;
  const int64_t h = (pos / a.ow) * a.sh - a.ph + i * a.dh, w = (pos % a.ow) * a.sw - a.pw + j * a.dw;
  const T* x = static_cast<const T*>(a.in) + (n * a.c + ch) * a.ih * a.iw;
  static_cast<T*>(a.out)[e] = (h >= 0 && h < a.ih && w >= 0 && w < a.iw) ? x[h * a.iw + w] : T(0);
}

// Image element e (row-major over [n, c, ih, iw]): the sum of the column entries that read it.
template <typename T, typename A>
MT_HOST_DEVICE inline void col2im(const Im2ColArgs& a, int64_t e) {
  const int64_t w = e % a.iw, h = (e / a.iw) % a.ih, ch = (e / (a.iw * a.ih)) % a.c, n = e / (a.iw * a.ih * a.c);
  const int64_t l = a.oh * a.ow, k = int64_t(a.kh) * a.kw;
  const T* cols = static_cast<const T*>(a.in) + n * a.c * k * l;
  A acc = 0;
  for_each_covering_output(h, w, a.kh, a.kw, a.sh, a.sw, a.ph, a.pw, a.dh, a.dw, a.oh, a.ow,
                           [&](int i, int j, int64_t y, int64_t x) {
                             acc += static_cast<A>(cols[(ch * k + i * a.kw + j) * l + y * a.ow + x]);
                           });
  static_cast<T*>(a.out)[e] = static_cast<T>(acc);
}

} // namespace conv

enum class ConvPass : int { Forward, BackwardData, BackwardFilter };

// One cuDNN convolution pass over NCHW tensors (1-D as height 1); `geom` carries the sizes and strides.
struct ConvArgs {
  ConvPass pass = ConvPass::Forward;
  Im2ColArgs geom;                 // n, c, ih, iw, oh, ow, kernel, stride, padding, dilation (dtype too)
  int64_t cout = 0, groups = 1;
  const void* x = nullptr;         // input (Forward, BackwardFilter)
  const void* w = nullptr;         // weight (Forward, BackwardData)
  const void* dy = nullptr;        // grad of the output (backward passes)
  void* out = nullptr;             // y, dx or dw
  bool allow_tf32 = true;          // torch.backends.cudnn.allow_tf32
  bool deterministic = false;      // torch.use_deterministic_algorithms / cudnn.deterministic
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

MT_LAUNCHER(im2col, (const Im2ColArgs& a, rt::Stream stream), (a, stream))
// With workspace_bytes non-null: only report the workspace the pass needs (no launch).
MT_LAUNCHER(convolution, (const ConvArgs& a, size_t* workspace_bytes, rt::Stream stream), (a, workspace_bytes, stream))

} // namespace mytorch
