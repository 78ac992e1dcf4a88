// Op table: in-place random fills driven by the device's Philox generator, native_dropout (so that dropout masks
// come from the mytorch generator and are reproducible for a seed) and randperm (Note [Random permutation]).
#include <ATen/core/DistributionsHelper.h>
#include <ATen/native/DistributionTemplates.h>
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

#include "csrc/core/Graph.h"
#include "csrc/core/Checked.h"
#include "csrc/aten/glue/Glue.h"
#include "csrc/core/Generator.h"
#include "csrc/core/Runtime.h"
#include "csrc/core/Stream.h"
#include "mytorch/random.h"
#include "mytorch/randperm.h"

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

// The (seed, offset) of one call of `elements` elements on `device`'s generator (or gen), advancing its offset
// (Note [Philox layout]).
std::pair<uint64_t, uint64_t> philoxCall(const c10::Device& device, const std::optional<at::Generator>& gen,
                                         int64_t elements) {
  auto* g = at::get_generator_or_default<MytorchGeneratorImpl>(gen, defaultGenerator(device.index()));
  std::lock_guard<std::mutex> lock(g->mutex_);
  return g->philoxStep(static_cast<uint64_t>(elements));
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
  std::tie(p.seed, p.offset) = philoxCall(self.device(), gen, self.numel());
  p.philox_dev = capturedPhiloxState();
  at::Tensor target = self.is_contiguous() ? self : at::empty(self.sizes(), self.options());
  p.data = target.data_ptr();
  p.dtype = toKernelDType(self.scalar_type());
  p.numel = self.numel();
  MT_RT_CHECK(kernels::random(p, streamFor(self)));
  if (!target.is_same(self)) self.copy_(target);
  return self;
}

// Note [ATen's random checks]
// The fills go through ATen's own templates (ATen/native/DistributionTemplates.h), as the CPU's and CUDA's kernels do:
// they check the arguments (ranges of the dtype, from < to, std >= 0, p in [0, 1], ...), warn where a floating
// dtype cannot hold random_'s range exactly, move a floating random_ range to values the dtype holds
// (update_from / update_to), clamp uniform_'s bounds, treat complex tensors as their real view and return early on
// empty ones, all with ATen's messages and in ATen's order. Only the kernel they end in is mytorch's: the functors
// below, which the templates call with the TensorIterator they built (its operand 0 is the tensor to fill). A dtype
// the CPU has no kernel for raises the CPU kernel's NotImplementedError (the dispatch macros' message).
struct NoRng {};

at::Tensor filled(const at::TensorIteratorBase& iter) { return iter.tensor(0); }

at::Tensor& integerFill(at::Tensor& self, int64_t low, uint64_t range, const std::optional<at::Generator>& gen) {
  RandomArgs p;
  p.dist = Distribution::Integer;
  p.low = low;
  p.range = range; // 0 means the full 64-bit range
  return randomFill(self, p, gen);
}

template <typename RNG>
struct UniformKernel {
  void operator()(at::TensorIteratorBase& iter, double from, double to, std::optional<at::Generator> gen) {
    at::Tensor self = filled(iter);
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, self.scalar_type(), "uniform_kernel_cpu", [] {});
    RandomArgs p;
    p.dist = Distribution::Uniform;
    p.a = from;
    p.b = to;
    randomFill(self, p, gen);
  }
};

template <typename RNG>
struct NormalKernel {
  void operator()(const at::TensorBase& base, double mean, double std, std::optional<at::Generator> gen) {
    at::Tensor self(base);
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, self.scalar_type(), "normal_kernel_cpu", [] {});
    RandomArgs p;
    p.dist = Distribution::Normal;
    p.a = mean;
    p.b = std;
    randomFill(self, p, gen);
  }
};

template <typename RNG>
struct ExponentialKernel {
  void operator()(at::TensorIteratorBase& iter, double lambda, std::optional<at::Generator> gen) {
    at::Tensor self = filled(iter);
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, self.scalar_type(), "exponential_cpu", [] {});
    RandomArgs p;
    p.dist = Distribution::Exponential;
    p.a = lambda;
    randomFill(self, p, gen);
  }
};

template <typename RNG>
struct RandomFromToKernel {
  // [base, base + range): range 0 is the full 64-bit range
  void operator()(at::TensorIteratorBase& iter, uint64_t range, int64_t base, std::optional<at::Generator> gen) {
    at::Tensor self = filled(iter);
    integerFill(self, base, range, gen);
  }
  // [int64 lowest, int64 max]
  void operator()(at::TensorIteratorBase& iter, std::optional<at::Generator> gen) {
    at::Tensor self = filled(iter);
    integerFill(self, std::numeric_limits<int64_t>::lowest(), 0, gen);
  }
};

template <typename RNG>
struct BernoulliScalarKernel {
  void operator()(const at::TensorBase& base, double prob, std::optional<at::Generator> gen) {
    at::Tensor self(base);
    RandomArgs p;
    p.dist = Distribution::Bernoulli;
    p.a = prob;
    randomFill(self, p, gen);
  }
};

at::Tensor& uniformInplace(at::Tensor& self, double from, double to, std::optional<at::Generator> gen) {
  return at::native::templates::uniform_impl_<UniformKernel, NoRng>(self, from, to, gen);
}

at::Tensor& normalInplace(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  return at::native::templates::normal_impl_<NormalKernel, NoRng>(self, mean, std, gen);
}

at::Tensor& exponentialInplace(at::Tensor& self, double lambd, std::optional<at::Generator> gen) {
  return at::native::templates::exponential_impl_<ExponentialKernel, NoRng>(self, lambd, gen);
}

at::Tensor& randomFrom(at::Tensor& self, int64_t from, std::optional<int64_t> to, std::optional<at::Generator> gen) {
  return at::native::templates::random_from_to_impl<RandomFromToKernel, NoRng>(self, from, to, gen);
}

at::Tensor& randomTo(at::Tensor& self, int64_t to, std::optional<at::Generator> gen) {
  return randomFrom(self, 0, to, gen);
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

at::Tensor& randomInplace(at::Tensor& self, std::optional<at::Generator> gen) {
  if (self.numel() == 0) return self;
  if (self.scalar_type() == at::kUInt64) return integerFill(self, 0, 0, gen); // all 64 bits
  return integerFill(self, 0, static_cast<uint64_t>(randomMax(self.scalar_type())) + 1, gen);
}

at::Tensor& bernoulliFloat(at::Tensor& self, double prob, std::optional<at::Generator> gen) {
  return at::native::templates::bernoulli_impl_<BernoulliScalarKernel, NoRng>(self, prob, gen);
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
  std::tie(d.seed, d.offset) = philoxCall(input.device(), std::nullopt, input.numel());
  d.philox_dev = capturedPhiloxState();
  MT_RT_CHECK(kernels::dropout(d, streamFor(input)));
  return {out, mask};
}

// Note [Random permutation]: the generator advances by n, as for a fill of n elements; any out= dtype takes the
// int64 permutation through a copy, as the CPU's randperm writes its dtype.
at::Tensor& randpermOut(int64_t n, std::optional<at::Generator> gen, at::Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be non-negative, got", n);
  out.resize_({n});  // as the CPU's randperm: resized without resize_output's warning
  if (n == 0) return out;
  const bool direct = out.scalar_type() == at::kLong && out.is_contiguous();
  at::Tensor perm = direct ? out : at::empty({n}, out.options().dtype(at::kLong));
  RandpermArgs a;
  a.out = perm.data_ptr<int64_t>();
  a.n = n;
  // the cuda launcher's bucket ids and sort (randperm_workspace_bytes); the sim needs none
  const at::Tensor scratch = kernelWorkspace(onSim() ? 0 : randperm_workspace_bytes(n), out);
  a.scratch = dataOrNull(scratch);
  c10::DeviceGuard guard(out.device());
  std::tie(a.seed, a.offset) = philoxCall(out.device(), gen, n);
  a.philox_dev = capturedPhiloxState();
  MT_RT_CHECK(kernels::randperm(a, streamFor(out)));
  if (!direct) out.copy_(perm);
  return out;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "randperm.generator_out", randpermOut);
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
