// Op table: native_group_norm and native_batch_norm (with the _native_batch_norm_legit forms) and their
// backwards, on the normalisation family (Note [Normalisation family]); LayerNorm has its own fused kernels
// (LayerNorm.cpp). Batch norm's saved statistics are in opmath (float for half types), as CUDA PyTorch keeps
// them; group norm's are in the parameters' dtype, as ATen's group norm keeps them on every device.
#include <ATen/core/Tensor.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <limits>

#include "csrc/core/Checked.h"
#include "csrc/aten/glue/Glue.h"
#include "csrc/core/Fallback.h"
#include "csrc/core/Runtime.h"
#include "mytorch/norm.h"

namespace mytorch {
namespace {

using at::Tensor;
using OptT = std::optional<Tensor>;

// The kernels read and write NCHW; a channels-last input gets a channels-last output and input gradient back,
// as the CPU's and CUDA's norms give (a copy; nothing for contiguous inputs).
Tensor likeInput(const Tensor& t, const Tensor& input) {
  return t.defined() ? t.contiguous(input.suggest_memory_format()) : t;
}

// The parameter dtype of an op: the weight's (or bias's, or running stat's), else the input's; it must be
// the input's or float32.
c10::ScalarType paramDtype(const Tensor& x, std::initializer_list<Tensor> params, const char* op) {
  c10::ScalarType p = x.scalar_type();
  for (const Tensor& t : params) {
    if (t.defined()) {
      p = t.scalar_type();
      break;
    }
  }
  for (const Tensor& t : params) {
    TORCH_CHECK(!t.defined() || t.scalar_type() == p, op, ": expected all parameters to have dtype ", p, ", but got ",
                t.scalar_type());
  }
  TORCH_CHECK(p == x.scalar_type() || p == at::kFloat, op, ": expected parameters of dtype ", x.scalar_type(),
              " or Float, but got ", p);
  return p;
}

void checkParam(const Tensor& t, int64_t c, const char* what, const char* op) {
  TORCH_CHECK(!t.defined() || t.numel() == c, op, ": expected ", what, " to have ", c, " elements, but got ",
              t.sizes());
}

// The cuda runtime's split sums (Note [Normalisation family]) need a small workspace; none on sim.
Tensor workspaceFor(NormArgs& a, const Tensor& like) {
  const size_t bytes = kernels::norm_workspace_bytes(a);
  if (bytes == 0) return Tensor();
  Tensor ws = at::empty({static_cast<int64_t>(bytes)}, like.options().dtype(at::kByte));
  a.workspace = ws.data_ptr();
  return ws;
}
void runForward(NormArgs& a, const Tensor& like) {
  c10::DeviceGuard guard(like.device());
  const Tensor ws = workspaceFor(a, like);
  MT_RT_CHECK(kernels::norm_forward(a, streamFor(like)));
}
void runBackward(NormArgs& a, const Tensor& like) {
  c10::DeviceGuard guard(like.device());
  const Tensor ws = workspaceFor(a, like);
  MT_RT_CHECK(kernels::norm_backward(a, streamFor(like)));
}

// --- GroupNorm --------------------------------------------------------------------------------------------

std::tuple<Tensor, Tensor, Tensor> groupNorm(const Tensor& input, const OptT& weight, const OptT& bias, int64_t N,
                                             int64_t C, int64_t HxW, int64_t group, double eps) {
  TORCH_CHECK(group > 0 && C % group == 0,
              "Expected number of channels in input to be divisible by num_groups, but "
              "got input of shape ",
              input.sizes(), " and num_groups=", group);
  TORCH_CHECK(input.numel() == N * C * HxW, "native_group_norm: expected input with N * C * HxW = ", N * C * HxW,
              " elements, but got ", input.numel());
  TORCH_CHECK(kernelFloating(input.scalar_type()), "native_group_norm: expected a floating point input, but got ",
              input.scalar_type());
  Tensor x = input.contiguous(), w = contiguousIfDefined(weight), b = contiguousIfDefined(bias);
  checkParam(w, C, "weight", "native_group_norm");
  checkParam(b, C, "bias", "native_group_norm");
  const auto p = paramDtype(x, {w, b}, "native_group_norm");
  const auto acc = opmathType(x.scalar_type());
  Tensor y = at::empty(input.sizes(), x.options());
  Tensor mean = at::empty({N, group}, x.options().dtype(acc)), rstd = at::empty({N, group}, x.options().dtype(acc));
  if (N > 0) {
    NormArgs a;
    a.kind = NormKind::Group;
    a.dtype = toKernelDType(x.scalar_type());
    a.param_dtype = toKernelDType(p);
    a.n = N;
    a.c = C;
    a.hw = HxW;
    a.groups = group;
    a.eps = eps;
    a.x = x.data_ptr();
    a.y = y.data_ptr();
    a.weight = dataOrNull(w);
    a.bias = dataOrNull(b);
    a.mean = mean.data_ptr();
    a.rstd = rstd.data_ptr();
    runForward(a, x);
  }
  if (x.numel() == 0) {   // as ATen: no elements have a mean of zero and an undefined rstd
    mean.zero_();
    rstd.fill_(std::numeric_limits<double>::quiet_NaN());
  }
  // The statistics are in the parameters' dtype (float for a half input with float parameters, else the input's),
  // as ATen's native_group_norm keeps them on every device; the kernels compute them in opmath.
  return {likeInput(y, input), mean.to(p), rstd.to(p)};
}

std::tuple<Tensor, Tensor, Tensor> groupNormBackward(const Tensor& grad_out, const Tensor& input, const Tensor& mean,
                                                     const Tensor& rstd, const OptT& weight, int64_t N, int64_t C,
                                                     int64_t HxW, int64_t group, std::array<bool, 3> mask) {
  TORCH_CHECK(group > 0 && C % group == 0, "native_group_norm_backward: expected C divisible by group, but got C=", C,
              " and group=", group);
  Tensor x = input.contiguous(), dy = grad_out.contiguous(), w = contiguousIfDefined(weight);
  TORCH_CHECK(dy.sizes() == x.sizes(), "native_group_norm_backward: expected grad_out of shape ", x.sizes(),
              ", but got ", dy.sizes());
  const auto p = paramDtype(x, {w}, "native_group_norm_backward");
  const auto acc = opmathType(x.scalar_type());
  Tensor mu = mean.to(acc).contiguous(), rs = rstd.to(acc).contiguous();
  Tensor dx = mask[0] ? at::empty(x.sizes(), x.options()) : Tensor();
  Tensor dw = mask[1] ? at::empty({C}, x.options().dtype(p)) : Tensor();
  Tensor db = mask[2] ? at::empty({C}, x.options().dtype(p)) : Tensor();
  if (N > 0 && C > 0) {
    NormArgs a;
    a.kind = NormKind::Group;
    a.dtype = toKernelDType(x.scalar_type());
    a.param_dtype = toKernelDType(p);
    a.n = N;
    a.c = C;
    a.hw = HxW;
    a.groups = group;
    a.x = x.data_ptr();
    a.weight = dataOrNull(w);
    a.mean = mu.data_ptr();
    a.rstd = rs.data_ptr();
    a.dy = dy.data_ptr();
    a.dx = dataOrNull(dx);
    a.dweight = dataOrNull(dw);
    a.dbias = dataOrNull(db);
    runBackward(a, x);
  } else {
    if (dw.defined()) dw.zero_();
    if (db.defined()) db.zero_();
  }
  return {likeInput(dx, input), dw, db};
}

// --- BatchNorm --------------------------------------------------------------------------------------------

std::tuple<Tensor, Tensor, Tensor> batchNorm(const Tensor& input, const OptT& weight, const OptT& bias,
                                             const OptT& running_mean, const OptT& running_var, bool training,
                                             double momentum, double eps) {
  TORCH_CHECK(input.dim() >= 2, "native_batch_norm: expected an input with at least 2 dimensions, but got ",
              input.sizes());
  TORCH_CHECK(kernelFloating(input.scalar_type()), "native_batch_norm: expected a floating point input, but got ",
              input.scalar_type());
  const int64_t N = input.size(0), C = input.size(1), HW = C == 0 || N == 0 ? 0 : input.numel() / (N * C);
  Tensor x = input.contiguous(), w = contiguousIfDefined(weight), b = contiguousIfDefined(bias);
  // Running statistics are updated in place: the caller's tensors, which must be contiguous.
  Tensor rm = running_mean.has_value() && running_mean->defined() ? *running_mean : Tensor();
  Tensor rv = running_var.has_value() && running_var->defined() ? *running_var : Tensor();
  TORCH_CHECK(training || (rm.defined() && rv.defined()),
              "running_mean and running_var must be defined in evaluation mode");
  TORCH_CHECK(!rm.defined() || rm.is_contiguous(), "native_batch_norm: expected a contiguous running_mean");
  TORCH_CHECK(!rv.defined() || rv.is_contiguous(), "native_batch_norm: expected a contiguous running_var");
  for (const auto& [t, what] :
       {std::pair<Tensor, const char*>{w, "weight"}, {b, "bias"}, {rm, "running_mean"}, {rv, "running_var"}})
    checkParam(t, C, what, "native_batch_norm");
  const auto p = paramDtype(x, {w, b, rm, rv}, "native_batch_norm");
  const auto acc = opmathType(x.scalar_type());
  TORCH_CHECK(!training || N * HW > 0 || C == 0,
              "Expected more than 1 value per channel when training, got input size ", input.sizes());
  Tensor y = at::empty(input.sizes(), x.options());
  Tensor mean = at::empty({C}, x.options().dtype(acc)), rstd = at::empty({C}, x.options().dtype(acc));
  if (C > 0) {
    NormArgs a;
    a.kind = NormKind::Batch;
    a.dtype = toKernelDType(x.scalar_type());
    a.param_dtype = toKernelDType(p);
    a.n = N;
    a.c = C;
    a.hw = HW;
    a.training = training;
    a.momentum = momentum;
    a.eps = eps;
    a.x = x.data_ptr();
    a.y = y.data_ptr();
    a.weight = dataOrNull(w);
    a.bias = dataOrNull(b);
    a.running_mean = dataOrNull(rm);
    a.running_var = dataOrNull(rv);
    a.mean = mean.data_ptr();
    a.rstd = rstd.data_ptr();
    runForward(a, x);
  }
  if (!training) {  // as CUDA PyTorch: no saved statistics in evaluation mode
    mean = at::empty({0}, x.options().dtype(acc));
    rstd = at::empty({0}, x.options().dtype(acc));
  }
  return {likeInput(y, input), mean, rstd};
}

std::tuple<Tensor, Tensor, Tensor> batchNormBackward(const Tensor& grad_out, const Tensor& input, const OptT& weight,
                                                     const OptT& running_mean, const OptT& running_var,
                                                     const OptT& save_mean, const OptT& save_invstd, bool train,
                                                     double eps, std::array<bool, 3> mask) {
  const int64_t N = input.size(0), C = input.size(1), HW = C == 0 || N == 0 ? 0 : input.numel() / (N * C);
  Tensor x = input.contiguous(), dy = grad_out.contiguous(), w = contiguousIfDefined(weight);
  Tensor rm = contiguousIfDefined(running_mean), rv = contiguousIfDefined(running_var);
  const auto p = paramDtype(x, {w, rm, rv}, "native_batch_norm_backward");
  const auto acc = opmathType(x.scalar_type());
  Tensor mu, rs;
  if (train) {
    TORCH_CHECK(save_mean.has_value() && save_mean->defined() && save_invstd.has_value() && save_invstd->defined(),
                "native_batch_norm_backward: expected save_mean and save_invstd in training mode");
    mu = save_mean->to(acc).contiguous();
    rs = save_invstd->to(acc).contiguous();
  } else {
    TORCH_CHECK(rm.defined() && rv.defined(),
                "native_batch_norm_backward: expected running_mean and running_var in "
                "evaluation mode");
    mu = rm.to(acc).contiguous();
    rs = rv.to(acc).add(eps).rsqrt().contiguous();
  }
  Tensor dx = mask[0] ? at::empty(x.sizes(), x.options()) : Tensor();
  Tensor dw = mask[1] ? at::empty({C}, x.options().dtype(p)) : Tensor();
  Tensor db = mask[2] ? at::empty({C}, x.options().dtype(p)) : Tensor();
  if (C > 0) {
    NormArgs a;
    a.kind = NormKind::Batch;
    a.dtype = toKernelDType(x.scalar_type());
    a.param_dtype = toKernelDType(p);
    a.n = N;
    a.c = C;
    a.hw = HW;
    a.training = train;
    a.x = x.data_ptr();
    a.weight = dataOrNull(w);
    a.mean = mu.data_ptr();
    a.rstd = rs.data_ptr();
    a.dy = dy.data_ptr();
    a.dx = dataOrNull(dx);
    a.dweight = dataOrNull(dw);
    a.dbias = dataOrNull(db);
    runBackward(a, x);
  }
  return {likeInput(dx, input), dw, db};
}

std::tuple<Tensor, Tensor, Tensor> batchNormLegit(const Tensor& input, const OptT& weight, const OptT& bias,
                                                  Tensor& running_mean, Tensor& running_var, bool training,
                                                  double momentum, double eps) {
  return batchNorm(input, weight, bias, running_mean, running_var, training, momentum, eps);
}
std::tuple<Tensor, Tensor, Tensor> batchNormLegitNoStats(const Tensor& input, const OptT& weight, const OptT& bias,
                                                         bool training, double momentum, double eps) {
  return batchNorm(input, weight, bias, std::nullopt, std::nullopt, training, momentum, eps);
}
std::tuple<Tensor, Tensor, Tensor> batchNormLegitNoTraining(const Tensor& input, const OptT& weight, const OptT& bias,
                                                            const Tensor& running_mean, const Tensor& running_var,
                                                            double momentum, double eps) {
  return batchNorm(input, weight, bias, running_mean, running_var, false, momentum, eps);
}

// The training batch norm torch.nn.functional.batch_norm reaches through _batch_norm_with_update (ATen's CPU and
// CUDA kernels: native_batch_norm's, plus an empty cuDNN reserve) and its backward.
std::tuple<Tensor, Tensor, Tensor, Tensor> batchNormWithUpdate(const Tensor& input, const OptT& weight,
                                                               const OptT& bias, Tensor& running_mean,
                                                               Tensor& running_var, double momentum, double eps) {
  auto [out, mean, rstd] = batchNorm(input, weight, bias, running_mean, running_var, true, momentum, eps);
  return {out, mean, rstd, at::empty({0}, input.options().dtype(at::kByte))};
}
std::tuple<Tensor, Tensor, Tensor> batchNormBackwardReserve(const Tensor& grad, const Tensor& input,
                                                            const Tensor& weight, const OptT& running_mean,
                                                            const OptT& running_var, const OptT& save_mean,
                                                            const OptT& save_rstd, bool update, double eps,
                                                            std::array<bool, 3> mask, const Tensor& /*reserve*/) {
  return batchNormBackward(grad, input, weight, running_mean, running_var, save_mean, save_rstd, update, eps, mask);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "_batch_norm_with_update", batchNormWithUpdate);
  MT_IMPL(m, "batch_norm_backward", batchNormBackwardReserve);
  MT_IMPL(m, "native_group_norm", groupNorm);
  MT_IMPL(m, "native_group_norm_backward", groupNormBackward);
  MT_IMPL(m, "native_batch_norm", batchNorm);
  MT_IMPL(m, "native_batch_norm_backward", batchNormBackward);
  MT_IMPL(m, "_native_batch_norm_legit", batchNormLegit);
  MT_IMPL(m, "_native_batch_norm_legit.no_stats", batchNormLegitNoStats);
  MT_IMPL(m, "_native_batch_norm_legit_no_training", batchNormLegitNoTraining);
}

} // namespace mytorch
