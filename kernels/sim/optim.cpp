// sim multi-tensor ops (Note [Multi-tensor apply]): the element functions in loops over each tensor.
#include "mytorch/optim.h"

namespace mytorch {

bool multi_tensor_supported(EwOp op, DType t) {
  if (t != DType::Half && t != DType::BFloat16 && t != DType::Float && t != DType::Double) return false;
  return ew_foreach(op);
}

namespace sim {
namespace {

template <typename T>
void run_elementwise(const MultiTensorArgs& a) {
  ew_visit(
      a.op,
      [&](auto op) {
        if constexpr (ew_foreach(decltype(op)::value)) {
          for (int64_t t = 0; t < a.ntensors; ++t)
            for (int64_t i = 0; i < a.tensors[t].numel; ++i)
              mt::elementwise<decltype(op)::value, T>(a, a.tensors[t], i);
        }
      },
      [] {});
}

template <typename T>
void run(const MultiTensorArgs& a) {
  if (a.kind == MtKind::Elementwise) return run_elementwise<T>(a);
  if ((a.kind == MtKind::Adam || a.kind == MtKind::AdamW || a.kind == MtKind::Sgd) && a.found_inf &&
      *a.found_inf != 0.0f)
    return;
  for (int64_t t = 0; t < a.ntensors; ++t) {
    const MtTensor& m = a.tensors[t];
    switch (a.kind) {
      case MtKind::Fill:
        for (int64_t i = 0; i < m.numel; ++i) static_cast<T*>(m.ptr[0])[i] = static_cast<T>(m.scalar);
        break;
      case MtKind::Copy:
        dispatch_floating(a.out_dtype, [&](auto tag) {
          using O = decltype(tag);
          for (int64_t i = 0; i < m.numel; ++i)
            static_cast<O*>(m.ptr[0])[i] = mt_cast<O>(static_cast<const T*>(m.ptr[1])[i]);
        });
        break;
      case MtKind::Norm: {
        // Partials of kMtChunk elements combined in order: the same grouping as the cuda kernels.
        double acc = 0;
        for (int64_t c = 0; c < mt_chunks(m.numel); ++c) {
          double part = 0;
          const int64_t end = (c + 1) * kMtChunk < m.numel ? (c + 1) * kMtChunk : m.numel;
          for (int64_t i = c * kMtChunk; i < end; ++i) part = mt::norm_push(part, mt::load<T>(m.ptr[1], i), a.ord);
          acc = mt::norm_combine(acc, part, a.ord);
        }
        const double r = mt::norm_finish(acc, a.ord);
        dispatch_floating(a.out_dtype,
                          [&](auto tag) { static_cast<decltype(tag)*>(m.ptr[0])[0] = mt_cast<decltype(tag)>(r); });
        break;
      }
      case MtKind::Adam:
      case MtKind::AdamW: {
        if (m.numel == 0) break;
        const auto k = mt::adam_consts<T>(a, m);
        for (int64_t i = 0; i < m.numel; ++i) mt::adam<T>(a, m, i, a.kind == MtKind::AdamW, k);
        break;
      }
      case MtKind::Sgd:
        for (int64_t i = 0; i < m.numel; ++i) mt::sgd<T>(a, m, i);
        break;
      default: break;
    }
  }
}

} // namespace

rt::Status multi_tensor(const MultiTensorArgs& a, rt::Stream) {
  if (a.ntensors == 0) return rt::Status::Success;
  const bool ok = dispatch_floating(a.dtype, [&](auto tag) { run<decltype(tag)>(a); });
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "multi_tensor: expected a floating dtype");
}

} // namespace sim
} // namespace mytorch
