// Op table: the CTC loss (F.ctc_loss: _ctc_loss and its backward, int-list and tensor overloads) on mytorch
// (kernels: mytorch/ctc.h, Note [CTC]), with ATen's argument checks. The lengths are read on the host (as
// CUDA's tensor overload does) and handed to the kernels as device arrays with each sample's target offset.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/from_blob.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "csrc/core/Checked.h"
#include "csrc/aten/glue/Glue.h"
#include "csrc/core/Runtime.h"
#include "csrc/core/Stream.h"
#include "mytorch/ctc.h"

namespace mytorch {
namespace {

using at::Tensor;

struct CtcSetup {
  CtcArgs a;
  Tensor targets, lengths;  // keep the device copies alive
};

Tensor toDevice(const std::vector<int64_t>& v, const at::Device& device) {
  return at::from_blob(const_cast<int64_t*>(v.data()), {static_cast<int64_t>(v.size())}, at::kLong).to(device);
}

CtcSetup setup(const Tensor& log_probs, const Tensor& targets, at::IntArrayRef input_lengths,
               at::IntArrayRef target_lengths, int64_t blank, const char* op) {
  TORCH_CHECK(log_probs.dim() == 3, op, ": expected log_probs of shape (T, N, C), but got ", log_probs.sizes());
  TORCH_CHECK(log_probs.scalar_type() == at::kFloat || log_probs.scalar_type() == at::kDouble, op,
              ": expected float or double log_probs, but got ", log_probs.scalar_type());
  TORCH_CHECK(targets.scalar_type() == at::kLong || targets.scalar_type() == at::kInt, op,
              ": expected int or long targets, but got ", targets.scalar_type());
  const int64_t T = log_probs.size(0), N = log_probs.size(1), C = log_probs.size(2);
  TORCH_CHECK(blank >= 0 && blank < C, "blank must be in label range");
  TORCH_CHECK(static_cast<int64_t>(input_lengths.size()) == N, "input_lengths must be of size batch_size");
  TORCH_CHECK(static_cast<int64_t>(target_lengths.size()) == N, "target_lengths must be of size batch_size");
  CtcSetup st;
  Tensor tg = targets.to(log_probs.device(), at::kLong);
  std::vector<int64_t> offsets(static_cast<size_t>(N));
  int64_t max_target = 0, pos = 0;
  for (int64_t b = 0; b < N; ++b) {
    TORCH_CHECK(input_lengths[b] >= 0 && input_lengths[b] <= T, op, ": expected input_lengths in [0, ", T,
                "], but got ", input_lengths[b], " for sample ", b);
    TORCH_CHECK(target_lengths[b] >= 0, op, ": expected non-negative target_lengths, but got ", target_lengths[b]);
    max_target = std::max(max_target, target_lengths[b]);
  }
  if (tg.dim() == 1) {  // the targets of all samples, one after the other
    for (int64_t b = 0; b < N; ++b) {
      offsets[static_cast<size_t>(b)] = pos;
      pos += target_lengths[b];
    }
    TORCH_CHECK(tg.size(0) >= pos, "Expected tensor to have size at least ", pos, " at dimension 0, but got size ",
                tg.size(0), " for argument #2 'targets' (while checking arguments for ctc_loss)");
    st.a.tg_stride = tg.stride(0);
    for (auto& o : offsets) o *= tg.stride(0);
  } else {
    TORCH_CHECK(tg.dim() == 2 && tg.size(0) == N, op,
                ": expected targets of shape (N, S) or a 1-D concatenation, "
                "but got ",
                targets.sizes());
    TORCH_CHECK(tg.size(1) >= max_target, "Expected tensor to have size at least ", max_target,
                " at dimension 1, but got size ", tg.size(1),
                " for argument #2 'targets' (while checking arguments "
                "for ctc_loss)");
    for (int64_t b = 0; b < N; ++b) offsets[static_cast<size_t>(b)] = b * tg.stride(0);
    st.a.tg_stride = tg.stride(1);
  }
  std::vector<int64_t> host;
  host.reserve(static_cast<size_t>(3 * N));
  host.insert(host.end(), input_lengths.begin(), input_lengths.end());
  host.insert(host.end(), target_lengths.begin(), target_lengths.end());
  host.insert(host.end(), offsets.begin(), offsets.end());
  st.lengths = toDevice(host, log_probs.device());
  st.targets = tg;
  CtcArgs& a = st.a;
  a.dtype = toKernelDType(log_probs.scalar_type());
  a.log_probs = log_probs.const_data_ptr();
  a.lp_st = log_probs.stride(0);
  a.lp_sn = log_probs.stride(1);
  a.lp_sc = log_probs.stride(2);
  a.max_t = T;
  a.n = N;
  a.c = C;
  a.targets = tg.const_data_ptr<int64_t>();
  a.input_lengths = st.lengths.const_data_ptr<int64_t>();
  a.target_lengths = a.input_lengths + N;
  a.tg_offsets = a.input_lengths + 2 * N;
  a.max_s = 2 * max_target + 1;
  a.blank = blank;
  return st;
}

std::tuple<Tensor, Tensor> ctcLoss(const Tensor& log_probs, const Tensor& targets, at::IntArrayRef input_lengths,
                                   at::IntArrayRef target_lengths, int64_t blank, bool /*zero_infinity*/) {
  CtcSetup st = setup(log_probs, targets, input_lengths, target_lengths, blank, "ctc_loss");
  Tensor nll = at::empty({st.a.n}, log_probs.options());
  Tensor log_alpha = at::empty({st.a.n, st.a.max_t, st.a.max_s}, log_probs.options());
  st.a.nll = nll.data_ptr();
  st.a.log_alpha = log_alpha.data_ptr();
  c10::DeviceGuard guard(log_probs.device());
  MT_RT_CHECK(kernels::ctc_forward(st.a, streamFor(log_probs)));
  return {nll, log_alpha};
}

Tensor ctcLossBackward(const Tensor& grad, const Tensor& log_probs, const Tensor& targets,
                       at::IntArrayRef input_lengths, at::IntArrayRef target_lengths, const Tensor& neg_log_likelihood,
                       const Tensor& log_alpha, int64_t blank, bool zero_infinity) {
  CtcSetup st = setup(log_probs, targets, input_lengths, target_lengths, blank, "ctc_loss_backward");
  CtcArgs& a = st.a;
  TORCH_CHECK(log_alpha.sizes() == at::IntArrayRef({a.n, a.max_t, a.max_s}) && grad.numel() == a.n,
              "ctc_loss_backward: expected log_alpha of shape ", at::IntArrayRef({a.n, a.max_t, a.max_s}),
              " and a gradient of ", a.n, " values, but got ", log_alpha.sizes(), " and ", grad.sizes());
  Tensor la = log_alpha.contiguous(), nll = neg_log_likelihood.to(log_probs.scalar_type()).contiguous();
  Tensor g = grad.to(log_probs.scalar_type()).reshape({a.n});
  Tensor log_beta = at::empty_like(la), out = at::empty(log_probs.sizes(), log_probs.options());
  a.log_alpha = la.data_ptr();
  a.nll = nll.data_ptr();
  a.log_beta = log_beta.data_ptr();
  a.grad_out = g.const_data_ptr();
  a.grad_stride = g.stride(0);
  a.grad = out.data_ptr();
  a.zero_infinity = zero_infinity;
  c10::DeviceGuard guard(log_probs.device());
  MT_RT_CHECK(kernels::ctc_backward(a, streamFor(log_probs)));
  return out;
}

std::vector<int64_t> hostLengths(const Tensor& t) {
  Tensor c = t.to(at::kCPU, at::kLong).contiguous();
  return {c.const_data_ptr<int64_t>(), c.const_data_ptr<int64_t>() + c.numel()};
}

std::tuple<Tensor, Tensor> ctcLossT(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                                    const Tensor& target_lengths, int64_t blank, bool zero_infinity) {
  return ctcLoss(log_probs, targets, hostLengths(input_lengths), hostLengths(target_lengths), blank, zero_infinity);
}

Tensor ctcLossBackwardT(const Tensor& grad, const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                        const Tensor& target_lengths, const Tensor& neg_log_likelihood, const Tensor& log_alpha,
                        int64_t blank, bool zero_infinity) {
  return ctcLossBackward(grad, log_probs, targets, hostLengths(input_lengths), hostLengths(target_lengths),
                         neg_log_likelihood, log_alpha, blank, zero_infinity);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "_ctc_loss", ctcLoss);
  MT_IMPL(m, "_ctc_loss.Tensor", ctcLossT);
  MT_IMPL(m, "_ctc_loss_backward", ctcLossBackward);
  MT_IMPL(m, "_ctc_loss_backward.Tensor", ctcLossBackwardT);
}

} // namespace mytorch
