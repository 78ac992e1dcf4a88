// The NN group's functors (tables/pointwise.def, group Nn): activations, their backwards and the pointwise
// losses; formulas follow ATen's CPU kernels so sim matches CPU PyTorch. Included by ops_math.h, which declares
// Fn and MT_EW_FN; the operands are in opmath (float for half types), floating dtypes only.
#pragma once

namespace mytorch::ew {

// 1/sqrt(2) and 2/sqrt(pi), in the functor's opmath type.
template <typename O> MT_HOST_DEVICE constexpr O sqrt1_2() { return O(0.70710678118654752440); }
template <typename O> MT_HOST_DEVICE constexpr O two_sqrt_pi() { return O(1.12837916709551257390); }

// ---- activations ------------------------------------------------------------------------------------------------
template <> struct Fn<EwOp::Gelu> {
  MT_EW_FN(O a, const EwParams&) { return a * O(0.5) * (O(1) + std::erf(a * sqrt1_2<O>())); }
};
template <> struct Fn<EwOp::GeluTanh> {
  MT_EW_FN(O a, const EwParams&) {
    const O kBeta = sqrt1_2<O>() * two_sqrt_pi<O>(), kKappa = O(0.044715);
    const O inner = kBeta * (a + kKappa * a * a * a);
    return O(0.5) * a * (O(1) + std::tanh(inner));
  }
};
template <> struct Fn<EwOp::Silu> {
  MT_EW_FN(O a, const EwParams&) { return a / (O(1) + std::exp(-a)); }
};
template <> struct Fn<EwOp::Mish> {
  MT_EW_FN(O a, const EwParams&) { return a * std::tanh(std::log1p(std::exp(a))); }
};
template <> struct Fn<EwOp::Softplus> {
  MT_EW_FN(O a, const EwParams& p) {
    const O beta = static_cast<O>(p.lo), threshold = static_cast<O>(p.hi);
    return (a * beta) > threshold ? a : std::log1p(std::exp(a * beta)) / beta;
  }
};
template <> struct Fn<EwOp::Elu> {
  MT_EW_FN(O a, const EwParams& p) {
    const O negcoef = static_cast<O>(p.alpha * p.lo), poscoef = static_cast<O>(p.lo), negiptcoef = static_cast<O>(p.hi);
    return a <= O(0) ? std::expm1(a * negiptcoef) * negcoef : a * poscoef;
  }
};
template <> struct Fn<EwOp::LeakyRelu> {
  MT_EW_FN(O a, const EwParams& p) { return a > O(0) ? a : a * static_cast<O>(p.alpha); }
};
template <> struct Fn<EwOp::Hardswish> {
  MT_EW_FN(O a, const EwParams&) {
    const O r = a + O(3);
    return a * (r < O(0) ? O(0) : (r > O(6) ? O(6) : r)) / O(6);
  }
};
template <> struct Fn<EwOp::Hardsigmoid> {
  MT_EW_FN(O a, const EwParams&) {
    const O r = a + O(3);
    return (r < O(0) ? O(0) : (r > O(6) ? O(6) : r)) / O(6);
  }
};
template <> struct Fn<EwOp::LogSigmoid> {
  MT_EW_FN(O a, const EwParams&) {
    const O m = a < O(0) ? a : O(0);
    return m - std::log1p(std::exp(-std::abs(a)));
  }
};

// ---- their backwards: (grad, x), or (grad, the forward's output) for sigmoid and tanh ---------------------------
// a: grad, b: x
template <> struct Fn<EwOp::GeluBackward> {
  MT_EW_FN(O a, O b, const EwParams&) {
    const O cdf = O(0.5) * (O(1) + std::erf(b * sqrt1_2<O>()));
    const O pdf = std::exp(O(-0.5) * b * b) * (two_sqrt_pi<O>() * sqrt1_2<O>() * O(0.5));
    return a * (cdf + b * pdf);
  }
};
template <> struct Fn<EwOp::GeluTanhBackward> {
  MT_EW_FN(O a, O b, const EwParams&) {
    const O kBeta = sqrt1_2<O>() * two_sqrt_pi<O>(), kKappa = O(0.044715);
    const O x_sq = b * b, x_cube = x_sq * b;
    const O t = std::tanh(kBeta * (b + kKappa * x_cube));
    const O left = O(0.5) * b, right = O(1) + t;
    const O left_d = O(0.5) * right;
    const O right_d = left * (O(1) - t * t) * kBeta * (O(1) + O(3) * kKappa * x_sq);
    return a * (left_d + right_d);
  }
};
template <> struct Fn<EwOp::SiluBackward> {
  MT_EW_FN(O a, O b, const EwParams&) {
    const O s = O(1) / (O(1) + std::exp(-b));
    return a * s * (O(1) + b * (O(1) - s));
  }
};
template <> struct Fn<EwOp::MishBackward> {
  MT_EW_FN(O a, O b, const EwParams&) {
    const O s = O(1) / (O(1) + std::exp(-b));
    const O ts = std::tanh(std::log1p(std::exp(b)));
    return a * (ts + b * s * (O(1) - ts * ts));
  }
};
template <> struct Fn<EwOp::SoftplusBackward> {
  MT_EW_FN(O a, O b, const EwParams& p) {
    const O beta = static_cast<O>(p.lo), threshold = static_cast<O>(p.hi);
    const O z = std::exp(b * beta);
    return (b * beta) > threshold ? a : a * z / (z + O(1));
  }
};
// b: x, or the output when is_result
template <> struct Fn<EwOp::EluBackward> {
  MT_EW_FN(O a, O b, const EwParams& p) {
    const O negcoef = static_cast<O>(p.alpha * p.lo), poscoef = static_cast<O>(p.lo), negiptcoef = static_cast<O>(p.hi);
    if (p.has_lo) return b <= O(0) ? a * negiptcoef * (b + negcoef) : a * poscoef;
    return b <= O(0) ? a * negiptcoef * negcoef * std::exp(b * negiptcoef) : a * poscoef;
  }
};
template <> struct Fn<EwOp::LeakyReluBackward> {
  MT_EW_FN(O a, O b, const EwParams& p) { return b > O(0) ? a : a * static_cast<O>(p.alpha); }
};
// ATen's boundaries: 0 at x <= -3, grad at x >= 3
template <> struct Fn<EwOp::HardswishBackward> {
  MT_EW_FN(O a, O b, const EwParams&) {
    if (b <= O(-3)) return O(0);
    if (b < O(3)) return a * ((b / O(3)) + O(0.5));
    return a;
  }
};
template <> struct Fn<EwOp::HardsigmoidBackward> {
  MT_EW_FN(O a, O b, const EwParams&) {
    return (b > O(-3) && b < O(3)) ? a * static_cast<O>(1.0f / 6.0f) : O(0);  // ATen's float constant
  }
};
template <> struct Fn<EwOp::HardtanhBackward> {
  MT_EW_FN(O a, O b, const EwParams& p) { return (b <= static_cast<O>(p.lo) || b >= static_cast<O>(p.hi)) ? O(0) : a; }
};
// hardshrink / softshrink with lambda (lo): 0 inside [-lambda, lambda]; their backwards (grad, x) pass grad outside.
template <> struct Fn<EwOp::Hardshrink> {
  MT_EW_FN(O a, const EwParams& p) {
    const O l = static_cast<O>(p.lo);
    return (a >= -l && a <= l) ? O(0) : a;
  }
};
template <> struct Fn<EwOp::Softshrink> {
  MT_EW_FN(O a, const EwParams& p) {
    const O l = static_cast<O>(p.lo);
    return a > l ? a - l : (a < -l ? a + l : a * O(0));  // a * 0 keeps a NaN
  }
};
template <> struct Fn<EwOp::HardshrinkBackward> {
  MT_EW_FN(O g, O x, const EwParams& p) {
    const O l = static_cast<O>(p.lo);
    return (x >= -l && x <= l) ? O(0) : g;
  }
};
template <> struct Fn<EwOp::SoftshrinkBackward> : Fn<EwOp::HardshrinkBackward> {};
// threshold(x, threshold = lo, value = hi): value where x <= threshold.
template <> struct Fn<EwOp::Threshold> {
  MT_EW_FN(O a, const EwParams& p) { return a <= static_cast<O>(p.lo) ? static_cast<O>(p.hi) : a; }
};
// prelu(x, w) = x > 0 ? x : w x, and its gradients (ATen's CPU kernels, NaN passing through the multiplications)
template <> struct Fn<EwOp::Prelu> {
  MT_EW_FN(O x, O w, const EwParams&) { return x > O(0) ? x : w * x; }
};
template <> struct Fn<EwOp::PreluBackwardInput> {
  MT_EW_FN(O g, O x, O w, const EwParams&) { return x > O(0) ? g : w * g; }
};
template <> struct Fn<EwOp::PreluBackwardWeight> {
  MT_EW_FN(O g, O x, const EwParams&) { return x > O(0) ? O(0) : x * g; }
};
// threshold_backward(grad, x, threshold = lo): 0 where x <= threshold (ReLU's backward at threshold 0).
template <> struct Fn<EwOp::ThresholdBackward> {
  MT_EW_FN(O g, O x, const EwParams& p) { return x <= static_cast<O>(p.lo) ? O(0) : g; }
};
template <> struct Fn<EwOp::LogSigmoidBackward> {
  MT_EW_FN(O a, O b, const EwParams&) {
    const bool neg = b < O(0);
    const O z = std::exp(-std::abs(b));
    return a * ((neg ? O(1) : O(0)) - (neg ? O(1) : O(-1)) * (z / (O(1) + z)));
  }
};
// a: grad, b: the forward's output
template <> struct Fn<EwOp::SigmoidBackward> {
  MT_EW_FN(O a, O b, const EwParams&) { return a * (O(1) - b) * b; }
};
template <> struct Fn<EwOp::TanhBackward> {
  MT_EW_FN(O a, O b, const EwParams&) { return a * (O(1) - b * b); }
};

// ---- pointwise losses: (input, target); their backwards: (grad, input, target) ----------------------------------
// a: input, b: target
template <> struct Fn<EwOp::MseLoss> {
  MT_EW_FN(O a, O b, const EwParams&) {
    const O d = a - b;
    return d * d;
  }
};
template <> struct Fn<EwOp::SmoothL1Loss> {
  MT_EW_FN(O a, O b, const EwParams& p) {
    const O beta = static_cast<O>(p.lo);
    const O z = std::abs(a - b);
    return z < beta ? O(0.5) * z * z / beta : z - O(0.5) * beta;
  }
};
template <> struct Fn<EwOp::HuberLoss> {
  MT_EW_FN(O a, O b, const EwParams& p) {
    const O delta = static_cast<O>(p.lo);
    const O z = std::abs(a - b);
    return z < delta ? O(0.5) * z * z : delta * (z - O(0.5) * delta);
  }
};
template <> struct Fn<EwOp::BceLoss> {
  MT_EW_FN(O a, O b, const EwParams&) {
    const O lo = O(-100);
    const O l1 = std::log1p(-a), l0 = std::log(a);
    return (b - O(1)) * (l1 > lo ? l1 : lo) - b * (l0 > lo ? l0 : lo);
  }
};
// a: grad, b: input, c: target
template <> struct Fn<EwOp::MseBackward> {
  MT_EW_FN(O a, O b, O c, const EwParams& p) { return static_cast<O>(p.alpha) * (b - c) * a; }
};
template <> struct Fn<EwOp::SmoothL1Backward> {
  MT_EW_FN(O a, O b, O c, const EwParams& p) {
    const O norm = static_cast<O>(p.alpha), beta = static_cast<O>(p.lo), x = b - c;
    if (x <= -beta) return -norm * a;
    if (x >= beta) return norm * a;
    return norm * x * a / beta;
  }
};
template <> struct Fn<EwOp::HuberBackward> {
  MT_EW_FN(O a, O b, O c, const EwParams& p) {
    const O norm = static_cast<O>(p.alpha), delta = static_cast<O>(p.lo), x = b - c;
    if (x <= -delta) return -norm * a * delta;
    if (x >= delta) return norm * a * delta;
    return norm * x * a;
  }
};
template <> struct Fn<EwOp::BceBackward> {
  MT_EW_FN(O a, O b, O c, const EwParams&) {
    const O eps = O(1e-12);
    const O d = (O(1) - b) * b;
    return a * (b - c) / (d > eps ? d : eps);
  }
};

// ---- mytorch's own pointwise ops (the table's `Op` rows): the schema's scalar arguments in p.arg, in order ------
// GPT-OSS's clamped SwiGLU gate (transformers' GptOssExperts._apply_gate), p.arg = {alpha, limit}:
//   g = min(gate, limit), u = clamp(up, -limit, limit), y = (u + 1) * g * sigmoid(alpha * g).
// Its gradients are aten autograd's of that composition: clamp passes the gradient only where its input lies within
// its bounds (a NaN input: nowhere), zero elsewhere whatever the gradient is (clamp's backward is a where).
template <typename O>
MT_HOST_DEVICE inline O clamped_swiglu_up(O up, O limit) {
  return up < -limit ? -limit : (up > limit ? limit : up);
}
template <> struct Fn<EwOp::ClampedSwiglu> {
  MT_EW_FN(O gate, O up, const EwParams& p) {
    const O alpha = static_cast<O>(p.arg[0]), limit = static_cast<O>(p.arg[1]);
    const O g = gate > limit ? limit : gate;  // NaN stays NaN, as clamp's
    return (clamped_swiglu_up(up, limit) + O(1)) * (g / (O(1) + std::exp(-alpha * g)));
  }
};
// a: grad, b: gate, c: up
template <> struct Fn<EwOp::ClampedSwigluGradGate> {
  MT_EW_FN(O a, O b, O c, const EwParams& p) {
    const O alpha = static_cast<O>(p.arg[0]), limit = static_cast<O>(p.arg[1]);
    if (!(b <= limit)) return O(0);
    const O s = O(1) / (O(1) + std::exp(-alpha * b));
    return a * (clamped_swiglu_up(c, limit) + O(1)) * (s + alpha * b * s * (O(1) - s));
  }
};
template <> struct Fn<EwOp::ClampedSwigluGradUp> {
  MT_EW_FN(O a, O b, O c, const EwParams& p) {
    const O alpha = static_cast<O>(p.arg[0]), limit = static_cast<O>(p.arg[1]);
    if (!(c >= -limit && c <= limit)) return O(0);
    const O g = b > limit ? limit : b;
    return a * (g / (O(1) + std::exp(-alpha * g)));
  }
};

} // namespace mytorch::ew
