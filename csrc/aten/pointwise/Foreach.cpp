// Op table: the `_foreach_*` ops torch.optim's foreach path and clip_grad_norm_ use, and the fused
// optimizers (_fused_adam_, _fused_adamw_, _fused_sgd_), as multi-tensor kernels (Note [Multi-tensor
// apply]). One boxed kernel serves every foreach overload: it reads the operands off the stack by schema,
// takes the fast path when the lists qualify and otherwise hands the call to ATen's per-tensor composite
// (CompositeExplicitAutograd), whose single-tensor ops are native too.
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <cmath>
#include <string>
#include <unordered_map>

#include "csrc/core/Checked.h"
#include "csrc/aten/glue/Glue.h"
#include "csrc/core/Runtime.h"
#include "mytorch/optim.h"

namespace mytorch {
namespace {

using at::Tensor;

// Whether every tensor of `lists` can go through the multi-tensor kernels with list 0 as the reference.
bool fastLists(const std::vector<std::vector<Tensor>>& lists, c10::ScalarType dtype) {
  if (lists.empty() || lists[0].empty()) return false;
  const auto device = lists[0][0].device();
  for (const auto& l : lists) {
    if (l.size() != lists[0].size()) return false;
    for (size_t i = 0; i < l.size(); ++i) {
      const Tensor& t = l[i];
      if (!t.defined() || t.device() != device || t.scalar_type() != dtype || !t.is_contiguous() ||
          t.numel() != lists[0][i].numel() || t.is_conj() || t.is_neg())
        return false;
    }
  }
  return device.type() == c10::DeviceType::PrivateUse1;
}

std::vector<Tensor> listOf(const c10::IValue& v) { return v.toTensorVector(); }

void launch(MultiTensorArgs& a, std::vector<MtTensor>& ts, const Tensor& like) {
  a.ntensors = static_cast<int64_t>(ts.size());
  a.tensors = ts.data();
  c10::DeviceGuard guard(like.device());
  Tensor ws;
  if (a.kind == MtKind::Norm && !onSim()) {
    ws = at::empty({static_cast<int64_t>(mt_norm_workspace_bytes(a))}, like.options().dtype(at::kByte));
    a.workspace = ws.data_ptr();
  }
  MT_RT_CHECK(kernels::multi_tensor(a, streamFor(like)));
}

struct ForeachSpec {
  EwOp op;
  bool has_alpha;  // add/sub: List and Tensor overloads take alpha
};

// _foreach_<name> for every row of the pointwise table marked Foreach (name: the row's aten column), and
// clamp_min / clamp_max, which are maximum / minimum with a bound.
const std::unordered_map<std::string, ForeachSpec>& specs() {
  static const std::unordered_map<std::string, ForeachSpec> m = [] {
    std::unordered_map<std::string, ForeachSpec> r;
#define MT_POINTWISE(name, arity, dtypes, result, group, glue, aten, overload, foreach) \
  if (ew_table::foreach) r[#aten] = {EwOp::name, EwOp::name == EwOp::Add || EwOp::name == EwOp::Sub};
#include "mytorch/tables/pointwise.def"
#undef MT_POINTWISE
    r["clamp_min"] = {EwOp::Maximum, false};
    r["clamp_max"] = {EwOp::Minimum, false};
    return r;
  }();
  return m;
}

// The fast path of one foreach call; false when it does not apply (the caller runs the composite).
bool foreachFast(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  std::string name = schema.name().substr(std::string("aten::_foreach_").size());
  const bool in_place = !name.empty() && name.back() == '_';
  if (in_place) name.pop_back();
  const std::string overload = schema.overload_name();
  const size_t nargs = schema.arguments().size();
  auto args = torch::jit::last(*stack, nargs);

  MultiTensorArgs a;
  std::vector<std::vector<Tensor>> lists;
  std::vector<double> per_tensor;
  Tensor device_scalar;

  if (name == "zero" || name == "copy" || name == "norm") {
    lists.push_back(listOf(args[0]));
    if (lists[0].empty()) return false;
    const auto dtype = lists[0][0].scalar_type();
    if (name == "copy") {
      lists.push_back(listOf(args[1]));
      if (!fastLists(lists, dtype) || !multi_tensor_supported(EwOp::Add, toKernelDType(dtype))) return false;
      for (size_t i = 0; i < lists[0].size(); ++i)
        if (lists[0][i].is_same(lists[1][i]) || lists[0][i].data_ptr() == lists[1][i].data_ptr()) return false;
      a.kind = MtKind::Copy;
      a.dtype = a.out_dtype = toKernelDType(dtype);
      std::vector<MtTensor> ts(lists[0].size());
      for (size_t i = 0; i < ts.size(); ++i) {
        ts[i].ptr[0] = lists[0][i].data_ptr();
        ts[i].ptr[1] = lists[1][i].data_ptr();
        ts[i].numel = lists[0][i].numel();
      }
      launch(a, ts, lists[0][0]);
      torch::jit::drop(*stack, nargs);
      return true;
    }
    if (!fastLists(lists, dtype) || !multi_tensor_supported(EwOp::Add, toKernelDType(dtype))) return false;
    a.dtype = toKernelDType(dtype);
    std::vector<MtTensor> ts(lists[0].size());
    std::vector<Tensor> outs;
    if (name == "zero") {
      a.kind = MtKind::Fill;
    } else {
      a.kind = MtKind::Norm;
      const double ord = args[1].toScalar().toDouble();
      if (!(ord == 1 || ord == 2 || ord == INFINITY)) return false;
      for (const Tensor& t : lists[0])
        TORCH_CHECK(ord != INFINITY || t.numel() > 0,
                    "_foreach_norm cannot compute the infinity norm on an empty "
                    "tensor because the operation does not have an identity");
      a.ord = ord;
      const auto out_dtype = args[2].isNone() ? dtype : args[2].toScalarType();
      if (!multi_tensor_supported(EwOp::Add, toKernelDType(out_dtype))) return false;
      a.out_dtype = toKernelDType(out_dtype);
      for (const Tensor& t : lists[0]) outs.push_back(at::empty({}, t.options().dtype(out_dtype)));
    }
    for (size_t i = 0; i < ts.size(); ++i) {
      ts[i].numel = lists[0][i].numel();
      if (a.kind == MtKind::Norm) {
        ts[i].ptr[0] = outs[i].data_ptr();
        ts[i].ptr[1] = lists[0][i].data_ptr();
        if (ts[i].numel == 0) outs[i].zero_();
      } else {
        ts[i].ptr[0] = lists[0][i].data_ptr();
      }
    }
    launch(a, ts, lists[0][0]);
    torch::jit::drop(*stack, nargs);
    if (a.kind == MtKind::Norm) torch::jit::push(*stack, c10::IValue(outs));
    return true;
  }

  auto it = specs().find(name);
  if (it == specs().end()) return false;
  a.kind = MtKind::Elementwise;
  a.op = it->second.op;
  const bool pointwise3 = a.op == EwOp::Addcmul || a.op == EwOp::Addcdiv || a.op == EwOp::Lerp;
  size_t k = 0;  // next stack argument
  if (overload == "ScalarAndTensor") {  // pow(Scalar self, Tensor[] exponent)
    a.operand[0] = MtOperand::Constant;
    a.constant[0] = args[0].toScalar().toDouble();
    if (args[0].toScalar().isComplex()) return false;
    lists.push_back(listOf(args[1]));
    a.operand[1] = MtOperand::List;
    a.ninputs = 2;
  } else {
    lists.push_back(listOf(args[k++]));
    a.ninputs = 1;
    if (pointwise3) {
      lists.push_back(listOf(args[k++]));
      a.ninputs = 2;
      if (a.op != EwOp::Lerp) {
        lists.push_back(listOf(args[k++]));
        a.ninputs = 3;
      }
    }
    if (k < nargs) {  // the remaining operand: another list, a scalar, a scalar list or a device scalar
      const c10::IValue& v = args[k++];
      const int slot = a.ninputs;
      const bool value_is_alpha = a.op == EwOp::Addcmul || a.op == EwOp::Addcdiv;
      if (v.isTensorList()) {
        lists.push_back(listOf(v));
        a.operand[slot] = MtOperand::List;
        a.ninputs++;
      } else if (v.isTensor()) {
        const Tensor& t = v.toTensor();
        if (value_is_alpha) {  // addcmul/addcdiv.Tensor: a 1-D CPU tensor of per-tensor values
          if (t.device().type() != c10::DeviceType::CPU || t.dim() != 1) return false;
          Tensor d = t.to(at::kDouble);
          for (int64_t i = 0; i < d.numel(); ++i) per_tensor.push_back(d.data_ptr<double>()[i]);
          a.alpha_per_tensor = true;
        } else {
          if (t.numel() != 1 || t.dim() != 0 || !at::isFloatingType(t.scalar_type())) return false;
          if (t.device().type() == c10::DeviceType::CPU) {
            a.operand[slot] = MtOperand::Constant;
            a.constant[slot] = t.item<double>();
          } else {
            device_scalar = t;
            a.operand[slot] = MtOperand::Device;
            a.device_scalar = t.data_ptr();
            a.device_scalar_dtype = toKernelDType(t.scalar_type());
          }
          a.ninputs++;
        }
      } else if (v.isList()) {
        for (const c10::IValue& s : v.toListRef()) {
          if (s.toScalar().isComplex()) return false;
          per_tensor.push_back(s.toScalar().toDouble());
        }
        if (value_is_alpha) {
          a.alpha_per_tensor = true;
        } else {
          a.operand[slot] = MtOperand::PerTensor;
          a.ninputs++;
        }
      } else if (v.isScalar()) {
        if (v.toScalar().isComplex()) return false;
        if (value_is_alpha) {
          a.p.alpha = v.toScalar().toDouble();
        } else {
          a.operand[slot] = MtOperand::Constant;
          a.constant[slot] = v.toScalar().toDouble();
          a.ninputs++;
        }
      } else {
        return false;
      }
    }
    if (k < nargs && it->second.has_alpha) a.p.alpha = args[k++].toScalar().toDouble();
  }
  const auto dtype = lists[0].empty() ? at::kFloat : lists[0][0].scalar_type();
  if (!fastLists(lists, dtype) || !multi_tensor_supported(a.op, toKernelDType(dtype))) return false;
  if (!per_tensor.empty() && per_tensor.size() != lists[0].size()) return false;
  if (!device_scalar.defined() || device_scalar.device() != lists[0][0].device()) {
    if (device_scalar.defined()) return false;
  }
  a.dtype = toKernelDType(dtype);
  // Outputs: the first list in place, new tensors otherwise.
  const std::vector<Tensor>& first = lists[0];
  std::vector<Tensor> outs;
  if (in_place && overload != "ScalarAndTensor") {
    outs = first;
  } else {
    for (const Tensor& t : first) outs.push_back(at::empty_like(t));
  }
  std::vector<MtTensor> ts(first.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    ts[i].ptr[0] = outs[i].data_ptr();
    int slot = 1;
    for (size_t l = 0; l < lists.size(); ++l) {
      while (slot - 1 < 3 && a.operand[slot - 1] != MtOperand::List) ++slot;
      ts[i].ptr[slot++] = lists[l][i].data_ptr();
    }
    ts[i].numel = first[i].numel();
    if (!per_tensor.empty()) ts[i].scalar = per_tensor[i];
  }
  launch(a, ts, first[0]);
  torch::jit::drop(*stack, nargs);
  if (!in_place) torch::jit::push(*stack, c10::IValue(outs));
  return true;
}

void foreachKernel(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  if (foreachFast(op, stack)) return;
  op.callBoxedForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd, *stack);
}

// --- fused optimizers -------------------------------------------------------------------------------------

const float* optionalFloatScalar(const std::optional<Tensor>& t, const char* what, const Tensor& like) {
  if (!t.has_value() || !t->defined()) return nullptr;
  TORCH_CHECK(t->numel() == 1 && t->scalar_type() == at::kFloat && t->device() == like.device(), what,
              " must be a float32 scalar tensor on ", like.device(), ", but got ", t->scalar_type(), " ", t->sizes(),
              " on ", t->device());
  return t->data_ptr<float>();
}

// The learning rate: a double, or a tensor (read on the device when it lives there, no sync).
void setLr(MultiTensorArgs& a, double lr, const Tensor& lr_t, Tensor& keep) {
  a.lr = lr;
  if (!lr_t.defined()) return;
  if (lr_t.device().type() == c10::DeviceType::CPU) {
    a.lr = lr_t.item<double>();
  } else {
    keep = lr_t.to(at::kFloat);
    a.lr_ptr = keep.data_ptr<float>();
  }
}

void checkFusedLists(const std::vector<at::TensorList>& lists, const char* op) {
  const Tensor& ref = lists[0][0];
  for (const auto& l : lists) {
    TORCH_CHECK(l.size() == lists[0].size(), op, ": expected every tensor list to have ", lists[0].size(),
                " tensors, but got one with ", l.size());
    for (size_t i = 0; i < l.size(); ++i) {
      TORCH_CHECK(l[i].device() == ref.device() && l[i].scalar_type() == ref.scalar_type() && l[i].is_contiguous() &&
                      l[i].numel() == lists[0][i].numel(),
                  op, ": expected dense tensors of one dtype and device with matching sizes, but tensor ", i, " is ",
                  l[i].scalar_type(), " ", l[i].sizes(), " on ", l[i].device());
    }
  }
  TORCH_CHECK(multi_tensor_supported(EwOp::Add, toKernelDType(ref.scalar_type())), op,
              ": expected floating point parameters, but got ", ref.scalar_type());
}

void fusedAdamImpl(bool adamw, at::TensorList self, at::TensorList grads, at::TensorList exp_avgs,
                   at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs, at::TensorList state_steps, double lr,
                   const Tensor& lr_t, double beta1, double beta2, double weight_decay, double eps, bool amsgrad,
                   bool maximize, const std::optional<Tensor>& grad_scale, const std::optional<Tensor>& found_inf) {
  if (self.empty()) return;
  const char* name = adamw ? "_fused_adamw_" : "_fused_adam_";
  std::vector<at::TensorList> lists{self, grads, exp_avgs, exp_avg_sqs};
  if (amsgrad) lists.push_back(max_exp_avg_sqs);
  checkFusedLists(lists, name);
  TORCH_CHECK(state_steps.size() == self.size(), name, ": expected ", self.size(), " state_steps, but got ",
              state_steps.size());
  for (const Tensor& s : state_steps)
    TORCH_CHECK(s.numel() == 1 && s.scalar_type() == at::kFloat && s.device() == self[0].device(), name,
                ": expected float32 step tensors on ", self[0].device(), ", but got ", s.scalar_type(), " on ",
                s.device());
  MultiTensorArgs a;
  a.kind = adamw ? MtKind::AdamW : MtKind::Adam;
  a.dtype = toKernelDType(self[0].scalar_type());
  Tensor lr_dev;
  setLr(a, lr, lr_t, lr_dev);
  a.beta1 = beta1;
  a.beta2 = beta2;
  a.weight_decay = weight_decay;
  a.eps = eps;
  a.amsgrad = amsgrad;
  a.maximize = maximize;
  a.grad_scale = optionalFloatScalar(grad_scale, "grad_scale", self[0]);
  a.found_inf = optionalFloatScalar(found_inf, "found_inf", self[0]);
  std::vector<MtTensor> ts(self.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    ts[i].ptr[0] = self[i].data_ptr();
    ts[i].ptr[1] = grads[i].data_ptr();
    ts[i].ptr[2] = exp_avgs[i].data_ptr();
    ts[i].ptr[3] = exp_avg_sqs[i].data_ptr();
    ts[i].ptr[4] = amsgrad ? max_exp_avg_sqs[i].data_ptr() : nullptr;
    ts[i].ptr[5] = state_steps[i].data_ptr();
    ts[i].numel = self[i].numel();
  }
  launch(a, ts, self[0]);
}

#define MT_FUSED_ADAM(fn, ADAMW, LR_T, LR_ARG, LR_T_ARG)                                                            \
  void fn(at::TensorList self, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,           \
          at::TensorList max_exp_avg_sqs, at::TensorList state_steps, LR_T lr, double beta1, double beta2,          \
          double weight_decay, double eps, bool amsgrad, bool maximize, const std::optional<Tensor>& grad_scale,    \
          const std::optional<Tensor>& found_inf) {                                                                 \
    fusedAdamImpl(ADAMW, self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, LR_ARG, LR_T_ARG, beta1, \
                  beta2, weight_decay, eps, amsgrad, maximize, grad_scale, found_inf);                              \
  }
MT_FUSED_ADAM(fusedAdam, false, double, lr, Tensor())
MT_FUSED_ADAM(fusedAdamTensorLr, false, const Tensor&, 0.0, lr)
MT_FUSED_ADAM(fusedAdamW, true, double, lr, Tensor())
MT_FUSED_ADAM(fusedAdamWTensorLr, true, const Tensor&, 0.0, lr)
#undef MT_FUSED_ADAM

void fusedSgdImpl(at::TensorList self, at::TensorList grads, at::TensorList bufs, double weight_decay, double momentum,
                  double lr, const Tensor& lr_t, double dampening, bool nesterov, bool maximize, bool is_first_step,
                  const std::optional<Tensor>& grad_scale, const std::optional<Tensor>& found_inf) {
  if (self.empty()) return;
  const bool has_momentum = momentum != 0.0;
  std::vector<at::TensorList> lists{self, grads};
  if (has_momentum) lists.push_back(bufs);
  checkFusedLists(lists, "_fused_sgd_");
  MultiTensorArgs a;
  a.kind = MtKind::Sgd;
  a.dtype = toKernelDType(self[0].scalar_type());
  Tensor lr_dev;
  setLr(a, lr, lr_t, lr_dev);
  a.weight_decay = weight_decay;
  a.momentum = momentum;
  a.dampening = dampening;
  a.nesterov = nesterov;
  a.maximize = maximize;
  a.is_first_step = is_first_step;
  a.has_momentum = has_momentum;
  a.grad_scale = optionalFloatScalar(grad_scale, "grad_scale", self[0]);
  a.found_inf = optionalFloatScalar(found_inf, "found_inf", self[0]);
  std::vector<MtTensor> ts(self.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    ts[i].ptr[0] = self[i].data_ptr();
    ts[i].ptr[1] = grads[i].data_ptr();
    ts[i].ptr[2] = has_momentum ? bufs[i].data_ptr() : nullptr;
    ts[i].numel = self[i].numel();
  }
  launch(a, ts, self[0]);
}

void fusedSgd(at::TensorList self, at::TensorList grads, at::TensorList bufs, double weight_decay, double momentum,
              double lr, double dampening, bool nesterov, bool maximize, bool is_first_step,
              const std::optional<Tensor>& grad_scale, const std::optional<Tensor>& found_inf) {
  fusedSgdImpl(self, grads, bufs, weight_decay, momentum, lr, Tensor(), dampening, nesterov, maximize, is_first_step,
               grad_scale, found_inf);
}
void fusedSgdTensorLr(at::TensorList self, at::TensorList grads, at::TensorList bufs, double weight_decay,
                      double momentum, const Tensor& lr, double dampening, bool nesterov, bool maximize,
                      bool is_first_step, const std::optional<Tensor>& grad_scale,
                      const std::optional<Tensor>& found_inf) {
  fusedSgdImpl(self, grads, bufs, weight_decay, momentum, 0.0, lr, dampening, nesterov, maximize, is_first_step,
               grad_scale, found_inf);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // Every functional and in-place overload (not the out= ones) of the foreach ops above, and zero_, copy_, norm.
  auto reg = [&](const std::string& name) {
    m.impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&foreachKernel>());
  };
  for (const c10::OperatorName& op : c10::Dispatcher::singleton().getAllOpNames()) {
    if (op.name.rfind("aten::_foreach_", 0) != 0) continue;
    std::string base = op.name.substr(std::string("aten::_foreach_").size());
    if (!base.empty() && base.back() == '_') base.pop_back();
    const std::string& ov = op.overload_name;
    if (specs().count(base) && (ov.size() < 3 || ov.compare(ov.size() - 3, 3, "out") != 0))
      reg(op.name.substr(std::string("aten::").size()) + (ov.empty() ? "" : "." + ov));
  }
  reg("_foreach_zero_");
  reg("_foreach_copy_");
  reg("_foreach_norm.Scalar");
  MT_IMPL(m, "_fused_adam_", fusedAdam);
  MT_IMPL(m, "_fused_adam_.tensor_lr", fusedAdamTensorLr);
  MT_IMPL(m, "_fused_adamw_", fusedAdamW);
  MT_IMPL(m, "_fused_adamw_.tensor_lr", fusedAdamWTensorLr);
  MT_IMPL(m, "_fused_sgd_", fusedSgd);
  MT_IMPL(m, "_fused_sgd_.tensor_lr", fusedSgdTensorLr);
}

} // namespace mytorch
