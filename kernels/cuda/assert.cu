// CUDA device-side assertion (mytorch/assert.h): one thread reads the flag and records the error.
#include "common.cuh"
#include "mytorch/assert.h"

namespace mytorch::cuda {
namespace {

__global__ void kernel(AssertArgs a) {
  if (!*a.ok) record_error(a.error, 0);
}

} // namespace

rt::Status assert_true(const AssertArgs& a, rt::Stream stream) {
  kernel<<<1, 1, 0, native(stream)>>>(a);
  return check_launch("assert_true");
}

} // namespace mytorch::cuda
