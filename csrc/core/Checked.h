// The one check path of mytorch's native kernels: every `MT_IMPL(m, "op", fn)` registration calls `fn`
// through Checked<fn>, which checks what ATen's generated CUDA wrappers and its kernels' common helpers check.
//
// Note [One check path for native ops]
// A kernel registered for PrivateUse1 is called with whatever the user passed; the checks CUDA users rely on
// live in code that never runs for us (the generated RegisterCUDA wrappers, structured meta functions,
// TensorIterator). Before this, tensors on the CPU or on another mytorch device reached device kernels,
// expanded outputs were written through their zero strides, and non-contiguous outputs were written as if
// contiguous. Checked<fn> reads the C++ signature of the kernel and, before calling it:
//  - device: every tensor argument (lists and optionals included) must be on one device, unless
//    native_functions.yaml says the operator does its own (device_check: NoCheck; TensorIterator ops, which
//    take CPU scalars); the list is generated from the installed torch (scripts/gen_device_checks.py);
//  - overlap: a written tensor (`at::Tensor&`: the in-place self, or an out=) must not have elements that
//    share memory (at::assert_no_internal_overlap; for an out=, once the kernel has kept or resized it, as ATen's
//    structured kernels check it), nor partly overlap any input (at::assert_no_partial_overlap); ATen's messages;
//  - strided out=: an out= that is not contiguous (or whose elements share memory) is computed into a contiguous
//    tensor of its sizes and copied into it through its strides (Note [Strided out=] in Checked.cpp), so kernels
//    only ever write contiguous outputs and an out= of the right size keeps its sizes and strides, as on the CPU.
// Views and metadata ops (resize_, set_, as_strided, ...) skip the overlap and out= steps.
#pragma once

#include <ATen/core/IListRef.h>
#include <ATen/core/List.h>
#include <ATen/core/Tensor.h>
#include <c10/util/MaybeOwned.h>
#include <c10/util/SmallVector.h>
#include <torch/library.h>

#include <iterator>
#include <optional>
#include <initializer_list>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "mytorch/device_checks.h"

namespace mytorch::checked {

enum : int {
  kDevice = 1,
  kOverlap = 2,
  kStridedOut = 4,
  kSelfMayOverlap = 8,
  kOutOverlapFirst = 16,
  kStridedOutDirect = 32
};

constexpr bool inList(std::string_view name) {
  for (std::string_view n : generated::kNoDeviceCheck) {
    if (n == name) return true;
  }
  return false;
}

constexpr bool metadataOp(std::string_view name) {
  constexpr std::string_view ops[] = {"resize_",
                                      "resize_as_",
                                      "set_",
                                      "set_.source_Storage",
                                      "set_.source_Tensor",
                                      "set_.source_Storage_storage_offset",
                                      "as_strided",
                                      "as_strided_",
                                      "view",
                                      "_reshape_alias",
                                      "unfold",
                                      "is_set_to",
                                      "alias",
                                      "_unsafe_view",
                                      "_local_scalar_dense",
                                      "view.dtype"};
  for (std::string_view n : ops) {
    if (n == name) return true;
  }
  return false;
}

// Ops that relate tensors on different devices by design (a type query, a storage swap).
constexpr bool crossDeviceOp(std::string_view name) {
  return name == "_has_compatible_shallow_copy_type" || name == "set_" || name == "set_.source_Tensor";
}

// In-place ops whose self ATen lets share memory between its elements, or checks itself in its own order: the fills
// write one value everywhere (ATen's fill_ builds its TensorIterator without the overlap check), and the random fills
// go through ATen's templates (Note [ATen's random checks]), whose TensorIterator refuses an overlapping self after
// the dtype's own checks, as the CPU's kernels do.
constexpr bool selfMayOverlap(std::string_view name) {
  constexpr std::string_view ops[] = {"fill_.Scalar", "fill_.Tensor", "zero_",   "uniform_",         "normal_",
                                      "random_.from", "random_.to",   "random_", "bernoulli_.float", "exponential_"};
  for (std::string_view op : ops) {
    if (op == name) return true;
  }
  return false;
}

// Out= ops whose ATen kernel refuses an out= with elements sharing memory before it resizes it (index_select, on
// the CPU and CUDA); the others resize it first, which gives it a layout of its own (Note [Strided out=]).
constexpr bool outOverlapCheckedFirst(std::string_view name) { return name == "index_select.out"; }

// In-place index writes that ATen lets write an expanded self with a deprecation warning (TensorAdvancedIndexing.cpp)
// where the other in-place ops refuse it: the name the warning gives and its indexing example.
struct ExpandedSelfWarning {
  std::string_view op;
  const char* shown;
  const char* example;
};
inline constexpr ExpandedSelfWarning kExpandedSelfWarnings[] = {
    {"index_fill_.int_Scalar", "index_fill_", "tensor[mask] = scalar"},
    {"index_fill_.int_Tensor", "index_fill_", "tensor[mask] = scalar"},
    {"masked_fill_.Scalar", "masked_fill_", "tensor[mask] = scalar"},
    {"masked_fill_.Tensor", "masked_fill_", "tensor[mask] = scalar"},
    {"_index_put_impl_", "index_put_", "tensor[indices] = tensor"}};
constexpr int kWarnShift = 8;  // policy bits from here: 1 + the op's row in kExpandedSelfWarnings

constexpr int expandedSelfWarning(std::string_view name) {
  for (size_t i = 0; i < std::size(kExpandedSelfWarnings); ++i) {
    if (kExpandedSelfWarnings[i].op == name) return static_cast<int>(i + 1) << kWarnShift;
  }
  return 0;
}
// Warns as ATen does when self has elements that share memory (row: the op's row in kExpandedSelfWarnings).
void warnIfExpanded(const at::Tensor& self, int row);

// fill_(Tensor) and index_fill_(Tensor) may take their value from self: ATen's read it first (fill_ from a clone,
// index_fill_ through item()), so nothing to refuse; index_fill_ checks its index itself (IndexOps.cpp).
constexpr bool valueMayAliasSelf(std::string_view name) {
  return name == "fill_.Tensor" || name == "index_fill_.int_Tensor";
}

// The out= kernels that write any layout themselves (Note [Strided out=]): the pointwise table's Table rows (their
// glue is csrc/aten/glue/PointwiseTable.cpp: ATen's TensorIterator over out's own strides), and the hand-written
// glue registered with MT_IMPL_ENGINE_OUT, which says at its registration that its out= is written only by the
// engine or the CPU fallback. A non-contiguous out= of theirs whose elements do not share memory is written in
// place (a transposed out= read and written in its own order, Note [Sim strided walks]); one whose elements share
// memory still takes the temporary.
constexpr bool writesStridedOut(std::string_view name) {
#define MT_POINTWISE(row, arity, dtypes, result, group, glue, aten, overload, foreach) \
  if (std::string_view(#glue) == "Table" && name == #aten "." #overload) return true;
#include "mytorch/tables/pointwise.def"
#undef MT_POINTWISE
  return false;
}

constexpr int policyFor(std::string_view name) {
  const int warns = expandedSelfWarning(name);
  return (inList(name) || crossDeviceOp(name) ? 0 : kDevice) |
         (metadataOp(name) || valueMayAliasSelf(name) ? 0 : kOverlap | kStridedOut) |
         (selfMayOverlap(name) || warns ? kSelfMayOverlap : 0) | (outOverlapCheckedFirst(name) ? kOutOverlapFirst : 0) |
         (writesStridedOut(name) ? kStridedOutDirect : 0) | warns;
}

// CUDA's message for tensors on two devices; the fallback raises it too (csrc/core/Fallback.cpp).
[[noreturn]] void deviceMismatch(std::string_view op, const c10::Device& a, const c10::Device& b);

struct Scan {
  bool check_device;
  bool keep_inputs;  // only a call that writes a tensor needs its inputs, for the overlap checks
  const char* op;
  std::optional<c10::Device> common;
  // The first input on a mytorch device: where an op without the full check (device_check: NoCheck) must write its
  // out= (checkOutDevices).
  std::optional<c10::Device> ours;
  // Borrowed where the argument is a reference (no copy: copying a tensor only Python holds takes the GIL, see
  // EwInput), owned where the argument list hands out copies (c10::List).
  c10::SmallVector<c10::MaybeOwned<at::Tensor>, 8> inputs;

  void device(const at::Tensor& t) {
    if (!check_device || !t.defined()) return;
    if (!common.has_value()) {
      common = t.device();
      return;
    }
    if (*common != t.device()) deviceMismatch(op, *common, t.device());
  }
  void note(const at::Tensor& t) {
    if (!check_device && !ours.has_value() && t.device().type() == c10::DeviceType::PrivateUse1) ours = t.device();
  }
  void input(const at::Tensor& t) {
    if (!t.defined()) return;
    device(t);
    note(t);
    if (keep_inputs) inputs.push_back(c10::MaybeOwned<at::Tensor>::borrowed(t));
  }
  void ownedInput(at::Tensor t) {
    if (!t.defined()) return;
    device(t);
    note(t);
    if (keep_inputs) inputs.push_back(c10::MaybeOwned<at::Tensor>::owned(std::move(t)));
  }
};

// Checked.cpp (kept out of this header, which every op file includes).
// `deferred[i]`: written[i] may have elements that share memory here: an out= that the strided-out path takes, until
// the kernel has resized it (Note [Strided out=] in Checked.cpp, which checks it then), or a self of selfMayOverlap.
void checkWritten(const Scan& s, at::Tensor* const* written, const bool* deferred, size_t nwritten);
// The ops whose device check is their own (device_check: NoCheck: TensorIterator's, which lets CPU scalars and, for
// indexing, CPU indices in) still refuse an out= off the inputs' mytorch device, as TensorIterator refuses any output
// off its common device: written[first..n) are the out= tensors.
void checkOutDevices(const Scan& s, at::Tensor* const* written, size_t first, size_t n);
at::Tensor stridedOutTemp(const at::Tensor& out, bool direct = false);  // undefined when `out` needs none
void copyBack(at::Tensor& out, const at::Tensor& temp);
// ATen's resize of an out= whose sizes are not the result's: resized (with resize_output's warning when `warn`),
// then given the result's layout where that is dense, as a structured kernel's resize takes the strides its meta
// function asks for (column-major for the solvers, the transform's for the FFTs). Nothing when the sizes agree: an
// out= of the right sizes keeps its strides.
void resizeOutAs(const at::Tensor& out, const at::Tensor& result, bool warn);

template <typename A>
inline void visitInput(Scan& s, const A& arg) {
  using T = std::decay_t<A>;
  if constexpr (std::is_same_v<T, at::Tensor>) {
    s.input(arg);
  } else if constexpr (std::is_same_v<T, std::optional<at::Tensor>>) {
    if (arg.has_value()) s.input(*arg);
  } else if constexpr (std::is_same_v<T, at::TensorList> || std::is_same_v<T, at::ITensorListRef>) {
    for (const at::Tensor& t : arg) s.input(t);
  } else if constexpr (std::is_same_v<T, c10::List<std::optional<at::Tensor>>>) {
    for (size_t i = 0; i < arg.size(); ++i) {  // elements come out as copies
      std::optional<at::Tensor> t = arg.get(i);
      if (t.has_value()) s.ownedInput(std::move(*t));
    }
  }
}

template <typename Sig, Sig* F, int Policy>
struct Checked;

template <typename R, typename... A, R (*F)(A...), int Policy>
struct Checked<R(A...), F, Policy> {
  static constexpr size_t N = sizeof...(A);
  template <size_t I>
  using Arg = std::tuple_element_t<I, std::tuple<A...>>;
  // A written tensor: `at::Tensor&`. Parameter 0 is the in-place self (also an input); the rest are out=.
  template <size_t I>
  static constexpr bool kWritten = std::is_same_v<Arg<I>, at::Tensor&>;
  static constexpr bool kReturnsRefs = std::is_same_v<R, at::Tensor&> ||
                                       std::is_same_v<R, std::tuple<at::Tensor&, at::Tensor&>> ||
                                       std::is_same_v<R, std::tuple<at::Tensor&, at::Tensor&, at::Tensor&>>;

  static inline const char* op_name = "?";  // set by MT_IMPL, for messages

  static constexpr bool kWritesAny = (std::is_same_v<A, at::Tensor&> || ...);
  static constexpr bool kSelfWritten = [] {
    if constexpr (N > 0) return kWritten<0>;
    else return false;
  }();

  static R call(A... args) {
    Scan s{(Policy & kDevice) != 0, kWritesAny && (Policy & kOverlap) != 0, op_name, std::nullopt, {}};
    at::Tensor* written[N + 1] = {};
    bool deferred[N + 1] = {};
    size_t nwritten = 0;
    scanArgs(s, written, deferred, nwritten, std::index_sequence_for<A...>{}, args...);
    if constexpr ((Policy & kDevice) == 0 && kWritesAny) checkOutDevices(s, written, kSelfWritten ? 1 : 0, nwritten);
    if constexpr ((Policy & kOverlap) != 0) checkWritten(s, written, deferred, nwritten);
    if constexpr ((Policy >> kWarnShift) != 0) warnIfExpanded(*written[0], (Policy >> kWarnShift) - 1);
    if constexpr ((Policy & kStridedOut) != 0 && kReturnsRefs) {
      at::Tensor temps[N + 1];
      bool any = false;
      markTemps(temps, any, std::index_sequence_for<A...>{}, args...);
      if (any) return callWithTemps(temps, std::index_sequence_for<A...>{}, args...);
    }
    return F(args...);
  }

 private:
  template <size_t... I>
  static void scanArgs(Scan& s, at::Tensor** written, bool* deferred, size_t& nwritten, std::index_sequence<I...>,
                       A&... args) {
    (scanOne<I>(s, written, deferred, nwritten, args), ...);
  }
  template <size_t I, typename T>
  static void scanOne(Scan& s, at::Tensor** written, bool* deferred, size_t& nwritten, T& arg) {
    if constexpr (kWritten<I>) {
      s.device(arg);
      deferred[nwritten] = I > 0 ? (Policy & kStridedOut) != 0 && (Policy & kOutOverlapFirst) == 0 && kReturnsRefs
                                 : (Policy & kSelfMayOverlap) != 0;
      written[nwritten++] = &arg;
      if constexpr (I == 0) {
        if (arg.defined() && s.keep_inputs)
          s.inputs.push_back(c10::MaybeOwned<at::Tensor>::borrowed(arg));  // in-place: self is read too
      }
    } else {
      visitInput(s, arg);
    }
  }

  template <size_t... I>
  static void markTemps(at::Tensor* temps, bool& any, std::index_sequence<I...>, A&... args) {
    (markOne<I>(temps, any, args), ...);
  }
  template <size_t I, typename T>
  static void markOne(at::Tensor* temps, bool& any, T& arg) {
    if constexpr (I > 0 && kWritten<I>) {
      temps[I] = stridedOutTemp(arg, (Policy & kStridedOutDirect) != 0);
      any = any || temps[I].defined();
    }
  }

  template <size_t I, typename T>
  static at::Tensor* originalOf(T& arg) {
    if constexpr (kWritten<I>) return &arg;
    else return nullptr;
  }

  template <size_t I, typename T>
  static decltype(auto) pick(at::Tensor* temps, T& arg) {
    if constexpr (kWritten<I>) {
      return temps[I].defined() ? temps[I] : arg;
    } else {
      return static_cast<Arg<I>>(arg);
    }
  }

  template <size_t... I>
  static R callWithTemps(at::Tensor* temps, std::index_sequence<I...>, A&... args) {
    at::Tensor* originals[N + 1] = {originalOf<I>(args)...};
    R result = F(pick<I>(temps, args)...);
    for (size_t i = 0; i < N; ++i) {
      if (!temps[i].defined()) continue;
      copyBack(*originals[i], temps[i]);
    }
    auto back = [&](at::Tensor& r) -> at::Tensor& {
      for (size_t i = 0; i < N; ++i) {
        if (temps[i].defined() && &r == &temps[i]) return *originals[i];
      }
      return r;
    };
    if constexpr (std::is_same_v<R, at::Tensor&>) {
      return back(result);
    } else {
      return std::apply([&](auto&... r) { return R(back(r)...); }, result);
    }
  }
};

} // namespace mytorch::checked

// Registers `fn` for `name` through the one check path (Note [One check path for native ops]). `fn` is a
// function, or a parenthesized template specialization: MT_IMPL(m, "x.out", (kernel<A, B>)).
#define MT_IMPL(m, name, fn) MT_IMPL_POLICY(m, name, fn, ::mytorch::checked::policyFor(name))
// MT_IMPL for hand-written out= glue that writes its out= only through the elementwise engine (ewRun/ewTry: any
// strides) or the CPU fallback: a non-contiguous out= is written in place (writesStridedOut).
#define MT_IMPL_ENGINE_OUT(m, name, fn) \
  MT_IMPL_POLICY(m, name, fn, ::mytorch::checked::policyFor(name) | ::mytorch::checked::kStridedOutDirect)
#define MT_IMPL_POLICY(m, name, fn, policy)                                                              \
  do {                                                                                                   \
    using MtChecked = ::mytorch::checked::Checked<std::remove_reference_t<decltype(fn)>, &fn, (policy)>; \
    MtChecked::op_name = name;                                                                           \
    (m).impl(name, TORCH_FN(MtChecked::call));                                                           \
  } while (0)
