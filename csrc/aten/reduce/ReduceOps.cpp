// Op table: reductions and scans on the reduction engine. Dtypes the kernels do not cover (complex)
// take the CPU fallback, counted as such.
#include <ATen/WrapDimUtils.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/add.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/masked_fill.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/all_ops.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/amax_ops.h>
#include <ATen/ops/amin_ops.h>
#include <ATen/ops/any_ops.h>
#include <ATen/ops/argmax_ops.h>
#include <ATen/ops/argmin_ops.h>
#include <ATen/ops/count_nonzero_ops.h>
#include <ATen/ops/cumprod_ops.h>
#include <ATen/ops/cumsum_ops.h>
#include <ATen/ops/_cummax_helper_ops.h>
#include <ATen/ops/_cummin_helper_ops.h>
#include <ATen/ops/_logcumsumexp_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/hash_tensor.h>
#include <ATen/ops/hash_tensor_ops.h>
#include <ATen/ops/linalg_vector_norm_ops.h>
#include <ATen/ops/log.h>
#include <ATen/ops/logsumexp_ops.h>
#include <ATen/ops/max_ops.h>
#include <ATen/ops/mean_ops.h>
#include <ATen/ops/min_ops.h>
#include <ATen/ops/prod_ops.h>
#include <ATen/ops/std_mean_ops.h>
#include <ATen/ops/std_ops.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/sum_ops.h>
#include <ATen/ops/var_mean_ops.h>
#include <ATen/ops/var_ops.h>
#include <torch/library.h>

#include <cmath>

#include "csrc/core/Checked.h"
#include "csrc/aten/glue/Glue.h"
#include "csrc/aten/glue/Reduce.h"

namespace mytorch {

// Complex sum and mean over the real view (Complex.cpp): false when the call is not one.
bool complexSum(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, std::optional<at::ScalarType> dtype,
                bool mean, const at::Tensor& out);
// Complex prod as a tree of complex multiplications (Complex.cpp): false when the call is not one.
bool complexProd(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim, std::optional<at::ScalarType> dtype,
                 const at::Tensor& out);

namespace {

using at::Tensor;

// Complex inputs and outputs take the CPU fallback (or the complex glue).
bool native(const Tensor& self, const Tensor& out) { return !self.is_complex() && !out.is_complex(); }

// all/any: a bool out= (uint8 for a uint8 input), with ATen's message.
void checkLogicalOut(const Tensor& self, const Tensor& out, const char* name) {
  // as TensorIterator's device check (a CPU out would otherwise take the fallback and be written on the host)
  TORCH_CHECK(out.device() == self.device(),
              "Expected all tensors to be on the same device, but found at least two "
              "devices, ",
              self.device(), " and ", out.device(), "!");
  const auto t = out.scalar_type();
  TORCH_CHECK(t == at::kBool || (t == at::kByte && self.scalar_type() == at::kByte), name,
              " only supports bool tensor for result, got: ", t);
}

Tensor& sumOut(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, std::optional<at::ScalarType> dtype,
               Tensor& out) {
  checkNamedDtype(out, dtype);
  if (!native(self, out)) {
    if (complexSum(self, dim, keepdim, dtype, /*mean=*/false, out)) return out;
    return Fallback<at::_ops::sum_IntList_out>::call(self, dim, keepdim, dtype, out);
  }
  runReduce(RedOp::Sum, computeInput(self, dtype, out), dim, keepdim, out);
  return out;
}

Tensor& meanOut(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, std::optional<at::ScalarType> dtype,
                Tensor& out) {
  const auto t = dtype.value_or(self.scalar_type());
  TORCH_CHECK(
      at::isFloatingType(t) || at::isComplexType(t),
      "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: ", t);
  checkNamedDtype(out, dtype);
  if (!native(self, out)) {
    if (complexSum(self, dim, keepdim, dtype, /*mean=*/true, out)) return out;
    return Fallback<at::_ops::mean_out>::call(self, dim, keepdim, dtype, out);
  }
  runReduce(RedOp::Mean, computeInput(self, dtype, out), dim, keepdim, out);
  return out;
}

Tensor& prodDimOut(const Tensor& self, int64_t dim, bool keepdim, std::optional<at::ScalarType> dtype, Tensor& out) {
  checkNamedDtype(out, dtype);
  if (!native(self, out)) {
    if (complexProd(self, dim, keepdim, dtype, out)) return out;
    return Fallback<at::_ops::prod_int_out>::call(self, dim, keepdim, dtype, out);
  }
  runReduce(RedOp::Prod, computeInput(self, dtype, out), at::IntArrayRef{dim}, keepdim, out);
  return out;
}

Tensor prodAll(const Tensor& self, std::optional<at::ScalarType> dtype) {
  const auto t = dtype.value_or(at::isIntegralType(self.scalar_type(), true) ? at::kLong : self.scalar_type());
  Tensor out = at::empty({}, self.options().dtype(t));
  if (!native(self, out)) {
    if (complexProd(self, std::nullopt, false, dtype, out)) return out;
    return Fallback<at::_ops::prod>::call(self, dtype);
  }
  runReduce(RedOp::Prod, castFor(self, dtype), std::nullopt, false, out);
  return out;
}

void checkNonEmpty(const Tensor& self, at::OptionalIntArrayRef dims, const char* name) {
  if (self.numel() != 0) return;
  TORCH_CHECK(dims.has_value() && !dims->empty(), name,
              "(): Expected reduction dim to be specified for input.numel() == 0. "
              "Specify the reduction dim with the 'dim' argument.");
  for (int64_t d : *dims) {
    TORCH_CHECK_INDEX(self.size(at::maybe_wrap_dim(d, self.dim())) != 0, name, "(): Expected reduction dim ", d,
                      " to have non-zero size.");
  }
}

Tensor& amaxOut(const Tensor& self, at::IntArrayRef dim, bool keepdim, Tensor& out) {
  if (!native(self, out)) return Fallback<at::_ops::amax_out>::call(self, dim, keepdim, out);
  checkNonEmpty(self, dim, "amax");
  checkOutDtype(out, self.scalar_type());
  runReduce(RedOp::Max, self, dim, keepdim, out);
  return out;
}

Tensor& aminOut(const Tensor& self, at::IntArrayRef dim, bool keepdim, Tensor& out) {
  if (!native(self, out)) return Fallback<at::_ops::amin_out>::call(self, dim, keepdim, out);
  checkNonEmpty(self, dim, "amin");
  checkOutDtype(out, self.scalar_type());
  runReduce(RedOp::Min, self, dim, keepdim, out);
  return out;
}

std::tuple<Tensor&, Tensor&> maxDimOut(const Tensor& self, int64_t dim, bool keepdim, Tensor& values, Tensor& indices) {
  if (!native(self, values)) return Fallback<at::_ops::max_dim_max>::call(self, dim, keepdim, values, indices);
  checkNonEmpty(self, at::IntArrayRef{dim}, "max");
  checkOutDtype(values, self.scalar_type());
  checkOutDtype(indices, at::kLong);
  runReduce(RedOp::Max, self, at::IntArrayRef{dim}, keepdim, values, indices);
  return {values, indices};
}

std::tuple<Tensor&, Tensor&> minDimOut(const Tensor& self, int64_t dim, bool keepdim, Tensor& values, Tensor& indices) {
  if (!native(self, values)) return Fallback<at::_ops::min_dim_min>::call(self, dim, keepdim, values, indices);
  checkNonEmpty(self, at::IntArrayRef{dim}, "min");
  checkOutDtype(values, self.scalar_type());
  checkOutDtype(indices, at::kLong);
  runReduce(RedOp::Min, self, at::IntArrayRef{dim}, keepdim, values, indices);
  return {values, indices};
}

Tensor maxAll(const Tensor& self) {
  TORCH_CHECK(self.numel() > 0,
              "max(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with "
              "the 'dim' argument.");
  Tensor out = at::empty({}, self.options());
  if (!native(self, out)) return Fallback<at::_ops::max>::call(self);
  runReduce(RedOp::Max, self, std::nullopt, false, out);
  return out;
}

Tensor minAll(const Tensor& self) {
  TORCH_CHECK(self.numel() > 0,
              "min(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with "
              "the 'dim' argument.");
  Tensor out = at::empty({}, self.options());
  if (!native(self, out)) return Fallback<at::_ops::min>::call(self);
  runReduce(RedOp::Min, self, std::nullopt, false, out);
  return out;
}

Tensor& arg_out(RedOp op, const Tensor& self, std::optional<int64_t> dim, bool keepdim, Tensor& out, const char* name) {
  checkOutDtype(out, at::kLong);
  if (dim.has_value()) checkNonEmpty(self, at::IntArrayRef{*dim}, name);
  else TORCH_CHECK(self.numel() > 0, name, "(): Expected reduction dim to be specified for input.numel() == 0.");
  Tensor values = at::empty({0}, self.options());
  if (dim.has_value()) {
    runReduce(op, self, at::IntArrayRef{*dim}, keepdim, values, out, 2, 1, false, false);
  } else {
    // Over the flattened input; keepdim keeps every dimension as size 1.
    at::Tensor flat = self.reshape({-1});
    runReduce(op, flat, std::nullopt, false, values, out, 2, 1, false, false);
    if (keepdim) out.resize_(std::vector<int64_t>(static_cast<size_t>(self.dim()), 1));
  }
  return out;
}

Tensor& argmaxOut(const Tensor& self, std::optional<int64_t> dim, bool keepdim, Tensor& out) {
  if (self.is_complex()) return Fallback<at::_ops::argmax_out>::call(self, dim, keepdim, out);
  return arg_out(RedOp::ArgMax, self, dim, keepdim, out, "argmax");
}
Tensor& argminOut(const Tensor& self, std::optional<int64_t> dim, bool keepdim, Tensor& out) {
  if (self.is_complex()) return Fallback<at::_ops::argmin_out>::call(self, dim, keepdim, out);
  return arg_out(RedOp::ArgMin, self, dim, keepdim, out, "argmin");
}

double correctionOf(const std::optional<c10::Scalar>& c) { return c.has_value() ? c->toDouble() : 1.0; }

void checkVarDtype(const Tensor& self, const char* name) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()) || at::isComplexType(self.scalar_type()), name,
              " only supports floating-point and complex dtypes. Got: ", self.scalar_type());
}

Tensor& varOut(const Tensor& self, at::OptionalIntArrayRef dim, const std::optional<c10::Scalar>& correction,
               bool keepdim, Tensor& out) {
  checkVarDtype(self, "std and var");
  if (!native(self, out)) return Fallback<at::_ops::var_correction_out>::call(self, dim, correction, keepdim, out);
  runReduce(RedOp::Var, computeInput(self, std::nullopt, out), dim, keepdim, out, Tensor(), 2, correctionOf(correction),
            false);
  return out;
}
Tensor& stdOut(const Tensor& self, at::OptionalIntArrayRef dim, const std::optional<c10::Scalar>& correction,
               bool keepdim, Tensor& out) {
  checkVarDtype(self, "std and var");
  if (!native(self, out)) return Fallback<at::_ops::std_correction_out>::call(self, dim, correction, keepdim, out);
  runReduce(RedOp::Var, computeInput(self, std::nullopt, out), dim, keepdim, out, Tensor(), 2, correctionOf(correction),
            true);
  return out;
}
Tensor var(const Tensor& self, at::OptionalIntArrayRef dim, const std::optional<c10::Scalar>& correction,
           bool keepdim) {
  Tensor out = at::empty({0}, self.options().dtype(c10::toRealValueType(self.scalar_type())));
  return varOut(self, dim, correction, keepdim, out);
}
Tensor stdFn(const Tensor& self, at::OptionalIntArrayRef dim, const std::optional<c10::Scalar>& correction,
             bool keepdim) {
  Tensor out = at::empty({0}, self.options().dtype(c10::toRealValueType(self.scalar_type())));
  return stdOut(self, dim, correction, keepdim, out);
}

std::tuple<Tensor, Tensor> varMean(const Tensor& self, at::OptionalIntArrayRef dim,
                                   const std::optional<c10::Scalar>& correction, bool keepdim) {
  checkVarDtype(self, "var_mean");
  if (self.is_complex()) return Fallback<at::_ops::var_mean_correction>::call(self, dim, correction, keepdim);
  Tensor v = at::empty({0}, self.options()), m = at::empty({0}, self.options());
  runReduce(RedOp::Var, self, dim, keepdim, v, m, 2, correctionOf(correction), false);
  return {v, m};
}
std::tuple<Tensor, Tensor> stdMean(const Tensor& self, at::OptionalIntArrayRef dim,
                                   const std::optional<c10::Scalar>& correction, bool keepdim) {
  checkVarDtype(self, "std_mean");
  if (self.is_complex()) return Fallback<at::_ops::std_mean_correction>::call(self, dim, correction, keepdim);
  Tensor v = at::empty({0}, self.options()), m = at::empty({0}, self.options());
  runReduce(RedOp::Var, self, dim, keepdim, v, m, 2, correctionOf(correction), true);
  return {v, m};
}

Tensor& vectorNormOut(const Tensor& self, const c10::Scalar& ord, at::OptionalIntArrayRef dim, bool keepdim,
                      std::optional<at::ScalarType> dtype, Tensor& out) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()) || at::isComplexType(self.scalar_type()),
              "linalg.vector_norm: Expected a floating point or complex tensor as input. Got ", self.scalar_type());
  checkOutDtype(out, c10::toRealValueType(dtype.value_or(self.scalar_type())));
  if (!native(self, out)) return Fallback<at::_ops::linalg_vector_norm_out>::call(self, ord, dim, keepdim, dtype, out);
  const double p = ord.toDouble();
  if (self.numel() == 0 && p < 0)
    TORCH_CHECK(false, "linalg.vector_norm cannot compute the ", ord,
                " norm on an empty tensor because the operation does not have an identity");
  runReduce(RedOp::Norm, castFor(self, dtype), dim, keepdim, out, Tensor(), p);
  return out;
}

Tensor& logsumexpOut(const Tensor& self_in, at::IntArrayRef dim, bool keepdim, Tensor& out) {
  if (!native(self_in, out)) return Fallback<at::_ops::logsumexp_out>::call(self_in, dim, keepdim, out);
  TORCH_CHECK(at::isFloatingType(out.scalar_type()),
              "logsumexp(): Expected floating point type for result tensor, "
              "but got: ",
              out.scalar_type());
  // Integer inputs are computed in the default floating dtype, as ATen does.
  const Tensor self = at::isFloatingType(self_in.scalar_type())
                          ? self_in
                          : self_in.to(c10::typeMetaToScalarType(c10::get_default_dtype()));
  if (self.numel() == 0) {
    at::native::resize_output(out, at::sum(self, dim, keepdim).sizes());
    return out.fill_(-std::numeric_limits<double>::infinity());
  }
  // As ATen: shift by the (finite) maximum, sum the exponentials into the out= (so in its dtype), take the log
  // and add the shift back; all native ops.
  Tensor maxes = at::amax(self, dim, true);
  Tensor shift = at::masked_fill(maxes, at::eq(at::abs(maxes), std::numeric_limits<double>::infinity()), 0);
  at::sum_out(out, at::exp(at::sub(self, shift)), dim, keepdim);
  out.log_().add_(keepdim ? shift : shift.squeeze(dim));
  return out;
}

Tensor& allOut(const Tensor& self, Tensor& out) {
  checkLogicalOut(self, out, "all");
  if (!native(self, out)) return Fallback<at::_ops::all_all_out>::call(self, out);
  runReduce(RedOp::All, self, std::nullopt, false, out);
  return out;
}
Tensor& anyOut(const Tensor& self, Tensor& out) {
  checkLogicalOut(self, out, "any");
  if (!native(self, out)) return Fallback<at::_ops::any_all_out>::call(self, out);
  runReduce(RedOp::Any, self, std::nullopt, false, out);
  return out;
}
Tensor& allDimsOut(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, Tensor& out) {
  checkLogicalOut(self, out, "all");
  if (!native(self, out)) return Fallback<at::_ops::all_dims_out>::call(self, dim, keepdim, out);
  runReduce(RedOp::All, self, dim, keepdim, out);
  return out;
}
Tensor& anyDimsOut(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, Tensor& out) {
  checkLogicalOut(self, out, "any");
  if (!native(self, out)) return Fallback<at::_ops::any_dims_out>::call(self, dim, keepdim, out);
  runReduce(RedOp::Any, self, dim, keepdim, out);
  return out;
}
Tensor& allDimOut(const Tensor& self, int64_t dim, bool keepdim, Tensor& out) {
  return allDimsOut(self, at::IntArrayRef{dim}, keepdim, out);
}
Tensor& anyDimOut(const Tensor& self, int64_t dim, bool keepdim, Tensor& out) {
  return anyDimsOut(self, at::IntArrayRef{dim}, keepdim, out);
}

Tensor countNonzero(const Tensor& self, at::IntArrayRef dim) {
  Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  if (self.is_complex()) return Fallback<at::_ops::count_nonzero_dim_IntList>::call(self, dim);
  runReduce(RedOp::CountNonzero, self, dim, false, out);
  return out;
}

// hash_tensor (mode 0, the only one): the XorSum row of the reduction engine into a double (floating inputs) or
// int64 (integers) result, whose bits the uint64 result takes. ATen's checks and result shape from its meta call.
Tensor& hashTensorOut(const Tensor& self, at::IntArrayRef dim, bool keepdim, int64_t mode, Tensor& out) {
  const auto dtype = self.scalar_type();
  if (at::isComplexType(dtype) || dtype == at::kUInt16 || dtype == at::kUInt32 || dtype == at::kUInt64 ||
      !(at::isFloatingType(dtype) || at::isIntegralType(dtype, /*includeBool=*/true))) // the CPU's refusal
    return Fallback<at::_ops::hash_tensor_out>::call(self, dim, keepdim, mode, out);
  const Tensor shape = at::hash_tensor(metaLike(self), dim, keepdim, mode);
  TORCH_CHECK(mode == 0, "Unknown hash_tensor mode: ", mode);
  Tensor bits = at::empty(shape.sizes(), self.options().dtype(at::isFloatingType(dtype) ? at::kDouble : at::kLong));
  runReduce(RedOp::XorSum, self, dim, keepdim, bits);
  return assignExactOut(out, bits.view(at::kUInt64));
}

Tensor& cumsumOut(const Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype, Tensor& out) {
  checkNamedDtype(out, dtype);
  if (!native(self, out)) return Fallback<at::_ops::cumsum_out>::call(self, dim, dtype, out);
  runScan(ScanOp::CumSum, computeInput(self, dtype, out), dim, out);
  return out;
}
Tensor& cumprodOut(const Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype, Tensor& out) {
  checkNamedDtype(out, dtype);
  if (!native(self, out)) return Fallback<at::_ops::cumprod_out>::call(self, dim, dtype, out);
  runScan(ScanOp::CumProd, computeInput(self, dtype, out), dim, out);
  return out;
}

Tensor& logcumsumexpOut(const Tensor& self, int64_t dim, Tensor& out) {
  if (!native(self, out) || !at::isFloatingType(self.scalar_type()) || out.scalar_type() != self.scalar_type()) {
    return Fallback<at::_ops::_logcumsumexp_out>::call(self, dim, out);
  }
  runScan(ScanOp::LogCumSumExp, self, dim, out);
  return out;
}
Tensor logcumsumexp(const Tensor& self, int64_t dim) {
  if (!at::isFloatingType(self.scalar_type())) return Fallback<at::_ops::_logcumsumexp>::call(self, dim);
  Tensor out = at::empty({0}, self.options());
  return logcumsumexpOut(self, dim, out);
}

// cummax / cummin (ATen's composites resize values and indices, then call these helpers).
template <ScanOp op, typename AtenOp>
void cumExtremeHelper(const Tensor& self, Tensor& values, Tensor& indices, int64_t dim) {
  if (self.is_complex() || values.scalar_type() != self.scalar_type()) {
    return Fallback<AtenOp>::call(self, values, indices, dim);
  }
  if (self.scalar_type() == at::kBool) { // false < true as 0 < 1: the same bytes scanned as uint8
    Tensor bytes = values.view(at::kByte);
    return runScan(op, self.view(at::kByte), dim, bytes, indices);
  }
  runScan(op, self, dim, values, indices);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "sum.IntList_out", sumOut);
  MT_IMPL(m, "mean.out", meanOut);
  MT_IMPL(m, "prod.int_out", prodDimOut);
  MT_IMPL(m, "prod", prodAll);
  MT_IMPL(m, "amax.out", amaxOut);
  MT_IMPL(m, "amin.out", aminOut);
  MT_IMPL(m, "max.dim_max", maxDimOut);
  MT_IMPL(m, "min.dim_min", minDimOut);
  MT_IMPL(m, "max", maxAll);
  MT_IMPL(m, "min", minAll);
  MT_IMPL(m, "argmax.out", argmaxOut);
  MT_IMPL(m, "argmin.out", argminOut);
  MT_IMPL(m, "var.correction_out", varOut);
  MT_IMPL(m, "std.correction_out", stdOut);
  MT_IMPL(m, "var.correction", var);
  MT_IMPL(m, "std.correction", stdFn);
  MT_IMPL(m, "var_mean.correction", varMean);
  MT_IMPL(m, "std_mean.correction", stdMean);
  MT_IMPL(m, "linalg_vector_norm.out", vectorNormOut);
  MT_IMPL(m, "logsumexp.out", logsumexpOut);
  MT_IMPL(m, "all.all_out", allOut);
  MT_IMPL(m, "any.all_out", anyOut);
  MT_IMPL(m, "all.dims_out", allDimsOut);
  MT_IMPL(m, "any.dims_out", anyDimsOut);
  MT_IMPL(m, "all.out", allDimOut);
  MT_IMPL(m, "any.out", anyDimOut);
  MT_IMPL(m, "count_nonzero.dim_IntList", countNonzero);
  MT_IMPL(m, "hash_tensor.out", hashTensorOut);
  MT_IMPL(m, "cumsum.out", cumsumOut);
  MT_IMPL(m, "cumprod.out", cumprodOut);
  MT_IMPL(m, "_logcumsumexp.out", logcumsumexpOut);
  MT_IMPL(m, "_logcumsumexp", logcumsumexp);
  MT_IMPL(m, "_cummax_helper", (cumExtremeHelper<ScanOp::CumMax, at::_ops::_cummax_helper>));
  MT_IMPL(m, "_cummin_helper", (cumExtremeHelper<ScanOp::CumMin, at::_ops::_cummin_helper>));
}

} // namespace mytorch
