// Op table: torch.cuda's attention operators on mytorch (Note [Attention operator families] in Attention.cpp), all on
// the one core of AttentionCore.h: the flash and memory-efficient SDPA ops with their backwards (what torch's context
// parallelism and DTensor dispatch to), and _flash_attention_forward/_backward, dense or varlen (packed sequences
// with cu_seqlens: what torch.nn.attention.varlen and TorchTitan's varlen attention call). Outputs, logsumexp shapes
// and RNG-state tensors are those of torch/_meta_registrations.py, so compiled graphs and DTensor see what they see
// on CUDA:
//   flash SDPA:  out empty_like(query), logsumexp (B, H, Lq) float, rng_state uint64 [seed, offset], unused uint64 ();
//   efficient:   out in (B, Lq, H, Ev) memory order, logsumexp (B, H, Lq rounded up to 32) or (B, H, 0), seed and
//                offset int64 scalars; gradients in (B, L, H, E) memory order;
//   _flash_attention_forward: (B, L, H, E) inputs, or (total, H, E) with cu_seqlens; logsumexp (B, H, Lq) or
//                (H, total_q).
// Causal masking in the flash family needs Lq == Lk per sequence (CUDA's flash aligns it bottom-right, the SDPA
// ops top-left; the two agree only there), as torch's own flash selection requires; sliding windows, ALiBi,
// paged KV and seqused_k are refused. Varlen reads cu_seqlens on the host (one launch a sequence), so it is refused
// during graph capture.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/full.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <cmath>
#include <vector>

#include "csrc/aten/nn/AttentionCore.h"
#include "csrc/core/Checked.h"
#include "csrc/core/Graph.h"
#include "csrc/core/TorchVersion.h"

namespace mytorch {
namespace {

using at::Tensor;
using OptT = std::optional<Tensor>;

uint64_t round4(int64_t n) { return (static_cast<uint64_t>(n) + 3) & ~uint64_t(3); }

void checkQkv(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, int64_t dims) {
  TORCH_CHECK(q.dim() == dims && k.dim() == dims && v.dim() == dims, op, ": expected ", dims,
              "-D query, key and value, but got ", q.sizes(), ", ", k.sizes(), " and ", v.sizes());
  TORCH_CHECK(q.scalar_type() == k.scalar_type() && q.scalar_type() == v.scalar_type(), op,
              ": expected query, key and value of one dtype, but got ", q.scalar_type(), ", ", k.scalar_type(), " and ",
              v.scalar_type());
  TORCH_CHECK(q.device() == k.device() && q.device() == v.device(), op,
              ": expected query, key and value on one device, but got ", q.device(), ", ", k.device(), " and ",
              v.device());
}

void checkCausalSquare(const char* op, bool causal, int64_t lq, int64_t lk) {
  TORCH_CHECK_NOT_IMPLEMENTED(!causal || lq == lk, op, ": causal masking with a query length (", lq,
                              ") different from the key length (", lk,
                              ") is not supported on mytorch (CUDA's flash aligns it bottom-right); use "
                              "scaled_dot_product_attention, whose causal mask is top-left aligned");
}

// The flash family's RNG state, as torch.cuda's: rng_state = [seed, offset] (uint64), unused = uint64 scalar.
std::pair<Tensor, Tensor> flashRngState(const attn::Philox& ph) {
  Tensor state = at::empty({2}, at::TensorOptions().dtype(at::kUInt64));
  state.data_ptr<uint64_t>()[0] = ph.seed;
  state.data_ptr<uint64_t>()[1] = ph.offset;
  return {state, at::empty({}, at::TensorOptions().dtype(at::kUInt64))};
}

attn::Philox flashPhilox(const Tensor& rng_state, double dropout_p) {
  attn::Philox ph;
  if (dropout_p <= 0) return ph;
  Tensor s = rng_state.to(at::kCPU).contiguous();
  TORCH_CHECK(s.numel() >= 2 && s.element_size() == 8,
              "flash attention backward: expected the forward's rng_state ([seed, offset], 64-bit), but got ",
              s.sizes(), " of ", s.scalar_type());
  const auto* p = static_cast<const uint64_t*>(s.data_ptr());
  ph.seed = p[0];
  ph.offset = p[1];
  return ph;
}

// ---- _scaled_dot_product_flash_attention ------------------------------------------------------------------------

std::tuple<Tensor, Tensor, Tensor, Tensor, c10::SymInt, c10::SymInt, Tensor, Tensor, Tensor> sdpaFlash(
    const Tensor& query, const Tensor& key, const Tensor& value, double dropout_p, bool is_causal,
    bool return_debug_mask, std::optional<double> scale) {
  const char* op = "_scaled_dot_product_flash_attention";
  checkQkv(op, query, key, value, 4);
  TORCH_CHECK_NOT_IMPLEMENTED(!return_debug_mask, op, ": mytorch does not return a debug attention mask");
  TORCH_CHECK(value.size(3) == query.size(3), op, ": expected the value's head dim (", value.size(3),
              ") to equal the query's (", query.size(3), ")");
  const int64_t b = query.size(0), h = query.size(1), lq = query.size(2), lk = key.size(2);
  checkCausalSquare(op, is_causal, lq, lk);
  Tensor out = at::empty_like(query);
  Tensor lse = at::empty({b, h, lq}, query.options().dtype(attn::accType(query.scalar_type())));
  attn::Philox ph;
  if (dropout_p > 0) ph = attn::drawPhilox(query, static_cast<uint64_t>(b * h * lq * lk));
  attn::forward(query, key, value, Tensor(), is_causal, scale, dropout_p, ph, out, lse);
  auto [state, unused] = flashRngState(ph);
  return {
      out, lse, Tensor(), Tensor(), c10::SymInt(lq), c10::SymInt(lk), state, unused, at::empty({0}, query.options())};
}

std::tuple<Tensor, Tensor, Tensor> sdpaFlashBackward(const Tensor& grad_out, const Tensor& query, const Tensor& key,
                                                     const Tensor& value, const Tensor& out, const Tensor& logsumexp,
                                                     const Tensor& cum_seq_q, const Tensor& cum_seq_k,
                                                     c10::SymInt max_q, c10::SymInt max_k, double dropout_p,
                                                     bool is_causal, const Tensor& rng_state, const Tensor& unused,
                                                     std::optional<double> scale) {
  Tensor dq = at::empty_like(query), dk = at::empty_like(key), dv = at::empty_like(value);
  if (!grad_out.defined()) return {dq.zero_(), dk.zero_(), dv.zero_()};
  attn::backward(grad_out, query, key, value, out, logsumexp, Tensor(), is_causal, scale, dropout_p,
                 flashPhilox(rng_state, dropout_p), dq, dk, dv);
  return {dq, dk, dv};
}

// ---- _scaled_dot_product_efficient_attention --------------------------------------------------------------------

// (B, H, L, E) in (B, L, H, E) memory order, as the memory-efficient kernels write.
Tensor bhleInBlhe(const Tensor& like, int64_t e) {
  return at::empty({like.size(0), like.size(2), like.size(1), e}, like.options()).transpose(1, 2);
}

std::tuple<Tensor, Tensor, Tensor, Tensor> sdpaEfficient(const Tensor& query, const Tensor& key, const Tensor& value,
                                                         const OptT& attn_bias, bool compute_log_sumexp,
                                                         double dropout_p, bool is_causal,
                                                         std::optional<double> scale) {
  checkQkv("_scaled_dot_product_efficient_attention", query, key, value, 4);
  const int64_t b = query.size(0), h = query.size(1), lq = query.size(2), lk = key.size(2);
  Tensor out = bhleInBlhe(query, value.size(3));
  const auto acc = attn::accType(query.scalar_type());
  Tensor lse = at::empty({b, h, lq}, query.options().dtype(acc));
  attn::Philox ph;
  if (dropout_p > 0) ph = attn::drawPhilox(query, static_cast<uint64_t>(b * h * lq * lk));
  attn::forward(query, key, value, attn_bias.has_value() ? *attn_bias : Tensor(), is_causal, scale, dropout_p, ph, out,
                lse);
  Tensor lse_out;
  if (compute_log_sumexp) {  // padded to a multiple of 32 queries, as CUDA's; the padding holds +inf (no row)
    lse_out = at::full({b, h, (lq + 31) / 32 * 32}, INFINITY, query.options().dtype(acc));
    lse_out.narrow(2, 0, lq).copy_(lse);
  } else {
    lse_out = at::empty({b, h, 0}, query.options().dtype(acc));
  }
  Tensor seed = at::empty({}, at::TensorOptions().dtype(at::kLong)), offset = at::empty({}, seed.options());
  seed.fill_(static_cast<int64_t>(ph.seed));
  offset.fill_(static_cast<int64_t>(ph.offset));
  return {out, lse_out, seed, offset};
}

// d bias = dS = P * (dP - rowsum(dO * O)), P = exp(scale q k^T + bias - lse), dP = dO v^T (no dropout), summed over
// the dimensions the bias broadcast along.
Tensor biasGradient(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                    const Tensor& lse, const Tensor& bias, bool causal, std::optional<double> scale) {
  const auto acc = attn::accType(q.scalar_type());
  const int64_t hq = q.size(1), hkv = k.size(1);
  Tensor kk = k.to(acc), vv = v.to(acc);
  if (hq != hkv) {
    kk = kk.repeat_interleave(hq / hkv, 1);
    vv = vv.repeat_interleave(hq / hkv, 1);
  }
  const double s = scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  Tensor scores = at::matmul(q.to(acc), kk.transpose(-2, -1)).mul_(s).add_(bias.to(acc));
  if (causal) {
    Tensor upper = at::ones({q.size(2), k.size(2)}, q.options().dtype(at::kBool)).triu_(1);
    scores.masked_fill_(upper, -INFINITY);
  }
  Tensor p = scores.sub_(lse.to(acc).unsqueeze(-1)).exp_();
  Tensor g = grad_out.to(acc);
  Tensor delta = g.mul(out.to(acc)).sum(-1, true);
  Tensor ds = p.mul_(at::matmul(g, vv.transpose(-2, -1)).sub_(delta));
  // Sum over the dimensions the bias was broadcast along.
  std::vector<int64_t> dims;
  const int64_t lead = ds.dim() - bias.dim();
  for (int64_t d = 0; d < ds.dim(); ++d)
    if (d < lead || bias.size(d - lead) == 1) dims.push_back(d);
  if (!dims.empty()) ds = ds.sum(dims, true);
  return ds.reshape(bias.sizes()).to(bias.scalar_type());
}

std::tuple<Tensor, Tensor, Tensor, Tensor> sdpaEfficientBackward(
    const Tensor& grad_out, const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& attn_bias,
    const Tensor& out, const Tensor& logsumexp, const Tensor& philox_seed, const Tensor& philox_offset,
    double dropout_p, std::array<bool, 4> mask, bool is_causal, std::optional<double> scale) {
  Tensor dq = bhleInBlhe(query, query.size(3)), dk = bhleInBlhe(key, key.size(3)),
         dv = bhleInBlhe(value, value.size(3));
  if (!grad_out.defined())
    return {mask[0] ? dq.zero_() : Tensor(), mask[1] ? dk.zero_() : Tensor(), mask[2] ? dv.zero_() : Tensor(),
            Tensor()};
  const int64_t lq = query.size(2);
  TORCH_CHECK(logsumexp.dim() == 3 && logsumexp.size(2) >= lq,
              "_scaled_dot_product_efficient_attention_backward: expected the forward's logsumexp (computed with "
              "compute_log_sumexp=True) of at least ",
              lq, " queries, but got ", logsumexp.sizes());
  Tensor lse = logsumexp.narrow(2, 0, lq);
  attn::Philox ph;
  if (dropout_p > 0) {
    ph.seed = static_cast<uint64_t>(philox_seed.item<int64_t>());
    ph.offset = static_cast<uint64_t>(philox_offset.item<int64_t>());
  }
  attn::backward(grad_out, query, key, value, out, lse, attn_bias, is_causal, scale, dropout_p, ph, dq, dk, dv);
  Tensor dbias;
  if (mask[3] && attn_bias.defined()) {
    TORCH_CHECK_NOT_IMPLEMENTED(dropout_p == 0,
                                "_scaled_dot_product_efficient_attention_backward: the gradient "
                                "of attn_bias with dropout is not supported on mytorch");
    dbias = biasGradient(grad_out, query, key, value, out, lse, attn_bias, is_causal, scale);
  }
  return {mask[0] ? dq : Tensor(), mask[1] ? dk : Tensor(), mask[2] ? dv : Tensor(), dbias};
}

// ---- _flash_attention_forward / _backward (dense and varlen) ----------------------------------------------------

void checkFlashExtras(const char* op, bool causal, std::optional<c10::SymInt> left, std::optional<c10::SymInt> right) {
  const bool noLeft = !left.has_value() || *left < 0;
  const bool noRight = !right.has_value() || *right < 0 || (causal && *right == 0);
  TORCH_CHECK_NOT_IMPLEMENTED(noLeft && noRight, op, ": sliding-window attention (window_size_left/right) is not ",
                              "supported on mytorch");
}

// The host copy of a cu_seqlens tensor: B + 1 nondecreasing offsets from 0 to at most `total`.
std::vector<int64_t> seqlens(const char* op, const char* name, const Tensor& cu, int64_t total) {
  TORCH_CHECK(cu.dim() == 1 && cu.numel() >= 2 && (cu.scalar_type() == at::kInt || cu.scalar_type() == at::kLong), op,
              ": expected ", name, " as a 1-D int32 tensor of batch + 1 offsets, but got ", cu.sizes(), " of ",
              cu.scalar_type());
  refuseDuringCapture("varlen flash attention (it reads cu_seqlens on the host)");
  Tensor host = cu.to(at::kCPU, at::kLong).contiguous();
  std::vector<int64_t> v(host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + host.numel());
  TORCH_CHECK(v.front() == 0 && v.back() <= total, op, ": expected ", name, " to run from 0 to at most ", total,
              ", but got ", v.front(), " .. ", v.back());
  for (size_t i = 1; i < v.size(); ++i)
    TORCH_CHECK(v[i] >= v[i - 1], op, ": expected ", name, " to be nondecreasing, but it falls at ", i);
  return v;
}

struct Varlen {
  std::vector<int64_t> cq, ck;
  std::vector<uint64_t> offset;  // each sequence's Philox offset past the call's
  uint64_t draws = 0;
};

Varlen varlenOf(const char* op, const Tensor& q, const Tensor& k, const Tensor& cu_q, const Tensor& cu_k, bool causal) {
  Varlen s;
  s.cq = seqlens(op, "cum_seq_q", cu_q, q.size(0));
  s.ck = seqlens(op, "cum_seq_k", cu_k, k.size(0));
  TORCH_CHECK(s.cq.size() == s.ck.size(), op, ": expected cum_seq_q and cum_seq_k of one batch, but got ",
              s.cq.size() - 1, " and ", s.ck.size() - 1, " sequences");
  for (size_t i = 0; i + 1 < s.cq.size(); ++i) {
    const int64_t lq = s.cq[i + 1] - s.cq[i], lk = s.ck[i + 1] - s.ck[i];
    checkCausalSquare(op, causal, lq, lk);
    s.offset.push_back(s.draws);
    s.draws += round4(q.size(1) * lq * lk);
  }
  return s;
}

// Sequence i of a packed (total, H, E) tensor as (1, H, L_i, E).
Tensor seq(const Tensor& t, const std::vector<int64_t>& cu, size_t i) {
  return t.narrow(0, cu[i], cu[i + 1] - cu[i]).transpose(0, 1).unsqueeze(0);
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> flashForward(
    const Tensor& query, const Tensor& key, const Tensor& value, const OptT& cum_seq_q, const OptT& cum_seq_k,
    c10::SymInt max_q, c10::SymInt max_k, double dropout_p, bool is_causal, bool return_debug_mask,
    std::optional<double> scale, std::optional<c10::SymInt> window_size_left,
    std::optional<c10::SymInt> window_size_right, const OptT& seqused_k, const OptT& alibi_slopes,
    const OptT& block_table, std::optional<int64_t> num_splits) {
  const char* op = "_flash_attention_forward";
  TORCH_CHECK_NOT_IMPLEMENTED(!return_debug_mask, op, ": mytorch does not return a debug attention mask");
  TORCH_CHECK_NOT_IMPLEMENTED(!seqused_k.has_value() && !alibi_slopes.has_value() && !block_table.has_value(), op,
                              ": seqused_k, alibi_slopes and block_table (paged KV) are not supported on mytorch");
  checkFlashExtras(op, is_causal, window_size_left, window_size_right);
  const bool varlen = cum_seq_q.has_value() && cum_seq_q->defined();
  TORCH_CHECK(varlen == (cum_seq_k.has_value() && cum_seq_k->defined()), op,
              ": expected cum_seq_q and cum_seq_k both given (varlen) or both None");
  checkQkv(op, query, key, value, varlen ? 3 : 4);
  Tensor out = at::empty_like(query);
  const auto acc = attn::accType(query.scalar_type());
  if (!varlen) {  // (B, L, H, E)
    Tensor q = query.transpose(1, 2), k = key.transpose(1, 2), v = value.transpose(1, 2), o = out.transpose(1, 2);
    checkCausalSquare(op, is_causal, q.size(2), k.size(2));
    Tensor lse = at::empty({q.size(0), q.size(1), q.size(2)}, query.options().dtype(acc));
    attn::Philox ph;
    if (dropout_p > 0)
      ph = attn::drawPhilox(query, static_cast<uint64_t>(q.size(0) * q.size(1) * q.size(2) * k.size(2)));
    attn::forward(q, k, v, Tensor(), is_causal, scale, dropout_p, ph, o, lse);
    auto [state, unused] = flashRngState(ph);
    return {out, lse, state, unused, at::empty({0}, query.options())};
  }
  Varlen s = varlenOf(op, query, key, *cum_seq_q, *cum_seq_k, is_causal);
  Tensor lse = at::empty({query.size(1), query.size(0)}, query.options().dtype(acc));
  if (s.cq.back() < query.size(0)) {  // rows past the last sequence belong to none: zero, as no key was seen
    out.narrow(0, s.cq.back(), query.size(0) - s.cq.back()).zero_();
    lse.narrow(1, s.cq.back(), query.size(0) - s.cq.back()).fill_(INFINITY);
  }
  attn::Philox base;
  if (dropout_p > 0) base = attn::drawPhilox(query, s.draws);
  for (size_t i = 0; i + 1 < s.cq.size(); ++i) {
    const int64_t lq = s.cq[i + 1] - s.cq[i], lk = s.ck[i + 1] - s.ck[i];
    if (lq == 0) continue;
    Tensor o = seq(out, s.cq, i);
    if (lk == 0) {  // no keys: a fully masked row (Note [Fused attention]): zero output, +inf logsumexp
      o.zero_();
      lse.narrow(1, s.cq[i], lq).fill_(INFINITY);
      continue;
    }
    Tensor l = at::empty({1, query.size(1), lq}, query.options().dtype(acc));
    attn::Philox ph{base.seed, base.offset + s.offset[i]};
    attn::forward(seq(query, s.cq, i), seq(key, s.ck, i), seq(value, s.ck, i), Tensor(), is_causal, scale, dropout_p,
                  ph, o, l);
    lse.narrow(1, s.cq[i], lq).copy_(l[0]);
  }
  auto [state, unused] = flashRngState(base);
  return {out, lse, state, unused, at::empty({0}, query.options())};
}

std::tuple<Tensor, Tensor, Tensor> flashBackward(
    const Tensor& grad_out, const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& out,
    const Tensor& logsumexp, const Tensor& cum_seq_q, const Tensor& cum_seq_k, c10::SymInt max_q, c10::SymInt max_k,
    double dropout_p, bool is_causal, const Tensor& rng_state, const Tensor& unused, std::optional<double> scale,
    std::optional<c10::SymInt> window_size_left, std::optional<c10::SymInt> window_size_right) {
  const char* op = "_flash_attention_backward";
  checkFlashExtras(op, is_causal, window_size_left, window_size_right);
  const bool varlen = cum_seq_q.defined();
  checkQkv(op, query, key, value, varlen ? 3 : 4);
  const attn::Philox base = flashPhilox(rng_state, dropout_p);
  if (!varlen) {
    Tensor dq = at::empty_like(query), dk = at::empty_like(key), dv = at::empty_like(value);
    Tensor dqt = dq.transpose(1, 2), dkt = dk.transpose(1, 2), dvt = dv.transpose(1, 2);
    attn::backward(grad_out.transpose(1, 2), query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
                   out.transpose(1, 2), logsumexp, Tensor(), is_causal, scale, dropout_p, base, dqt, dkt, dvt);
    return {dq, dk, dv};
  }
  Varlen s = varlenOf(op, query, key, cum_seq_q, cum_seq_k, is_causal);
  Tensor dq = at::zeros_like(query), dk = at::zeros_like(key), dv = at::zeros_like(value);
  for (size_t i = 0; i + 1 < s.cq.size(); ++i) {
    const int64_t lq = s.cq[i + 1] - s.cq[i], lk = s.ck[i + 1] - s.ck[i];
    if (lq == 0 || lk == 0) continue;
    Tensor dqi = seq(dq, s.cq, i), dki = seq(dk, s.ck, i), dvi = seq(dv, s.ck, i);
    Tensor l = logsumexp.narrow(1, s.cq[i], lq).unsqueeze(0);
    attn::Philox ph{base.seed, base.offset + s.offset[i]};
    attn::backward(seq(grad_out, s.cq, i), seq(query, s.cq, i), seq(key, s.ck, i), seq(value, s.ck, i),
                   seq(out, s.cq, i), l, Tensor(), is_causal, scale, dropout_p, ph, dqi, dki, dvi);
  }
  return {dq, dk, dv};
}

#if !MYTORCH_TORCH_AT_LEAST(2, 12)
// torch 2.11's schema has no block_table and num_splits (the lent GPU machines' torch: csrc/core/TorchVersion.h).
std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> flashForward211(
    const Tensor& query, const Tensor& key, const Tensor& value, const OptT& cum_seq_q, const OptT& cum_seq_k,
    c10::SymInt max_q, c10::SymInt max_k, double dropout_p, bool is_causal, bool return_debug_mask,
    std::optional<double> scale, std::optional<c10::SymInt> window_size_left,
    std::optional<c10::SymInt> window_size_right, const OptT& seqused_k, const OptT& alibi_slopes) {
  return flashForward(query, key, value, cum_seq_q, cum_seq_k, std::move(max_q), std::move(max_k), dropout_p, is_causal,
                      return_debug_mask, scale, std::move(window_size_left), std::move(window_size_right), seqused_k,
                      alibi_slopes, std::nullopt, std::nullopt);
}
#endif

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "_scaled_dot_product_flash_attention", sdpaFlash);
  MT_IMPL(m, "_scaled_dot_product_flash_attention_backward", sdpaFlashBackward);
  MT_IMPL(m, "_scaled_dot_product_efficient_attention", sdpaEfficient);
  MT_IMPL(m, "_scaled_dot_product_efficient_attention_backward", sdpaEfficientBackward);
#if MYTORCH_TORCH_AT_LEAST(2, 12)
  MT_IMPL(m, "_flash_attention_forward", flashForward);
#else
  MT_IMPL(m, "_flash_attention_forward", flashForward211);
#endif
  MT_IMPL(m, "_flash_attention_backward", flashBackward);
}

} // namespace mytorch
