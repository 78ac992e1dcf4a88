// sim device-side assertion (mytorch/assert.h).
#include "mytorch/assert.h"

namespace mytorch::sim {

rt::Status assert_true(const AssertArgs& a, rt::Stream) {
  if (!*a.ok) record_error(a.error, 0);
  return rt::Status::Success;
}

} // namespace mytorch::sim
