// Op table: autocast for the mytorch device (AutocastPrivateUse1) with CUDA's policy. The op lists are
// PyTorch's own (AT_FORALL_* in ATen/autocast_mode.h, the lists CUDA autocast registers), so the policy
// cannot drift from torch.cuda's: lower precision for matmul-like ops, fp32 for numerically sensitive
// ones, widest-type promotion for multi-input ops.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace mytorch {
namespace {

using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;
using namespace at::autocast;

#define ADD_NS(RAW_OP) at::RAW_OP
#define MT_LOWER_PRECISION(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define MT_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define MT_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define MT_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)

// As on CUDA: binary_cross_entropy is not safe to autocast.
Tensor binaryCrossEntropyBanned(const Tensor&, const Tensor&, const std::optional<Tensor>&, int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
              "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
              "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
              "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
              "safe to autocast.");
}

} // namespace

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  // torch 2.11's AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE names at::DimnameList unqualified (2.13 has no such type):
  // a using-directive lets either version's list resolve (the build against torch 2.11 on a GPU machine failed).
  using namespace at;  // NOLINT(google-build-using-namespace)
  AT_FORALL_LOWER_PRECISION_FP(MT_LOWER_PRECISION)
  AT_FORALL_FP32(MT_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(MT_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(MT_PROMOTE)
  KERNEL_PRIVATEUSEONE(cat, promote)
  KERNEL_PRIVATEUSEONE(stack, promote)
  KERNEL_PRIVATEUSEONE(index_copy, promote)
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN(binaryCrossEntropyBanned));
}

} // namespace mytorch
