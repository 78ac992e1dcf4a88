// The fused LLM ops beyond aten (Note [Fused LLM ops] in kernels/include/mytorch/llm.h): the mytorch kernels
// (schemas: Library.cpp). Autograd, the fake kernels for torch.compile and the CPU implementations (aten
// compositions, the reference) are in python/mytorch/ops/.
#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "csrc/aten/glue/Glue.h"
#include "csrc/core/DeviceErrors.h"
#include "csrc/core/Runtime.h"
#include "mytorch/llm.h"

namespace mytorch {
namespace {

using at::Tensor;

// The row stride of t read as [rows][t.size(-1)] with each row contiguous, or -1 when t's layout is not that.
int64_t rowStride(const Tensor& t) {
  if (t.dim() == 0 || (t.size(-1) > 1 && t.stride(-1) != 1)) return -1;
  int64_t ld = -1, expect = 0;
  for (int64_t d = t.dim() - 2; d >= 0; --d) {
    if (t.size(d) == 1) continue;
    if (ld < 0) {
      ld = t.stride(d);
      expect = ld * t.size(d);
    } else if (t.stride(d) != expect) {
      return -1;
    } else {
      expect *= t.size(d);
    }
  }
  return ld < 0 ? t.size(-1) : ld;
}

// t itself when its rows are evenly spaced and contiguous, else a contiguous copy; *ld: its row stride.
Tensor asRows(const Tensor& t, int64_t* ld) {
  *ld = rowStride(t);
  if (*ld >= 0) return t;
  Tensor c = t.contiguous();
  *ld = c.dim() == 0 ? 1 : c.size(-1);
  return c;
}

GluAct gluAct(std::string_view name, const char* op) {
  if (name == "silu") return GluAct::Silu;
  if (name == "gelu") return GluAct::Gelu;
  if (name == "gelu_tanh") return GluAct::GeluTanh;
  TORCH_CHECK(false, op, ": expected activation 'silu', 'gelu' or 'gelu_tanh', but got '", name, "'");
}

// gate and up, or the halves of a packed gate_up ([..., 2 * I]: gate first) when up is absent.
std::pair<Tensor, Tensor> gluOperands(const Tensor& gate_in, const std::optional<Tensor>& up_in, const char* op) {
  TORCH_CHECK(gate_in.dim() >= 1, op, ": expected gate with at least one dimension, but got a 0-d tensor");
  Tensor gate = gate_in, up;
  if (up_in.has_value() && up_in->defined()) {
    up = *up_in;
  } else {
    const int64_t n = gate_in.size(-1);
    TORCH_CHECK(n % 2 == 0, op, ": expected a packed gate_up with an even last dim, but got ", gate_in.sizes());
    gate = gate_in.narrow(-1, 0, n / 2);
    up = gate_in.narrow(-1, n / 2, n / 2);
  }
  TORCH_CHECK(gate.sizes() == up.sizes(), op, ": expected gate and up of the same shape, but got ", gate.sizes(),
              " and ", up.sizes());
  TORCH_CHECK(gate.scalar_type() == up.scalar_type(), op, ": expected gate and up of the same dtype, but got ",
              gate.scalar_type(), " and ", up.scalar_type());
  TORCH_CHECK(kernelFloating(gate.scalar_type()), op, ": expected a floating dtype, but got ", gate.scalar_type());
  TORCH_CHECK(gate.device() == up.device(), op, ": expected gate and up on one device, but got ", gate.device(),
              " and ", up.device());
  return {gate, up};
}

Tensor glu(const Tensor& gate_in, const std::optional<Tensor>& up_in, c10::string_view activation) {
  const auto [gate_v, up_v] = gluOperands(gate_in, up_in, "mytorch::glu");
  GluArgs a;
  a.act = gluAct(activation, "mytorch::glu");
  const Tensor gate = asRows(gate_v, &a.gate_ld), up = asRows(up_v, &a.up_ld);
  Tensor y = at::empty(gate.sizes(), gate.options().memory_format(at::MemoryFormat::Contiguous));
  a.gate = gate.data_ptr();
  a.up = up.data_ptr();
  a.y = y.data_ptr();
  a.cols = gate.size(-1);
  a.rows = a.cols == 0 ? 0 : gate.numel() / a.cols;
  a.y_ld = a.cols;
  a.dtype = toKernelDType(gate.scalar_type());
  c10::DeviceGuard guard(gate.device());
  MT_RT_CHECK(kernels::glu_forward(a, streamFor(y)));
  return y;
}

// Both gradients in one buffer of the operands' shape with the last dim doubled: [..., dgate | dup].
Tensor gluBackward(const Tensor& grad_in, const Tensor& gate_in, const std::optional<Tensor>& up_in,
                   c10::string_view activation) {
  const auto [gate_v, up_v] = gluOperands(gate_in, up_in, "mytorch::glu_backward");
  TORCH_CHECK(grad_in.sizes() == gate_v.sizes() && grad_in.scalar_type() == gate_v.scalar_type() &&
                  grad_in.device() == gate_v.device(),
              "mytorch::glu_backward: expected grad like gate (", gate_v.sizes(), ", ", gate_v.scalar_type(), ", ",
              gate_v.device(), "), but got ", grad_in.sizes(), ", ", grad_in.scalar_type(), ", ", grad_in.device());
  GluArgs a;
  a.act = gluAct(activation, "mytorch::glu_backward");
  const Tensor gate = asRows(gate_v, &a.gate_ld), up = asRows(up_v, &a.up_ld), grad = asRows(grad_in, &a.dy_ld);
  a.cols = gate.size(-1);
  std::vector<int64_t> shape(gate.sizes().begin(), gate.sizes().end());
  shape.back() = 2 * a.cols;
  Tensor out = at::empty(shape, gate.options().memory_format(at::MemoryFormat::Contiguous));
  a.gate = gate.data_ptr();
  a.up = up.data_ptr();
  a.dy = grad.data_ptr();
  a.dgate = out.data_ptr();
  a.dup = static_cast<char*>(out.data_ptr()) + a.cols * out.element_size();
  a.rows = a.cols == 0 ? 0 : gate.numel() / a.cols;
  a.dgate_ld = a.dup_ld = 2 * a.cols;
  a.dtype = toKernelDType(gate.scalar_type());
  c10::DeviceGuard guard(gate.device());
  MT_RT_CHECK(kernels::glu_backward(a, streamFor(out)));
  return out;
}

// t broadcast to `lead` (x's dims but the last) with its own last dim kept: the strides of the leading dims in
// the kernel's [n0][n1][n2] view (x padded in front to 3 leading dims).
void leadStrides(const Tensor& t, at::IntArrayRef lead, int64_t* st, const char* what) {
  TORCH_CHECK(t.dim() - 1 <= static_cast<int64_t>(lead.size()), "mytorch::rope: expected ", what,
              " to broadcast against x's leading dims ", lead, ", but got shape ", t.sizes());
  const int64_t pad = 3 - static_cast<int64_t>(lead.size()), off = static_cast<int64_t>(lead.size()) - (t.dim() - 1);
  for (int64_t d = 0; d < 3; ++d) st[d] = 0;
  for (int64_t d = 0; d < t.dim() - 1; ++d) {
    const int64_t xd = d + off, size = t.size(d);
    TORCH_CHECK(size == 1 || size == lead[xd], "mytorch::rope: expected ", what,
                " to broadcast against x's leading dims ", lead, ", but got shape ", t.sizes());
    st[pad + xd] = size == 1 ? 0 : t.stride(d);
  }
}

Tensor ropeInto(const Tensor& x_in, const Tensor& cos_in, const Tensor& sin_in,
                const std::optional<Tensor>& position_ids, bool interleaved, int64_t rotary_dim, bool inverse,
                const Tensor* inplace) {
  const char* op = "mytorch::rope";
  TORCH_CHECK(x_in.dim() >= 1 && x_in.dim() <= 4, op, ": expected x with 1 to 4 dimensions, but got ", x_in.dim());
  TORCH_CHECK(kernelFloating(x_in.scalar_type()), op, ": expected a floating x, but got ", x_in.scalar_type());
  TORCH_CHECK(cos_in.scalar_type() == sin_in.scalar_type() && cos_in.sizes() == sin_in.sizes(), op,
              ": expected cos and sin of one shape and dtype, but got ", cos_in.sizes(), " ", cos_in.scalar_type(),
              " and ", sin_in.sizes(), " ", sin_in.scalar_type());
  TORCH_CHECK(cos_in.scalar_type() == x_in.scalar_type() || cos_in.scalar_type() == at::kFloat, op,
              ": expected cos/sin of x's dtype (", x_in.scalar_type(), ") or float32, but got ", cos_in.scalar_type());
  TORCH_CHECK(cos_in.dim() >= 1, op, ": expected cos/sin with at least one dimension");
  for (const Tensor* t : {&cos_in, &sin_in})
    TORCH_CHECK(t->device() == x_in.device(), op, ": expected cos and sin on x's device (", x_in.device(),
                "), but got ", t->device());
  RopeArgs a;
  a.head_dim = x_in.size(-1);
  a.cs_width = cos_in.size(-1);
  a.rot = rotary_dim > 0 ? rotary_dim : a.cs_width;
  TORCH_CHECK(a.rot % 2 == 0 && a.rot <= a.head_dim, op, ": expected an even rotary dim of at most the head dim (",
              a.head_dim, "), but got ", a.rot);
  TORCH_CHECK(a.cs_width == a.rot || 2 * a.cs_width == a.rot, op, ": expected cos/sin of width ", a.rot, " or ",
              a.rot / 2, " (the rotary dim, per element or per pair), but got ", a.cs_width);
  a.interleaved = interleaved;
  a.inverse = inverse;
  const Tensor x = x_in.stride(-1) == 1 || x_in.size(-1) <= 1 ? x_in : x_in.contiguous();
  Tensor cos = cos_in, sin = sin_in;
  if (cos.stride(-1) != 1 || sin.stride(-1) != 1 || cos.strides() != sin.strides()) {
    cos = cos.contiguous();
    sin = sin.contiguous();
  }
  Tensor out = inplace ? *inplace : at::empty_like(x);
  if (out.size(-1) > 1 && out.stride(-1) != 1) out = at::empty(x.sizes(), x.options());
  const auto lead = x.sizes().slice(0, x.dim() - 1);
  const int64_t pad = 3 - static_cast<int64_t>(lead.size());
  for (int64_t d = 0; d < 3; ++d) {
    const bool real = d >= pad;
    a.n[d] = real ? lead[d - pad] : 1;
    a.x_st[d] = real ? x.stride(d - pad) : 0;
    a.out_st[d] = real ? out.stride(d - pad) : 0;
  }
  Tensor pos;
  if (position_ids.has_value() && position_ids->defined()) {
    TORCH_CHECK(position_ids->scalar_type() == at::kLong || position_ids->scalar_type() == at::kInt, op,
                ": expected integer position_ids, but got ", position_ids->scalar_type());
    TORCH_CHECK(position_ids->device() == x.device(), op, ": expected position_ids on x's device (", x.device(),
                "), but got ", position_ids->device());
    TORCH_CHECK(cos.dim() == 2, op,
                ": with position_ids, expected cos/sin tables of shape [positions, width], but got ", cos.sizes());
    pos = position_ids->to(at::kLong);
    // position_ids index x's leading dims as cos/sin would: [..., seq] against [..., seq, head_dim] minus the last
    TORCH_CHECK(pos.dim() >= 1, op, ": expected position_ids with at least one dimension");
    Tensor p2 = pos.unsqueeze(-1);
    leadStrides(p2, lead, a.pos_st, "position_ids");
    a.pos = pos.data_ptr<int64_t>();
    a.cs_row = cos.stride(0);
    a.pos_limit = cos.size(0);
    a.error = deviceErrorSite(x.device(), "mytorch::rope", DeviceErrorFormat::IndexOutOfBounds, true, 0, a.pos_limit);
  } else {
    leadStrides(cos, lead, a.cs_st, "cos/sin");
  }
  a.x = x.data_ptr();
  a.out = out.data_ptr();
  a.cos = cos.data_ptr();
  a.sin = sin.data_ptr();
  a.dtype = toKernelDType(x.scalar_type());
  a.cs_dtype = toKernelDType(cos.scalar_type());
  c10::DeviceGuard guard(x.device());
  MT_RT_CHECK(kernels::rope(a, streamFor(out)));
  if (a.pos) afterErrorCheckedLaunch(x.device());  // Note [Device-side errors]
  return out;
}

Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin, const std::optional<Tensor>& position_ids,
            bool interleaved, int64_t rotary_dim, bool inverse) {
  return ropeInto(x, cos, sin, position_ids, interleaved, rotary_dim, inverse, nullptr);
}

Tensor& ropeInplace(Tensor& x, const Tensor& cos, const Tensor& sin, const std::optional<Tensor>& position_ids,
                    bool interleaved, int64_t rotary_dim) {
  TORCH_CHECK(at::has_internal_overlap(x) != at::MemOverlap::Yes,
              "mytorch::rope_: expected x without internal overlap (an expanded tensor cannot be written in place)");
  if (x.size(-1) <= 1 || x.stride(-1) == 1) {
    ropeInto(x, cos, sin, position_ids, interleaved, rotary_dim, false, &x);
  } else {
    x.copy_(ropeInto(x, cos, sin, position_ids, interleaved, rotary_dim, false, nullptr));
  }
  return x;
}

// The loss and logsumexp of each row of `logits` [rows, vocab] (float32), and with grad the gradient written over
// the logits (Note [Fused linear cross-entropy] in python/mytorch/ops/cross_entropy.py).
std::tuple<Tensor, Tensor> crossEntropyRows(Tensor& logits, const Tensor& target, const std::optional<Tensor>& divisor,
                                            const std::optional<Tensor>& row_scale, int64_t ignore_index,
                                            double label_smoothing, double softcap, double z_loss, double grad_scale,
                                            bool grad) {
  const char* op = "mytorch::cross_entropy_rows_";
  TORCH_CHECK(logits.dim() == 2 && logits.size(1) > 0, op, ": expected logits [rows, vocab], but got ", logits.sizes());
  TORCH_CHECK(kernelFloating(logits.scalar_type()), op, ": expected floating logits, but got ", logits.scalar_type());
  TORCH_CHECK(logits.stride(1) == 1 || logits.size(1) == 1, op, ": expected logits with contiguous rows");
  TORCH_CHECK(target.dim() == 1 && target.size(0) == logits.size(0) && target.scalar_type() == at::kLong, op,
              ": expected a Long target of ", logits.size(0), " rows, but got ", target.scalar_type(), " ",
              target.sizes());
  TORCH_CHECK(label_smoothing >= 0 && label_smoothing <= 1, op, ": expected label_smoothing in [0, 1], but got ",
              label_smoothing);
  TORCH_CHECK(softcap >= 0, op, ": expected softcap >= 0 (0: none), but got ", softcap);
  TORCH_CHECK(target.device() == logits.device(), op, ": expected target on the logits' device (", logits.device(),
              "), but got ", target.device());
  auto f32 = [&](const std::optional<Tensor>& t, int64_t n, const char* what) -> const float* {
    if (!t.has_value() || !t->defined()) return nullptr;
    TORCH_CHECK(
        t->scalar_type() == at::kFloat && t->numel() == n && t->device() == logits.device() && t->is_contiguous(), op,
        ": expected ", what, " as ", n, " contiguous float32 value(s) on ", logits.device(), ", but got ",
        t->scalar_type(), " ", t->sizes(), " on ", t->device());
    return t->data_ptr<float>();
  };
  CeRowsArgs a;
  a.divisor = f32(divisor, 1, "divisor");
  a.row_scale = f32(row_scale, logits.size(0), "row_scale");
  const Tensor tgt = target.contiguous();
  Tensor loss = at::empty({logits.size(0)}, logits.options().dtype(at::kFloat));
  Tensor lse = at::empty({logits.size(0)}, logits.options().dtype(at::kFloat));
  a.logits = logits.data_ptr();
  a.rows = logits.size(0);
  a.vocab = logits.size(1);
  a.ld = logits.size(0) > 1 ? logits.stride(0) : a.vocab;
  a.target = tgt.data_ptr<int64_t>();
  a.loss = loss.data_ptr<float>();
  a.lse = lse.data_ptr<float>();
  a.grad_scale = grad_scale;
  a.label_smoothing = label_smoothing;
  a.softcap = softcap;
  a.z_loss = z_loss;
  a.ignore_index = ignore_index;
  a.grad = grad;
  a.dtype = toKernelDType(logits.scalar_type());
  a.error = deviceErrorSite(logits.device(), op, DeviceErrorFormat::TargetOutOfBounds, true);
  c10::DeviceGuard guard(logits.device());
  MT_RT_CHECK(kernels::cross_entropy_rows(a, streamFor(logits)));
  afterErrorCheckedLaunch(logits.device());  // Note [Device-side errors]
  return {loss, lse};
}

} // namespace

TORCH_LIBRARY_IMPL(mytorch, PrivateUse1, m) {
  m.impl("glu", TORCH_FN(glu));
  m.impl("glu_backward", TORCH_FN(gluBackward));
  m.impl("rope", TORCH_FN(rope));
  m.impl("rope_", TORCH_FN(ropeInplace));
  m.impl("cross_entropy_rows_", TORCH_FN(crossEntropyRows));
}

} // namespace mytorch
