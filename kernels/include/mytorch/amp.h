// Mixed-precision family: the two ops torch.amp.GradScaler needs on the device, reading and writing the
// scale, the growth tracker and found_inf in device memory (no host round trip, as on CUDA).
#pragma once

#include <cstdint>

#include "mytorch/dtype.h"
#include "mytorch/macros.h"
#include "mytorch/launch.h"

namespace mytorch {

// Up to kMaxUnscaleTensors tensors of one dtype in one launch (the cuda kernel takes them all: a block row per
// tensor, grid-stride within it), each a dense run of numel[i] elements.
constexpr int kMaxUnscaleTensors = 64;
struct UnscaleArgs {
  int count = 0;
  void* data[kMaxUnscaleTensors] = {};
  int64_t numel[kMaxUnscaleTensors] = {};
  DType dtype = DType::Float;     // floating
  const float* inv_scale = nullptr;
  float* found_inf = nullptr;     // set to 1.0 when any element is not finite
};

struct UpdateScaleArgs {
  float* scale = nullptr;
  int32_t* growth_tracker = nullptr;
  const float* found_inf = nullptr;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

// One step of GradScaler's scale update, with ATen's semantics (shared by both runtimes).
MT_HOST_DEVICE inline void update_scale_step(const UpdateScaleArgs& p) {
  if (*p.found_inf != 0.0f) {
    *p.scale = static_cast<float>(*p.scale * p.backoff_factor);
    *p.growth_tracker = 0;
  } else {
    const int32_t successful = *p.growth_tracker + 1;
    if (successful == p.growth_interval) {
      const float grown = static_cast<float>(*p.scale * p.growth_factor);
      if (grown == grown && grown - grown == 0.0f) *p.scale = grown; // finite
      *p.growth_tracker = 0;
    } else {
      *p.growth_tracker = successful;
    }
  }
}

MT_LAUNCHER(non_finite_check_and_unscale, (const UnscaleArgs& p, rt::Stream stream), (p, stream))
MT_LAUNCHER(update_scale, (const UpdateScaleArgs& p, rt::Stream stream), (p, stream))

} // namespace mytorch
