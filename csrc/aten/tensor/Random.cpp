// Op table: in-place random fills driven by the device's Philox generator, and native_dropout (so that
// dropout masks come from the mytorch generator and are reproducible for a seed).
#include <ATen/core/DistributionsHelper.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/view_as_real.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <mutex>

#include "csrc/core/Checked.h"
#include "csrc/aten/glue/Glue.h"
#include "csrc/core/Generator.h"
#include "csrc/core/Runtime.h"
#include "csrc/core/Stream.h"
#include "mytorch/random.h"

namespace mytorch {
namespace {

// uint16/uint32/uint64 have no kernel element type: an integer draw is written through the signed type of
// the same width, whose bits are the same for every value in the unsigned range.
at::Tensor unsignedAsSigned(const at::Tensor& self) {
  switch (self.scalar_type()) {
    case at::kUInt16: return self.view(at::kShort);
    case at::kUInt32: return self.view(at::kInt);
    case at::kUInt64: return self.view(at::kLong);
    default: return self;
  }
}

// The (seed, offset) of one call on `device`'s generator (or gen), advancing its offset (Note [Philox layout]).
std::pair<uint64_t, uint64_t> philoxCall(const c10::Device& device, const std::optional<at::Generator>& gen) {
  auto* g = at::get_generator_or_default<MytorchGeneratorImpl>(gen, defaultGenerator(device.index()));
  std::lock_guard<std::mutex> lock(g->mutex_);
  return g->philoxStep();
}

at::Tensor& randomFill(at::Tensor& self, RandomArgs p, const std::optional<at::Generator>& gen) {
  if (self.numel() == 0) return self;
  if (!unsignedAsSigned(self).is_same(self)) {
    TORCH_CHECK(p.dist == Distribution::Integer, "mytorch: this random fill is not implemented for ",
                self.scalar_type(), " (only random_ is, as on the CPU)");
    at::Tensor as_signed = unsignedAsSigned(self);
    randomFill(as_signed, p, gen);
    return self;
  }
  TORCH_CHECK(!self.is_complex(), "mytorch random fills support real dtypes, but got ", self.scalar_type());
  TORCH_CHECK(toKernelDType(self.scalar_type()) != DType::Other, "mytorch random fills do not support dtype ",
              self.scalar_type());
  c10::DeviceGuard guard(self.device());
  std::tie(p.seed, p.offset) = philoxCall(self.device(), gen);
  at::Tensor target = self.is_contiguous() ? self : at::empty(self.sizes(), self.options());
  p.data = target.data_ptr();
  p.dtype = toKernelDType(self.scalar_type());
  p.numel = self.numel();
  MT_RT_CHECK(kernels::random(p, streamFor(self)));
  if (!target.is_same(self)) self.copy_(target);
  return self;
}

void checkFloating(const at::Tensor& self, const char* op) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), op, " expects a floating point tensor, but got ",
              self.scalar_type());
}

at::Tensor& uniformInplace(at::Tensor& self, double from, double to, std::optional<at::Generator> gen) {
  if (self.is_complex()) { // as on the CPU: real and imaginary parts drawn independently
    at::Tensor real = at::view_as_real(self);
    uniformInplace(real, from, to, gen);
    return self;
  }
  checkFloating(self, "uniform_");
  TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from, " > to=", to);
  TORCH_CHECK(std::isfinite(to - from), "uniform_ expects a finite range, but got from=", from, " to=", to);
  RandomArgs p;
  p.dist = Distribution::Uniform;
  p.a = from;
  p.b = to;
  return randomFill(self, p, gen);
}

at::Tensor& normalInplace(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  if (self.is_complex()) { // as on the CPU: each part gets std/sqrt(2), so |z| has the requested spread
    at::Tensor real = at::view_as_real(self);
    normalInplace(real, mean, std / std::sqrt(2.0), gen);
    return self;
  }
  checkFloating(self, "normal_");
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  RandomArgs p;
  p.dist = Distribution::Normal;
  p.a = mean;
  p.b = std;
  return randomFill(self, p, gen);
}

at::Tensor& exponentialInplace(at::Tensor& self, double lambd, std::optional<at::Generator> gen) {
  checkFloating(self, "exponential_");
  TORCH_CHECK(lambd > 0.0, "exponential_ expects lambda > 0.0, but found lambda=", lambd);
  RandomArgs p;
  p.dist = Distribution::Exponential;
  p.a = lambd;
  return randomFill(self, p, gen);
}

// Largest value random_() draws for a dtype: 2^digits for floating types (so every integer below it is
// exact), the type's maximum for integers.
int64_t randomMax(c10::ScalarType t) {
  switch (t) {
    case at::kBool: return 1;
    case at::kHalf: return int64_t(1) << 11;
    case at::kBFloat16: return int64_t(1) << 8;
    case at::kFloat: return int64_t(1) << 24;
    case at::kDouble: return int64_t(1) << 53;
    case at::kByte: return std::numeric_limits<uint8_t>::max();
    case at::kChar: return std::numeric_limits<int8_t>::max();
    case at::kShort: return std::numeric_limits<int16_t>::max();
    case at::kInt: return std::numeric_limits<int32_t>::max();
    case at::kUInt16: return std::numeric_limits<uint16_t>::max();
    case at::kUInt32: return std::numeric_limits<uint32_t>::max();
    default: return std::numeric_limits<int64_t>::max();
  }
}

// The C++ name ATen's range check prints for an integral dtype, so the messages read the same as the CPU's.
const char* integralTypeName(c10::ScalarType t) {
  switch (t) {
    case at::kBool: return "bool";
    case at::kByte: return "unsigned char";
    case at::kChar: return "signed char";
    case at::kShort: return "short int";
    case at::kUInt16: return "short unsigned int";
    case at::kInt: return "int";
    case at::kUInt32: return "unsigned int";
    case at::kLong: return "long int";
    case at::kUInt64: return "long unsigned int";
    default: return c10::toString(t);
  }
}

// [lowest, highest] of an integral dtype as int128-free bounds: highest saturates at INT64_MAX, which is as far
// as random_'s int64 arguments reach.
std::pair<int64_t, int64_t> integralBounds(c10::ScalarType t) {
  switch (t) {
    case at::kBool: return {0, 1};
    case at::kByte: return {0, std::numeric_limits<uint8_t>::max()};
    case at::kChar: return {std::numeric_limits<int8_t>::min(), std::numeric_limits<int8_t>::max()};
    case at::kShort: return {std::numeric_limits<int16_t>::min(), std::numeric_limits<int16_t>::max()};
    case at::kUInt16: return {0, std::numeric_limits<uint16_t>::max()};
    case at::kInt: return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    case at::kUInt32: return {0, std::numeric_limits<uint32_t>::max()};
    case at::kUInt64: return {0, std::numeric_limits<int64_t>::max()};
    default: return {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
  }
}

// ATen's check_from_to_in_range for integral dtypes: values outside the dtype would wrap silently.
void checkIntegralRange(const at::Tensor& self, int64_t from, int64_t last) {
  if (!c10::isIntegralType(self.scalar_type(), /*includeBool=*/true)) return;
  auto [lo, hi] = integralBounds(self.scalar_type());
  TORCH_CHECK(from >= lo && from <= hi, "from is out of bounds for ", integralTypeName(self.scalar_type()));
  TORCH_CHECK(last >= lo && last <= hi, "to - 1 is out of bounds for ", integralTypeName(self.scalar_type()));
}

at::Tensor& integerFill(at::Tensor& self, int64_t low, uint64_t range, const std::optional<at::Generator>& gen) {
  RandomArgs p;
  p.dist = Distribution::Integer;
  p.low = low;
  p.range = range; // 0 means the full 64-bit range
  return randomFill(self, p, gen);
}

at::Tensor& randomFrom(at::Tensor& self, int64_t from, std::optional<int64_t> to, std::optional<at::Generator> gen) {
  if (to.has_value()) {
    TORCH_CHECK(from < *to, "random_ expects 'from' to be less than 'to', but got from=", from, " >= to=", *to);
    checkIntegralRange(self, from, *to - 1);
    return integerFill(self, from, static_cast<uint64_t>(*to) - static_cast<uint64_t>(from), gen);
  }
  const int64_t hi = randomMax(self.scalar_type());
  TORCH_CHECK(from <= hi, "random_ expects 'from' to be at most ", hi, " for dtype ", self.scalar_type(), ", but got ",
              from);
  return integerFill(self, from, static_cast<uint64_t>(hi) - static_cast<uint64_t>(from) + 1, gen);
}

at::Tensor& randomTo(at::Tensor& self, int64_t to, std::optional<at::Generator> gen) {
  TORCH_CHECK(0 < to, "random_ expects 'from' to be less than 'to', but got from=0 >= to=", to);
  checkIntegralRange(self, 0, to - 1);
  return integerFill(self, 0, static_cast<uint64_t>(to), gen);
}

at::Tensor& randomInplace(at::Tensor& self, std::optional<at::Generator> gen) {
  if (self.scalar_type() == at::kUInt64) return integerFill(self, 0, 0, gen); // all 64 bits
  return integerFill(self, 0, static_cast<uint64_t>(randomMax(self.scalar_type())) + 1, gen);
}

at::Tensor& bernoulliFloat(at::Tensor& self, double prob, std::optional<at::Generator> gen) {
  TORCH_CHECK(0 <= prob && prob <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", prob);
  RandomArgs p;
  p.dist = Distribution::Bernoulli;
  p.a = prob;
  return randomFill(self, p, gen);
}

std::tuple<at::Tensor, at::Tensor> nativeDropout(const at::Tensor& input, double prob, std::optional<bool> train) {
  TORCH_CHECK(0 <= prob && prob <= 1, "dropout probability has to be between 0 and 1, but got ", prob);
  if (input.numel() == 0 || (train.has_value() && !*train) || prob == 0) {
    return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  }
  at::Tensor mask = at::empty(input.sizes(), input.options().dtype(at::kBool));
  const double scale = prob == 1 ? 0.0 : 1.0 / (1.0 - prob);
  if (!input.is_contiguous() || !at::isFloatingType(input.scalar_type()) ||
      toKernelDType(input.scalar_type()) == DType::Other) {  // the composition (ATen's own)
    bernoulliFloat(mask, 1.0 - prob, std::nullopt);
    return {at::mul(at::mul(input, mask), scale), mask};
  }
  // Note [Fused dropout]: one pass, the same mask and values as the composition above
  at::Tensor out = at::empty_like(input, at::MemoryFormat::Contiguous);
  DropoutArgs d;
  d.in = input.const_data_ptr();
  d.out = out.data_ptr();
  d.mask = mask.data_ptr<bool>();
  d.dtype = toKernelDType(input.scalar_type());
  d.numel = input.numel();
  d.keep = 1.0 - prob;
  d.scale = scale;
  c10::DeviceGuard guard(input.device());
  std::tie(d.seed, d.offset) = philoxCall(input.device(), std::nullopt);
  MT_RT_CHECK(kernels::dropout(d, streamFor(input)));
  return {out, mask};
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "uniform_", uniformInplace);
  MT_IMPL(m, "normal_", normalInplace);
  MT_IMPL(m, "random_.from", randomFrom);
  MT_IMPL(m, "random_.to", randomTo);
  MT_IMPL(m, "random_", randomInplace);
  MT_IMPL(m, "bernoulli_.float", bernoulliFloat);
  MT_IMPL(m, "exponential_", exponentialInplace);
  MT_IMPL(m, "native_dropout", nativeDropout);
}

} // namespace mytorch
