// One library handle per (host thread, device), for the libraries whose handles carry a stream (cuDNN,
// cuSOLVER): setting the stream of a handle other threads share and then calling on it is a race (another thread's
// stream can be set in between). A thread's handles go back to a per-device pool when it ends and are reused by
// later threads, as torch.cuda's handle pools do; they are never destroyed (the process may be exiting, with the
// CUDA context gone).
#pragma once

#include <mutex>
#include <vector>

#include "mytorch/runtime.h"

namespace mytorch::cuda {

constexpr int kMaxPooledDevices = 64;

// Handle: a copyable value (a library handle, or a struct of them); one pool per Handle type.
template <typename Handle>
class HandlePool {
 public:
  // The calling thread's handle for `device`: its own, one a finished thread returned, or create(&h) (an
  // rt::Status, Success or the failure to report).
  template <typename Create>
  static rt::Status get(int device, Handle* out, Create&& create) {
    if (device < 0 || device >= kMaxPooledDevices)
      return rt::report(rt::Status::InvalidDevice, "library handle: device index out of range");
    Mine& mine = mine_();
    if (!mine.set[device]) {
      {
        std::lock_guard<std::mutex> lock(shared().mu);
        auto& free = shared().free[device];
        if (!free.empty()) {
          mine.h[device] = free.back();
          free.pop_back();
          mine.set[device] = true;
        }
      }
      if (!mine.set[device]) {
        if (rt::Status st = create(&mine.h[device]); st != rt::Status::Success) return st;
        mine.set[device] = true;
      }
    }
    *out = mine.h[device];
    return rt::Status::Success;
  }

 private:
  struct Shared {
    std::mutex mu;
    std::vector<Handle> free[kMaxPooledDevices];
  };
  static Shared& shared() {
    static Shared* p = new Shared();  // leaked: threads may return handles during exit
    return *p;
  }
  struct Mine {
    Handle h[kMaxPooledDevices] = {};
    bool set[kMaxPooledDevices] = {};
    ~Mine() {
      std::lock_guard<std::mutex> lock(shared().mu);
      for (int d = 0; d < kMaxPooledDevices; ++d)
        if (set[d]) shared().free[d].push_back(h[d]);
    }
  };
  static Mine& mine_() {
    thread_local Mine mine;
    return mine;
  }
};

} // namespace mytorch::cuda
