// See Generator.h. The random kernels (kernels/include/mytorch/random.h) consume (seed, offset).
#include "csrc/core/Generator.h"

#include <ATen/core/GeneratorForPrivateuseone.h>
#include <ATen/ops/empty.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <deque>
#include <mutex>

#include "csrc/core/Graph.h"
#include "csrc/core/Stream.h"
#include "mytorch/once.h"
#include "mytorch/runtime.h"

namespace mytorch {

constexpr size_t kStateBytes = 2 * sizeof(uint64_t);

MytorchGeneratorImpl::MytorchGeneratorImpl(c10::DeviceIndex device, uint64_t seed)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      seed_(seed) {}

void MytorchGeneratorImpl::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}
uint64_t MytorchGeneratorImpl::current_seed() const { return seed_; }
uint64_t MytorchGeneratorImpl::seed() {
  uint64_t s = c10::detail::getNonDeterministicRandom();
  set_current_seed(s);
  return s;
}
void MytorchGeneratorImpl::set_offset(uint64_t offset) { offset_ = offset; }
uint64_t MytorchGeneratorImpl::get_offset() const { return offset_; }

void MytorchGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  TORCH_CHECK(new_state.dtype() == caffe2::TypeMeta::Make<uint8_t>() && new_state.device().is_cpu(),
              "mytorch generator state must be a CPU torch.uint8 tensor, but got a ", new_state.dtype(), " tensor on ",
              new_state.device());
  TORCH_CHECK(static_cast<size_t>(new_state.numel()) == kStateBytes, "mytorch generator state must have ", kStateBytes,
              " bytes (seed, offset), but got ", new_state.numel());
  uint64_t v[2];
  std::memcpy(v, new_state.data(), kStateBytes);
  seed_ = v[0];
  offset_ = v[1];
}

c10::intrusive_ptr<c10::TensorImpl> MytorchGeneratorImpl::get_state() const {
  auto t = at::empty({static_cast<int64_t>(kStateBytes)}, at::TensorOptions().dtype(at::kByte));
  uint64_t v[2] = {seed_, offset_};
  std::memcpy(t.data_ptr(), v, kStateBytes);
  return t.getIntrusivePtr();
}

std::pair<uint64_t, uint64_t> MytorchGeneratorImpl::philoxStep(uint64_t elements) {
  const uint64_t step = (elements + 3) / 4 * 4;
  uint64_t captured = 0;  // during a graph capture: resolved per replay (Note [Random numbers in a captured graph])
  if (capturedPhiloxOffset(this, step, &captured)) return {seed_, captured};
  const uint64_t at = offset_;
  offset_ += step;
  return {seed_, at};
}

MytorchGeneratorImpl* MytorchGeneratorImpl::clone_impl() const {
  auto* g = new MytorchGeneratorImpl(device().index(), seed_);
  g->offset_ = offset_;
  return g;
}

const at::Generator& defaultGenerator(c10::DeviceIndex device) {
  static Once once;  // Note [Once, cheaply]
  static std::deque<at::Generator> gens;
  once([] {
    for (int i = 0; i < rt::device_count(); ++i) {
      gens.push_back(at::make_generator<MytorchGeneratorImpl>(static_cast<c10::DeviceIndex>(i)));
    }
  });
  device = resolveDevice(device);
  return gens[static_cast<size_t>(device)];
}

at::Generator newGenerator(c10::DeviceIndex device) {
  return at::make_generator<MytorchGeneratorImpl>(resolveDevice(device));
}

} // namespace mytorch
