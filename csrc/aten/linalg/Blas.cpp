// Op table: the GEMM family (mm, addmm, bmm, baddbmm, addbmm, addmv, dot, vdot, _addmm_activation) on
// mytorch. cuda: cuBLASLt with the bias/activation fused in the epilogue (Note [GEMM family]), the integer dtypes
// on the family's own kernel (Note [Integer GEMM]); sim: ATen's CPU BLAS on host views of the same buffers, i.e.
// exactly what CPU PyTorch computes. Complex and bool take the counted CPU fallback.
#include <ATen/Context.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_addmm_activation.h>
#include <ATen/ops/_addmm_activation_ops.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/addmm_ops.h>
#include <ATen/ops/addmv.h>
#include <ATen/ops/addbmm_ops.h>
#include <ATen/ops/addmv_ops.h>
#include <ATen/ops/baddbmm.h>
#include <ATen/ops/baddbmm_ops.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/bmm_ops.h>
#include <ATen/ops/complex.h>
#include <ATen/ops/view_as_real.h>
#include <ATen/ops/dot.h>
#include <ATen/ops/dot_ops.h>
#include <ATen/ops/vdot_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/mm_ops.h>
#include <ATen/ops/relu.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <map>
#include <mutex>
#include <utility>

#include "csrc/core/Graph.h"
#include "csrc/core/Checked.h"
#include "csrc/aten/glue/Glue.h"
#include "csrc/aten/glue/HostRoute.h"
#include "csrc/core/Fallback.h"
#include "csrc/core/Runtime.h"
#include "csrc/core/SimBlas.h"
#include "mytorch/gemm.h"

namespace mytorch {
namespace {

// The GEMM library's workspace: one per (device, stream), allocated through the caching allocator on first use and
// kept, as torch.cuda keeps cuBLAS's per handle and stream, so a GEMM allocates nothing (and the memory statistics
// do not see a 32 MiB block come and go with each call). Never freed (the map outlives the allocator at exit).
void* gemmWorkspace(const at::Tensor& out) {
  static std::mutex mu;
  static auto* cache = new std::map<std::pair<int, rt::Stream>, at::Tensor>();
  const std::pair<int, rt::Stream> key{out.device().index(), streamFor(out)};
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache->find(key);
  if (it == cache->end())
    it = cache->emplace(key, at::empty({static_cast<int64_t>(kGemmWorkspaceBytes)}, out.options().dtype(at::kByte)))
             .first;
  return it->second.data_ptr();
}

using at::Tensor;

bool floatGemmDtype(c10::ScalarType t) {
  return t == at::kFloat || t == at::kHalf || t == at::kBFloat16 || t == at::kDouble;
}

// The dtypes the family computes natively: the floating ones, the integers (Note [Integer GEMM]) and complex64/128
// (Note [Complex GEMM]).
bool gemmDtype(c10::ScalarType t) {
  return floatGemmDtype(t) || gemm_integer_dtype(toKernelDType(t)) || t == at::kComplexFloat || t == at::kComplexDouble;
}

bool isZero(const c10::Scalar& s) { return s.isComplex() ? s.toComplexDouble() == 0.0 : s.toDouble() == 0.0; }

void checkSameDtype(const Tensor& a, const Tensor& b, const char* op) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), op,
              ": expected m1 and m2 to have the same dtype, but got: ", a.scalar_type(), " != ", b.scalar_type());
}

// One matrix operand (the last two dims of `x`) as the GEMM family wants it: row-major with a unit column
// stride, or transposed (unit row stride); anything else is copied contiguous once.
struct Mat {
  Tensor t;
  int64_t ld = 0;
  bool trans = false;
  int64_t batch_stride = 0;
};

Mat matOf(const Tensor& x) {
  const int64_t nd = x.dim(), r = x.size(nd - 2), c = x.size(nd - 1);
  const int64_t rs = x.stride(nd - 2), cs = x.stride(nd - 1);
  Mat m;
  if (cs == 1 && (r == 1 || rs >= std::max<int64_t>(1, c))) {
    m = {x, r == 1 ? std::max<int64_t>(1, c) : rs, false};
  } else if (rs == 1 && (c == 1 || cs >= std::max<int64_t>(1, r))) {
    m = {x, c == 1 ? std::max<int64_t>(1, r) : cs, true};
  } else {
    Tensor y = x.contiguous();
    m = {y, std::max<int64_t>(1, c), false};
  }
  m.batch_stride = nd == 3 ? m.t.stride(0) : 0;
  return m;
}

bool rowMajorOut(const Tensor& out) {
  const int64_t nd = out.dim(), c = out.size(nd - 1), r = out.size(nd - 2);
  if (out.stride(nd - 1) != 1 || (r > 1 && out.stride(nd - 2) < std::max<int64_t>(1, c))) return false;
  return nd == 2 || out.size(0) <= 1 || out.stride(0) >= 1;
}

void cudaGemm(const Tensor& out, const Tensor& a, const Tensor& b, const c10::Scalar& alpha_s,
              const c10::Scalar& beta_s, const Tensor& bias, GemmEpilogue epi);

// Note [Complex GEMM]
// On the cuda runtime a complex GEMM is four real GEMMs over the operands' real and imaginary planes (the 4M
// method: each part of the product the sum of two real products, the rounding of a complex multiply-add), into a
// product P, then out = alpha P + beta out with the complex pointwise compositions (Complex.cpp). Conjugate views
// (mm, bmm and their kin take them as they are) are resolved first. cuBLASLt's complex types would do it in one
// call with the planes interleaved; the composition runs on kernels every build has, so the emulated build checks
// it. On sim the glue hands complex GEMMs to the CPU's BLAS on host views, which carry the conjugate bit.
void complexGemm(const Tensor& out, const Tensor& a, const Tensor& b, const c10::Scalar& alpha,
                 const c10::Scalar& beta) {
  if (out.numel() == 0) return;
  auto planes = [](const Tensor& t) {
    const Tensor r = at::view_as_real(t.resolve_conj().resolve_neg());
    return std::make_pair(r.select(-1, 0).contiguous(), r.select(-1, 1).contiguous());
  };
  const auto [ar, ai] = planes(a);
  const auto [br, bi] = planes(b);
  const auto real = c10::toRealValueType(out.scalar_type());
  Tensor pr = at::empty(out.sizes(), out.options().dtype(real)), pi = at::empty(out.sizes(), pr.options());
  cudaGemm(pr, ar, br, 1.0, 0.0, Tensor(), GemmEpilogue::None);
  cudaGemm(pr, ai, bi, -1.0, 1.0, Tensor(), GemmEpilogue::None);
  cudaGemm(pi, ar, bi, 1.0, 0.0, Tensor(), GemmEpilogue::None);
  cudaGemm(pi, ai, br, 1.0, 1.0, Tensor(), GemmEpilogue::None);
  const Tensor p = at::complex(pr, pi);
  if (isZero(beta)) out.copy_(p.mul(alpha));  // beta == 0: out's old contents (NaN included) are not read
  else out.mul_(beta).add_(p, alpha);
}

// out = alpha * a @ b + beta * out (+ bias per column, + activation) on the cuda runtime. a: [B,]m x k,
// b: [B,]k x n, out: [B,]m x n (any strides: a non row-major out is computed in a scratch and copied).
void cudaGemm(const Tensor& out, const Tensor& a, const Tensor& b, const c10::Scalar& alpha_s,
              const c10::Scalar& beta_s, const Tensor& bias, GemmEpilogue epi) {
  if (out.is_complex()) return complexGemm(out, a, b, alpha_s, beta_s);
  const double alpha = alpha_s.toDouble(), beta = beta_s.toDouble();
  if (out.numel() == 0) return;
  // The GEMM library's handle is per device and taken from the current device: it must be out's device, the
  // device of the stream the work goes to.
  c10::DeviceGuard guard(out.device());
  if (!rowMajorOut(out)) {
    Tensor tmp = beta != 0 ? out.contiguous() : at::empty(out.sizes(), out.options());
    cudaGemm(tmp, a, b, alpha_s, beta_s, bias, epi);
    out.copy_(tmp);
    return;
  }
  const bool batched = out.dim() == 3;
  Mat ma = matOf(a), mb = matOf(b);
  GemmArgs g;
  g.dtype = toKernelDType(out.scalar_type());
  g.batch = batched ? out.size(0) : 1;
  g.m = out.size(-2);
  g.n = out.size(-1);
  g.k = a.size(-1);
  g.a = ma.t.data_ptr();
  g.lda = ma.ld;
  g.trans_a = ma.trans;
  g.stride_a = ma.batch_stride;
  g.b = mb.t.data_ptr();
  g.ldb = mb.ld;
  g.trans_b = mb.trans;
  g.stride_b = mb.batch_stride;
  g.c = out.data_ptr();
  g.ldc = out.size(-2) == 1 ? std::max<int64_t>(1, g.n) : out.stride(-2);
  g.stride_c = batched ? out.stride(0) : 0;
  Tensor bias_c;
  if (bias.defined()) {
    bias_c = bias.contiguous();
    g.bias = bias_c.data_ptr();
  }
  g.epilogue = epi;
  g.alpha = alpha;
  g.beta = beta;
  if (!out.is_floating_point()) {
    g.alpha_int = alpha_s.toLong();  // a floating alpha or beta is truncated, as ATen's CPU integer GEMM does
    g.beta_int = beta_s.toLong();
  }
  g.allow_tf32 = at::globalContext().float32MatmulPrecision() != at::Float32MatmulPrecision::HIGHEST;
  g.workspace = gemmWorkspace(out);
  g.workspace_bytes = kGemmWorkspaceBytes;
  if (g.k == 0) {  // an empty product: out = beta * out (cuBLASLt wants k >= 1)
    if (beta == 0) out.zero_();
    else out.mul_(beta_s);
    if (bias.defined()) out.add_(bias);
    return;
  }
  MT_RT_CHECK(kernels::gemm(g, streamFor(out)));
}

// Whether `self` of addmm is a per-column bias the epilogue can add: a length-n vector, or its broadcast.
bool isColumnBias(const Tensor& self, int64_t m, int64_t n) {
  if (self.dim() == 1) return self.size(0) == n;
  return self.dim() == 2 && self.size(1) == n && (self.size(0) == 1 || self.stride(0) == 0) && (m > 0);
}

void checkMm(const Tensor& a, const Tensor& b, const char* op) {
  TORCH_CHECK(a.dim() == 2, op, ": self must be a matrix, but got a ", a.dim(), "-D tensor");
  TORCH_CHECK(b.dim() == 2, op, ": mat2 must be a matrix, but got a ", b.dim(), "-D tensor");
  TORCH_CHECK(a.size(1) == b.size(0), "mat1 and mat2 shapes cannot be multiplied (", a.size(0), "x", a.size(1), " and ",
              b.size(0), "x", b.size(1), ")");
  checkSameDtype(a, b, op);
}

Tensor& mmOut(const Tensor& a, const Tensor& b, Tensor& out) {
  if (!gemmDtype(a.scalar_type())) return Fallback<at::_ops::mm_out>::call(a, b, out);
  checkMm(a, b, "mm");
  checkOutDtype(out, a.scalar_type());
  at::native::resize_output(out, {a.size(0), b.size(1)});
  if (simHostRoute(HostRoute::Gemm)) {
    runOrRecord("mm", [ho = hostView(out), ha = hostView(a), hb = hostView(b)]() mutable {
      if (!simGemmOneDnn(ha, hb, ho, 0.f, 1.f)) at::mm_out(ho, ha, hb);  // Note [Sim GEMM library]
    });
  } else {
    cudaGemm(out, a, b, 1.0, 0.0, Tensor(), GemmEpilogue::None);
  }
  return out;
}

Tensor& addmmImpl(const Tensor& self, const Tensor& a, const Tensor& b, const c10::Scalar& beta_s,
                  const c10::Scalar& alpha_s, Tensor& out, std::optional<bool> act_gelu) {
  checkMm(a, b, "addmm");
  checkOutDtype(out, a.scalar_type());
  TORCH_CHECK(self.scalar_type() == a.scalar_type(), "addmm: expected self and mat1 to have the same dtype, but got ",
              self.scalar_type(), " != ", a.scalar_type());
  const int64_t m = a.size(0), n = b.size(1);
  const auto self_exp = self.expand({m, n});  // raises ATen's broadcast error for a mismatched self
  if (simHostRoute(HostRoute::Gemm)) {
    const bool in_place = out.is_same(self);
    at::native::resize_output(out, {m, n});
    Tensor ho = hostView(out);
    Tensor hs = in_place ? ho : hostView(self);
    Tensor ha = hostView(a), hb = hostView(b);
    runOrRecord("addmm", [=, complex = a.is_complex()]() mutable {
      if (act_gelu.has_value()) {
        at::_addmm_activation_out(ho, hs, ha, hb, beta_s, alpha_s, *act_gelu);
      } else if (complex || !simGemmOneDnn(ha, hb, ho, beta_s.toFloat(), alpha_s.toFloat(), hs)) {
        at::addmm_out(ho, hs, ha, hb, beta_s, alpha_s);  // Note [Sim GEMM library]
      }
    });
    return out;
  }
  const bool beta_zero = isZero(beta_s);
  const GemmEpilogue epi = !act_gelu.has_value() ? GemmEpilogue::None
                           : *act_gelu           ? GemmEpilogue::Gelu
                                                 : GemmEpilogue::Relu;
  if (!out.is_same(self) && floatGemmDtype(a.scalar_type()) && beta_s.toDouble() == 1.0 && isColumnBias(self, m, n)) {
    at::native::resize_output(out, {m, n});
    cudaGemm(out, a, b, alpha_s, 0.0, self.dim() == 1 ? self : self.select(0, 0), epi);
    return out;
  }
  if (!out.is_same(self)) {
    at::native::resize_output(out, {m, n});
    if (!beta_zero) out.copy_(self_exp);
  }
  cudaGemm(out, a, b, alpha_s, beta_s, Tensor(), GemmEpilogue::None);
  if (epi == GemmEpilogue::Relu) at::relu_(out);
  if (epi == GemmEpilogue::Gelu) out.copy_(at::gelu(out, "tanh"));
  return out;
}

Tensor& addmmOut(const Tensor& self, const Tensor& a, const Tensor& b, const c10::Scalar& beta,
                 const c10::Scalar& alpha, Tensor& out) {
  if (!gemmDtype(a.scalar_type())) return Fallback<at::_ops::addmm_out>::call(self, a, b, beta, alpha, out);
  return addmmImpl(self, a, b, beta, alpha, out, std::nullopt);
}

Tensor& addmmActivationOut(const Tensor& self, const Tensor& a, const Tensor& b, const c10::Scalar& beta,
                           const c10::Scalar& alpha, bool use_gelu, Tensor& out) {
  if (!floatGemmDtype(a.scalar_type()))
    return Fallback<at::_ops::_addmm_activation_out>::call(self, a, b, beta, alpha, use_gelu, out);
  return addmmImpl(self, a, b, beta, alpha, out, use_gelu);
}

void checkBmm(const Tensor& a, const Tensor& b, const char* op) {
  TORCH_CHECK(a.dim() == 3, op, ": batch1 must be a 3D tensor, but got a ", a.dim(), "-D tensor");
  TORCH_CHECK(b.dim() == 3, op, ": batch2 must be a 3D tensor, but got a ", b.dim(), "-D tensor");
  TORCH_CHECK(a.size(0) == b.size(0), op, ": batch1 and batch2 must have the same number of batches, got ", a.size(0),
              " and ", b.size(0));
  TORCH_CHECK(a.size(2) == b.size(1), "Expected size for first two dimensions of batch2 tensor to be: [", a.size(0),
              ", ", a.size(2), "] but got: [", b.size(0), ", ", b.size(1), "].");
  checkSameDtype(a, b, op);
}

Tensor& bmmOut(const Tensor& a, const Tensor& b, Tensor& out) {
  if (!gemmDtype(a.scalar_type())) return Fallback<at::_ops::bmm_out>::call(a, b, out);
  checkBmm(a, b, "bmm");
  checkOutDtype(out, a.scalar_type());
  at::native::resize_output(out, {a.size(0), a.size(1), b.size(2)});
  if (simHostRoute(HostRoute::Gemm)) {
    runOrRecord("bmm", [ho = hostView(out), ha = hostView(a), hb = hostView(b)]() mutable {
      if (!simGemmOneDnn(ha, hb, ho, 0.f, 1.f)) at::bmm_out(ho, ha, hb);  // Note [Sim GEMM library]
    });
  } else {
    cudaGemm(out, a, b, 1.0, 0.0, Tensor(), GemmEpilogue::None);
  }
  return out;
}

Tensor& baddbmmOut(const Tensor& self, const Tensor& a, const Tensor& b, const c10::Scalar& beta_s,
                   const c10::Scalar& alpha_s, Tensor& out) {
  if (!gemmDtype(a.scalar_type())) return Fallback<at::_ops::baddbmm_out>::call(self, a, b, beta_s, alpha_s, out);
  checkBmm(a, b, "baddbmm");
  checkOutDtype(out, a.scalar_type());
  const std::vector<int64_t> shape{a.size(0), a.size(1), b.size(2)};
  const auto self_exp = self.expand(shape);
  if (simHostRoute(HostRoute::Gemm)) {
    const bool in_place = out.is_same(self);
    at::native::resize_output(out, shape);
    Tensor ho = hostView(out), hs = in_place ? ho : hostView(self), ha = hostView(a), hb = hostView(b);
    runOrRecord("baddbmm", [=, complex = a.is_complex()]() mutable {
      if (complex || !simGemmOneDnn(ha, hb, ho, beta_s.toFloat(), alpha_s.toFloat(), hs))  // [Sim GEMM library]
        at::baddbmm_out(ho, hs, ha, hb, beta_s, alpha_s);
    });
    return out;
  }
  if (!out.is_same(self)) {
    at::native::resize_output(out, shape);
    if (!isZero(beta_s)) out.copy_(self_exp);
  }
  cudaGemm(out, a, b, alpha_s, beta_s, Tensor(), GemmEpilogue::None);
  return out;
}

// addbmm: beta * self + alpha * sum_b A_b B_b, one GEMM over the batches laid side by side: [m, B*k] x [B*k, n].
Tensor& addbmmOut(const Tensor& self, const Tensor& a, const Tensor& b, const c10::Scalar& beta_s,
                  const c10::Scalar& alpha_s, Tensor& out) {
  if (!gemmDtype(a.scalar_type()) || a.dim() != 3 || b.dim() != 3)
    return Fallback<at::_ops::addbmm_out>::call(self, a, b, beta_s, alpha_s, out);
  TORCH_CHECK(a.size(0) == b.size(0), "batch1 and batch2 must have same number of batches, got ", a.size(0), " and ",
              b.size(0));
  TORCH_CHECK(a.size(2) == b.size(1), "Incompatible matrix sizes for bmm (", a.size(1), "x", a.size(2), " and ",
              b.size(1), "x", b.size(2), ")");
  const int64_t batches = a.size(0), m = a.size(1), k = a.size(2), n = b.size(2);
  Tensor wide = a.permute({1, 0, 2}).reshape({m, batches * k}), tall = b.reshape({batches * k, n});
  return addmmOut(self, wide, tall, beta_s, alpha_s, out);
}

Tensor addbmm(const Tensor& self, const Tensor& a, const Tensor& b, const c10::Scalar& beta, const c10::Scalar& alpha) {
  Tensor out = at::empty({0}, self.options());
  return addbmmOut(self, a, b, beta, alpha, out);
}

Tensor& addbmmInplace(Tensor& self, const Tensor& a, const Tensor& b, const c10::Scalar& beta,
                      const c10::Scalar& alpha) {
  return addbmmOut(self, a, b, beta, alpha, self);
}

Tensor& addmvOut(const Tensor& self, const Tensor& mat, const Tensor& vec, const c10::Scalar& beta_s,
                 const c10::Scalar& alpha_s, Tensor& out) {
  if (!gemmDtype(mat.scalar_type())) return Fallback<at::_ops::addmv_out>::call(self, mat, vec, beta_s, alpha_s, out);
  TORCH_CHECK(mat.dim() == 2 && vec.dim() == 1, "vector + matrix @ vector expected, got ", self.dim(), ", ", mat.dim(),
              ", ", vec.dim());
  TORCH_CHECK(mat.size(1) == vec.size(0), "size mismatch, got input (", self.size(0), "), mat (", mat.size(0), "x",
              mat.size(1), "), vec (", vec.size(0), ")");
  checkSameDtype(mat, vec, "addmv");
  checkOutDtype(out, mat.scalar_type());
  const auto self_exp = self.expand({mat.size(0)});
  if (simHostRoute(HostRoute::Gemm)) {
    const bool in_place = out.is_same(self);
    at::native::resize_output(out, {mat.size(0)});
    Tensor ho = hostView(out);
    runOrRecord("addmv", [=, hs = in_place ? ho : hostView(self), hm = hostView(mat), hv = hostView(vec)]() mutable {
      at::addmv_out(ho, hs, hm, hv, beta_s, alpha_s);
    });
    return out;
  }
  if (!out.is_same(self)) {
    at::native::resize_output(out, {mat.size(0)});
    if (!isZero(beta_s)) out.copy_(self_exp);
  }
  cudaGemm(out.unsqueeze(1), mat, vec.unsqueeze(1), alpha_s, beta_s, Tensor(), GemmEpilogue::None);
  return out;
}

// dot, and vdot (dot of the first operand's conjugate: a conjugate view, which the GEMM family takes).
Tensor dotImpl(const Tensor& a, const Tensor& b) {
  TORCH_CHECK(a.dim() == 1 && b.dim() == 1, "1D tensors expected, but got ", a.dim(), "D and ", b.dim(), "D tensors");
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "dot : expected both vectors to have same dtype, but found ",
              a.scalar_type(), " and ", b.scalar_type());
  TORCH_CHECK(a.numel() == b.numel(), "inconsistent tensor size, expected tensor [", a.numel(), "] and src [",
              b.numel(), "] to have the same number of elements, but got ", a.numel(), " and ", b.numel(),
              " elements respectively");
  Tensor out = at::empty({}, a.options());
  if (simHostRoute(HostRoute::Gemm)) {
    runOrRecord("dot",
                [ho = hostView(out), ha = hostView(a), hb = hostView(b)]() mutable { ho.copy_(at::dot(ha, hb)); });
  } else {
    cudaGemm(out.view({1, 1}), a.unsqueeze(0), b.unsqueeze(1), 1.0, 0.0, Tensor(), GemmEpilogue::None);
  }
  return out;
}

Tensor dot(const Tensor& a, const Tensor& b) {
  if (!gemmDtype(a.scalar_type())) return Fallback<at::_ops::dot>::call(a, b);
  return dotImpl(a, b);
}

Tensor vdot(const Tensor& a, const Tensor& b) {
  if (!gemmDtype(a.scalar_type())) return Fallback<at::_ops::vdot>::call(a, b);
  return dotImpl(a.is_complex() ? a.conj() : a, b);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "mm.out", mmOut);
  MT_IMPL(m, "addmm.out", addmmOut);
  MT_IMPL(m, "_addmm_activation.out", addmmActivationOut);
  MT_IMPL(m, "bmm.out", bmmOut);
  MT_IMPL(m, "baddbmm.out", baddbmmOut);
  MT_IMPL(m, "addmv.out", addmvOut);
  MT_IMPL(m, "dot", dot);
  MT_IMPL(m, "vdot", vdot);
  MT_IMPL(m, "addbmm.out", addbmmOut);
  MT_IMPL(m, "addbmm", addbmm);
  MT_IMPL(m, "addbmm_", addbmmInplace);
}

} // namespace mytorch
