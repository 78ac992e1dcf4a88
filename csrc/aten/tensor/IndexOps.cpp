// Op table: indexing on the index engine (Note [Index engine] in kernels/include/mytorch/index.h); nonzero and the
// masked ops, composed over it, are in Masks.cpp.
#include <sstream>

#include <ATen/Context.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/core/List.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/nonzero.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/index_reduce_ops.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <string>

#include "csrc/core/Checked.h"
#include "csrc/core/DeviceErrors.h"
#include "csrc/aten/glue/Glue.h"
#include "csrc/core/Runtime.h"
#include "csrc/core/Stream.h"
#include "mytorch/index.h"

namespace mytorch {
namespace {

using at::Tensor;

enum class Kind { Gather, Scatter };

// A complex write as a write of real pairs: one more iteration dim of 2 (real, imaginary), strides in real
// elements, the scalar source as a 2-element tensor. Assign and Add act on the parts separately; the kernels
// have no complex arithmetic and refuse the rest (Note [Complex index writes]).
//
// Note [Complex index writes]
// The scatter kernels did nothing for complex dtypes and reported success, so x[i] = v, index_put_,
// scatter_, index_add_, indexFillInplace, putInplace and maskedScatterInplace left complex tensors unchanged. Every scatter
// launch now comes here first, and the kernels report complex dtypes as unsupported instead of skipping.
Tensor realPairs(IndexArgs& a, const at::Device& device) {
  TORCH_CHECK(a.op == ScatterOp::Assign || a.op == ScatterOp::Add,
              "mytorch: this scatter reduction is not supported "
              "for complex tensors (only assignment and addition are)");
  TORCH_CHECK(a.ndim < kMaxDims, "mytorch indexing supports at most ", kMaxDims - 1, " dimensions for complex tensors");
  const bool dbl = a.dtype == DType::ComplexDouble;
  Tensor scalar_pair;
  if (a.src_is_scalar) {
    c10::complex<double> z;
    if (dbl) z = *reinterpret_cast<const c10::complex<double>*>(a.scalar);
    else z = static_cast<c10::complex<double>>(*reinterpret_cast<const c10::complex<float>*>(a.scalar));
    scalar_pair =
        at::tensor({z.real(), z.imag()}, at::TensorOptions().dtype(dbl ? at::kDouble : at::kFloat)).to(device);
    a.src_is_scalar = false;
    a.other = scalar_pair.data_ptr();
    for (int d = 0; d < a.ndim; ++d) a.other_strides[d] = 0;
  } else {
    for (int d = 0; d < a.ndim; ++d) a.other_strides[d] *= 2;
  }
  for (int d = 0; d < a.ndim; ++d) a.target_strides[d] *= 2;
  for (int k = 0; k < a.nidx; ++k) {
    a.idx_target_stride[k] *= 2;
    a.idx_strides[k][a.ndim] = 0;
  }
  a.sizes[a.ndim] = 2;
  a.target_strides[a.ndim] = 1;
  a.other_strides[a.ndim] = 1;
  a.ndim += 1;
  a.numel *= 2;
  a.dtype = dbl ? DType::Double : DType::Float;
  a.elem_size /= 2;
  return scalar_pair;
}

// Which indices are out of bounds and how that is reported, as by the CPU's kernel for the op: the exception class
// (the gather/scatter family and index_add raise RuntimeError, indexing and the rest IndexError), the message, and
// whether a negative index counts from the end (indexing, take, put, index_fill) or is out of bounds (the
// gather/scatter family, indexSelect, index_add, index_copy; so also embedding, take_along_dim and one_hot).
struct OutOfBounds {
  const char* op = "indexing";  // names the op in a deferred error (Note [Device-side errors])
  bool runtime_error = false;
  int64_t dim = -1;   // with its size, for "out of bounds for dimension D with size S"
  int64_t size = -1;
  bool negative_wraps = true;
};

// The rule of the ops that index along one dimension (the gather/scatter family, indexSelect, index_add,
// index_copy): negative indices out of bounds, the message naming the dimension; RuntimeError unless the CPU's
// kernel for the op raises IndexError.
OutOfBounds alongDim(const char* op, const Tensor& t, int64_t dim, bool runtime_error = true) {
  return {op, runtime_error, dim, t.dim() ? t.size(dim) : 1, false};
}

// Launches and turns an out-of-bounds index into the op's exception (the kernels never use such an index).
void launch(Kind kind, IndexArgs& a, const at::Device& device, const OutOfBounds& oob = {}) {
  if (a.numel == 0) return;
  Tensor keep;
  if (kind == Kind::Scatter && (a.dtype == DType::ComplexFloat || a.dtype == DType::ComplexDouble))
    keep = realPairs(a, device);
  if (a.dtype == DType::Other && (kind == Kind::Gather || a.op == ScatterOp::Assign)) {
    // moves only (complex32, float8, the unsigned dtypes): the integer type of the element's size carries the bytes
    switch (a.elem_size) {
      case 1: a.dtype = DType::UInt8; break;
      case 2: a.dtype = DType::Int16; break;
      case 4: a.dtype = DType::Int32; break;
      case 8: a.dtype = DType::Int64; break;
      default: break;
    }
  }
  a.negative_wraps = oob.negative_wraps;
  a.error = deviceErrorSite(device, oob.op, DeviceErrorFormat::IndexOutOfBounds, !oob.runtime_error, oob.dim, oob.size);
  c10::DeviceGuard guard(device);
  const rt::Stream s = streamFor(device);
  MT_RT_CHECK(kind == Kind::Gather ? kernels::gather(a, s) : kernels::scatter(a, s));
  afterErrorCheckedLaunch(device);  // no synchronisation on cuda (Note [Device-side errors])
}

void setShape(IndexArgs& a, at::IntArrayRef shape) {
  TORCH_CHECK(shape.size() <= static_cast<size_t>(kMaxDims), "mytorch indexing supports at most ", kMaxDims,
              " dimensions");
  a.ndim = static_cast<int>(shape.size());
  a.numel = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    a.sizes[d] = shape[d];
    a.numel *= shape[d];
  }
}

void addIndex(IndexArgs& a, const Tensor& idx, at::IntArrayRef strides_over_shape, int64_t bound,
              int64_t target_stride) {
  TORCH_CHECK(a.nidx < kMaxIndices, "mytorch indexing supports at most ", kMaxIndices, " index tensors");
  const int k = a.nidx++;
  a.idx[k] = idx.const_data_ptr<int64_t>();
  for (size_t d = 0; d < strides_over_shape.size(); ++d) a.idx_strides[k][d] = strides_over_shape[d];
  a.idx_bound[k] = bound;
  a.idx_target_stride[k] = target_stride;
}

// The index dtypes an op accepts, each with the CPU kernel's exception and message.
enum class IndexDtypes { Integral, IntOrLong, Long, LongIndexError };

Tensor longIndex(const Tensor& index, const Tensor& self, const char* name,
                 IndexDtypes accept = IndexDtypes::Integral) {
  const at::ScalarType t = index.scalar_type();
  switch (accept) {
    case IndexDtypes::Integral:
      TORCH_CHECK(at::isIntegralType(t, false), name, "(): Expected an integer dtype for index but got: ", t);
      break;
    case IndexDtypes::IntOrLong:
      TORCH_CHECK(t == at::kLong || t == at::kInt, name, "(): Expected dtype int32 or int64 for index");
      break;
    case IndexDtypes::Long:
      TORCH_CHECK(t == at::kLong, name, "(): Expected a long tensor for index, but got ", t);
      break;
    case IndexDtypes::LongIndexError:
      TORCH_CHECK_INDEX(t == at::kLong, name, "(): Expected dtype int64 for index.");
      break;
  }
  return index.to(self.device(), at::kLong);
}

// ---- dim-wise ops ---------------------------------------------------------------------------------------------

Tensor& indexSelectOut(const Tensor& self, int64_t dim, const Tensor& index_in, Tensor& out) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK_INDEX(index_in.dim() <= 1, "index_select(): Index is supposed to be a vector");
  Tensor index = longIndex(index_in, self, "index_select", IndexDtypes::IntOrLong).reshape({-1});
  std::vector<int64_t> shape = self.sizes().vec();
  if (self.dim() > 0) shape[static_cast<size_t>(dim)] = index.numel();
  at::native::resize_output(out, shape);
  TORCH_CHECK(out.scalar_type() == self.scalar_type(),
              "index_select(): self and result must have the same scalar type");
  IndexArgs a;
  setShape(a, shape);
  a.dtype = toKernelDType(self.scalar_type());
  a.elem_size = static_cast<int>(self.element_size());
  a.target = self.data_ptr();
  a.other = out.data_ptr();
  std::vector<int64_t> istr(shape.size(), 0);
  for (int64_t d = 0; d < self.dim(); ++d) {
    a.target_strides[d] = d == dim ? 0 : self.stride(d);
    a.other_strides[d] = out.stride(d);
  }
  if (self.dim() == 0) {
    addIndex(a, index, {}, 1, 0);
  } else {
    istr[static_cast<size_t>(dim)] = index.stride(0);
    addIndex(a, index, istr, self.size(dim), self.stride(dim));
  }
  // The CPU's exception class: RuntimeError from its kernel for dimension 1 of a tensor with more, else IndexError.
  launch(Kind::Gather, a, self.device(), alongDim("index_select", self, dim, dim == 1 && self.dim() > 1));
  return out;
}

void checkGatherShapes(const Tensor& self, int64_t dim, const Tensor& index, const Tensor* src, const char* name) {
  if (index.numel() == 0) return;  // an empty index is a no-op whatever its shape, as in ATen
  TORCH_CHECK(index.dim() == self.dim() || (index.dim() <= 1 && self.dim() <= 1), name,
              "(): Index tensor must have the same number of dimensions as input tensor");
  for (int64_t d = 0; d < index.dim(); ++d) {
    if (d == dim) continue;
    TORCH_CHECK(index.size(d) <= (self.dim() ? self.size(d) : 1), "Size does not match at dimension ", d,
                " expected index ", index.sizes(), " to be no larger than self ", self.sizes(),
                " apart from dimension ", dim);
    if (src)
      TORCH_CHECK(index.size(d) <= src->size(d), "Expected index ", index.sizes(), " to be no larger than src ",
                  src->sizes(), " apart from dimension ", dim);
  }
}

Tensor& gatherOut(const Tensor& self, int64_t dim, const Tensor& index_in, bool, Tensor& out) {
  checkOutDtype(out, self.scalar_type());
  dim = at::maybe_wrap_dim(dim, self.dim());
  Tensor index = longIndex(index_in, self, "gather");
  checkGatherShapes(self, dim, index, nullptr, "gather");
  at::native::resize_output(out, index.sizes());
  if (index.numel() == 0) return out;
  IndexArgs a;
  setShape(a, index.sizes());
  a.dtype = toKernelDType(self.scalar_type());
  a.elem_size = static_cast<int>(self.element_size());
  a.target = self.data_ptr();
  a.other = out.data_ptr();
  for (int64_t d = 0; d < index.dim(); ++d) {
    a.target_strides[d] = d == dim || self.dim() == 0 ? 0 : self.stride(d);
    a.other_strides[d] = out.stride(d);
  }
  addIndex(a, index, index.strides(), self.dim() ? self.size(dim) : 1, self.dim() ? self.stride(dim) : 0);
  launch(Kind::Gather, a, self.device(), alongDim("gather", self, dim));
  return out;
}

Tensor& takeOut(const Tensor& self, const Tensor& index_in, Tensor& out) {
  checkOutDtype(out, self.scalar_type());
  at::assert_no_overlap(out, self);   // as ATen's take: not even an out= that is self
  at::assert_no_overlap(out, index_in);
  Tensor index = longIndex(index_in, self, "take", IndexDtypes::Long);
  Tensor flat = self.contiguous();
  at::native::resize_output(out, index.sizes());
  IndexArgs a;
  setShape(a, index.sizes());
  a.dtype = toKernelDType(self.scalar_type());
  a.elem_size = static_cast<int>(self.element_size());
  a.target = flat.data_ptr();
  a.other = out.data_ptr();
  for (int64_t d = 0; d < index.dim(); ++d) a.other_strides[d] = out.stride(d);
  addIndex(a, index, index.strides(), self.numel(), 1);
  launch(Kind::Gather, a, self.device(), OutOfBounds{"take"});
  return out;
}

Tensor indexSelect(const Tensor& self, int64_t dim, const Tensor& index) {
  Tensor out = at::empty({0}, self.options());
  return indexSelectOut(self, dim, index, out);
}

Tensor take(const Tensor& self, const Tensor& index) {
  Tensor out = at::empty({0}, self.options());
  return takeOut(self, index, out);
}

// dst (already holding self) (op)= src through index along dim, iterating over index's shape.
// Note [Reduced-precision scatter accumulation]
// A float16/bfloat16 target of an accumulating scatter (add, multiply: scatter_add, scatter_reduce, index_add,
// putInplace with accumulate) is accumulated in float32 and rounded once per element, as the CPU's kernels do
// (ATen's opmath). The kernel adds in the target's dtype, so rounding after every contribution lost up to hundreds of
// ulps where a position's contributions cancel (found through linear_cross_entropy's chunked gradients, which
// index_add_ into half buffers).
bool accumulatesInFloat(const Tensor& dst, ScatterOp op) {
  return (op == ScatterOp::Add || op == ScatterOp::Mul) &&
         (dst.scalar_type() == at::kHalf || dst.scalar_type() == at::kBFloat16);
}

// IndexArgs::split_dim of a scatter along `dim` (only that coordinate of a position changes on its way to the target)
// into a target without internal overlap: the first other dimension with more than one position and a target stride.
void setSplitDim(IndexArgs& a, const Tensor& dst, int64_t dim) {
  if (at::has_internal_overlap(dst) != at::MemOverlap::No) return;
  for (int d = 0; d < a.ndim; ++d) {
    if (d != dim && a.sizes[d] > 1 && a.target_strides[d] != 0) {
      a.split_dim = d;
      return;
    }
  }
}

void scatterInto(const Tensor& dst, int64_t dim, const Tensor& index, const Tensor* src, const c10::Scalar* value,
                 ScatterOp op, const OutOfBounds& oob = {}) {
  if (index.numel() == 0) return;
  if (accumulatesInFloat(dst, op)) {
    Tensor acc = dst.to(at::kFloat);
    scatterInto(acc, dim, index, src, value, op, oob);
    dst.copy_(acc);
    return;
  }
  IndexArgs a;
  setShape(a, index.sizes());
  a.dtype = toKernelDType(dst.scalar_type());
  a.elem_size = static_cast<int>(dst.element_size());
  a.target = dst.data_ptr();
  a.op = op;
  Tensor src_cast;
  if (src) {
    src_cast = src->scalar_type() == dst.scalar_type() ? *src : src->to(dst.scalar_type());
    a.other = src_cast.data_ptr();
  } else {
    a.src_is_scalar = true;
    Tensor v = at::full({}, *value, at::TensorOptions().dtype(dst.scalar_type()));
    std::memcpy(a.scalar, v.data_ptr(), v.element_size());
  }
  for (int64_t d = 0; d < index.dim(); ++d) {
    a.target_strides[d] = d == dim || dst.dim() == 0 ? 0 : dst.stride(d);
    a.other_strides[d] = src ? (src_cast.dim() ? src_cast.stride(d) : 0) : 0;
  }
  addIndex(a, index, index.strides(), dst.dim() ? dst.size(dim) : 1, dst.dim() ? dst.stride(dim) : 0);
  setSplitDim(a, dst, dim);
  launch(Kind::Scatter, a, dst.device(), oob);
}

// The identity of amax (lowest value) or amin (highest value) in a dtype.
c10::Scalar extreme(at::ScalarType t, bool lowest) {
  switch (t) {
    case at::kByte: return lowest ? 0 : 255;
    case at::kChar: return lowest ? -128 : 127;
    case at::kShort: return lowest ? -32768 : 32767;
    case at::kInt:
      return lowest ? c10::Scalar(std::numeric_limits<int32_t>::lowest())
                    : c10::Scalar(std::numeric_limits<int32_t>::max());
    case at::kLong:
      return lowest ? c10::Scalar(std::numeric_limits<int64_t>::lowest())
                    : c10::Scalar(std::numeric_limits<int64_t>::max());
    case at::kBool: return lowest ? c10::Scalar(false) : c10::Scalar(true);
    default: return lowest ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  }
}

ScatterOp reduceOp(c10::string_view reduce, bool two) {
  if (reduce == "sum" || reduce == "add") return ScatterOp::Add;
  if (reduce == "prod" || reduce == "multiply") return ScatterOp::Mul;
  if (two && reduce == "amax") return ScatterOp::Max;
  if (two && reduce == "amin") return ScatterOp::Min;
  TORCH_CHECK(false, "reduce argument must be either ", two ? "sum, prod, mean, amax or amin" : "add or multiply",
              ", got ", reduce);
}

// The start of every out= that is self with some elements written (scatter, index_add, index_copy, ...).
Tensor& prepare(const Tensor& self, Tensor& out) {
  checkOutDtype(out, self.scalar_type());
  if (!out.is_same(self)) {
    at::native::resize_output(out, self.sizes());
    out.copy_(self);
  }
  return out;
}

// The shared path of the scatter overloads: wrap dim, check index dtype and shapes, start from self.
Tensor& scatterOverload(const Tensor& self, int64_t dim, const Tensor& index_in, const Tensor* src,
                        const c10::Scalar* value, ScatterOp op, const char* name, Tensor& out) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  Tensor index = longIndex(index_in, self, name);
  checkGatherShapes(self, dim, index, src, name);
  prepare(self, out);
  scatterInto(out, dim, index, src, value, op, alongDim("scatter", out, dim));
  return out;
}

Tensor& scatterSrcOut(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, Tensor& out) {
  return scatterOverload(self, dim, index, &src, nullptr, ScatterOp::Assign, "scatter", out);
}
Tensor& scatterValueOut(const Tensor& self, int64_t dim, const Tensor& index, const c10::Scalar& value, Tensor& out) {
  return scatterOverload(self, dim, index, nullptr, &value, ScatterOp::Assign, "scatter", out);
}
// Complex tensors: the kernels add and assign through real pairs (Note [Complex index writes]); the other
// reductions (multiply, amax, ...) run through the CPU fallback.
bool complexReduction(const Tensor& self, ScatterOp op) {
  return self.is_complex() && op != ScatterOp::Assign && op != ScatterOp::Add;
}

Tensor& scatterReduceOut(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                         c10::string_view reduce, Tensor& out) {
  if (complexReduction(self, reduceOp(reduce, false)))
    return Fallback<at::_ops::scatter_reduce_out>::call(self, dim, index, src, reduce, out);
  return scatterOverload(self, dim, index, &src, nullptr, reduceOp(reduce, false), "scatter", out);
}
Tensor& scatterValueReduceOut(const Tensor& self, int64_t dim, const Tensor& index, const c10::Scalar& value,
                              c10::string_view reduce, Tensor& out) {
  if (complexReduction(self, reduceOp(reduce, false)))
    return Fallback<at::_ops::scatter_value_reduce_out>::call(self, dim, index, value, reduce, out);
  return scatterOverload(self, dim, index, nullptr, &value, reduceOp(reduce, false), "scatter", out);
}
Tensor& scatterAddOut(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, Tensor& out) {
  return scatterOverload(self, dim, index, &src, nullptr, ScatterOp::Add, "scatter_add", out);
}

// scatter_reduce (two) into `out`, which holds self: bad indices reported as `oob` says.
void scatterReduceInto(Tensor& out, int64_t dim, const Tensor& index, const Tensor& src, c10::string_view reduce,
                       bool include_self, const OutOfBounds& oob) {
  const bool mean = reduce == "mean";
  const ScatterOp op = mean ? ScatterOp::Add : reduceOp(reduce, true);
  if (!include_self) {
    // Positions that receive a value start from the reduction's identity instead of self.
    c10::Scalar identity = 0;
    if (op == ScatterOp::Mul) identity = 1;
    if (op == ScatterOp::Max || op == ScatterOp::Min) identity = extreme(out.scalar_type(), op == ScatterOp::Max);
    scatterInto(out, dim, index, nullptr, &identity, ScatterOp::Assign, oob);
  }
  scatterInto(out, dim, index, &src, nullptr, op, oob);
  if (mean) {
    Tensor counts = include_self ? at::ones_like(out) : at::zeros_like(out);
    Tensor ones = at::ones_like(src);
    scatterInto(counts, dim, index, &ones, nullptr, ScatterOp::Add);
    counts.masked_fill_(at::eq(counts, 0), 1);
    if (at::isFloatingType(out.scalar_type())) out.div_(counts);
    else out.div_(counts, "floor");
  }
}

Tensor& scatterReduceTwoOut(const Tensor& self, int64_t dim, const Tensor& index_in, const Tensor& src,
                            c10::string_view reduce, bool include_self, Tensor& out) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  Tensor index = longIndex(index_in, self, "scatter_reduce");
  checkGatherShapes(self, dim, index, &src, "scatter_reduce");
  const bool mean = reduce == "mean";
  if (complexReduction(self, mean ? ScatterOp::Add : reduceOp(reduce, true)) || (mean && self.is_complex()))
    return Fallback<at::_ops::scatter_reduce_two_out>::call(self, dim, index_in, src, reduce, include_self, out);
  prepare(self, out);
  scatterReduceInto(out, dim, index, src, reduce, include_self, alongDim("scatter", out, dim));
  return out;
}

// index_reduce: scatter_reduce with the 1-D index spread along source's other dimensions; a bad index raises
// IndexError, as the CPU's kernel. ATen's checks run first, on meta tensors.
Tensor& indexReduceOut(const Tensor& self, int64_t dim, const Tensor& index_in, const Tensor& source,
                       c10::string_view reduce, bool include_self, Tensor& out) {
  if (self.is_complex() || toKernelDType(self.scalar_type()) == DType::Other)
    return Fallback<at::_ops::index_reduce_out>::call(self, dim, index_in, source, reduce, include_self, out);
  auto meta = [](const Tensor& t) { return at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kMeta)); };
  Tensor meta_out = meta(out);
  at::_ops::index_reduce_out::call(meta(self), dim, meta(index_in), meta(source), reduce, include_self, meta_out);
  Tensor index = index_in.to(at::kLong).reshape({-1});
  prepare(self, out);
  if (source.dim() == 0) {  // 0-d self and source: the one element, as a 1-element vector
    Tensor one = out.view({1});
    scatterReduceInto(one, 0, index, source.reshape({1}), reduce, include_self,
                      alongDim("index_reduce", one, 0, /*runtime_error=*/false));
    return out;
  }
  dim = at::maybe_wrap_dim(dim, source.dim());
  std::vector<int64_t> shape(source.dim(), 1);
  shape[dim] = -1;
  scatterReduceInto(out, dim, index.view(shape).expand(source.sizes()), source, reduce, include_self,
                    alongDim("index_reduce", out, dim, /*runtime_error=*/false));
  return out;
}

// index_add / index_copy: iterate over the source; the index picks the position along dim in out.
void indexIntoAlongDim(Tensor& out, int64_t dim, const Tensor& index, const Tensor& source, ScatterOp op,
                       bool runtime_error) {
  if (accumulatesInFloat(out, op)) {  // Note [Reduced-precision scatter accumulation]
    Tensor acc = out.to(at::kFloat);
    indexIntoAlongDim(acc, dim, index, source, op, runtime_error);
    out.copy_(acc);
    return;
  }
  std::vector<int64_t> istr(static_cast<size_t>(std::max<int64_t>(source.dim(), 1)), 0);
  IndexArgs a;
  setShape(a, source.dim() ? source.sizes() : at::IntArrayRef{1});
  a.dtype = toKernelDType(out.scalar_type());
  a.elem_size = static_cast<int>(out.element_size());
  a.target = out.data_ptr();
  Tensor sc = source.scalar_type() == out.scalar_type() ? source : source.to(out.scalar_type());
  a.other = sc.data_ptr();
  a.op = op;
  for (int64_t d = 0; d < source.dim(); ++d) {
    a.target_strides[d] = d == dim ? 0 : out.stride(d);
    a.other_strides[d] = sc.stride(d);
  }
  if (source.dim()) istr[static_cast<size_t>(dim)] = index.stride(0);
  addIndex(a, index, istr, out.dim() ? out.size(dim) : 1, out.dim() ? out.stride(dim) : 0);
  if (source.dim()) setSplitDim(a, out, dim);
  launch(Kind::Scatter, a, out.device(), alongDim("index_add/index_copy", out, dim, runtime_error));
}

Tensor& indexAddOut(const Tensor& self, int64_t dim, const Tensor& index_in, const Tensor& source,
                    const c10::Scalar& alpha, Tensor& out) {
  if (self.scalar_type() == at::kComplexHalf) {  // no complex32 arithmetic in the kernels: complex64, rounded back
    return out.copy_(at::index_add(self.to(at::kComplexFloat), dim, index_in, source.to(at::kComplexFloat), alpha));
  }
  dim = at::maybe_wrap_dim(dim, self.dim());
  Tensor index = longIndex(index_in, self, "index_add").reshape({-1});
  prepare(self, out);
  // The CPU raises IndexError for a bad index into a tensor of at most one dimension, RuntimeError beyond.
  indexIntoAlongDim(out, dim, index, alpha.equal(1) ? source : at::mul(source, alpha), ScatterOp::Add,
                    /*runtime_error=*/out.dim() > 1);
  return out;
}

Tensor& indexCopyOut(const Tensor& self, int64_t dim, const Tensor& index_in, const Tensor& source, Tensor& out) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  Tensor index = longIndex(index_in, self, "index_copy").reshape({-1});
  TORCH_CHECK(source.dim() == 0 || index.numel() == source.size(dim), "index_copy_(): Number of indices (",
              index.numel(), ") should be equal to source.size(dim) (", source.dim() ? source.size(dim) : 1, ")");
  prepare(self, out);
  indexIntoAlongDim(out, dim, index, source, ScatterOp::Assign, /*runtime_error=*/false);
  return out;
}

// index_fill_ with a host scalar, or (`device_value` defined) with a 0-dim tensor of self's dtype in device memory,
// read by the kernel: no host round trip, as torch.cuda.
Tensor& indexFill(Tensor& self, int64_t dim, const Tensor& index_in, const c10::Scalar& value,
                  const Tensor& device_value) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  Tensor index = longIndex(index_in, self, "index_fill_", IndexDtypes::LongIndexError).reshape({-1});
  // Iterate over self's shape with dim replaced by the index's length.
  std::vector<int64_t> shape = self.sizes().vec();
  if (self.dim()) shape[static_cast<size_t>(dim)] = index.numel();
  IndexArgs a;
  setShape(a, shape);
  a.dtype = toKernelDType(self.scalar_type());
  a.elem_size = static_cast<int>(self.element_size());
  a.target = self.data_ptr();
  if (device_value.defined()) {
    a.other = device_value.data_ptr();  // other_strides stay 0: every element reads the one value
  } else {
    a.src_is_scalar = true;
    Tensor v = at::full({}, value, at::TensorOptions().dtype(self.scalar_type()));
    std::memcpy(a.scalar, v.data_ptr(), v.element_size());
  }
  std::vector<int64_t> istr(shape.size(), 0);
  for (int64_t d = 0; d < self.dim(); ++d) a.target_strides[d] = d == dim ? 0 : self.stride(d);
  if (self.dim()) istr[static_cast<size_t>(dim)] = index.stride(0);
  addIndex(a, index, istr, self.dim() ? self.size(dim) : 1, self.dim() ? self.stride(dim) : 0);
  launch(Kind::Scatter, a, self.device(), OutOfBounds{"index_fill"});
  return self;
}

Tensor& indexFillInplace(Tensor& self, int64_t dim, const Tensor& index_in, const c10::Scalar& value) {
  TORCH_CHECK(!value.isComplex() || self.is_complex(),
              "index_fill_(): Converting complex Scalar to non-complex type is "
              "not supported");
  return indexFill(self, dim, index_in, value, Tensor());
}

Tensor& indexFillTensorInplace(Tensor& self, int64_t dim, const Tensor& index, const Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "Only supports 0-dimensional value tensor. Got a tensor with ", value.dim(),
              " dimensions.");
  // The one-check path leaves this op's overlap to it (valueMayAliasSelf, Checked.h): self and index, as ATen (an
  // expanded self only warns, there).
  at::assert_no_overlap(self, index);
  if (value.device().type() != c10::DeviceType::PrivateUse1) return indexFillInplace(self, dim, index, value.item());
  TORCH_CHECK(!value.is_complex() || self.is_complex(),
              "index_fill_(): Converting complex Scalar to non-complex type is "
              "not supported");
  TORCH_CHECK(value.device() == self.device(), "index_fill_(): expected the value on ", self.device(), ", but got ",
              value.device());
  // Converted on the device. A value inside self is written with itself: it cannot change under the fill.
  Tensor v = value.scalar_type() == self.scalar_type() ? value : value.to(self.scalar_type());
  return indexFill(self, dim, index, 0, v);
}

Tensor& putInplace(Tensor& self, const Tensor& index_in, const Tensor& source, bool accumulate) {
  // As ATen's putInplace on a GPU: duplicate indices make the result order-dependent (accumulation is atomic), so
  // torch.use_deterministic_algorithms(True) refuses it.
  at::globalContext().alertNotDeterministic("put_");
  Tensor index = longIndex(index_in, self, "put_", IndexDtypes::Long).reshape({-1});
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "put_(): self and source expected to have the same dtype, ",
              "but got self.dtype = ", self.scalar_type(), " and source.dtype = ", source.scalar_type());
  TORCH_CHECK(index.numel() == source.numel(),
              "put_(): Expected source and index to have the same number of elements, but got source.numel() = ",
              source.numel(), ", index.numel() = ", index.numel());
  Tensor flat = self.is_contiguous() ? self.view({-1}) : self.contiguous().view({-1});
  Tensor values = source.reshape({-1}).contiguous();
  scatterInto(flat, 0, index, &values, nullptr, accumulate ? ScatterOp::Add : ScatterOp::Assign);
  if (!self.is_contiguous()) self.copy_(flat.view(self.sizes()));
  return self;
}

// ---- advanced indexing -------------------------------------------------------------------------------------------

struct Advanced {
  Tensor self;                     // possibly permuted so the indexed dims are adjacent
  std::vector<Tensor> idx;         // defined, broadcast together, int64 on self's device
  int64_t before = 0;
  std::vector<int64_t> shape;      // result shape
  std::vector<int64_t> repl;       // broadcast index shape
  Tensor keep;                     // folded index offsets (see describe), alive until the launch
};

Advanced makeAdvanced(const Tensor& self_in, const c10::List<std::optional<Tensor>>& orig) {
  Tensor self = self_in;
  std::vector<Tensor> idx;
  for (const std::optional<Tensor>& o : orig) {
    if (!o.has_value() || !o->defined()) {
      idx.emplace_back();
      continue;
    }
    const Tensor& t = *o;
    if (t.scalar_type() == at::kBool || t.scalar_type() == at::kByte) {
      const int64_t start = static_cast<int64_t>(idx.size());
      for (int64_t j = 0; j < t.dim(); ++j) {
        TORCH_CHECK_INDEX(t.size(j) == self.size(start + j), "The shape of the mask ", t.sizes(), " at index ", j,
                          " does not match the shape of the indexed tensor ", self.sizes(), " at index ", start + j);
      }
      Tensor nz = at::nonzero(t.to(self.device()));
      for (int64_t j = 0; j < t.dim(); ++j) idx.push_back(nz.select(1, j));
    } else {
      TORCH_CHECK_INDEX(t.scalar_type() == at::kLong || t.scalar_type() == at::kInt,
                        "tensors used as indices must be long, int, byte or bool tensors");
      idx.push_back(t.to(self.device(), at::kLong));
    }
  }
  TORCH_CHECK_INDEX(static_cast<int64_t>(idx.size()) <= self.dim(), "too many indices for tensor of dimension ",
                    self.dim(), " (got ", idx.size(), ")");
  while (static_cast<int64_t>(idx.size()) < self.dim()) idx.emplace_back();
  std::vector<Tensor> defined;
  for (const Tensor& t : idx)
    if (t.defined()) defined.push_back(t);
  try {
    defined = at::expand_outplace(defined);
  } catch (const c10::Error&) {  // ATen's IndexError and message (test_indexing's test_broaderrors_indexing)
    std::ostringstream shapes;
    for (size_t j = 0; j < defined.size(); ++j) shapes << (j ? ", " : "") << defined[j].sizes();
    TORCH_CHECK_INDEX(false, "shape mismatch: indexing tensors could not be broadcast together with shapes ",
                      shapes.str());
  }
  size_t k = 0;
  for (Tensor& t : idx)
    if (t.defined()) t = defined[k++];
  // Non-adjacent indexed dims: move them (and self's dims) to the front, as ATen does.
  bool adjacent = true;
  {
    int state = 0;
    for (const Tensor& t : idx) {
      if (t.defined() && state == 0) state = 1;
      else if (!t.defined() && state == 1) state = 2;
      else if (t.defined() && state == 2) adjacent = false;
    }
  }
  if (!adjacent) {
    std::vector<int64_t> perm;
    std::vector<Tensor> reordered;
    for (int64_t d = 0; d < self.dim(); ++d)
      if (idx[static_cast<size_t>(d)].defined()) {
        perm.push_back(d);
        reordered.push_back(idx[static_cast<size_t>(d)]);
      }
    for (int64_t d = 0; d < self.dim(); ++d)
      if (!idx[static_cast<size_t>(d)].defined()) {
        perm.push_back(d);
        reordered.emplace_back();
      }
    self = self.permute(perm);
    idx = reordered;
  }
  Advanced adv;
  adv.self = self;
  while (adv.before < self.dim() && !idx[static_cast<size_t>(adv.before)].defined()) ++adv.before;
  for (const Tensor& t : idx)
    if (t.defined()) adv.idx.push_back(t);
  adv.repl = adv.idx.empty() ? std::vector<int64_t>{} : adv.idx[0].sizes().vec();
  for (int64_t d = 0; d < adv.before; ++d) adv.shape.push_back(self.size(d));
  for (int64_t s : adv.repl) adv.shape.push_back(s);
  for (int64_t d = adv.before + static_cast<int64_t>(adv.idx.size()); d < self.dim(); ++d)
    adv.shape.push_back(self.size(d));
  return adv;
}

// Fills the description of `adv` over its result shape: the target is self restrided, the indices placed
// at the replacement dims.
void describe(IndexArgs& a, Advanced& adv, const Tensor& target) {
  setShape(a, adv.shape);
  const int64_t nrepl = static_cast<int64_t>(adv.repl.size()), nidx = static_cast<int64_t>(adv.idx.size());
  int64_t d = 0;
  for (int64_t s = 0; s < adv.before; ++s, ++d) a.target_strides[d] = target.stride(s);
  for (int64_t r = 0; r < nrepl; ++r, ++d) a.target_strides[d] = 0;
  for (int64_t s = adv.before + nidx; s < target.dim(); ++s, ++d) a.target_strides[d] = target.stride(s);
  // More index tensors than the kernel takes (a boolean mask over more than kMaxIndices dims): the first ones
  // are folded into one offset tensor, checked and wrapped here, as they share one broadcast shape.
  const int64_t nfold = nidx > kMaxIndices ? nidx - kMaxIndices + 1 : 0;
  if (nfold > 0) {
    Tensor offset = at::zeros(adv.repl, adv.idx[0].options());
    for (int64_t k = 0; k < nfold; ++k) {
      const Tensor& t = adv.idx[static_cast<size_t>(k)];
      const int64_t size = target.size(adv.before + k);
      Tensor bad = t.lt(-size).logical_or_(t.ge(size));
      if (bad.any().item<bool>()) {
        const int64_t v = t.masked_select(bad).reshape({-1})[0].item<int64_t>();
        TORCH_CHECK_INDEX(false, "index ", v, " is out of bounds for dimension ", adv.before + k, " with size ", size);
      }
      offset.add_(at::where(t.lt(0), t.add(size), t), target.stride(adv.before + k));
    }
    adv.keep = offset.contiguous();
  }
  for (int64_t k = nfold > 0 ? nfold - 1 : 0; k < nidx; ++k) {
    const bool folded = nfold > 0 && k == nfold - 1;
    const Tensor& t = folded ? adv.keep : adv.idx[static_cast<size_t>(k)];
    std::vector<int64_t> st(adv.shape.size(), 0);
    for (int64_t r = 0; r < nrepl; ++r) st[static_cast<size_t>(adv.before + r)] = t.stride(r);
    if (folded) addIndex(a, t, st, std::numeric_limits<int64_t>::max(), 1);
    else addIndex(a, t, st, target.size(adv.before + k), target.stride(adv.before + k));
  }
}

Tensor& indexOut(const Tensor& self, const c10::List<std::optional<Tensor>>& indices, Tensor& out) {
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "index_out: self (", self.scalar_type(), ") and result (",
              out.scalar_type(), ") must have the same scalar type");
  Advanced adv = makeAdvanced(self, indices);
  at::native::resize_output(out, adv.shape);
  IndexArgs a;
  a.dtype = toKernelDType(self.scalar_type());
  a.elem_size = static_cast<int>(self.element_size());
  a.target = adv.self.data_ptr();
  a.other = out.data_ptr();
  describe(a, adv, adv.self);
  for (int64_t d = 0; d < out.dim(); ++d) a.other_strides[d] = out.stride(d);
  launch(Kind::Gather, a, self.device(), OutOfBounds{"index"});
  return out;
}

Tensor& indexPutImplInplace(Tensor& self, const c10::List<std::optional<Tensor>>& indices, const Tensor& values,
                            bool accumulate, bool) {
  for (const std::optional<Tensor>& o : indices) {  // the CPU's index_put_ warns; ATen's index (reads) already does
    if (o.has_value() && o->defined() && o->scalar_type() == at::kByte) {
      TORCH_WARN("indexing with dtype torch.uint8 is now deprecated, please use a dtype torch.bool instead.");
      break;
    }
  }
  if (accumulate && self.scalar_type() == at::kComplexHalf &&
      values.scalar_type() == at::kComplexHalf) {  // as index_add: complex64, rounded back
    Tensor wide = self.to(at::kComplexFloat);
    at::_index_put_impl_(wide, indices, values.to(at::kComplexFloat), true, false);
    return self.copy_(wide);
  }
  Advanced adv = makeAdvanced(self, indices);
  Tensor v = values.device() == self.device() ? values : values.to(self.device());
  TORCH_CHECK(at::is_expandable_to(v.sizes(), adv.shape), "shape mismatch: value tensor of shape ", v.sizes(),
              " cannot be broadcast to indexing result of shape ", adv.shape);
  TORCH_CHECK(v.scalar_type() == self.scalar_type(), "Index put requires the source and destination dtypes match, got ",
              self.scalar_type(), " for the destination and ", v.scalar_type(), " for the source.");
  v = v.expand(adv.shape);
  IndexArgs a;
  a.dtype = toKernelDType(self.scalar_type());
  a.elem_size = static_cast<int>(self.element_size());
  a.target = adv.self.data_ptr();
  a.other = v.data_ptr();
  a.op = accumulate ? ScatterOp::Add : ScatterOp::Assign;
  describe(a, adv, adv.self);
  for (int64_t d = 0; d < v.dim(); ++d) a.other_strides[d] = v.stride(d);
  launch(Kind::Scatter, a, self.device(), OutOfBounds{"index_put"});
  return self;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "index_select.out", indexSelectOut);
  MT_IMPL(m, "gather.out", gatherOut);
  MT_IMPL(m, "take.out", takeOut);
  MT_IMPL(m, "index_select", indexSelect);
  MT_IMPL(m, "take", take);
  MT_IMPL(m, "scatter.src_out", scatterSrcOut);
  MT_IMPL(m, "scatter.value_out", scatterValueOut);
  MT_IMPL(m, "scatter.reduce_out", scatterReduceOut);
  MT_IMPL(m, "scatter.value_reduce_out", scatterValueReduceOut);
  MT_IMPL(m, "scatter_add.out", scatterAddOut);
  MT_IMPL(m, "scatter_reduce.two_out", scatterReduceTwoOut);
  MT_IMPL(m, "index_reduce.out", indexReduceOut);
  MT_IMPL(m, "index_add.out", indexAddOut);
  MT_IMPL(m, "index_copy.out", indexCopyOut);
  MT_IMPL(m, "index_fill_.int_Scalar", indexFillInplace);
  MT_IMPL(m, "put_", putInplace);
  MT_IMPL(m, "index_fill_.int_Tensor", indexFillTensorInplace);
  MT_IMPL(m, "index.Tensor_out", indexOut);
  MT_IMPL(m, "_index_put_impl_", indexPutImplInplace);
}

} // namespace mytorch
