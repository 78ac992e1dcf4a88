// Meta results kept per argument metadata (Note [Cached meta results]).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/SymInt.h>
#include <c10/util/OptionalArrayRef.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace mytorch {

// Note [Cached meta results]
// A composed kernel that has no C++ meta function to call (Note [Structured meta functions] in Glue.h) calls its
// operator on meta tensors for ATen's checks and its results' sizes, strides and dtypes, and through the dispatcher
// that runs torch's Python meta kernel: 15-40 us a call (linalg_qr, the FFTs, adaptive max pooling), more than the
// operator itself on a small input. cachedMeta(op, f, args...) runs f (that meta call) once per key and hands later
// calls with the same key the same meta results. The key is everything a meta function reads: the op's name, each
// tensor argument's dtype, sizes, strides and conjugate/negative bits, and every other argument's value. A call that
// raises stores nothing (the next one raises again, with ATen's message). Meta tensors hold no data, and the callers
// read their sizes, strides and dtypes only (emptyLike); the cache holds at most kMetaCacheEntries keys (cleared
// whole when full), under a mutex.
constexpr size_t kMetaCacheEntries = 4096;

namespace meta_cache {

struct Key {
  std::vector<int64_t> words;
  template <typename T>
  std::enable_if_t<std::is_integral_v<T> || std::is_enum_v<T>> add(T v) {  // bool, int64_t, c10::ScalarType
    words.push_back(static_cast<int64_t>(v));
  }
  void add(double v) {
    int64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    words.push_back(bits);
  }
  void add(std::string_view s) {
    words.push_back(static_cast<int64_t>(s.size()));
    for (unsigned char c : s) words.push_back(c);
  }
  void add(const c10::SymInt& s) { add(s.guard_int(__FILE__, __LINE__)); }
  void add(c10::IntArrayRef a) {
    words.push_back(static_cast<int64_t>(a.size()));
    words.insert(words.end(), a.begin(), a.end());
  }
  void add(at::OptionalIntArrayRef a) {
    add(a.has_value());
    if (a.has_value()) add(*a);
  }
  void add(const at::Tensor& t);
  template <typename T>
  void add(const std::optional<T>& v) {
    add(v.has_value());
    if (v.has_value()) add(*v);
  }
};

// The cached results of `key`, or none.
std::optional<std::vector<at::Tensor>> find(const Key& key);
void store(Key key, std::vector<at::Tensor> results);
// How many keys the cache holds (mytorch._C._meta_cache_entries(), for the tests).
size_t entries();

inline std::vector<at::Tensor> flatten(const at::Tensor& t) { return {t}; }
template <typename... Ts>
std::vector<at::Tensor> flatten(const std::tuple<Ts...>& t) {
  return std::apply([](const auto&... x) { return std::vector<at::Tensor>{x...}; }, t);
}
template <typename R, size_t... I>
R rebuild(const std::vector<at::Tensor>& v, std::index_sequence<I...>) {
  return R(v[I]...);
}
template <typename R>
R rebuild(const std::vector<at::Tensor>& v) {
  if constexpr (std::is_same_v<R, at::Tensor>) return v[0];
  else return rebuild<R>(v, std::make_index_sequence<std::tuple_size_v<R>>{});
}

} // namespace meta_cache

// f() (an operator called on metaLike arguments), once per (op, args...) key: Note [Cached meta results].
template <typename F, typename... Args>
auto cachedMeta(std::string_view op, F&& f, const Args&... args) -> std::decay_t<decltype(f())> {
  using R = std::decay_t<decltype(f())>;
  meta_cache::Key key;
  key.add(op);
  (key.add(args), ...);
  if (auto hit = meta_cache::find(key)) return meta_cache::rebuild<R>(*hit);
  R r = f();
  meta_cache::store(std::move(key), meta_cache::flatten(r));
  return r;
}

} // namespace mytorch
