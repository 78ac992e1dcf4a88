// The per-device Philox generator of the mytorch device (state: seed and offset, 16 bytes).
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

#include <utility>

namespace mytorch {

class MytorchGeneratorImpl : public c10::GeneratorImpl {
 public:
  explicit MytorchGeneratorImpl(c10::DeviceIndex device, uint64_t seed = c10::default_rng_seed_val);

  void set_current_seed(uint64_t seed) override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

  // (seed, offset) for one kernel launch drawing `elements` elements; advances the offset by that count rounded
  // up to 4 (Note [Philox layout]). Caller holds mutex_.
  std::pair<uint64_t, uint64_t> philoxStep(uint64_t elements);

 private:
  MytorchGeneratorImpl* clone_impl() const override;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

const at::Generator& defaultGenerator(c10::DeviceIndex device = -1);
at::Generator newGenerator(c10::DeviceIndex device = -1);

} // namespace mytorch
