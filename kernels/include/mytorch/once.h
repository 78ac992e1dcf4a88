// Once: std::call_once with a fast path for the calls after the first.
#pragma once

#include <atomic>
#include <mutex>

namespace mytorch {

// Note [Once, cheaply]
// libstdc++'s std::call_once stores its callable in two thread-local variables on every call, done or not, and a
// thread-local in a shared library is a call to __tls_get_addr: the runtime, allocator and stream lookups that a
// small op makes several times each cost more than the op's arithmetic. Once reads an atomic flag first and calls
// std::call_once only until the work is done (an exception from it leaves the flag clear, as std::call_once does).
class Once {
 public:
  template <typename F>
  void operator()(F&& f) {
    if (done_.load(std::memory_order_acquire)) return;
    std::call_once(flag_, std::forward<F>(f));
    done_.store(true, std::memory_order_release);
  }

 private:
  std::once_flag flag_;
  std::atomic<bool> done_{false};
};

} // namespace mytorch
