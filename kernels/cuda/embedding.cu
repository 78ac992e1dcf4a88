// CUDA embedding backward (Note [Embedding backward]): blockIdx.x walks sorted positions (only run starts
// work), the threads of a block split the columns, so each output element is written by one thread.
#include "common.cuh"
#include "mytorch/embedding.h"

namespace mytorch::cuda {
namespace {

template <typename T>
__global__ void kernel(EmbeddingBackwardArgs a) {
  for (const int64_t s : block_stride(a.n)) {
    for (int64_t c = threadIdx.x; c < a.dim; c += blockDim.x) emb::run<T>(a, s, c, c + 1);
  }
}

} // namespace

rt::Status embedding_backward(const EmbeddingBackwardArgs& a, rt::Stream stream) {
  if (a.n == 0 || a.dim == 0) return rt::Status::Success;
  const unsigned grid = grid_blocks(a.n);
  const bool ok =
      dispatch_floating(a.dtype, [&](auto tag) { kernel<decltype(tag)><<<grid, kThreads, 0, native(stream)>>>(a); });
  if (!ok) return rt::report(rt::Status::InvalidValue, "embedding_backward: expected a floating dtype");
  return check_launch("embedding_backward");
}

} // namespace mytorch::cuda
