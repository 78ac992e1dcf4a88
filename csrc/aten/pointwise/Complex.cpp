// Complex arithmetic that real models reach (DeepSeek-V2's rotary embedding: polar, complex mul,
// conj_physical in the backward; abs, sgn, neg, and sum and mean), composed natively from the real kernels on the tensors' real views
// (at::view_as_real) instead of running on the CPU through the fallback. The elementwise kernels themselves
// have no complex dtypes (Pointwise.h); complex division is composed too, with c10::complex's algorithm.
//
// Each result's real and imaginary parts are computed into temporaries first and then written, so an output
// that aliases an input (in-place mul_) reads its inputs before they change.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/add.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/cos.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/div.h>
#include <ATen/ops/full.h>
#include <ATen/ops/hypot.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/logical_and.h>
#include <ATen/ops/reciprocal.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/view_as_complex.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/neg.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/sin.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/view_as_real.h>
#include <ATen/ops/where.h>
#include <torch/library.h>

#include <optional>
#include <tuple>
#include <utility>

#include "csrc/core/Checked.h"
#include "csrc/aten/glue/Glue.h"
#include "csrc/aten/glue/Pointwise.h"

namespace mytorch {
namespace {

using at::Tensor;

// One part (real or imaginary) of an operand: a real tensor, or a constant.
struct Part {
  Tensor t;
  double c = 0;
  bool tensor() const { return t.defined(); }
};

Part mulP(const Part& a, const Part& b) {
  if (a.tensor() && b.tensor()) return {at::mul(a.t, b.t)};
  if (a.tensor()) return b.c == 1 ? a : Part{at::mul(a.t, b.c)};
  if (b.tensor()) return a.c == 1 ? b : Part{at::mul(b.t, a.c)};
  return {Tensor(), a.c * b.c};
}

Part addP(const Part& a, const Part& b, double alpha) { // a + alpha * b
  if (a.tensor() && b.tensor()) return {at::add(a.t, b.t, alpha)};
  if (a.tensor()) return b.c == 0 ? a : Part{at::add(a.t, b.c * alpha)};
  if (b.tensor()) return {at::add(at::mul(b.t, alpha), a.c)};
  return {Tensor(), a.c + alpha * b.c};
}

struct Operand { Part re, im; };

// An input as real and imaginary parts at the compute dtype; nullopt when it is not a mytorch tensor or a
// scalar (the caller falls back).
std::optional<Operand> operandOf(const EwInput& in, c10::ScalarType compute, const at::Device& device) {
  c10::Scalar s;
  if (!in.isTensor()) {
    s = in.scalar();
  } else {
    const Tensor& t = in.tensor();
    if (t.dim() == 0 && t.device().is_cpu()) {
      s = t.item();
    } else {
      if (t.device() != device) return std::nullopt;
      if (!t.is_complex()) return Operand{{t.to(c10::toRealValueType(compute))}, {Tensor(), 0.0}};
      Tensor r = at::view_as_real(t.scalar_type() == compute ? t : t.to(compute));
      return Operand{{r.select(-1, 0)}, {r.select(-1, 1)}};
    }
  }
  const c10::complex<double> z = s.toComplexDouble();
  return Operand{{Tensor(), z.real()}, {Tensor(), z.imag()}};
}

// Writes the parts into `out` (complex, already sized): constants are broadcast.
void writeParts(const Tensor& out, const Part& re, const Part& im) {
  Tensor o = at::view_as_real(out);
  for (auto [k, p] : {std::pair<int, const Part*>{0, &re}, {1, &im}}) {
    if (p->tensor()) o.select(-1, k).copy_(p->t);
    else o.select(-1, k).fill_(p->c);
  }
}

// (a + bi) / (c + di) as c10::complex divides (numpy's algorithm, which ATen's CPU kernels use for every element,
// vectorised or not): Smith's scaling by the larger of |c| and |d| -- r = d / c, s = 1 / (c + d r),
// ((a + b r) s, (b - a r) s) when |c| >= |d|, the mirror image otherwise -- and a zero divisor giving
// (a / |c|, b / |d|), infinities or NaN per part.
std::pair<Part, Part> dividedParts(const Operand& x, const Operand& y, const at::TensorOptions& real) {
  auto tensor = [&](const Part& p) { return p.tensor() ? p.t : at::full({}, p.c, real); };
  const Tensor a = tensor(x.re), b = tensor(x.im), c = tensor(y.re), d = tensor(y.im);
  const Tensor ac = at::abs(c), ad = at::abs(d);
  const Tensor wide = at::ge(ac, ad), zero = at::logical_and(at::eq(ac, 0), at::eq(ad, 0));
  const Tensor r1 = at::div(d, c), s1 = at::reciprocal(at::add(c, at::mul(d, r1)));
  const Tensor r2 = at::div(c, d), s2 = at::reciprocal(at::add(d, at::mul(c, r2)));
  const Tensor re = at::where(wide, at::mul(at::add(a, at::mul(b, r1)), s1), at::mul(at::add(at::mul(a, r2), b), s2));
  const Tensor im = at::where(wide, at::mul(at::sub(b, at::mul(a, r1)), s1), at::mul(at::sub(at::mul(b, r2), a), s2));
  return {Part{at::where(zero, at::div(a, ac), re)}, Part{at::where(zero, at::div(b, ad), im)}};
}

} // namespace

bool ewComplex(EwOp op, c10::ScalarType compute, c10::ArrayRef<EwInput> inputs, const at::Tensor& out,
               const EwParams& params) {
  if (!c10::isComplexType(compute) || (op != EwOp::Add && op != EwOp::Sub && op != EwOp::Mul && op != EwOp::Div))
    return false;
  if (!out.is_complex() || inputs.size() != 2) return false;
  std::vector<Tensor> shapes;
  for (const EwInput& in : inputs) {
    if (in.isTensor()) shapes.push_back(in.tensor());
  }
  auto a = operandOf(inputs[0], compute, out.device());
  auto b = operandOf(inputs[1], compute, out.device());
  if (!a || !b) return false;
  ewCheckOut(op, compute, out);
  at::DimVector shape;
  for (const Tensor& t : shapes) shape = at::infer_size_dimvector(shape, t.sizes());
  Part re, im;
  if (op == EwOp::Div) {
    std::tie(re, im) = dividedParts(*a, *b, out.options().dtype(c10::toRealValueType(compute)));
  } else if (op == EwOp::Mul) {
    re = addP(mulP(a->re, b->re), mulP(a->im, b->im), -1.0);
    im = addP(mulP(a->re, b->im), mulP(a->im, b->re), 1.0);
  } else {
    const double alpha = op == EwOp::Sub ? -params.alpha : params.alpha;
    re = addP(a->re, b->re, alpha);
    im = addP(a->im, b->im, alpha);
  }
  ewResizeOut(out, shapes);
  if (out.scalar_type() == compute) {
    writeParts(out, re, im);
  } else {
    Tensor tmp = at::empty(shape, out.options().dtype(compute));
    writeParts(tmp, re, im);
    out.copy_(tmp);
  }
  return true;
}

bool whereComplex(const Tensor& cond, const Tensor& self, const Tensor& other, Tensor& out) {
  const auto compute = at::result_type(self, other);
  if (!c10::isComplexType(compute) || !out.is_complex()) return false;
  for (const Tensor* t : {&cond, &self, &other})
    if (t->device() != out.device()) return false;
  ewCheckOut(EwOp::Where, compute, out);
  const Tensor s = at::view_as_real(self.to(compute).resolve_conj()),
               o = at::view_as_real(other.to(compute).resolve_conj());
  const Tensor r = at::view_as_complex(at::where(cond.unsqueeze(-1), s, o));
  ewResizeOut(out, {cond, self, other});
  out.copy_(r);
  return true;
}

bool ewComplexUnary(EwOp op, const at::Tensor& self, const at::Tensor& out) {
  if (!self.is_complex() || (op != EwOp::Abs && op != EwOp::Sign && op != EwOp::Neg && op != EwOp::Reciprocal))
    return false;
  if (self.device() != out.device()) return false;
  Tensor s = at::view_as_real(self);
  Tensor re = s.select(-1, 0), im = s.select(-1, 1);
  // the row's out= rule; abs of a complex tensor has a real result that casts into a real out= (ATen's
  // unary_op_impl_with_complex_to_float_out), or writes a complex out= of exactly the input's dtype
  if (op != EwOp::Abs) ewCheckOut(op, self.scalar_type(), out);
  else if (out.is_complex()) checkExactOut(out, self.scalar_type());
  else checkCastOut(out, c10::toRealValueType(self.scalar_type()));
  if (op == EwOp::Reciprocal) { // 1 / z, ATen's reciprocal of a complex number
    const auto [pre, pim] = dividedParts(Operand{{Tensor(), 1.0}, {Tensor(), 0.0}}, Operand{{re}, {im}}, re.options());
    ewResizeOut(out, {self});
    writeParts(out, pre, pim);
    return true;
  }
  if (op == EwOp::Neg) {
    ewResizeOut(out, {self});
    writeParts(out, {at::neg(re)}, {at::neg(im)});
    return true;
  }
  Tensor mag = at::hypot(re, im); // |z| as std::abs(complex), ATen's CPU abs
  if (op == EwOp::Abs) {
    ewResizeOut(out, {self});
    if (out.is_complex()) writeParts(out, {mag}, {Tensor(), 0.0});
    else out.copy_(mag);
    return true;
  }
  Tensor zero = mag.eq(0); // sgn(0) = 0
  Part pre{at::where(zero, 0.0, at::div(re, mag))}, pim{at::where(zero, 0.0, at::div(im, mag))};
  ewResizeOut(out, {self});
  writeParts(out, pre, pim);
  return true;
}

// The input of a complex reduction at its dtype, or none when the call is not one (the caller falls back).
static std::optional<Tensor> complexReductionInput(const Tensor& self, std::optional<at::ScalarType> dtype,
                                                   const Tensor& out) {
  if (!self.is_complex() || !out.is_complex() || (dtype.has_value() && !c10::isComplexType(*dtype)))
    return std::nullopt;
  if (self.device() != out.device()) return std::nullopt;
  return dtype.has_value() && *dtype != self.scalar_type() ? self.to(*dtype) : self;
}

bool complexSum(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, std::optional<at::ScalarType> dtype,
                bool mean, const at::Tensor& out) {
  const std::optional<Tensor> input = complexReductionInput(self, dtype, out);
  if (!input) return false;
  const Tensor& x = *input;
  Tensor c;
  if (x.dim() == 0) {
    c = x.clone();
  } else {
    std::vector<int64_t> dims; // over the complex dims; the real view's last dim (re, im) stays
    if (!dim.has_value() || dim->empty()) {
      for (int64_t d = 0; d < x.dim(); ++d) dims.push_back(d);
    } else {
      for (int64_t d : *dim) dims.push_back(at::maybe_wrap_dim(d, x.dim()));
    }
    Tensor r = mean ? at::mean(at::view_as_real(x), dims, keepdim) : at::sum(at::view_as_real(x), dims, keepdim);
    c = at::view_as_complex(r.contiguous());
  }
  at::native::resize_output(out, c.sizes());
  out.copy_(c);
  return true;
}

// A product over `dim` (all dimensions when none) as a tree of complex multiplications: halves multiplied
// pairwise until one element is left (an odd element carried), so log2(n) native multiplications; the empty
// product is 1.
bool complexProd(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim, std::optional<at::ScalarType> dtype,
                 const at::Tensor& out) {
  const std::optional<Tensor> input = complexReductionInput(self, dtype, out);
  if (!input) return false;
  Tensor x = *input;
  Tensor c;
  if (x.dim() == 0) {
    c = x.clone();
  } else {
    int64_t d = 0;
    if (dim.has_value()) {
      d = at::maybe_wrap_dim(*dim, x.dim());
    } else {
      x = x.reshape(-1);
      keepdim = false;
    }
    if (x.size(d) == 0) {
      std::vector<int64_t> shape = x.sizes().vec();
      shape[d] = 1;
      x = at::ones(shape, x.options());
    }
    while (x.size(d) > 1) {
      const int64_t n = x.size(d), h = n / 2;
      Tensor p = at::mul(x.narrow(d, 0, h), x.narrow(d, h, h));
      x = n % 2 ? at::cat({p, x.narrow(d, 2 * h, 1)}, d) : p;
    }
    c = keepdim ? x : x.squeeze(d);
    if (!dim.has_value() && self.dim() > 0) c = c.reshape({});
  }
  at::native::resize_output(out, c.sizes());
  out.copy_(c);
  return true;
}

namespace {

Tensor& conjPhysicalOut(const Tensor& self, Tensor& out) {
  checkOutDtype(out, self.scalar_type());
  ewResizeOut(out, {self});
  if (!self.is_complex()) return out.copy_(self);
  TORCH_CHECK(out.is_complex(), "conj_physical: expected a complex out, but got ", out.scalar_type());
  Tensor s = at::view_as_real(self);
  writeParts(out, {s.select(-1, 0).clone()}, {at::neg(s.select(-1, 1))});
  return out;
}

Tensor& polarOut(const Tensor& abs, const Tensor& angle, Tensor& out) {
  TORCH_CHECK(abs.scalar_type() == angle.scalar_type(), "Expected object of scalar type ", abs.scalar_type(),
              " but got scalar type ", angle.scalar_type(), " for second argument");
  TORCH_CHECK(abs.scalar_type() == at::kFloat || abs.scalar_type() == at::kDouble,
              "polar: expected abs and angle of dtype float or double, but got ", abs.scalar_type());
  TORCH_CHECK(out.scalar_type() == c10::toComplexType(abs.scalar_type()), "Expected object of scalar type ",
              c10::toComplexType(abs.scalar_type()), " but got scalar type ", out.scalar_type(), " for argument 'out'");
  Part re{at::mul(abs, at::cos(angle))}, im{at::mul(abs, at::sin(angle))};
  ewResizeOut(out, {abs, angle});
  writeParts(out, re, im);
  return out;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "conj_physical.out", conjPhysicalOut);
  MT_IMPL(m, "polar.out", polarOut);
}

} // namespace mytorch
