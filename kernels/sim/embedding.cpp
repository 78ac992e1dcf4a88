// sim embedding backward (Note [Embedding backward]).
#include "mytorch/embedding.h"

namespace mytorch::sim {

rt::Status embedding_backward(const EmbeddingBackwardArgs& a, rt::Stream) {
  const bool ok = dispatch_floating(a.dtype, [&](auto tag) {
    for (int64_t s = 0; s < a.n; ++s) emb::run<decltype(tag)>(a, s, 0, a.dim);
  });
  return ok ? rt::Status::Success
            : rt::report(rt::Status::InvalidValue, "embedding_backward: expected a floating dtype");
}

} // namespace mytorch::sim
