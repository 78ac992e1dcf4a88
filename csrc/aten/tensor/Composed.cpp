// Op table: operators mytorch answers by composing its native kernels (Note [Composed ops]).
//
// Note [Composed ops]
// ATen's CUDA backend has a kernel of its own for these operators, but each is a short composition of
// operators mytorch already runs natively (a comparison and a reduction, a view and a sum, a few products over
// views): composing them keeps the op on the device (on a GPU a fallback is two copies and a synchronisation)
// without a kernel per operator. Each keeps ATen's argument checks and messages, and computes in the dtype ATen
// computes in (opmath for the half types where ATen's kernel rounds once), so that results agree with the CPU
// to the shared tolerance. Arguments outside what a composition covers (complex, empty edge cases ATen words
// specially) take the CPU fallback, counted as such.
#include <ATen/ExpandUtils.h>
#include <ATen/Dispatch.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/complex_ops.h>
#include <ATen/ops/logspace_ops.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/_prelu_kernel_ops.h>
#include <ATen/ops/_prelu_kernel_backward_ops.h>
#include <ATen/ops/tril.h>
#include <ATen/ops/tril_indices_ops.h>
#include <ATen/ops/triu.h>
#include <ATen/ops/triu_indices_ops.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/all.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/log2.h>
#include <ATen/ops/frexp_ops.h>
#include <ATen/ops/floor.h>
#include <ATen/ops/exp2.h>
#include <ATen/ops/trunc.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/amin.h>
#include <ATen/ops/aminmax_ops.h>
#include <ATen/ops/add.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/div.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/full.h>
#include <ATen/ops/glu_backward_ops.h>
#include <ATen/ops/glu_ops.h>
#include <ATen/ops/bitwise_xor.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/index_put.h>
#include <ATen/ops/linalg_cross_ops.h>
#include <ATen/ops/linalg_vector_norm.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/nonzero.h>
#include <ATen/ops/nonzero_static_ops.h>
#include <ATen/ops/norm_ops.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/renorm_ops.h>
#include <ATen/ops/repeat_interleave_ops.h>
#include <ATen/ops/rsub.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/unfold_backward_ops.h>
#include <ATen/ops/view_as_real.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/accumulate.h>
#include <torch/library.h>

#include <algorithm>

#include "csrc/core/Checked.h"
#include "csrc/aten/glue/Glue.h"
#include "csrc/aten/glue/Pointwise.h"
#include "mytorch/llm.h"
#include "csrc/core/Runtime.h"
#include "csrc/core/KernelDType.h"

namespace mytorch {
namespace {

using at::Tensor;

// out = value, resized as ATen resizes an out= (a fresh result is moved in without a copy).
// equal: ATen's CPU and CUDA kernels compare in the two tensors' common dtype (eq's promotion).
bool equal(const Tensor& self, const Tensor& other) {
  if (!self.is_same_size(other)) return false;
  if (self.numel() == 0) return true;
  const auto common = at::result_type(self, other);
  const Tensor a = self.to(common), b = other.to(common);
  if (a.is_complex())
    return at::all(at::eq(at::view_as_real(a.resolve_conj()), at::view_as_real(b.resolve_conj()))).item<bool>();
  return at::all(at::eq(a, b)).item<bool>();
}

Tensor trace(const Tensor& self) {
  TORCH_CHECK(self.dim() == 2, "trace: expected a matrix, but got tensor with dim ", self.dim());
  if (self.is_complex()) return Fallback<at::_ops::trace>::call(self);
  return at::sum(self.diagonal());  // integers sum into int64, as ATen's trace
}

std::tuple<Tensor&, Tensor&> aminmaxOut(const Tensor& self, std::optional<int64_t> dim, bool keepdim, Tensor& min,
                                        Tensor& max) {
  if (self.is_complex()) return Fallback<at::_ops::aminmax_out>::call(self, dim, keepdim, min, max);
  if (dim.has_value()) {
    const int64_t d = at::maybe_wrap_dim(*dim, self.dim());
    TORCH_CHECK_INDEX(self.dim() == 0 || self.size(d) != 0, "aminmax: Expected reduction dim ", d,
                      " to have non-zero size.");
  } else {
    TORCH_CHECK(self.numel() > 0,
                "aminmax(): cannot compute aminmax over an empty dimension as the operation has "
                "no identity.");
  }
  checkOutDtype(min, self.scalar_type());
  checkOutDtype(max, self.scalar_type());
  std::vector<int64_t> dims;
  if (dim.has_value() && self.dim() > 0) dims.push_back(*dim);
  Tensor lo = at::amin(self, dims, keepdim), hi = at::amax(self, dims, keepdim);
  if (!dim.has_value() && keepdim) {  // ATen keeps every dimension as 1 when reducing all of them
    std::vector<int64_t> ones(self.dim(), 1);
    lo = lo.reshape(ones);
    hi = hi.reshape(ones);
  }
  assignOut(min, lo);
  assignOut(max, hi);
  return {min, max};
}

std::tuple<Tensor, Tensor> aminmax(const Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  Tensor min = at::empty({0}, self.options()), max = at::empty({0}, self.options());
  aminmaxOut(self, dim, keepdim, min, max);
  return {min, max};
}

// norm.out / norm.dtype_out: ATen's impl is linalg_vector_norm, which mytorch runs natively.
void checkNormInput(const Tensor& self) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()) || at::isComplexType(self.scalar_type()),
              "norm(): input dtype should be either floating point or complex. Got ", self.scalar_type(), " instead.");
}

Tensor& normOut(const Tensor& self, const std::optional<c10::Scalar>& p, at::IntArrayRef dim, bool keepdim,
                Tensor& out) {
  checkNormInput(self);
  return at::linalg_vector_norm_out(out, self, p.value_or(2.0), dim, keepdim, std::nullopt);
}

Tensor& normDtypeOut(const Tensor& self, const std::optional<c10::Scalar>& p, at::IntArrayRef dim, bool keepdim,
                     at::ScalarType dtype, Tensor& out) {
  checkNormInput(self);
  TORCH_CHECK(at::isFloatingType(dtype) || at::isComplexType(dtype),
              "norm(): the desired output dtype should be either floating point or complex. Got ", dtype, " instead.");
  return at::linalg_vector_norm_out(out, self, p.value_or(2.0), dim, keepdim, dtype);
}

// renorm: each slice along dim whose p-norm exceeds maxnorm is scaled to maxnorm (ATen's factor, with its 1e-7).
Tensor& renormOut(const Tensor& self, const c10::Scalar& p, int64_t dim, const c10::Scalar& maxnorm, Tensor& out) {
  TORCH_CHECK(!p.isComplex(), "renorm: p must be real-valued");
  TORCH_CHECK(p.toDouble() > 0.0, "renorm: non-positive-norm not supported");
  TORCH_CHECK(!maxnorm.isComplex(), "renorm: maxnorm must be real-valued");
  TORCH_CHECK(maxnorm.toDouble() >= 0.0, "renorm: expected maxnorm to be >= 0 but got ", maxnorm.toDouble());
  TORCH_CHECK(self.dim() > 1, "renorm: input needs at least 2 dimensions, got ", self.dim(), " dimensions");
  if (self.is_complex() || !kernelFloating(self.scalar_type()))
    return Fallback<at::_ops::renorm_out>::call(self, p, dim, maxnorm, out);
  checkOutDtype(out, self.scalar_type());
  dim = at::maybe_wrap_dim(dim, self.dim());
  std::vector<int64_t> reduce;
  for (int64_t d = 0; d < self.dim(); ++d)
    if (d != dim) reduce.push_back(d);
  const auto acc = opmathType(self.scalar_type());
  Tensor norm = at::linalg_vector_norm(self, p, reduce, /*keepdim=*/true, acc);
  const double maxv = maxnorm.toDouble();
  Tensor factor = at::where(at::gt(norm, maxv), at::div(at::full({}, maxv, norm.options()), at::add(norm, 1e-7)),
                            at::full({}, 1.0, norm.options()));
  return assignOut(out, at::mul(self, factor.to(self.scalar_type())));
}

// linalg_cross: out_i = a_{i+1} b_{i+2} - a_{i+2} b_{i+1} over views along dim, in the inputs' dtype as ATen.
Tensor& linalgCrossOut(const Tensor& self, const Tensor& other, int64_t dim, Tensor& out) {
  TORCH_CHECK(self.dim() == other.dim(), "linalg.cross: inputs must have the same number of dimensions.");
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK(self.size(d) == 3 && other.size(d) == 3, "linalg.cross: inputs dimension ", dim,
              " must have length 3. Got ", self.size(d), " and ", other.size(d));
  if (self.is_complex() || self.scalar_type() != other.scalar_type() ||
      toKernelDType(self.scalar_type()) == DType::Other)
    return Fallback<at::_ops::linalg_cross_out>::call(self, other, dim, out);
  checkOutDtype(out, self.scalar_type());
  const auto shape = at::infer_size(self.sizes(), other.sizes());
  Tensor result = at::empty(shape, self.options());
  for (int64_t i = 0; i < 3; ++i) {
    const int64_t j = (i + 1) % 3, k = (i + 2) % 3;
    Tensor r = result.select(d, i);
    at::sub_out(r, at::mul(self.select(d, j), other.select(d, k)), at::mul(self.select(d, k), other.select(d, j)));
  }
  return assignOut(out, result);
}

// glu: a * sigmoid(b) over the two halves along dim, in opmath for the half types (ATen rounds once).
std::tuple<Tensor, Tensor, int64_t> gluHalves(const Tensor& self, int64_t dim) {
  TORCH_CHECK(self.dim() > 0, "glu does not support scalars because halving size must be even");
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  const int64_t n = self.size(d);
  TORCH_CHECK(n % 2 == 0, "Halving dimension must be even, but dimension ", d, " is size ", n);
  return {self.narrow(d, 0, n / 2), self.narrow(d, n / 2, n / 2), d};
}

// One launch of the fused GLU kernel (kernels/include/mytorch/llm.h, act Sigmoid: b is its gate, a its up): the
// input contiguous, viewed as (outer, n * inner), each half a row block of (n / 2) * inner elements.
Tensor& gluOut(const Tensor& self, int64_t dim, Tensor& out) {
  if (!kernelFloating(self.scalar_type())) return Fallback<at::_ops::glu_out>::call(self, dim, out);
  auto [a, b, d] = gluHalves(self, dim);
  checkCastOut(out, self.scalar_type());
  at::native::resize_output(out, a.sizes());
  Tensor y =
      out.is_contiguous() && out.scalar_type() == self.scalar_type() ? out : at::empty(a.sizes(), self.options());
  if (y.numel() == 0) return assignOut(out, y);
  const Tensor x = self.contiguous();
  GluArgs g;
  g.act = GluAct::Sigmoid;
  g.dtype = toKernelDType(x.scalar_type());
  g.cols = y.numel() / c10::multiply_integers(x.sizes().slice(0, d));
  g.rows = y.numel() / g.cols;
  g.gate_ld = g.up_ld = 2 * g.cols;
  g.y_ld = g.cols;
  g.up = x.const_data_ptr();
  g.gate = static_cast<const char*>(x.const_data_ptr()) + g.cols * x.element_size();
  g.y = y.mutable_data_ptr();
  c10::DeviceGuard guard(x.device());
  MT_RT_CHECK(kernels::glu_forward(g, streamFor(x)));
  return y.is_same(out) ? out : assignOut(out, y);
}

Tensor& gluBackwardOut(const Tensor& grad, const Tensor& self, int64_t dim, Tensor& grad_input) {
  if (!kernelFloating(self.scalar_type()) || grad.scalar_type() != self.scalar_type())
    return Fallback<at::_ops::glu_backward_grad_input>::call(grad, self, dim, grad_input);
  auto [a, b, d] = gluHalves(self, dim);
  checkExactOut(grad_input, self.scalar_type());
  const auto acc = opmathType(self.scalar_type());
  // As ATen: sigmoid(b) in the input's dtype, its product with the gradient rounded once more, and the second
  // half's product in opmath from that rounded sigmoid.
  Tensor sig = at::sigmoid(b), sig_acc = sig.to(acc);
  Tensor result = at::empty(self.sizes(), self.options());
  const int64_t half = self.size(d) / 2;
  result.narrow(d, 0, half).copy_(at::mul(sig, grad));
  result.narrow(d, half, half).copy_(at::mul(at::mul(at::mul(at::rsub(sig_acc, 1), sig_acc), a.to(acc)), grad.to(acc)));
  return assignOut(grad_input, result);
}

Tensor gluBackward(const Tensor& grad, const Tensor& self, int64_t dim) {
  Tensor grad_input = at::empty({0}, self.options());
  return gluBackwardOut(grad, self, dim, grad_input);
}

// channel_shuffle: (N, g, C/g, *) -> (N, C/g, g, *) by one strided copy, in the input's memory format.
Tensor channel_shuffle(const Tensor& self, c10::SymInt groups_sym) {
  const int64_t groups = groups_sym.guard_int(__FILE__, __LINE__);
  TORCH_CHECK(self.dim() > 2, "channel_shuffle expects input to have at least 3 dimensions, but got input with sizes ",
              self.sizes());
  TORCH_CHECK(groups > 0, "Number of groups to divide channels in must be positive.", " Value of groups:", groups);
  const int64_t c = self.size(1);
  TORCH_CHECK(c % groups == 0, "Number of channels must be divisible by groups. Got ", c, " channels and ", groups,
              " groups.");
  const auto format = self.suggest_memory_format();
  Tensor result = at::empty(self.sizes(), self.options().memory_format(format));
  if (self.numel() == 0) return result;
  std::vector<int64_t> split = {self.size(0), groups, c / groups, -1};
  Tensor shuffled = self.reshape(split).permute({0, 2, 1, 3});
  result.view(std::vector<int64_t>{self.size(0), c / groups, groups, self.numel() / (self.size(0) * c)})
      .copy_(shuffled);
  return result;
}

Tensor channelShuffleAny(const Tensor& self, c10::SymInt groups) {
  // channels_last results cannot be viewed as (N, C/g, g, *): shuffle contiguously, then change the format.
  if (self.dim() > 2 && self.suggest_memory_format() != at::MemoryFormat::Contiguous)
    return channel_shuffle(self.contiguous(), groups).contiguous(self.suggest_memory_format());
  return channel_shuffle(self, groups);
}

// unfoldBackward: window element k of window j came from input position j*step + k along dim; one strided add
// per k, each of them free of overlap.
Tensor unfoldBackward(const Tensor& grad_in, c10::SymIntArrayRef input_sizes_sym, int64_t dim, int64_t size,
                      int64_t step) {
  auto input_sizes = C10_AS_INTARRAYREF_SLOW(input_sizes_sym);
  // ATen's checks in ATen's order: the step, the dimension, the size.
  TORCH_CHECK_VALUE(step > 0, "step is ", step, " but must be > 0");
  const int64_t d = at::maybe_wrap_dim(dim, static_cast<int64_t>(input_sizes.size()));
  TORCH_CHECK(size >= 0, "size is ", size, " but must be >= 0");
  if (toKernelDType(grad_in.scalar_type()) == DType::Other)
    return Fallback<at::_ops::unfold_backward>::call(grad_in, input_sizes, dim, size, step);
  if (input_sizes.empty()) {  // a 0-d input unfolds to one window of size 0 or 1
    Tensor grad_input = at::zeros({}, grad_in.options());
    if (grad_in.numel() > 0) grad_input.add_(grad_in.reshape({-1}).select(0, 0));
    return grad_input;
  }
  Tensor grad_input = at::zeros(input_sizes, grad_in.options());
  const int64_t windows = grad_in.size(d);
  if (windows == 0 || size == 0) return grad_input;
  for (int64_t k = 0; k < size; ++k) {
    Tensor dst = grad_input.slice(d, k, k + (windows - 1) * step + 1, step);
    dst.add_(grad_in.select(-1, k));
  }
  return grad_input;
}

// nonzeroStatic: nonzero's rows, cut or padded with fill_value to `size` rows. Only the first `size` are kept, so
// the flattened input is searched by prefixes growing fourfold (from 8 * size elements) until they hold `size`
// non-zeros or the whole input is read, and the flat indices unravelled: size = 0 reads nothing, as on the CPU
// (a whole nonzero first took 0.9 ms on 216,000 elements against the CPU's 1 us).
Tensor& nonzeroStaticOut(const Tensor& self, c10::SymInt size_sym, int64_t fill_value, Tensor& out) {
  const int64_t size = size_sym.guard_int(__FILE__, __LINE__);
  TORCH_CHECK(size >= 0, "nonzero_static: 'size' must be an non-negative integer");
  TORCH_CHECK(out.scalar_type() == at::kLong, "nonzero_static: Expected out tensor to have scalar type Long but got ",
              "scalar type", out.scalar_type());
  Tensor result = at::full({size, self.dim()}, fill_value, self.options().dtype(at::kLong));
  const int64_t numel = self.numel();
  if (size == 0 || numel == 0) return assignOut(out, result);
  const Tensor flat = self.reshape({-1});
  Tensor found;
  for (int64_t len = std::min(numel, std::max<int64_t>(4096, 8 * size));; len = std::min(numel, 4 * len)) {
    found = at::nonzero(flat.narrow(0, 0, len)).select(1, 0);
    if (found.size(0) >= size || len == numel) break;
  }
  const int64_t n = std::min(size, found.size(0));
  if (n > 0 && self.dim() > 0) {
    Tensor rest = found.narrow(0, 0, n);
    for (int64_t d = self.dim() - 1; d >= 0; --d) {
      result.narrow(0, 0, n).select(1, d).copy_(at::remainder(rest, self.size(d)));
      rest = at::div(rest, self.size(d), "floor");
    }
  }
  return assignOut(out, result);
}

Tensor nonzeroStatic(const Tensor& self, c10::SymInt size, int64_t fill_value) {
  Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  return nonzeroStaticOut(self, std::move(size), fill_value, out);
}

// repeatInterleave(repeats): index i repeated repeats[i] times: a 1 at each segment's end, summed by a scan.
Tensor repeatInterleave(const Tensor& repeats, std::optional<c10::SymInt> output_size) {
  TORCH_CHECK(repeats.dim() == 1, "repeat_interleave only accept 1D vector as repeat");
  TORCH_CHECK(repeats.scalar_type() == at::kLong || repeats.scalar_type() == at::kInt,
              "repeats has to be Long or Int tensor");
  if (repeats.size(0) == 0) return at::empty_like(repeats, at::MemoryFormat::Contiguous);
  Tensor ends = at::cumsum(repeats, 0, at::kLong);
  int64_t total;
  if (output_size.has_value()) {
    total = output_size->guard_int(__FILE__, __LINE__);
  } else {
    total = ends[-1].item<int64_t>();
    TORCH_CHECK(at::all(at::ge(repeats, 0)).item<bool>(), "repeats can not be negative");
  }
  Tensor marks = at::zeros({total + 1}, repeats.options().dtype(at::kLong));
  Tensor at_end = ends.narrow(0, 0, repeats.size(0) - 1).clamp(0, total);
  marks.index_put_({at_end}, at::ones_like(at_end), /*accumulate=*/true);
  return at::cumsum(marks.narrow(0, 0, total), 0).to(repeats.scalar_type());
}

// prelu's kernels (the composite prelu broadcasts the weight): the Prelu rows, x > 0 ? x : w x and its two
// gradients in one pass each, over the broadcast shape as ATen's.
Tensor preluKernel(const Tensor& self, const Tensor& weight) {
  Tensor out = at::empty({0}, self.options());
  if (weight.scalar_type() != self.scalar_type() || !ewTry(EwOp::Prelu, {self, weight}, out))
    return Fallback<at::_ops::_prelu_kernel>::call(self, weight);
  return out;
}

std::tuple<Tensor, Tensor> preluKernelBackward(const Tensor& grad, const Tensor& self, const Tensor& weight) {
  Tensor gi = at::empty({0}, self.options()), gw = at::empty({0}, self.options());
  if (weight.scalar_type() != self.scalar_type() || grad.scalar_type() != self.scalar_type() ||
      !ewNative(EwOp::PreluBackwardInput, self.scalar_type(), {grad, self, weight}))
    return Fallback<at::_ops::_prelu_kernel_backward>::call(grad, self, weight);
  ewRun(EwOp::PreluBackwardInput, self.scalar_type(), {grad, self, weight}, gi);
  ewRun(EwOp::PreluBackwardWeight, self.scalar_type(), {grad, self}, gw);
  return {gi, gw};
}

// tril_indices / triu_indices: the (row, column) pairs of the triangle in row-major order, which is nonzero's order
// over the triangle's mask.
template <bool kLower>
Tensor triangleIndices(int64_t row, int64_t col, int64_t offset, std::optional<at::ScalarType> dtype,
                       std::optional<at::Layout> layout, std::optional<at::Device> device, std::optional<bool> pin) {
  const auto dt = dtype.value_or(at::kLong);
  if ((dt != at::kLong && dt != at::kInt) || (layout.has_value() && *layout != at::kStrided))
    return kLower ? Fallback<at::_ops::tril_indices>::call(row, col, offset, dtype, layout, device, pin)
                  : Fallback<at::_ops::triu_indices>::call(row, col, offset, dtype, layout, device, pin);
  TORCH_CHECK(row >= 0, "row must be non-negative, got", row);
  TORCH_CHECK(col >= 0, "col must be non-negative, got", col);
  const auto opts = at::TensorOptions().dtype(dt).device(device.value_or(at::Device(at::kPrivateUse1)));
  if (row == 0 || col == 0) return at::empty({2, 0}, opts);
  Tensor ones = at::ones({row, col}, opts.dtype(at::kBool));
  Tensor mask = kLower ? at::tril(ones, offset) : at::triu(ones, offset);
  return at::nonzero(mask).t().contiguous().to(dt);
}

// logspace: base ** exponent, the exponents ATen's CPU kernel computes (in double from the dtype's start and end,
// from both ends toward the middle), then cast to the out= dtype.
Tensor& logspaceOut(const c10::Scalar& start, const c10::Scalar& end, int64_t steps, double base, Tensor& out) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  if (out.is_complex() || toKernelDType(out.scalar_type()) == DType::Other || out.scalar_type() == at::kBool)
    return Fallback<at::_ops::logspace_out>::call(start, end, steps, base, out);
  if (out.numel() != steps) out.resize_({steps}); // as the CPU's logspace: no warning, an out= of the right size kept
  if (steps == 0) return out;
  if (steps == 1) {
    out.fill_(std::pow(base, start.to<double>()));
    return out;
  }
  double lo = 0, hi = 0;
  AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, out.scalar_type(), "logspace", [&] {
    lo = static_cast<double>(start.to<scalar_t>());
    hi = static_cast<double>(end.to<scalar_t>());
  });
  const double step = (hi - lo) / static_cast<double>(steps - 1);
  const auto dbl = out.options().dtype(at::kDouble);
  Tensor i = at::arange(steps, dbl);
  Tensor from_start = at::add(at::mul(i, step), lo);
  Tensor from_end = at::rsub(at::mul(at::rsub(i, static_cast<double>(steps - 1)), step), hi);
  Tensor exponent = at::where(at::lt(i, static_cast<double>(steps / 2)), from_start, from_end);
  out.copy_(at::pow(base, exponent).view(out.sizes()));
  return out;
}

// complex(real, imag): the two halves of the complex result's real view (complex32 too: copies, no arithmetic).
Tensor& complexOut(const Tensor& real, const Tensor& imag, Tensor& out) {
  const auto t = real.scalar_type();
  if ((t != at::kFloat && t != at::kDouble && t != at::kHalf) || imag.scalar_type() != t ||
      out.scalar_type() != c10::toComplexType(t))
    return Fallback<at::_ops::complex_out>::call(real, imag, out);
  const auto shape = at::infer_size(real.sizes(), imag.sizes());
  const bool resized = out.sizes() != at::IntArrayRef(shape);
  at::native::resize_output(out, shape);
  if (resized && real.sizes() == shape && imag.sizes() == shape && real.strides() == imag.strides() &&
      real.is_non_overlapping_and_dense()) {
    // a resized out= takes the inputs' layout, as TensorIterator restrides it on the CPU: a transposed pair then
    // copies without transposing (0.17x the CPU with a contiguous result)
    out.as_strided_(shape, real.strides());
  }
  Tensor parts = at::view_as_real(out);
  parts.select(-1, 0).copy_(real.expand(shape));
  parts.select(-1, 1).copy_(imag.expand(shape));
  return out;
}

// frexp: x = mantissa * 2^exponent, |mantissa| in [0.5, 1) (0, infinities and NaN: themselves and exponent 0, as
// std::frexp), read from the bits by two rows of the elementwise engine (ops_math.h frexp_bits): the exponent as a
// value of x's dtype (exact) into a scratch tensor, converted into the exponent by the copy kernel (any strides, as
// the engine: MT_IMPL_ENGINE_OUT), then the mantissa, which may be written over x itself. Composing it from about
// 15 native bitwise passes ran at 0.16-0.20x the CPU.
std::tuple<Tensor&, Tensor&> frexpOut(const Tensor& self, Tensor& mantissa, Tensor& exponent) {
  if (!at::isFloatingType(self.scalar_type()) || mantissa.scalar_type() != self.scalar_type() ||
      exponent.scalar_type() != at::kInt) // the CPU's refusals, with its messages
    return Fallback<at::_ops::frexp_Tensor_out>::call(self, mantissa, exponent);
  Tensor e = at::empty_like(self);
  if (!ewTry(EwOp::FrexpExponent, {self}, e) || !ewTry(EwOp::FrexpMantissa, {self}, mantissa))
    return Fallback<at::_ops::frexp_Tensor_out>::call(self, mantissa, exponent);
  assignOut(exponent, e);
  return {mantissa, exponent};
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL_ENGINE_OUT(m, "frexp.Tensor_out", frexpOut);
  MT_IMPL(m, "_prelu_kernel", preluKernel);
  MT_IMPL(m, "_prelu_kernel_backward", preluKernelBackward);
  MT_IMPL(m, "tril_indices", triangleIndices<true>);
  MT_IMPL(m, "triu_indices", triangleIndices<false>);
  MT_IMPL(m, "logspace.out", logspaceOut);
  MT_IMPL(m, "complex.out", complexOut);
  MT_IMPL(m, "equal", equal);
  MT_IMPL(m, "trace", trace);
  MT_IMPL(m, "aminmax", aminmax);
  MT_IMPL(m, "aminmax.out", aminmaxOut);
  MT_IMPL(m, "norm.out", normOut);
  MT_IMPL(m, "norm.dtype_out", normDtypeOut);
  MT_IMPL(m, "renorm.out", renormOut);
  MT_IMPL(m, "linalg_cross.out", linalgCrossOut);
  MT_IMPL(m, "glu.out", gluOut);
  MT_IMPL(m, "glu_backward.grad_input", gluBackwardOut);
  MT_IMPL(m, "glu_backward", gluBackward);
  MT_IMPL(m, "channel_shuffle", channelShuffleAny);
  MT_IMPL(m, "unfold_backward", unfoldBackward);
  MT_IMPL(m, "nonzero_static", nonzeroStatic);
  MT_IMPL(m, "nonzero_static.out", nonzeroStaticOut);
  MT_IMPL(m, "repeat_interleave.Tensor", repeatInterleave);
}

} // namespace mytorch
