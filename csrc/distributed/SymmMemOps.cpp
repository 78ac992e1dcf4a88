// torch's `symm_mem` operators for mytorch tensors (TORCH_LIBRARY_IMPL(symm_mem, PrivateUse1)): the schemas are in
// every torch wheel; the kernels are the symm_mem family (Note [Symmetric memory kernels]) over the handles of
// SymmetricMemory.cpp. Arguments are checked as torch.cuda's versions check them (contiguity, sizes, sum only),
// with the dtypes our kernels take (float32, float64, float16, bfloat16; torch.cuda's take float32 and bfloat16).
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "csrc/core/DeviceAllocator.h"
#include "csrc/core/DeviceErrors.h"
#include "csrc/core/KernelDType.h"
#include "csrc/core/Runtime.h"
#include "csrc/core/Stream.h"
#include "csrc/distributed/SymmetricMemory.h"
#include "mytorch/runtime.h"

namespace mytorch::dist {
namespace {

using Handle = c10::intrusive_ptr<MytorchSymmetricMemory>;

DType dtypeOf(const at::Tensor& t, const char* op) {
  TORCH_CHECK_VALUE(kernelFloating(t.scalar_type()), op,
                    ": expected a float32, float64, float16 or bfloat16 tensor, got ", t.scalar_type());
  return toKernelDType(t.scalar_type());
}

void checkMytorch(const at::Tensor& t, const char* op, const char* what) {
  TORCH_CHECK_VALUE(t.device().type() == c10::DeviceType::PrivateUse1, op, ": ", what,
                    " must be a mytorch tensor, got ", t.device());
  TORCH_CHECK_VALUE(t.is_contiguous(), op, ": ", what, " must be contiguous");
}

// The symmetric-memory handle of `t` (allocated by symm_mem.empty) for the group, and the checks every op makes.
Handle handleOf(const at::Tensor& t, const std::string& group, const char* op) {
  checkMytorch(t, op, "input");
  TORCH_CHECK_VALUE(isSymmetricTensor(t), op, ": input must be allocated with ",
                    "torch.distributed._symmetric_memory.empty() (empty_strided_p2p)");
  return symmetricMemoryOf(t, group);
}

void checkReduceOp(const std::string& op, const char* name) {
  TORCH_CHECK_VALUE(op == "sum", name, ": only sum is supported (as in torch.cuda), got '", op, "'");
}

void launchReduce(const Handle& h, const at::Tensor& input, SymmReduceMode mode, const at::Tensor* local,
                  const at::Tensor& out, int64_t last_dim) {
  c10::DeviceGuard guard(input.device());
  SymmReduceArgs a;
  a.sync = h->sync(0);
  a.bufs = reinterpret_cast<void* const*>(h->get_buffer_ptrs_dev());
  // The input's elements from the start of the allocation (its storage's data is the allocation's start).
  a.offset = input.storage_offset();
  a.numel = input.numel();
  a.last_dim = last_dim;
  a.local_in = local != nullptr ? local->const_data_ptr() : nullptr;
  a.out = out.data_ptr();
  a.dtype = dtypeOf(input, "symm_mem");
  a.mode = mode;
  MT_RT_CHECK(kernels::symm_reduce(a, nativeHandle(currentStream(input.device().index()))));
  afterErrorCheckedLaunch(input.device());
}

at::Tensor oneShotOut(const at::Tensor& input, const std::optional<at::Tensor>& local, const std::string& reduce_op,
                      const std::string& group, at::Tensor out, const char* op) {
  checkReduceOp(reduce_op, op);
  checkMytorch(out, op, "out");
  TORCH_CHECK_VALUE(out.scalar_type() == input.scalar_type(), op, ": out has dtype ", out.scalar_type(),
                    " but input has ", input.scalar_type());
  if (local) {
    checkMytorch(*local, op, "local_input");
    TORCH_CHECK_VALUE(local->scalar_type() == input.scalar_type(), op, ": local_input has dtype ", local->scalar_type(),
                      " but the symmetric buffer has ", input.scalar_type());
    TORCH_CHECK_VALUE(local->numel() <= input.numel(), op, ": local_input has ", local->numel(),
                      " elements, more than the symmetric buffer's ", input.numel());
    TORCH_CHECK_VALUE(out.numel() == local->numel(), op, ": out has ", out.numel(), " elements but local_input ",
                      local->numel());
  } else {
    TORCH_CHECK_VALUE(out.sizes() == input.sizes(), op, ": input/output size mismatch, input.sizes(): ", input.sizes(),
                      ", output.sizes(): ", out.sizes());
  }
  Handle h = handleOf(input, group, op);
  dtypeOf(input, op);
  if (out.numel() == 0) return out;
  // With a local input only its elements are reduced (torch.cuda reduces the whole buffer but returns as many).
  at::Tensor view = local ? input.reshape({-1}).narrow(0, 0, local->numel()) : input;
  launchReduce(h, view, SymmReduceMode::OneShot, local ? &*local : nullptr, out, 0);
  return out;
}

at::Tensor oneShotAllReduceOut(const at::Tensor& input, std::string reduce_op, std::string group, at::Tensor out) {
  return oneShotOut(input, std::nullopt, reduce_op, group, out, "one_shot_all_reduce_out");
}
at::Tensor oneShotAllReduce(const at::Tensor& input, std::string reduce_op, std::string group) {
  return oneShotOut(input, std::nullopt, reduce_op, group, at::empty_like(input), "one_shot_all_reduce");
}
at::Tensor oneShotAllReduceCopyOut(const at::Tensor& buffer, const at::Tensor& local, std::string reduce_op,
                                   std::string group, at::Tensor out) {
  return oneShotOut(buffer, local, reduce_op, group, out, "one_shot_all_reduce_copy_out");
}
at::Tensor oneShotAllReduceCopy(const at::Tensor& buffer, const at::Tensor& local, std::string reduce_op,
                                std::string group) {
  return oneShotOut(buffer, local, reduce_op, group, at::empty_like(local), "one_shot_all_reduce_copy");
}

at::Tensor twoShot(at::Tensor input, const std::optional<at::Tensor>& output, const std::string& reduce_op,
                   const std::string& group, const char* op) {
  checkReduceOp(reduce_op, op);
  Handle h = handleOf(input, group, op);
  dtypeOf(input, op);
  if (output) {
    checkMytorch(*output, op, "output");
    TORCH_CHECK_VALUE(output->sizes() == input.sizes() && output->scalar_type() == input.scalar_type(), op,
                      ": output must match the input's sizes and dtype, got ", output->sizes(), " ",
                      output->scalar_type(), " for ", input.sizes(), " ", input.scalar_type());
  }
  if (input.numel() == 0) return output ? *output : input;
  launchReduce(h, input, output ? SymmReduceMode::TwoShotOut : SymmReduceMode::TwoShot, nullptr,
               output ? *output : input, 0);
  return output ? *output : input;
}

at::Tensor twoShotAllReduceInPlace(at::Tensor input, std::string reduce_op, std::string group) {
  return twoShot(input, std::nullopt, reduce_op, group, "two_shot_all_reduce_");
}
at::Tensor twoShotAllReduceOut(at::Tensor input, std::string reduce_op, std::string group, at::Tensor output) {
  return twoShot(input, output, reduce_op, group, "two_shot_all_reduce_out");
}

at::Tensor reduceScatterOut(at::Tensor input, std::string group, bool split_last_dim, at::Tensor output) {
  const char* op = "reduce_scatter_out";
  Handle h = handleOf(input, group, op);
  checkMytorch(output, op, "output");
  dtypeOf(input, op);
  TORCH_CHECK_VALUE(output.scalar_type() == input.scalar_type(), op, ": output has dtype ", output.scalar_type(),
                    " but input has ", input.scalar_type());
  const int64_t world = h->get_world_size();
  TORCH_CHECK_VALUE(input.numel() % world == 0, op, ": expected the number of elements (", input.numel(),
                    ") to be divisible by the world size ", world);
  int64_t last = 0;
  if (split_last_dim) {
    TORCH_CHECK_VALUE(input.dim() >= 1 && input.dim() == output.dim(), op,
                      ": input and output must have the same number of dimensions");
    TORCH_CHECK_VALUE(std::equal(input.sizes().begin(), input.sizes().end() - 1, output.sizes().begin()), op,
                      ": expected input and output to have the same sizes except in the last dimension");
    TORCH_CHECK_VALUE(input.size(-1) % world == 0 && output.size(-1) == input.size(-1) / world, op,
                      ": expected the output's last dimension to be the input's (", input.size(-1),
                      ") divided by the world size ", world, ", got ", output.size(-1));
    last = input.size(-1);
  } else {
    TORCH_CHECK_VALUE(input.dim() == 1 && output.dim() == 1, op, ": expected 1-D input and output");
    TORCH_CHECK_VALUE(output.numel() == input.numel() / world, op, ": expected ", input.numel() / world,
                      " output elements, got ", output.numel());
  }
  if (input.numel() == 0) return output;
  launchReduce(h, input, SymmReduceMode::ReduceScatter, nullptr, output, last);
  return output;
}

void allToAll(const at::Tensor& input, const at::Tensor& out, const at::Tensor& splits,
              const at::Tensor& out_splits_offsets, const std::string& group, SymmAllToAllMode mode,
              int64_t major_align, const char* op) {
  Handle hin = handleOf(input, group, op);
  handleOf(out, group, op);  // collective, as torch's: every rank's output is symmetric memory too
  Handle hsplits = handleOf(splits, group, op);
  checkMytorch(out_splits_offsets, op, "out_splits_offsets");
  const int world = hin->get_world_size();
  TORCH_CHECK_VALUE(splits.scalar_type() == at::kLong && out_splits_offsets.scalar_type() == at::kLong, op,
                    ": splits and offsets must be int64");
  TORCH_CHECK_VALUE(input.scalar_type() == out.scalar_type() && input.dim() >= 1 && out.dim() == input.dim() &&
                        input.sizes().slice(1) == out.sizes().slice(1),
                    op, ": input and out must have the same dtype and the same row shape, got ", input.sizes(), " and ",
                    out.sizes());
  const int64_t nsplits = mode == SymmAllToAllMode::Combine2d ? splits.size(-1) : splits.numel();
  const bool shaped =
      mode == SymmAllToAllMode::Combine2d ? splits.dim() == 2 && splits.size(0) == 2 : splits.dim() == 1;
  TORCH_CHECK_VALUE(shaped && nsplits % world == 0 && nsplits > 0, op, ": expected ",
                    mode == SymmAllToAllMode::Combine2d ? "in_splits_offsets of shape (2, experts * world)"
                                                        : "in_splits of shape (world * experts,)",
                    " with world ", world, ", got ", splits.sizes());
  TORCH_CHECK_VALUE(mode != SymmAllToAllMode::Vdev || nsplits == world, op, ": expected ", world, " in_splits, got ",
                    nsplits);
  TORCH_CHECK_VALUE(
      out_splits_offsets.dim() == 2 && out_splits_offsets.size(0) == 2 && out_splits_offsets.size(1) == nsplits, op,
      ": expected out_splits_offsets of shape (2, ", nsplits, "), got ", out_splits_offsets.sizes());
  TORCH_CHECK_VALUE(nsplits <= kSymmMaxSplits, op, ": at most ", kSymmMaxSplits, " splits, got ", nsplits);
  TORCH_CHECK_VALUE(major_align >= 0, op, ": major_align must be positive, got ", major_align);
  c10::DeviceGuard guard(input.device());
  SymmAllToAllArgs a;
  a.sync = hin->sync(0);
  // The peers' tensors sit at this rank's offsets into their allocations (every rank allocates the same layout).
  a.inputs = reinterpret_cast<const void* const*>(hin->get_buffer_ptrs_dev());
  a.input_offset = input.storage_offset() * input.element_size();
  a.splits = reinterpret_cast<const void* const*>(hsplits->get_buffer_ptrs_dev());
  a.splits_offset = splits.storage_offset() * splits.element_size();
  const rt::Stream stream = nativeHandle(currentStream(input.device().index()));
  a.out = out.data_ptr();
  a.out_splits_offsets = out_splits_offsets.data_ptr<int64_t>();
  a.row_bytes = input.numel() / std::max<int64_t>(input.size(0), 1) * input.element_size();
  a.in_rows = input.size(0);
  a.out_rows = out.size(0);
  a.experts = static_cast<int>(nsplits / world);
  a.major_align = major_align;
  a.mode = mode;
  a.bad_split = deviceErrorSite(input.device(), op, DeviceErrorFormat::IndexOutOfBounds, true, 0, input.size(0));
  MT_RT_CHECK(kernels::symm_all_to_all(a, stream));
  afterErrorCheckedLaunch(input.device());
}

void allToAllVdev(const at::Tensor& input, const at::Tensor& out, const at::Tensor& in_splits,
                  const at::Tensor& out_splits_offsets, std::string group) {
  allToAll(input, out, in_splits, out_splits_offsets, group, SymmAllToAllMode::Vdev, 0, "all_to_all_vdev");
}
void allToAllVdev2d(const at::Tensor& input, const at::Tensor& out, const at::Tensor& in_splits,
                    const at::Tensor& out_splits_offsets, std::string group, std::optional<int64_t> major_align) {
  allToAll(input, out, in_splits, out_splits_offsets, group, SymmAllToAllMode::Dispatch2d, major_align.value_or(1),
           "all_to_all_vdev_2d");
}
void allToAllVdev2dOffset(const at::Tensor& input, const at::Tensor& out, const at::Tensor& in_splits_offsets,
                          const at::Tensor& out_splits_offsets, std::string group) {
  allToAll(input, out, in_splits_offsets, out_splits_offsets, group, SymmAllToAllMode::Combine2d, 0,
           "all_to_all_vdev_2d_offset");
}

// The 32-bit writes async TP signals with: a fill of the int32/uint32 elements [offset, offset + count).
at::Tensor write32(at::Tensor& input, int64_t offset, int64_t val, int64_t count, const char* op) {
  checkMytorch(input, op, "input");
  TORCH_CHECK_VALUE(input.scalar_type() == at::kUInt32 || input.scalar_type() == at::kInt, op,
                    ": expected a uint32 or int32 tensor, got ", input.scalar_type());
  TORCH_CHECK_VALUE(offset >= 0 && count >= 0 && offset + count <= input.numel(), op, ": elements [", offset, ", ",
                    offset + count, ") are outside the tensor's ", input.numel());
  TORCH_CHECK_VALUE(val >= 0 && val <= int64_t(UINT32_MAX), op, ": val must fit 32 unsigned bits, got ", val);
  if (count > 0) input.view(at::kInt).reshape({-1}).narrow(0, offset, count).fill_(static_cast<int32_t>(val));
  return input;
}

at::Tensor streamWriteValue32(at::Tensor input, int64_t offset, int64_t val) {
  return write32(input, offset, val, 1, "stream_write_value32_");
}
at::Tensor memset32(at::Tensor input, int64_t offset, int64_t val, int64_t count) {
  return write32(input, offset, val, count, "memset32_");
}

// torch registers its own CUDA kernels of these ops, with Tensor& parameters in 2.11 and other C++ signatures in
// later versions, and the dispatcher refuses a second kernel whose C++ signature differs (on the lent GPU machine's
// torch 2.11 the import aborted). A kernel registered boxed only carries no C++ signature: BoxedOnly unpacks the
// stack into Fn's parameters as an unboxed registration's own boxed path does.
template <class FnType>  // TORCH_FN_TYPE(fn)
struct BoxedOnly final : c10::OperatorKernel {
  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
    typename c10::impl::WrapFunctionIntoFunctor<FnType>::type fn;
    c10::impl::make_boxed_from_unboxed_functor<decltype(fn), false>::call(&fn, op, keys, stack);
  }
};
template <class FnType>
torch::CppFunction boxedOnly(FnType) {
  return torch::CppFunction::makeFromBoxedFunctor(std::make_unique<BoxedOnly<FnType>>());
}

} // namespace

TORCH_LIBRARY_IMPL(symm_mem, PrivateUse1, m) {
  m.impl("one_shot_all_reduce", boxedOnly(TORCH_FN(oneShotAllReduce)));
  m.impl("one_shot_all_reduce_out", boxedOnly(TORCH_FN(oneShotAllReduceOut)));
  m.impl("one_shot_all_reduce_copy", boxedOnly(TORCH_FN(oneShotAllReduceCopy)));
  m.impl("one_shot_all_reduce_copy_out", boxedOnly(TORCH_FN(oneShotAllReduceCopyOut)));
  m.impl("two_shot_all_reduce_", boxedOnly(TORCH_FN(twoShotAllReduceInPlace)));
  m.impl("two_shot_all_reduce_out", boxedOnly(TORCH_FN(twoShotAllReduceOut)));
  m.impl("reduce_scatter_out", boxedOnly(TORCH_FN(reduceScatterOut)));
  m.impl("all_to_all_vdev", boxedOnly(TORCH_FN(allToAllVdev)));
  m.impl("all_to_all_vdev_2d", boxedOnly(TORCH_FN(allToAllVdev2d)));
  m.impl("all_to_all_vdev_2d_offset", boxedOnly(TORCH_FN(allToAllVdev2dOffset)));
  m.impl("stream_write_value32_", boxedOnly(TORCH_FN(streamWriteValue32)));
  m.impl("memset32_", boxedOnly(TORCH_FN(memset32)));
}

} // namespace mytorch::dist
