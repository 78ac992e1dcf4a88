// Convolution family: im2col and col2im for 3-D convolutions (vol2col; 2-D ones run as depth-1 3-D, 1-D ones as
// depth-1 height-1).
//
// Note [Convolution family]
// A convolution is im2col + GEMM: columns [N, C*kd*kh*kw, OD*OH*OW] built from the input, multiplied by the
// weight [Cout, C*kd*kh*kw] (per group) through the GEMM family; its input gradient is the transposed GEMM
// followed by col2im, which *gathers* for each input element the column entries that read it (no
// atomics: deterministic). That is the sim path and the reference. On cuda the glue prefers cuDNN
// (`convolution` below: forward, backward data, backward filter through cuDNN's convolution API, opened with
// dlopen at first use like cuBLASLt, algorithms from its heuristics, deterministic ones when PyTorch asks),
// and uses im2col + GEMM only when cuDNN cannot be loaded. sim's `convolution` runs the passes itself, one image
// at a time (Note [Sim convolution] in sim/conv.cpp).
#pragma once

#include <cstdint>
#include <type_traits>

#include "mytorch/dtype.h"
#include "mytorch/macros.h"
#include "mytorch/ops_math.h"
#include "mytorch/launch.h"
#include "mytorch/window.h"

namespace mytorch {

struct Im2ColArgs {
  bool col2im = false;
  DType dtype = DType::Float;
  int64_t n = 0, c = 0, id = 1, ih = 0, iw = 0, od = 1, oh = 0, ow = 0;
  int kd = 1, kh = 1, kw = 1, sd = 1, sh = 1, sw = 1, pd = 0, ph = 0, pw = 0, dd = 1, dh = 1, dw = 1;
  const void* in = nullptr;  // im2col: image [n, c, id, ih, iw]; col2im: columns [n, c*kd*kh*kw, od*oh*ow]
  void* out = nullptr;       // im2col: columns; col2im: image

  MT_HOST_DEVICE int64_t taps() const { return int64_t(kd) * kh * kw; }       // kernel positions per channel
  MT_HOST_DEVICE int64_t positions() const { return od * oh * ow; }           // output positions
  MT_HOST_DEVICE int64_t image() const { return c * id * ih * iw; }            // elements of one input image
  MT_HOST_DEVICE bool volumetric() const { return id != 1 || od != 1 || kd != 1; }
};

namespace conv {

// The type col2im adds in: the opmath type, and for bool (the CPU's fold of bool ORs) an integer count.
template <typename T>
using col2im_acc_t = std::conditional_t<std::is_same_v<T, bool>, int64_t, ew::opmath_t<T>>;

// Column element e (row-major over [n, c*kd*kh*kw, od*oh*ow]).
template <typename T>
MT_HOST_DEVICE inline void im2col(const Im2ColArgs& a, int64_t e) {
  const int64_t l = a.positions(), k = a.taps();
  const int64_t pos = e % l, row = (e / l) % (a.c * k), n = e / (l * a.c * k);
  const int64_t ch = row / k, t = row % k, q = t / (int64_t(a.kh) * a.kw), i = (t / a.kw) % a.kh, j = t % a.kw;
  const int64_t z = pos / (a.oh * a.ow), y = (pos / a.ow) % a.oh, x = pos % a.ow;
  const int64_t d = z * a.sd - a.pd + q * a.dd, h = y * a.sh - a.ph + i * a.dh, w = x * a.sw - a.pw + j * a.dw;
  const T* src = static_cast<const T*>(a.in) + (n * a.c + ch) * a.id * a.ih * a.iw;
  const bool inside = d >= 0 && d < a.id && h >= 0 && h < a.ih && w >= 0 && w < a.iw;
  static_cast<T*>(a.out)[e] = inside ? src[(d * a.ih + h) * a.iw + w] : T(0);
}

// Image element e (row-major over [n, c, id, ih, iw]): the sum of the column entries that read it, the depth taps
// ascending, then the 2-D gather's order within each.
template <typename T, typename A>
MT_HOST_DEVICE inline void col2im(const Im2ColArgs& a, int64_t e) {
  const int64_t w = e % a.iw, h = (e / a.iw) % a.ih, d = (e / (a.iw * a.ih)) % a.id;
  const int64_t ch = (e / (a.iw * a.ih * a.id)) % a.c, n = e / (a.iw * a.ih * a.id * a.c);
  const int64_t l = a.positions(), k = a.taps(), ohw = a.oh * a.ow;
  const T* cols = static_cast<const T*>(a.in) + n * a.c * k * l;
  A acc = A(0);
  int64_t zlo, zhi;
  covering_range(d + a.pd, a.kd, a.sd, a.dd, a.od, &zlo, &zhi);
  for (int64_t z = zhi; z >= zlo; --z) {  // z descending: depth tap q ascending
    const int64_t rz = d + a.pd - z * a.sd;
    if (a.dd != 1 && rz % a.dd) continue;
    const int64_t q = a.dd == 1 ? rz : rz / a.dd;
    for_each_covering_output(h, w, a.kh, a.kw, a.sh, a.sw, a.ph, a.pw, a.dh, a.dw, a.oh, a.ow,
                             [&](int i, int j, int64_t y, int64_t x) {
                               const int64_t tap = (q * a.kh + i) * a.kw + j;
                               acc += static_cast<A>(cols[(ch * k + tap) * l + z * ohw + y * a.ow + x]);
                             });
  }
  static_cast<T*>(a.out)[e] = static_cast<T>(acc);
}

} // namespace conv

enum class ConvPass : int { Forward, BackwardData, BackwardFilter };

// One cuDNN convolution pass over NC(D)HW tensors (1-D as height 1); `geom` carries the sizes and strides.
struct ConvArgs {
  ConvPass pass = ConvPass::Forward;
  Im2ColArgs geom;                 // n, c, input and output sizes, kernel, stride, padding, dilation (dtype too)
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
// Capture: a call that only reports the workspace size runs at once.
inline bool capture_is_query(const ConvArgs&, const size_t* workspace_bytes, rt::Stream) {
  return workspace_bytes != nullptr;
}
MT_LAUNCHER(convolution, (const ConvArgs& a, size_t* workspace_bytes, rt::Stream stream), (a, workspace_bytes, stream))

} // namespace mytorch
