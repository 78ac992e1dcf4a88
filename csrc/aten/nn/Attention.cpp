// Op table: F.scaled_dot_product_attention on mytorch through PyTorch's public hook for PrivateUse1
// backends (docs/architecture.md, "Fused kernels"): the _fused_sdp_choice stub answers OVERRIDEABLE for inputs the
// fused kernels support, and _scaled_dot_product_fused_attention_overrideable (+ backward) run them
// (Note [Fused attention]). Everything else — 3-D inputs, head dims above 256, a mask that needs a
// gradient, mixed dtypes, the sdpa_kernel context excluding our backend — takes PyTorch's math path (which
// runs on mytorch's native GEMM/softmax kernels). Dropout uses the device's Philox generator.
#include <ATen/Context.h>
#include <ATen/SDPBackend.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/logical_not.h>
#include <ATen/ops/masked_fill.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <numeric>

#include "csrc/core/Graph.h"
#include "csrc/core/Checked.h"
#include "csrc/aten/glue/Glue.h"
#include "csrc/core/Generator.h"
#include "csrc/core/Runtime.h"
#include "csrc/aten/nn/AttentionCore.h"
#include "mytorch/attention.h"

namespace mytorch {
namespace {

using at::Tensor;
using OptT = std::optional<Tensor>;

bool supported(const Tensor& q, const Tensor& k, const Tensor& v, const OptT& mask, bool is_causal, bool gqa) {
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4) return false;
  if (!kernelFloating(q.scalar_type()) || k.scalar_type() != q.scalar_type() || v.scalar_type() != q.scalar_type())
    return false;
  if (q.size(-1) > 256 || v.size(-1) > 256 || q.size(-1) != k.size(-1)) return false;
  if (q.size(0) != k.size(0) || q.size(0) != v.size(0) || k.size(1) != v.size(1) || k.size(2) != v.size(2))
    return false;
  if (k.size(1) == 0 || (q.size(1) != k.size(1) && !(gqa && q.size(1) % k.size(1) == 0))) return false;
  if (mask.has_value() && mask->defined()) {
    if (is_causal || mask->requires_grad() || mask->dim() > 4) return false;
    if (!kernelFloating(mask->scalar_type()) && mask->scalar_type() != at::kBool) return false;
  }
  return true;
}

// Note [Attention operator families]
// Plain tensors take the SDPA hook's overrideable op. A tensor subclass with real storage (DTensor, e.g. under
// torch's context parallelism) takes torch.cuda's memory-efficient op instead: torch's subclasses know that family
// (ring attention, DTensor's sharding rules) and not the overrideable op. Fake tensors (compiling: meta storage)
// keep the overrideable op, as does anything traced (a fake, functional or proxy mode on the stack: a compiled
// graph keeps the op Inductor and mytorch's tests expect). scaled_dot_product_attention sends the flash choice to
// the CPU's kernel on every device but CUDA, so the flash family is reached only by direct calls (ring attention's,
// TorchTitan's varlen).
bool eagerSubclass(const Tensor& t) {
  using c10::impl::TorchDispatchModeKey;
  using c10::impl::TorchDispatchModeTLS;
  for (auto key : {TorchDispatchModeKey::FAKE, TorchDispatchModeKey::PROXY, TorchDispatchModeKey::FUNCTIONAL})
    if (TorchDispatchModeTLS::get_mode(key).has_value()) return false;
  return t.key_set().has(c10::DispatchKey::Python) && t.unsafeGetTensorImpl()->has_storage() &&
         !t.unsafeGetTensorImpl()->storage().device().is_meta();
}

int64_t fusedSdpChoice(const Tensor& q, const Tensor& k, const Tensor& v, const OptT& mask, double dropout_p,
                       bool is_causal, std::optional<double> scale, bool enable_gqa) {
  const auto& ctx = at::globalContext();
  const bool ok = supported(q, k, v, mask, is_causal, enable_gqa);
  const bool subclass = eagerSubclass(q);
  if (ok && !subclass && ctx.userEnabledOverrideableSDP()) return static_cast<int64_t>(at::SDPBackend::overrideable);
  if (ok && q.size(1) == k.size(1) && ctx.userEnabledMemEfficientSDP())
    return static_cast<int64_t>(at::SDPBackend::efficient_attention);
  if (ok && ctx.userEnabledOverrideableSDP()) return static_cast<int64_t>(at::SDPBackend::overrideable);
  TORCH_CHECK(ctx.userEnabledMathSDP(),
              "No available kernel. Aborting execution. (mytorch's fused attention does not "
              "support these inputs, or only the flash backend is enabled, which scaled_dot_product_attention "
              "routes to the CPU's kernel off CUDA, and the math backend is disabled)");
  return static_cast<int64_t>(at::SDPBackend::math);
}

AttnTensor view(const Tensor& t) {
  AttnTensor a;
  a.data = t.data_ptr();
  a.sb = t.stride(0);
  a.sh = t.stride(1);
  a.ss = t.stride(2);
  return a;
}

// Last dimension contiguous, as the kernels read rows.
Tensor rows(const Tensor& t) { return t.stride(-1) == 1 ? t : t.contiguous(); }

// Note [Attention output layout]: the outputs take the layout PyTorch's meta functions promise (torch/
// _meta_registrations.py): the forward's output the stride order of the query (alloc_with_matching_layout), the
// backward's gradients empty_like their inputs. Compiled graphs (Inductor) assert these strides, and a model
// that transposes (B, L, H, E) into (B, H, L, E), as Hugging Face's do, hands in exactly such a query.
Tensor likeLayout(const Tensor& like, at::IntArrayRef shape) {
  if (like.sizes() == shape) return at::empty_like(like);
  std::vector<int64_t> order(shape.size()), strides(shape.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return like.stride(x) > like.stride(y); });
  int64_t stride = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    strides[*it] = stride;
    stride *= shape[*it];
  }
  return at::empty_strided(shape, strides, like.options());
}

// Where a promised layout is not row-contiguous, the kernel writes a row-contiguous buffer that is then copied.
Tensor rowsBuffer(const Tensor& target) {
  return target.stride(-1) == 1 ? target : at::empty(target.sizes(), target.options());
}
void settle(Tensor& target, const Tensor& written) {
  if (!written.is_same(target)) target.copy_(written);
}

AttentionArgs argsFor(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias, bool causal,
                      std::optional<double> scale) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4,
              "fused attention: expected 4-D query, key and value, but got ", q.sizes(), ", ", k.sizes(), " and ",
              v.sizes());
  TORCH_CHECK(q.size(1) % k.size(1) == 0, "fused attention: expected query heads (", q.size(1),
              ") to be a multiple of key/value heads (", k.size(1), ")");
  AttentionArgs a;
  a.dtype = toKernelDType(q.scalar_type());
  a.b = q.size(0);
  a.hq = q.size(1);
  a.hkv = k.size(1);
  a.lq = q.size(2);
  a.lk = k.size(2);
  a.d = q.size(3);
  a.dv = v.size(3);
  a.q = view(q);
  a.k = view(k);
  a.v = view(v);
  a.causal = causal;
  a.scale = scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(a.d));
  if (bias.defined()) {
    Tensor e = bias.expand({a.b, a.hq, a.lq, a.lk});
    a.bias = e.data_ptr();
    a.bias_dtype = toKernelDType(e.scalar_type());
    a.bias_sb = e.stride(0);
    a.bias_sh = e.stride(1);
    a.bias_si = e.stride(2);
    a.bias_sj = e.stride(3);
  }
  return a;
}

} // namespace

namespace attn {

at::ScalarType accType(at::ScalarType t) { return t == at::kDouble ? at::kDouble : at::kFloat; }

Philox drawPhilox(const Tensor& like, uint64_t elements) {
  auto* g = at::get_generator_or_default<MytorchGeneratorImpl>(std::nullopt, defaultGenerator(like.device().index()));
  std::lock_guard<std::mutex> lock(g->mutex_);
  Philox p;
  std::tie(p.seed, p.offset) = g->philoxStep(elements);
  return p;
}

void forward(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& attn_bias, bool causal,
             std::optional<double> scale, double dropout_p, const Philox& philox, Tensor& out, Tensor& lse) {
  TORCH_CHECK(dropout_p >= 0 && dropout_p < 1, "dropout_p must be in [0, 1), but got ", dropout_p);
  Tensor q = rows(query), k = rows(key), v = rows(value);
  Tensor bias = attn_bias;
  if (bias.defined() && bias.scalar_type() == at::kBool)  // sdpa converts boolean masks; a direct call may not
    bias = at::zeros(bias.sizes(), q.options()).masked_fill_(bias.logical_not(), -INFINITY);
  AttentionArgs a = argsFor(q, k, v, bias, causal, scale);
  TORCH_CHECK(lse.is_contiguous() && lse.numel() == a.b * a.hq * a.lq && lse.scalar_type() == accType(q.scalar_type()),
              "fused attention: the logsumexp buffer must be a contiguous ", accType(q.scalar_type()), " tensor of ",
              a.b * a.hq * a.lq, " values");
  Tensor out_rows = rowsBuffer(out);
  a.out = view(out_rows);
  a.lse = lse.data_ptr();
  if (dropout_p > 0) {
    a.seed = philox.seed;
    a.offset = philox.offset;
    a.philox_dev = capturedPhiloxState();
    a.dropout_p = dropout_p;
  }
  Tensor split_ws;
  if (attention_use_split(a.lq, a.lk, a.causal)) {  // decoding: split the keys (flash decoding)
    split_ws = at::empty({static_cast<int64_t>(attention_split_workspace_bytes(a.b * a.hq, a.lk, a.dv,
                                                                               lse.scalar_type() == at::kDouble))},
                         q.options().dtype(at::kByte));
    a.split_ws = split_ws.data_ptr();
    a.split_chunk = kAttnSplitChunk;
  }
  c10::DeviceGuard guard(q.device());
  MT_RT_CHECK(kernels::attention_forward(a, streamFor(q)));
  settle(out, out_rows);
}

void backward(const Tensor& grad_out, const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& out,
              const Tensor& logsumexp, const Tensor& bias, bool causal, std::optional<double> scale, double dropout_p,
              const Philox& philox, Tensor& dq, Tensor& dk, Tensor& dv) {
  Tensor q = rows(query), k = rows(key), v = rows(value), o = rows(out), g = rows(grad_out);
  AttentionArgs a = argsFor(q, k, v, bias, causal, scale);
  const auto acc = accType(q.scalar_type());
  Tensor lse = logsumexp.to(acc).contiguous();
  TORCH_CHECK(lse.numel() == a.b * a.hq * a.lq, "fused attention backward: expected a logsumexp of ", a.b * a.hq * a.lq,
              " values, but got ", logsumexp.sizes());
  a.out = view(o);
  a.dout = view(g);
  a.lse = lse.data_ptr();
  if (dropout_p > 0) {
    a.dropout_p = dropout_p;
    a.seed = philox.seed;
    a.offset = philox.offset;
    a.philox_dev = capturedPhiloxState();  // a backward in the same capture: the forward's replay state
  }
  Tensor dq_rows = rowsBuffer(dq), dk_rows = rowsBuffer(dk), dv_rows = rowsBuffer(dv);
  Tensor delta = at::empty({a.b, a.hq, a.lq}, q.options().dtype(acc));
  a.dq = view(dq_rows);
  a.dk = view(dk_rows);
  a.dvv = view(dv_rows);
  a.delta = delta.data_ptr();
  a.deterministic = at::globalContext().deterministicAlgorithms();
  Tensor dq_accum;  // the tensor-core backward's fp32 dQ (cuda; none for the deterministic kernels)
  if (const size_t bytes = onSim() ? 0 : attention_backward_workspace_bytes(a)) {
    dq_accum = at::empty({static_cast<int64_t>(bytes / sizeof(float))}, q.options().dtype(at::kFloat));
    a.dq_accum = dq_accum.data_ptr();
  }
  c10::DeviceGuard guard(q.device());
  MT_RT_CHECK(kernels::attention_backward(a, streamFor(q)));
  settle(dq, dq_rows);
  settle(dk, dk_rows);
  settle(dv, dv_rows);
}

} // namespace attn

namespace {

std::tuple<Tensor, Tensor, Tensor, Tensor, c10::SymInt, c10::SymInt, Tensor, Tensor, Tensor> fusedAttention(
    const Tensor& query, const Tensor& key, const Tensor& value, const OptT& attn_bias, double dropout_p,
    bool is_causal, bool return_debug_mask, std::optional<double> scale) {
  TORCH_CHECK(!return_debug_mask, "mytorch's fused attention does not return a debug attention mask");
  TORCH_CHECK(query.dim() == 4 && key.dim() == 4 && value.dim() == 4,
              "fused attention: expected 4-D query, key and value, but got ", query.sizes(), ", ", key.sizes(), " and ",
              value.sizes());
  const int64_t b = query.size(0), h = query.size(1), lq = query.size(2), lk = key.size(2);
  Tensor out = likeLayout(query, {b, h, lq, value.size(3)});
  Tensor lse = at::empty({b, h, lq}, query.options().dtype(attn::accType(query.scalar_type())));
  attn::Philox ph;
  if (dropout_p > 0) ph = attn::drawPhilox(query, static_cast<uint64_t>(b * h * lq * lk));
  attn::forward(query, key, value, attn_bias.has_value() ? *attn_bias : Tensor(), is_causal, scale, dropout_p, ph, out,
                lse);
  Tensor seed_t = at::zeros({}, at::TensorOptions().dtype(at::kLong)),
         offset_t = at::zeros({}, at::TensorOptions().dtype(at::kLong));
  seed_t.fill_(static_cast<int64_t>(ph.seed));
  offset_t.fill_(static_cast<int64_t>(ph.offset));
  Tensor empty = at::empty({0}, query.options());
  return {out, lse, Tensor(), Tensor(), c10::SymInt(lq), c10::SymInt(lk), seed_t, offset_t, empty};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> fusedAttentionBackward(
    const Tensor& grad_out, const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& attn_bias,
    std::array<bool, 4> mask, const Tensor& out, const Tensor& logsumexp, const Tensor& cum_seq_q,
    const Tensor& cum_seq_k, c10::SymInt max_q, c10::SymInt max_k, double dropout_p, bool is_causal,
    const Tensor& philox_seed, const Tensor& philox_offset, std::optional<double> scale) {
  if (!grad_out.defined())  // an unused output: no gradient flows
    return {mask[0] ? at::zeros_like(query) : Tensor(), mask[1] ? at::zeros_like(key) : Tensor(),
            mask[2] ? at::zeros_like(value) : Tensor(), Tensor()};
  attn::Philox ph;
  if (dropout_p > 0) {
    ph.seed = static_cast<uint64_t>(philox_seed.item<int64_t>());
    ph.offset = static_cast<uint64_t>(philox_offset.item<int64_t>());
  }
  Tensor dq = at::empty_like(query), dk = at::empty_like(key), dv = at::empty_like(value);
  attn::backward(grad_out, query, key, value, out, logsumexp, attn_bias, is_causal, scale, dropout_p, ph, dq, dk, dv);
  return {mask[0] ? dq : Tensor(), mask[1] ? dk : Tensor(), mask[2] ? dv : Tensor(), Tensor()};
}

} // namespace

int64_t fusedSdpChoiceStub(const Tensor& q, const Tensor& k, const Tensor& v, const OptT& mask, double dropout_p,
                           bool is_causal, std::optional<double> scale, bool enable_gqa) {
  return fusedSdpChoice(q, k, v, mask, dropout_p, is_causal, scale, enable_gqa);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "_scaled_dot_product_fused_attention_overrideable", fusedAttention);
  MT_IMPL(m, "_scaled_dot_product_fused_attention_overrideable_backward", fusedAttentionBackward);
  MT_IMPL(m, "_fused_sdp_choice", fusedSdpChoice);
}

} // namespace mytorch

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &mytorch::fusedSdpChoiceStub);
}
