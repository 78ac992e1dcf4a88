// Meta results kept per argument metadata (Note [Cached meta results] in MetaCache.h).
#include "csrc/aten/glue/MetaCache.h"

#include <functional>
#include <mutex>
#include <unordered_map>

namespace mytorch::meta_cache {
namespace {

struct KeyHash {
  size_t operator()(const Key& k) const {
    size_t h = k.words.size();
    for (int64_t w : k.words) h = h * 1000003u ^ std::hash<int64_t>()(w);
    return h;
  }
};
struct KeyEq {
  bool operator()(const Key& a, const Key& b) const { return a.words == b.words; }
};

std::mutex g_mutex;
std::unordered_map<Key, std::vector<at::Tensor>, KeyHash, KeyEq>& cache() {
  static auto* c = new std::unordered_map<Key, std::vector<at::Tensor>, KeyHash, KeyEq>();  // never destroyed
  return *c;
}

} // namespace

void Key::add(const at::Tensor& t) {
  add(t.defined());
  if (!t.defined()) return;
  add(static_cast<int64_t>(t.scalar_type()));
  add(t.sizes());
  add(t.strides());
  add(t.is_conj());
  add(t.is_neg());
}

std::optional<std::vector<at::Tensor>> find(const Key& key) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = cache().find(key);
  if (it == cache().end()) return std::nullopt;
  return it->second;
}

void store(Key key, std::vector<at::Tensor> results) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (cache().size() >= kMetaCacheEntries) cache().clear();
  cache().emplace(std::move(key), std::move(results));
}

size_t entries() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return cache().size();
}

} // namespace mytorch::meta_cache
