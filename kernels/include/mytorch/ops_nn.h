// The math of the NN elementwise ops (activations, their backwards, pointwise losses), shared by the sim
// loops and the CUDA kernels; formulas follow ATen's CPU kernels so sim matches CPU PyTorch. Called from
// ew::apply (ops_math.h) for every op with ew_is_nn(op); a, b, c are in opmath (float for half types).
#pragma once

#include <cmath>

#include "mytorch/ew_ops.h"
#include "mytorch/macros.h"

namespace mytorch::ew {

template <EwOp op, typename O>
MT_HOST_DEVICE inline O nn_apply(O a, O b, O c, const EwParams& p) {
  constexpr O kSqrt1_2 = O(0.70710678118654752440);
  constexpr O k2SqrtPi = O(1.12837916709551257390);
  if constexpr (op == EwOp::Gelu) {
    return a * O(0.5) * (O(1) + std::erf(a * kSqrt1_2));
  } else if constexpr (op == EwOp::GeluTanh) {
    const O kBeta = kSqrt1_2 * k2SqrtPi, kKappa = O(0.044715);
    const O inner = kBeta * (a + kKappa * a * a * a);
    return O(0.5) * a * (O(1) + std::tanh(inner));
  } else if constexpr (op == EwOp::Silu) {
    return a / (O(1) + std::exp(-a));
  } else if constexpr (op == EwOp::Mish) {
    return a * std::tanh(std::log1p(std::exp(a)));
  } else if constexpr (op == EwOp::Softplus) {
    const O beta = static_cast<O>(p.lo), threshold = static_cast<O>(p.hi);
    return (a * beta) > threshold ? a : std::log1p(std::exp(a * beta)) / beta;
  } else if constexpr (op == EwOp::Elu) {
    const O negcoef = static_cast<O>(p.alpha * p.lo), poscoef = static_cast<O>(p.lo), negiptcoef = static_cast<O>(p.hi);
    return a <= O(0) ? std::expm1(a * negiptcoef) * negcoef : a * poscoef;
  } else if constexpr (op == EwOp::LeakyRelu) {
    return a > O(0) ? a : a * static_cast<O>(p.alpha);
  } else if constexpr (op == EwOp::Hardswish) {
    const O r = a + O(3);
    return a * (r < O(0) ? O(0) : (r > O(6) ? O(6) : r)) / O(6);
  } else if constexpr (op == EwOp::Hardsigmoid) {
    const O r = a + O(3);
    return (r < O(0) ? O(0) : (r > O(6) ? O(6) : r)) / O(6);
  } else if constexpr (op == EwOp::LogSigmoid) {
    const O m = a < O(0) ? a : O(0);
    return m - std::log1p(std::exp(-std::abs(a)));
  } else if constexpr (op == EwOp::LogSigmoidBackward) {
    const bool neg = b < O(0);
    const O z = std::exp(-std::abs(b));
    return a * ((neg ? O(1) : O(0)) - (neg ? O(1) : O(-1)) * (z / (O(1) + z)));
  } else if constexpr (op == EwOp::SigmoidBackward) {  // a: grad, b: the forward's output
    return a * (O(1) - b) * b;
  } else if constexpr (op == EwOp::TanhBackward) {
    return a * (O(1) - b * b);
  } else if constexpr (op == EwOp::GeluBackward) {  // a: grad, b: x
    const O cdf = O(0.5) * (O(1) + std::erf(b * kSqrt1_2));
    const O pdf = std::exp(O(-0.5) * b * b) * (k2SqrtPi * kSqrt1_2 * O(0.5));
    return a * (cdf + b * pdf);
  } else if constexpr (op == EwOp::GeluTanhBackward) {
    const O kBeta = kSqrt1_2 * k2SqrtPi, kKappa = O(0.044715);
    const O x_sq = b * b, x_cube = x_sq * b;
    const O t = std::tanh(kBeta * (b + kKappa * x_cube));
    const O left = O(0.5) * b, right = O(1) + t;
    const O left_d = O(0.5) * right;
    const O right_d = left * (O(1) - t * t) * kBeta * (O(1) + O(3) * kKappa * x_sq);
    return a * (left_d + right_d);
  } else if constexpr (op == EwOp::SiluBackward) {
    const O s = O(1) / (O(1) + std::exp(-b));
    return a * s * (O(1) + b * (O(1) - s));
  } else if constexpr (op == EwOp::MishBackward) {
    const O s = O(1) / (O(1) + std::exp(-b));
    const O ts = std::tanh(std::log1p(std::exp(b)));
    return a * (ts + b * s * (O(1) - ts * ts));
  } else if constexpr (op == EwOp::SoftplusBackward) {
    const O beta = static_cast<O>(p.lo), threshold = static_cast<O>(p.hi);
    const O z = std::exp(b * beta);
    return (b * beta) > threshold ? a : a * z / (z + O(1));
  } else if constexpr (op == EwOp::EluBackward) {  // b: x, or the output when is_result
    const O negcoef = static_cast<O>(p.alpha * p.lo), poscoef = static_cast<O>(p.lo), negiptcoef = static_cast<O>(p.hi);
    if (p.has_lo) return b <= O(0) ? a * negiptcoef * (b + negcoef) : a * poscoef;
    return b <= O(0) ? a * negiptcoef * negcoef * std::exp(b * negiptcoef) : a * poscoef;
  } else if constexpr (op == EwOp::LeakyReluBackward) {
    return b > O(0) ? a : a * static_cast<O>(p.alpha);
  } else if constexpr (op == EwOp::HardswishBackward) {  // ATen's boundaries: 0 at x <= -3, grad at x >= 3
    if (b <= O(-3)) return O(0);
    if (b < O(3)) return a * ((b / O(3)) + O(0.5));
    return a;
  } else if constexpr (op == EwOp::HardsigmoidBackward) {
    return (b > O(-3) && b < O(3)) ? a * static_cast<O>(1.0f / 6.0f) : O(0);  // ATen's float constant
  } else if constexpr (op == EwOp::HardtanhBackward) {
    return (b <= static_cast<O>(p.lo) || b >= static_cast<O>(p.hi)) ? O(0) : a;
  } else if constexpr (op == EwOp::MseLoss) {  // a: input, b: target
    const O d = a - b;
    return d * d;
  } else if constexpr (op == EwOp::SmoothL1Loss) {
    const O beta = static_cast<O>(p.lo);
    const O z = std::abs(a - b);
    return z < beta ? O(0.5) * z * z / beta : z - O(0.5) * beta;
  } else if constexpr (op == EwOp::HuberLoss) {
    const O delta = static_cast<O>(p.lo);
    const O z = std::abs(a - b);
    return z < delta ? O(0.5) * z * z : delta * (z - O(0.5) * delta);
  } else if constexpr (op == EwOp::HuberBackward) {
    const O norm = static_cast<O>(p.alpha), delta = static_cast<O>(p.lo), x = b - c;
    if (x <= -delta) return -norm * a * delta;
    if (x >= delta) return norm * a * delta;
    return norm * x * a;
  } else if constexpr (op == EwOp::BceLoss) {
    const O lo = O(-100);
    const O l1 = std::log1p(-a), l0 = std::log(a);
    return (b - O(1)) * (l1 > lo ? l1 : lo) - b * (l0 > lo ? l0 : lo);
  } else if constexpr (op == EwOp::MseBackward) {  // a: grad, b: input, c: target
    return static_cast<O>(p.alpha) * (b - c) * a;
  } else if constexpr (op == EwOp::SmoothL1Backward) {
    const O norm = static_cast<O>(p.alpha), beta = static_cast<O>(p.lo), x = b - c;
    if (x <= -beta) return -norm * a;
    if (x >= beta) return norm * a;
    return norm * x * a / beta;
  } else if constexpr (op == EwOp::BceBackward) {
    const O eps = O(1e-12);
    const O d = (O(1) - b) * b;
    return a * (b - c) / (d > eps ? d : eps);
  } else {
    return a;
  }
}

} // namespace mytorch::ew
