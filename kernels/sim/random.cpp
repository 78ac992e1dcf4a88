// Sim twin of cuda/random.cu.
#include "mytorch/random.h"

namespace mytorch::sim {

rt::Status random(const RandomParams& p, rt::Stream) {
  if (p.dtype == DType::ComplexFloat || p.dtype == DType::ComplexDouble) {
    return rt::report(rt::Status::InvalidValue, "random: complex outputs are not supported by the kernel");
  }
  bool ok = dispatch_dtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!is_complex_t<T>::value) {
      T* out = static_cast<T*>(p.data);
      for (int64_t i = 0; i < p.numel; ++i) out[i] = random_element<T>(p, i);
    }
  });
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "random: unsupported element type");
}

} // namespace mytorch::sim
