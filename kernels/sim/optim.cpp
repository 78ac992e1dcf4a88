// sim multi-tensor ops (Note [Multi-tensor apply]): the element functions over the tensors of the lists, the
// elements of all tensors split evenly over the threads (Note [Sim parallelism]); norms per kMtChunk chunk, as the
// cuda kernels group them, each chunk's sum in double lanes. Compiled for each ISA variant (Note [Sim ISA variants]): the elementwise ops run on
// opmath blocks (Note [Sim row loops]) and the Adam/AdamW loop branches on values only, so both vectorise.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "mytorch/optim.h"
#include "mytorch/parallel.h"
#include "mytorch/sim_isa.h"
#include "mytorch/sim_vec.h"
#include "mytorch/sim_vmath.h"

namespace mytorch {

#if !defined(MT_SIM_ISA_AVX2)
bool multi_tensor_supported(EwOp op, DType t) {
  if (t != DType::Half && t != DType::BFloat16 && t != DType::Float && t != DType::Double) return false;
  return ew_foreach(op);
}
#endif

namespace sim::MT_SIM_ISA_NS {
namespace {

constexpr int64_t kBlock = 256; // elements per opmath block

// f(tensor, begin, end) over every tensor's elements, the total split evenly over the threads.
template <typename F>
void for_each_segment(const MultiTensorArgs& a, int64_t work_per_element, const F& f) {
  std::vector<int64_t> start(static_cast<size_t>(a.ntensors + 1), 0);
  for (int64_t t = 0; t < a.ntensors; ++t) start[t + 1] = start[t] + a.tensors[t].numel;
  par::parallel_for(start.back(), par::grain_for(work_per_element), [&](int64_t b, int64_t e) {
    int64_t t = std::upper_bound(start.begin(), start.end(), b) - start.begin() - 1;
    for (; t < a.ntensors && start[t] < e; ++t) {
      const int64_t lo = std::max(b, start[t]) - start[t], hi = std::min(e, start[t + 1]) - start[t];
      if (lo < hi) f(a.tensors[t], lo, hi);
    }
  });
}

template <EwOp op, typename T>
void elementwise_segment(const MultiTensorArgs& a, const MtTensor& t, int64_t lo, int64_t hi) {
  using O = ew::opmath_t<T>;
  constexpr bool kInPlace = std::is_same_v<T, O>; // float, double: the lists read and written where they are
  EwParams p = a.p;
  if (a.alpha_per_tensor) p.alpha = t.scalar;
  O buf[3][kBlock], r[kBlock];
  for (int k = a.ninputs; k < 3; ++k) std::fill(buf[k], buf[k] + kBlock, O(0));
  for (int k = 0; k < a.ninputs; ++k)
    if (a.operand[k] != MtOperand::List) std::fill(buf[k], buf[k] + kBlock, mt::operand<T>(a, t, k, 0));
  for (int64_t i = lo; i < hi; i += kBlock) {
    const int64_t m = std::min(kBlock, hi - i);
    const O* in[3] = {buf[0], buf[1], buf[2]};
    for (int k = 0; k < a.ninputs; ++k) {
      if (a.operand[k] != MtOperand::List) continue;
      const T* src = static_cast<const T*>(t.ptr[k + 1]) + i;
      if constexpr (kInPlace) in[k] = src;
      else vec::to_opmath(src, buf[k], m);
    }
    O* out = r;
    if constexpr (kInPlace) out = static_cast<T*>(t.ptr[0]) + i;
    const O* x = in[0];
    const O* y = in[1];
    const O* z = in[2];
    for (int64_t j = 0; j < m; ++j) out[j] = static_cast<O>(ew::apply<op, T>(x[j], y[j], z[j], p));
    if constexpr (!kInPlace) vec::from_opmath(r, static_cast<T*>(t.ptr[0]) + i, m);
  }
}

template <typename T>
void adam_segment(const MultiTensorArgs& args, const MtTensor& t, int64_t lo, int64_t hi, bool adamw) {
  using O = ew::opmath_t<T>;
  const MultiTensorArgs a = args; // a local copy: the compiler need not reload it after every store
  const auto k = mt::adam_consts<T>(a, t);
  if (a.grad_scale || a.amsgrad) {
    for (int64_t i = lo; i < hi; ++i) mt::adam<T>(a, t, i, adamw, k);
    return;
  }
  T* pp = static_cast<T*>(t.ptr[0]);
  const T* gp = static_cast<const T*>(t.ptr[1]);
  T* m1p = static_cast<T*>(t.ptr[2]);
  T* m2p = static_cast<T*>(t.ptr[3]);
  auto step = [&](O* p, const O* g, O* m1, O* m2, int64_t m) {
    for (int64_t j = 0; j < m; ++j) mt::adam_math<O>(a, adamw, k, p[j], g[j], m1[j], m2[j], nullptr);
  };
  if constexpr (std::is_same_v<T, O>) {
    step(pp + lo, gp + lo, m1p + lo, m2p + lo, hi - lo); // in place: no block copies
  } else {
    O p[kBlock], g[kBlock], m1[kBlock], m2[kBlock];
    for (int64_t i = lo; i < hi; i += kBlock) {
      const int64_t m = std::min(kBlock, hi - i);
      vec::to_opmath(pp + i, p, m);
      vec::to_opmath(gp + i, g, m);
      vec::to_opmath(m1p + i, m1, m);
      vec::to_opmath(m2p + i, m2, m);
      step(p, g, m1, m2, m);
      vec::from_opmath(p, pp + i, m);
      vec::from_opmath(m1, m1p + i, m);
      vec::from_opmath(m2, m2p + i, m);
    }
  }
}

// The 1- or 2-norm's sum of |x| or x^2 over n elements, in double in vec::sum_of's lanes (a fixed order for each n,
// so the thread count does not change it); half types converted a block at a time. The inf-norm: one chain.
template <typename T>
double chunk_norm(const T* x, int64_t n, double ord) {
  if (ord != 1 && ord != 2) {
    double acc = 0;
    for (int64_t i = 0; i < n; ++i) acc = mt::norm_push(acc, static_cast<double>(mt_load(x + i)), ord);
    return acc;
  }
  auto sum = [ord](const auto* v, int64_t m) {
    if (ord == 2) return vec::sum_of<double>(m, [v](int64_t i) { return double(v[i]) * double(v[i]); });
    return vec::sum_of<double>(m, [v](int64_t i) { return std::abs(double(v[i])); });
  };
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    return sum(x, n);
  } else {
    float buf[kBlock];
    double acc = 0;
    for (int64_t i = 0; i < n; i += kBlock) {
      const int64_t m = std::min(kBlock, n - i);
      vec::to_opmath(x + i, buf, m);
      acc += sum(static_cast<const float*>(buf), m);
    }
    return acc;
  }
}

template <typename T>
void norms(const MultiTensorArgs& a) {
  std::vector<int64_t> first(static_cast<size_t>(a.ntensors + 1), 0); // each tensor's first chunk
  for (int64_t t = 0; t < a.ntensors; ++t) first[t + 1] = first[t] + mt_chunks(a.tensors[t].numel);
  std::vector<double> part(static_cast<size_t>(first.back()));
  par::parallel_for(first.back(), par::grain_for(kMtChunk), [&](int64_t cb, int64_t ce) {
    int64_t t = std::upper_bound(first.begin(), first.end(), cb) - first.begin() - 1;
    for (int64_t c = cb; c < ce; ++c) {
      while (c >= first[t + 1]) ++t;
      const MtTensor& m = a.tensors[t];
      const int64_t b = (c - first[t]) * kMtChunk, e = std::min(m.numel, b + kMtChunk);
      part[c] = chunk_norm(static_cast<const T*>(m.ptr[1]) + b, e - b, a.ord);
    }
  });
  for (int64_t t = 0; t < a.ntensors; ++t) {
    double acc = 0; // partials combined in chunk order: the same grouping as the cuda kernels
    for (int64_t c = first[t]; c < first[t + 1]; ++c) acc = mt::norm_combine(acc, part[c], a.ord);
    const double r = mt::norm_finish(acc, a.ord);
    dispatch_floating(a.out_dtype, [&](auto tag) {
      static_cast<decltype(tag)*>(a.tensors[t].ptr[0])[0] = mt_cast<decltype(tag)>(r);
    });
  }
}

template <typename T>
void run(const MultiTensorArgs& a) {
  switch (a.kind) {
    case MtKind::Elementwise:
      ew_visit(
          a.op,
          [&](auto op) {
            if constexpr (ew_foreach(decltype(op)::value)) {
              for_each_segment(a, 4, [&](const MtTensor& t, int64_t lo, int64_t hi) {
                elementwise_segment<decltype(op)::value, T>(a, t, lo, hi);
              });
            }
          },
          [] {});
      return;
    case MtKind::Norm: return norms<T>(a);
    case MtKind::Fill:
      for_each_segment(a, 1, [&](const MtTensor& m, int64_t lo, int64_t hi) {
        std::fill(static_cast<T*>(m.ptr[0]) + lo, static_cast<T*>(m.ptr[0]) + hi, static_cast<T>(m.scalar));
      });
      return;
    case MtKind::Copy:
      dispatch_floating(a.out_dtype, [&](auto tag) {
        using O = decltype(tag);
        for_each_segment(a, 1, [&](const MtTensor& m, int64_t lo, int64_t hi) {
          for (int64_t i = lo; i < hi; ++i)
            static_cast<O*>(m.ptr[0])[i] = mt_cast<O>(static_cast<const T*>(m.ptr[1])[i]);
        });
      });
      return;
    default: break;
  }
  if (a.found_inf && *a.found_inf != 0.0f) return; // Adam, AdamW, SGD skip the step
  if (a.kind == MtKind::Adam || a.kind == MtKind::AdamW) {
    for_each_segment(a, 16, [&](const MtTensor& m, int64_t lo, int64_t hi) {
      if (m.numel) adam_segment<T>(a, m, lo, hi, a.kind == MtKind::AdamW);
    });
  } else if (a.kind == MtKind::Sgd) {
    for_each_segment(a, 8, [&](const MtTensor& m, int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) mt::sgd<T>(a, m, i);
    });
  }
}

} // namespace

MT_SIM_ENTRY rt::Status multi_tensor(const MultiTensorArgs& a, rt::Stream) {
  if (a.ntensors == 0) return rt::Status::Success;
  const bool ok = dispatch_floating(a.dtype, [&](auto tag) { run<decltype(tag)>(a); });
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "multi_tensor: expected a floating dtype");
}

} // namespace sim::MT_SIM_ISA_NS

#if !defined(MT_SIM_ISA_AVX2)
namespace sim {
MT_SIM_DISPATCH(rt::Status, multi_tensor, (const MultiTensorArgs& a, rt::Stream s), (a, s))
} // namespace sim
#endif

} // namespace mytorch
