// Sim twin of cuda/index.cu (Note [Index engine]).
#include "mytorch/index.h"

#include <cstring>
#include <string>

#include "mytorch/ops_math.h"

namespace mytorch::sim {
namespace {

rt::Status out_of_bounds(const IndexArgs& a, int64_t v) {
  if (a.error_value) *a.error_value = v;
  if (a.error_flag) *a.error_flag = 1;
  return rt::Status::Success;  // the glue reads the flag and raises IndexError with the value
}

template <typename T>
void combine(T* dst, T v, ScatterOp op) {
  using O = ew::opmath_t<T>;
  switch (op) {
    case ScatterOp::Assign: *dst = v; break;
    case ScatterOp::Add: *dst = static_cast<T>(static_cast<O>(*dst) + static_cast<O>(v)); break;
    case ScatterOp::Mul: *dst = static_cast<T>(static_cast<O>(*dst) * static_cast<O>(v)); break;
    case ScatterOp::Max:
      *dst = ew::apply<EwOp::Maximum, T>(static_cast<O>(*dst), static_cast<O>(v), O(0), EwParams{});
      break;
    case ScatterOp::Min:
      *dst = ew::apply<EwOp::Minimum, T>(static_cast<O>(*dst), static_cast<O>(v), O(0), EwParams{});
      break;
  }
}

} // namespace

rt::Status gather(const IndexArgs& a, rt::Stream) {
  const char* src = static_cast<const char*>(a.target);
  char* out = static_cast<char*>(a.other);
  const int64_t es = a.elem_size;
  for (int64_t o = 0; o < a.numel; ++o) {
    int64_t t = 0, u = 0, bad = 0;
    if (!index_offsets(a, o, &t, &u, &bad)) return out_of_bounds(a, bad);
    std::memcpy(out + u * es, src + t * es, static_cast<size_t>(es));
  }
  return rt::Status::Success;
}

rt::Status scatter(const IndexArgs& a, rt::Stream) {
  bool ok = dispatch_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!is_complex_t<T>::value) {
      T* dst = static_cast<T*>(a.target);
      const T* src = static_cast<const T*>(a.other);
      T scalar;
      std::memcpy(&scalar, a.scalar, sizeof(T));
      for (int64_t o = 0; o < a.numel; ++o) {
        int64_t t = 0, u = 0, bad = 0;
        if (!index_offsets(a, o, &t, &u, &bad)) {
          out_of_bounds(a, bad);
          return;
        }
        combine<T>(dst + t, a.src_is_scalar ? scalar : src[u], a.op);
      }
    }
  });
  if (ok && (a.dtype == DType::ComplexFloat || a.dtype == DType::ComplexDouble))
    ok = false;  // Note [Complex index writes]
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "scatter: unsupported dtype");
}

} // namespace mytorch::sim
