// Op table: torch._grouped_mm, the grouped GEMM of mixture-of-experts layers (transformers' default experts
// path), natively: one kernel per call on cuda (kernels/cuda/grouped_gemm.cu, the modes in gemm.h), ATen's CPU
// implementation on host views on sim (exactly what CPU PyTorch computes). Without it the op decomposed into a
// host read of the offsets and one mm per group. Its backward (derivatives.yaml) is _grouped_mm again, so
// training takes the same kernel. Arguments are checked with ATen's own checks, so errors read as on CUDA.
#include <ATen/core/Tensor.h>
#include <ATen/native/GroupedMMUtils.h>
#include <ATen/ops/bmm.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "csrc/core/Checked.h"
#include "csrc/aten/glue/Glue.h"
#include "csrc/aten/glue/HostRoute.h"
#include "csrc/core/Runtime.h"
#include "mytorch/gemm.h"

namespace mytorch {
namespace {

using at::Tensor;

Tensor groupedMm(const Tensor& a, const Tensor& b, const std::optional<Tensor>& offs, const std::optional<Tensor>& bias,
                 std::optional<c10::ScalarType> out_dtype) {
  at::native::_grouped_mm_validate_inputs(a, b, offs, bias, out_dtype);
  TORCH_CHECK(a.scalar_type() == b.scalar_type(),
              "_grouped_mm: expected mat_a and mat_b to have the same dtype, but got ", a.scalar_type(),
              " != ", b.scalar_type());
  const c10::ScalarType dtype = at::native::_resolve_grouped_mm_out_dtype(a, b, out_dtype);
  c10::DeviceGuard guard(a.device());
  Tensor out = at::native::create_grouped_gemm_output_tensor(a, b, offs, dtype);
  const bool a2 = a.dim() == 2, b2 = b.dim() == 2;
  if (simHostRoute(HostRoute::GroupedGemm)) {
    std::optional<Tensor> host_offs;
    if (offs.has_value()) host_offs = hostView(*offs);
    at::native::_grouped_mm_fallback(hostView(a), hostView(b), host_offs, bias, out_dtype, hostView(out));
    return out;
  }
  if (!a2 && !b2) {  // a batch of equal products: the GEMM library's batched call
    at::bmm_out(out, a, b);
    return out;
  }
  GroupedGemmArgs g;
  g.dtype = toKernelDType(dtype);
  g.mode = a2 && !b2 ? GroupMode::Rows : (!a2 && b2 ? GroupMode::Cols : GroupMode::Depth);
  g.groups = offs->size(0);
  g.m = out.size(-2);
  g.n = out.size(-1);
  g.k = a.size(-1);
  Tensor o = offs->contiguous();
  g.offs = o.const_data_ptr<int32_t>();
  g.a = a.const_data_ptr();
  g.a_row = a.stride(-2);
  g.a_col = a.stride(-1);
  g.a_group = a2 ? 0 : a.stride(0);
  g.b = b.const_data_ptr();
  g.b_row = b.stride(-2);
  g.b_col = b.stride(-1);
  g.b_group = b2 ? 0 : b.stride(0);
  g.c = out.data_ptr();
  g.c_row = out.stride(-2);
  g.c_col = out.stride(-1);
  g.c_group = out.dim() == 3 ? out.stride(0) : 0;
  MT_RT_CHECK(kernels::grouped_gemm(g, streamFor(out)));
  return out;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { MT_IMPL(m, "_grouped_mm", groupedMm); }

} // namespace mytorch
