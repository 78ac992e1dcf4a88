// The functional and in-place overloads of the pointwise table's Table rows (Note [Elementwise fast path] in
// Pointwise.h): a call whose result is evident runs on the engine directly; any other runs ATen's structured kernel
// for PrivateUse1 (at::compositeexplicitautogradnonfunctional::<op>: the meta function, then the row's out= glue),
// as it did before these were registered. A row whose op has no structured functional or in-place kernel registers
// neither here.
#include <ATen/CompositeExplicitAutogradNonFunctionalFunctions.h>
#include <torch/library.h>

#include <type_traits>
#include <utility>

#include "csrc/aten/glue/Pointwise.h"
#include "csrc/core/Checked.h"

namespace mytorch {
struct NoStructuredKernel {};
} // namespace mytorch

// Declared and never defined: a call that finds no structured kernel of the row's name resolves to these and the row
// registers nothing (Fast<..>::kFn/kIp); where ATen has the kernel, it is a non-template exact match and overload
// resolution prefers it.
namespace at::compositeexplicitautogradnonfunctional {
#define MT_POINTWISE(name, arity, dtypes, result, group, glue, aten, overload, foreach) \
  template <typename... T>                                                              \
  ::mytorch::NoStructuredKernel aten(T&&...);                                           \
  template <typename... T>                                                              \
  ::mytorch::NoStructuredKernel aten##_(T&&...);
#include "mytorch/tables/pointwise.def"
#undef MT_POINTWISE
} // namespace at::compositeexplicitautogradnonfunctional

namespace mytorch {
namespace {

using at::Tensor;

// Fn: the row's structured functional kernel (Calls::fn) and in-place kernel (Calls::ip); arity 1 or 2.
template <EwOp op, int arity, typename Calls>
struct Fast {
  static constexpr bool kFn =
      arity == 1
          ? std::is_same_v<decltype(Calls::fn(std::declval<const Tensor&>())), Tensor>
          : std::is_same_v<decltype(Calls::fn(std::declval<const Tensor&>(), std::declval<const Tensor&>())), Tensor>;
  static constexpr bool kIp =
      arity == 1 ? std::is_same_v<decltype(Calls::ip(std::declval<Tensor&>())), Tensor&>
                 : std::is_same_v<decltype(Calls::ip(std::declval<Tensor&>(), std::declval<const Tensor&>())), Tensor&>;

  static Tensor fn1(const Tensor& self) {
    Tensor r = ewFast(op, {self});
    return r.defined() ? r : Calls::fn(self);
  }
  static Tensor fn2(const Tensor& self, const Tensor& other) {
    Tensor r = ewFast(op, {self, other});
    return r.defined() ? r : Calls::fn(self, other);
  }
  static Tensor& ip1(Tensor& self) { return ewFastInplace(op, self, {self}) ? self : Calls::ip(self); }
  static Tensor& ip2(Tensor& self, const Tensor& other) {
    return ewFastInplace(op, self, {self, other}) ? self : Calls::ip(self, other);
  }
};

// Calls<row>: the row's structured functional and in-place kernels, by name (a NoStructuredKernel where there is none).
#define MT_POINTWISE(name, arity, dtypes, result, group, glue, aten, overload, foreach)               \
  struct Calls##name {                                                                                \
    template <typename... T>                                                                          \
    static auto fn(T&&... a) -> decltype(at::compositeexplicitautogradnonfunctional::aten(a...)) {    \
      return at::compositeexplicitautogradnonfunctional::aten(a...);                                  \
    }                                                                                                 \
    template <typename... T>                                                                          \
    static auto ip(T&&... a) -> decltype(at::compositeexplicitautogradnonfunctional::aten##_(a...)) { \
      return at::compositeexplicitautogradnonfunctional::aten##_(a...);                               \
    }                                                                                                 \
  };
#include "mytorch/tables/pointwise.def"
#undef MT_POINTWISE

// The overloads a row's out= overload stands beside: sin.out -> sin, sin_; eq.Tensor_out -> eq.Tensor, eq_.Tensor;
// xlogy.OutTensor -> xlogy.Tensor, xlogy_.Tensor. Rows of other out= overloads (the backward rows' grad_input,
// pow.Tensor_Tensor_out) have no in-place overload, and their functional one is registered by their own glue or not at
// all.
#define MT_FAST_out(name, arity, aten) MT_FAST_ROW(name, arity, aten, #aten, #aten "_")
#define MT_FAST_Tensor_out(name, arity, aten) MT_FAST_ROW(name, arity, aten, #aten ".Tensor", #aten "_.Tensor")
#define MT_FAST_OutTensor(name, arity, aten) MT_FAST_ROW(name, arity, aten, #aten ".Tensor", #aten "_.Tensor")
#define MT_FAST_grad_input(name, arity, aten)
#define MT_FAST_Tensor_Tensor_out(name, arity, aten)
#define MT_FAST_ROW(name, arity, aten, fname, iname) \
  registerRow<EwOp::name, arity, Calls##name, checked::policyFor(fname), checked::policyFor(iname)>(m, fname, iname);
#define MT_REGISTER_Hand(name, arity, aten, overload)
#define MT_REGISTER_Op(name, arity, aten, overload)
#define MT_REGISTER_Table(name, arity, aten, overload) MT_FAST_##overload(name, arity, aten)

template <EwOp op, int arity, typename Calls, int kFnPolicy, int kIpPolicy>
void registerRow(torch::Library& m, const char* fname, const char* iname) {
  using Row = Fast<op, arity, Calls>;
  if constexpr (Row::kFn) {
    if constexpr (arity == 1) MT_IMPL_POLICY(m, fname, Row::fn1, kFnPolicy);
    else MT_IMPL_POLICY(m, fname, Row::fn2, kFnPolicy);
  }
  if constexpr (Row::kIp) {
    if constexpr (arity == 1) MT_IMPL_POLICY(m, iname, Row::ip1, kIpPolicy);
    else MT_IMPL_POLICY(m, iname, Row::ip2, kIpPolicy);
  }
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
#define MT_POINTWISE(name, arity, dtypes, result, group, glue, aten, overload, foreach) \
  MT_REGISTER_##glue(name, arity, aten, overload)
#include "mytorch/tables/pointwise.def"
#undef MT_POINTWISE
}

} // namespace mytorch
