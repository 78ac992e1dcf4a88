// Multi-tensor family: the `_foreach_*` ops and the fused optimizers (Adam, AdamW, SGD) over lists of
// tensors, one launch per batch of chunks rather than one per tensor.
//
// Note [Multi-tensor apply]
// The glue takes the fast path only when every tensor of every list is dense, of one dtype, on one device,
// and the i-th tensors of the lists have the same number of elements; anything else goes to ATen's
// per-tensor composite (which runs the native single-tensor kernels). Each tensor i has up to kMtSlots
// pointers (slot 0 is the output of an elementwise op) and a per-tensor scalar. Elementwise ops are the
// pointwise table's rows marked Foreach, run through their functors (ew::apply), with operand k taken from
// slot k + 1, a constant, the tensor's own scalar (a ScalarList), or a device scalar (the `Tensor` overloads;
// read on the device, no sync).
// cuda/ splits every tensor into chunks of kMtChunk elements and packs up to kMtTensors tensors and
// kMtBlocks chunks into each launch's by-value metadata; norms write one partial per chunk and a second
// kernel sums each tensor's partials in order (deterministic). sim/ runs the same element functions.
#pragma once

#include <cmath>
#include <cstdint>

#include "mytorch/dtype.h"
#include "mytorch/macros.h"
#include "mytorch/ops_math.h"
#include "mytorch/launch.h"

namespace mytorch {

enum class MtKind : int { Elementwise, Fill, Copy, Norm, Adam, AdamW, Sgd };
enum class MtOperand : int { List, Constant, PerTensor, Device };

constexpr int kMtSlots = 6;
constexpr int64_t kMtChunk = 65536;

struct MtTensor {
  void* ptr[kMtSlots] = {};
  int64_t numel = 0;
  double scalar = 0;   // the per-tensor scalar (ScalarList operand, Addcmul/Addcdiv value list)
};

struct MultiTensorArgs {
  MtKind kind = MtKind::Elementwise;
  EwOp op = EwOp::Add;
  DType dtype = DType::Float;      // every list's dtype (Norm: the input)
  DType out_dtype = DType::Float;  // Norm / Copy output
  int ninputs = 0;                 // elementwise operands
  MtOperand operand[3] = {MtOperand::List, MtOperand::List, MtOperand::List};
  double constant[3] = {0, 0, 0};
  const void* device_scalar = nullptr;  // MtOperand::Device, of `device_scalar_dtype`
  DType device_scalar_dtype = DType::Float;
  bool alpha_per_tensor = false;   // Addcmul/Addcdiv ScalarList: the tensor's scalar is the value
  EwParams p;
  double ord = 2;                  // Norm: 1, 2 or inf
  // Fused optimizers: slots are param, grad, exp_avg / momentum_buffer, exp_avg_sq, max_exp_avg_sq, step.
  double lr = 0, beta1 = 0, beta2 = 0, weight_decay = 0, eps = 0, momentum = 0, dampening = 0;
  const float* lr_ptr = nullptr;   // tensor lr (float32 device scalar)
  bool amsgrad = false, maximize = false, nesterov = false, is_first_step = false, has_momentum = false;
  const float* grad_scale = nullptr;
  const float* found_inf = nullptr;
  int64_t ntensors = 0;
  const MtTensor* tensors = nullptr;  // host array
  void* workspace = nullptr;          // Norm on cuda: mt_norm_workspace_bytes(args)
};

// Chunks of one tensor / of the whole list.
MT_HOST_DEVICE inline int64_t mt_chunks(int64_t numel) { return (numel + kMtChunk - 1) / kMtChunk; }
inline size_t mt_norm_workspace_bytes(const MultiTensorArgs& a) {
  int64_t n = 0;
  for (int64_t i = 0; i < a.ntensors; ++i) n += mt_chunks(a.tensors[i].numel);
  return static_cast<size_t>(n) * sizeof(double);
}

namespace mt {

template <typename T>
MT_HOST_DEVICE inline double load(const void* p, int64_t i) {
  return static_cast<double>(static_cast<const T*>(p)[i]);
}

// Operand k of element i of tensor t, in opmath.
template <typename T>
MT_HOST_DEVICE inline ew::opmath_t<T> operand(const MultiTensorArgs& a, const MtTensor& t, int k, int64_t i) {
  using O = ew::opmath_t<T>;
  switch (a.operand[k]) {
    case MtOperand::List: return static_cast<O>(static_cast<const T*>(t.ptr[k + 1])[i]);
    case MtOperand::Constant: return static_cast<O>(a.constant[k]);
    case MtOperand::PerTensor: return static_cast<O>(t.scalar);
    case MtOperand::Device: {
      double v = 0;
      switch (a.device_scalar_dtype) {
        case DType::Double: v = load<double>(a.device_scalar, 0); break;
        case DType::Half:
          v = static_cast<double>(static_cast<float>(static_cast<const c10::Half*>(a.device_scalar)[0]));
          break;
        case DType::BFloat16:
          v = static_cast<double>(static_cast<float>(static_cast<const c10::BFloat16*>(a.device_scalar)[0]));
          break;
        case DType::Int64: v = static_cast<double>(static_cast<const int64_t*>(a.device_scalar)[0]); break;
        default: v = load<float>(a.device_scalar, 0); break;
      }
      return static_cast<O>(v);
    }
  }
  return O(0);
}

template <EwOp op, typename T>
MT_HOST_DEVICE inline void elementwise(const MultiTensorArgs& a, const MtTensor& t, int64_t i) {
  using O = ew::opmath_t<T>;
  EwParams p = a.p;
  if (a.alpha_per_tensor) p.alpha = t.scalar;
  const O x = operand<T>(a, t, 0, i);
  const O y = a.ninputs > 1 ? operand<T>(a, t, 1, i) : O(0);
  const O z = a.ninputs > 2 ? operand<T>(a, t, 2, i) : O(0);
  static_cast<T*>(t.ptr[0])[i] = static_cast<T>(ew::apply<op, T>(x, y, z, p));
}

// Per-tensor constants of the fused Adam/AdamW step, computed once per tensor in double (the bias corrections of
// the tensor's step count, the step size) and rounded to opmath, as ATen's fused kernels do; the per-element math
// is then in opmath alone.
template <typename O>
struct AdamConsts {
  O lr_decay;  // lr * weight_decay (AdamW)
  O decay;     // weight_decay (Adam)
  O beta1, one_minus_beta1, beta2, one_minus_beta2;
  O step_size;  // lr / (1 - beta1^step)
  O bc2_sqrt;   // sqrt(1 - beta2^step)
  O eps;
};
template <typename T>
MT_HOST_DEVICE inline AdamConsts<ew::opmath_t<T>> adam_consts(const MultiTensorArgs& a, const MtTensor& t) {
  using O = ew::opmath_t<T>;
  const double step = static_cast<double>(*static_cast<const float*>(t.ptr[5]));
  const double lr = a.lr_ptr ? static_cast<double>(*a.lr_ptr) : a.lr;
  return {static_cast<O>(lr * a.weight_decay),
          static_cast<O>(a.weight_decay),
          static_cast<O>(a.beta1),
          static_cast<O>(1 - a.beta1),
          static_cast<O>(a.beta2),
          static_cast<O>(1 - a.beta2),
          static_cast<O>(lr / (1 - std::pow(a.beta1, step))),
          static_cast<O>(std::sqrt(1 - std::pow(a.beta2, step))),
          static_cast<O>(a.eps)};
}

// The fused Adam/AdamW update of one element's values, grad already unscaled; max_sq: the element's amsgrad
// maximum, or null. Opmath throughout and branches only on values, so a loop over it vectorises.
template <typename O>
MT_HOST_DEVICE inline void adam_math(const MultiTensorArgs& a, bool adamw, const AdamConsts<O>& k, O& param, O grad,
                                     O& exp_avg, O& exp_avg_sq, O* max_sq) {
  grad = a.maximize ? -grad : grad;
  if (a.weight_decay != 0) {
    if (adamw) param = param - k.lr_decay * param;
    else grad = grad + param * k.decay;
  }
  exp_avg = k.beta1 * exp_avg + k.one_minus_beta1 * grad;
  exp_avg_sq = k.beta2 * exp_avg_sq + k.one_minus_beta2 * grad * grad;
  O second = exp_avg_sq;
  if (max_sq) {
    *max_sq = *max_sq > exp_avg_sq ? *max_sq : exp_avg_sq;
    second = *max_sq;
  }
  const O denom = std::sqrt(second) / k.bc2_sqrt + k.eps;
  param -= k.step_size * exp_avg / denom;
}

// One element of the fused Adam/AdamW step (a found_inf step is skipped by the caller).
template <typename T>
MT_HOST_DEVICE inline void adam(const MultiTensorArgs& a, const MtTensor& t, int64_t i, bool adamw,
                                const AdamConsts<ew::opmath_t<T>>& k) {
  using O = ew::opmath_t<T>;
  T* pp = static_cast<T*>(t.ptr[0]);
  T* gp = static_cast<T*>(t.ptr[1]);
  T* m1p = static_cast<T*>(t.ptr[2]);
  T* m2p = static_cast<T*>(t.ptr[3]);
  O param = static_cast<O>(pp[i]), grad = static_cast<O>(gp[i]);
  O exp_avg = static_cast<O>(m1p[i]), exp_avg_sq = static_cast<O>(m2p[i]);
  if (a.grad_scale) {
    grad = static_cast<O>(grad / static_cast<double>(*a.grad_scale));
    gp[i] = static_cast<T>(grad);
  }
  O mx = O(0);
  if (a.amsgrad) mx = static_cast<O>(static_cast<T*>(t.ptr[4])[i]);
  adam_math<O>(a, adamw, k, param, grad, exp_avg, exp_avg_sq, a.amsgrad ? &mx : nullptr);
  if (a.amsgrad) static_cast<T*>(t.ptr[4])[i] = static_cast<T>(mx);
  pp[i] = static_cast<T>(param);
  m1p[i] = static_cast<T>(exp_avg);
  m2p[i] = static_cast<T>(exp_avg_sq);
}

// One element of the fused SGD step.
template <typename T>
MT_HOST_DEVICE inline void sgd(const MultiTensorArgs& a, const MtTensor& t, int64_t i) {
  using O = ew::opmath_t<T>;
  T* pp = static_cast<T*>(t.ptr[0]);
  T* gp = static_cast<T*>(t.ptr[1]);
  const double lr = a.lr_ptr ? static_cast<double>(*a.lr_ptr) : a.lr;
  O param = static_cast<O>(pp[i]), grad = static_cast<O>(gp[i]);
  if (a.grad_scale) {
    grad = static_cast<O>(grad / static_cast<double>(*a.grad_scale));
    gp[i] = static_cast<T>(grad);
  }
  if (a.maximize) grad = -grad;
  if (a.weight_decay != 0) grad = static_cast<O>(grad + a.weight_decay * param);
  if (a.has_momentum) {
    T* bp = static_cast<T*>(t.ptr[2]);
    O buf = a.is_first_step ? grad : static_cast<O>(a.momentum * static_cast<O>(bp[i]) + (1 - a.dampening) * grad);
    bp[i] = static_cast<T>(buf);
    grad = a.nesterov ? static_cast<O>(grad + a.momentum * buf) : buf;
  }
  pp[i] = static_cast<T>(param - lr * grad);
}

// The norm accumulation of one element (|x|, x^2 or max |x|) in double.
MT_HOST_DEVICE inline double norm_push(double acc, double v, double ord) {
  const double x = v < 0 ? -v : v;
  if (ord == 2) return acc + x * x;
  if (ord == 1) return acc + x;
  return (x != x || x > acc) ? x : acc;
}
MT_HOST_DEVICE inline double norm_combine(double a, double b, double ord) {
  if (ord == 1 || ord == 2) return a + b;
  return (b != b || b > a) ? b : a;
}
MT_HOST_DEVICE inline double norm_finish(double acc, double ord) { return ord == 2 ? std::sqrt(acc) : acc; }

} // namespace mt

// Whether the kernels implement this elementwise op for dtype t: the rows of tables/pointwise.def marked Foreach,
// at floating dtypes (the glue falls back otherwise).
bool multi_tensor_supported(EwOp op, DType t);

// Capture (Note [Graph capture]): the tensor list lives in the glue's memory only during the call.
inline std::shared_ptr<void> capture_own(MultiTensorArgs& a) {
  auto list = std::make_shared<std::vector<MtTensor>>(a.tensors, a.tensors + a.ntensors);
  a.tensors = list->data();
  return list;
}
MT_LAUNCHER(multi_tensor, (const MultiTensorArgs& a, rt::Stream stream), (a, stream))

} // namespace mytorch
