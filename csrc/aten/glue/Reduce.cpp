// See Reduce.h.
#include "csrc/aten/glue/Reduce.h"

#include <utility>

#include <ATen/WrapDimUtils.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>

#include "csrc/aten/glue/Glue.h"
#include "csrc/core/Runtime.h"
#include "csrc/core/Stream.h"

namespace mytorch {
void runReduce(RedOp op, const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim, const at::Tensor& out,
               const at::Tensor& out2, double p, double correction, bool take_sqrt, bool want_values) {
  const int64_t ndim = self.dim();
  std::bitset<64> reduced;
  if (!dims.has_value() || dims->empty()) {
    for (int64_t d = 0; d < ndim; ++d) reduced.set(static_cast<size_t>(d));
  } else {
    reduced = at::dim_list_to_bitset(*dims, ndim);
  }
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < ndim; ++d) {
    if (!reduced[static_cast<size_t>(d)]) shape.push_back(self.size(d));
    else if (keepdim) shape.push_back(1);
  }
  at::native::resize_output(out, shape);
  if (out2.defined()) at::native::resize_output(out2, shape);
  // Views of the outputs with every reduced dimension present (size 1), for their strides.
  at::Tensor o = out, o2 = out2;
  if (!keepdim) {
    for (int64_t d = 0; d < ndim; ++d) {
      if (reduced[static_cast<size_t>(d)]) {
        o = o.unsqueeze(d);
        if (o2.defined()) o2 = o2.unsqueeze(d);
      }
    }
  }
  ReduceArgs r;
  r.op = op;
  r.in_dtype = toKernelDType(self.scalar_type());
  r.out_dtype = toKernelDType(out.scalar_type());
  TORCH_CHECK(r.in_dtype != DType::Other && r.out_dtype != DType::Other, "mytorch reductions do not support dtype ",
              self.scalar_type(), " -> ", out.scalar_type());
  r.in = self.const_data_ptr();
  r.out = out.data_ptr();
  r.out2 = dataOrNull(out2);
  r.want_values = want_values;
  r.params.p = p;
  r.params.correction = correction;
  r.params.take_sqrt = take_sqrt;
  r.out_numel = 1;
  r.red_numel = 1;
  for (int64_t d = 0; d < ndim; ++d) {
    if (reduced[static_cast<size_t>(d)]) {
      r.red_sizes[r.red_ndim] = self.size(d);
      r.red_in_strides[r.red_ndim] = self.stride(d);
      r.red_numel *= self.size(d);
      ++r.red_ndim;
    } else {
      r.out_sizes[r.out_ndim] = self.size(d);
      r.out_in_strides[r.out_ndim] = self.stride(d);
      r.out_strides[r.out_ndim] = o.stride(d);
      r.out2_strides[r.out_ndim] = o2.defined() ? o2.stride(d) : 0;
      r.out_numel *= self.size(d);
      ++r.out_ndim;
    }
  }
  // A reduction whose value does not depend on which element is the j-th (all but argmax/argmin and max/min with
  // indices) reads the reduced dimensions in memory order, outermost stride first, as ATen's TensorIterator does:
  // a full reduction of a transposed tensor is then one contiguous run (the vectorised lanes' path), not a walk
  // with a row's stride per element. The order depends on the strides only, so the bits do not depend on the thread
  // count.
  const bool indexed =
      op == RedOp::ArgMax || op == RedOp::ArgMin || ((op == RedOp::Max || op == RedOp::Min) && out2.defined());
  if (!indexed) {
    for (int d = 1; d < r.red_ndim; ++d) {  // insertion sort by stride, descending (stable: ties keep their order)
      for (int e = d; e > 0 && r.red_in_strides[e - 1] < r.red_in_strides[e]; --e) {
        std::swap(r.red_sizes[e - 1], r.red_sizes[e]);
        std::swap(r.red_in_strides[e - 1], r.red_in_strides[e]);
      }
    }
  }
  // Reduced dimensions that are one run of memory (a contiguous tail, or all of a contiguous tensor) merge into
  // one, so that the kernels index them without a division per element; for the indexed reductions the order of
  // j, and so argmax's index, is unchanged. Size-1 dimensions drop out.
  int merged = 0;
  for (int d = 0; d < r.red_ndim; ++d) {
    if (r.red_sizes[d] == 1 && r.red_ndim > 1) continue;
    if (merged > 0 && r.red_in_strides[merged - 1] == r.red_in_strides[d] * r.red_sizes[d]) {
      r.red_sizes[merged - 1] *= r.red_sizes[d];
      r.red_in_strides[merged - 1] = r.red_in_strides[d];
    } else {
      r.red_sizes[merged] = r.red_sizes[d];
      r.red_in_strides[merged] = r.red_in_strides[d];
      ++merged;
    }
  }
  r.red_ndim = std::max(merged, std::min(r.red_ndim, 1));
  r.params.count = r.red_numel;
  TORCH_CHECK(r.out_ndim <= kMaxDims && r.red_ndim <= kMaxDims, "mytorch reductions support at most ", kMaxDims,
              " dimensions");
  if (r.out_numel == 0) return;
  c10::DeviceGuard guard(self.device());
  // Note [CUDA reduction plan]: the partials of a split reduction
  const at::Tensor workspace =
      kernelWorkspace(onSim() ? 0 : reduce_plan(r, multiProcessors(self.device().index())).workspace_bytes, self);
  r.workspace = dataOrNull(workspace);
  MT_RT_CHECK(kernels::reduce(r, streamFor(self)));
}

void runScan(ScanOp op, const at::Tensor& self, int64_t dim, const at::Tensor& out, const at::Tensor& indices) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  at::native::resize_output(out, self.sizes());
  if (indices.defined()) at::native::resize_output(indices, self.sizes());
  const at::Tensor in = self.scalar_type() == out.scalar_type() ? self : self.to(out.scalar_type());
  ScanArgs s;
  s.op = op;
  s.dtype = toKernelDType(out.scalar_type());
  TORCH_CHECK(s.dtype != DType::Other && s.dtype != DType::Bool && !out.is_complex(),
              "mytorch scans do not support dtype ", out.scalar_type());
  s.in = in.const_data_ptr();
  s.out = out.data_ptr();
  s.length = in.dim() == 0 ? 1 : in.size(dim);
  s.in_stride = in.dim() == 0 ? 1 : in.stride(dim);
  s.out_stride = in.dim() == 0 ? 1 : out.stride(dim);
  if (indices.defined()) {
    TORCH_CHECK(indices.scalar_type() == at::kLong, "mytorch: the indices of a scan are int64, got ",
                indices.scalar_type());
    s.indices = indices.data_ptr();
    s.idx_stride = in.dim() == 0 ? 1 : indices.stride(dim);
  }
  s.lines = 1;
  for (int64_t d = 0; d < in.dim(); ++d) {
    if (d == dim) continue;
    s.outer_sizes[s.outer_ndim] = in.size(d);
    s.outer_in_strides[s.outer_ndim] = in.stride(d);
    s.outer_out_strides[s.outer_ndim] = out.stride(d);
    if (indices.defined()) s.outer_idx_strides[s.outer_ndim] = indices.stride(d);
    s.lines *= in.size(d);
    ++s.outer_ndim;
  }
  if (in.numel() == 0) return;
  c10::DeviceGuard guard(self.device());
  // Note [CUDA scan plan]: the chunks' look-back tiles
  const at::Tensor workspace = kernelWorkspace(onSim() ? 0 : scan_plan(s).workspace_bytes, self);
  s.workspace = dataOrNull(workspace);
  MT_RT_CHECK(kernels::scan(s, streamFor(self)));
}

at::Tensor castFor(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  return dtype.has_value() && *dtype != self.scalar_type() ? self.to(*dtype) : self;
}

at::Tensor computeInput(const at::Tensor& self, std::optional<at::ScalarType> dtype, const at::Tensor& out) {
  if (dtype.has_value()) return castFor(self, dtype);
  const auto o = out.scalar_type();
  if (at::isFloatingType(self.scalar_type()) && self.scalar_type() != at::kDouble && o == at::kDouble)
    return self.to(o);
  return self;
}

void checkNamedDtype(const at::Tensor& out, std::optional<at::ScalarType> dtype) {
  if (dtype.has_value()) checkOutDtype(out, *dtype);
}

} // namespace mytorch
