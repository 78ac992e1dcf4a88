// sim softmax: the line functions of Note [Softmax family] in a loop.
#include "mytorch/softmax.h"

namespace mytorch::sim {
namespace {

template <typename I, typename O>
void run(const SoftmaxArgs& s) {
  using A = ew::opmath_t<I>;
  const int64_t lines = s.outer * s.inner;
  for (int64_t l = 0; l < lines; ++l) {
    if (s.backward) smx::backward_line<I, O, A>(s, l);
    else smx::forward_line<I, O, A>(s, l);
  }
}

} // namespace

rt::Status softmax(const SoftmaxArgs& s, rt::Stream) {
  if (s.outer * s.inner == 0 || s.dim == 0) return rt::Status::Success;
  bool ok = false;
  dispatch_floating(s.in_dtype, [&](auto in_tag) {
    using I = decltype(in_tag);
    ok = dispatch_floating(s.out_dtype, [&](auto out_tag) { run<I, decltype(out_tag)>(s); });
  });
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "softmax: expected floating dtypes");
}

} // namespace mytorch::sim
