// The NCCL data path of ProcessGroupMytorch (the cuda runtime's NCCL, or the emulated NCCL of the emulated build):
// NCCL through kernels' comm.h on an internal mytorch stream per process group, ordered after the caller's current
// stream, watched by a watchdog thread (Note [Ordering and stream contract] in ProcessGroupMytorch.hpp). One device
// per rank, as ProcessGroupNCCL.
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/view_as_real.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <algorithm>
#include <array>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <functional>
#include <optional>
#include <shared_mutex>
#include <thread>

#include "csrc/core/Stream.h"
#include "csrc/distributed/Paths.h"
#include "mytorch/comm.h"
#include "mytorch/runtime.h"

namespace mytorch::dist {
namespace {

using comm::ReduceOp;

std::optional<DType> ncclType(at::ScalarType t) {
  switch (t) {
    case at::kChar: return DType::Int8;
    case at::kByte:
    case at::kBool: return DType::UInt8;
    case at::kInt: return DType::Int32;
    case at::kUInt32: return DType::UInt32;
    case at::kLong: return DType::Int64;
    case at::kUInt64: return DType::UInt64;
    case at::kHalf: return DType::Half;
    case at::kFloat: return DType::Float;
    case at::kDouble: return DType::Double;
    case at::kBFloat16: return DType::BFloat16;
    case at::kFloat8_e4m3fn: return DType::Float8e4m3;
    case at::kFloat8_e5m2: return DType::Float8e5m2;
    default: return std::nullopt;
  }
}

// A tensor NCCL can move: its own type, or its bytes.
std::pair<at::Tensor, DType> movable(const at::Tensor& t) {
  at::Tensor v = t.is_complex() ? at::view_as_real(t) : t;
  if (auto d = ncclType(v.scalar_type())) return {v, *d};
  return {v.reshape({-1}).view(at::kByte), DType::UInt8};
}

struct Reduction {
  at::Tensor tensor;
  DType type;
  ReduceOp op;
  std::optional<double> premul;
};

Reduction reduction(const at::Tensor& t, const c10d::ReduceOp& op) {
  at::Tensor v = t;
  auto kind = op.op_;
  Reduction r{v, DType::Float, ReduceOp::Sum, premulFactor(op)};
  if (v.is_complex()) {
    TORCH_CHECK_VALUE(kind == c10d::ReduceOp::SUM || kind == c10d::ReduceOp::AVG || r.premul,
                      "mytorch (NCCL): complex tensors reduce only with SUM, AVG or PREMUL_SUM");
    r.tensor = at::view_as_real(v);
  }
  auto d = ncclType(r.tensor.scalar_type());
  TORCH_CHECK_VALUE(d, "mytorch (NCCL): NCCL cannot reduce ", t.scalar_type(), " tensors");
  r.type = *d;
  const bool isBool = t.scalar_type() == at::kBool;
  switch (kind) {
    case c10d::ReduceOp::SUM: r.op = isBool ? ReduceOp::Max : ReduceOp::Sum; break; // bool: logical or
    case c10d::ReduceOp::PRODUCT: r.op = isBool ? ReduceOp::Min : ReduceOp::Prod; break;
    case c10d::ReduceOp::MIN: r.op = ReduceOp::Min; break;
    case c10d::ReduceOp::MAX: r.op = ReduceOp::Max; break;
    case c10d::ReduceOp::AVG:
      TORCH_CHECK_VALUE(!isBool, "mytorch (NCCL): AVG of bool tensors is not defined");
      r.op = ReduceOp::Avg;
      break;
    case c10d::ReduceOp::PREMUL_SUM: r.op = ReduceOp::Sum; break;
    default:
      TORCH_CHECK_VALUE(false, "mytorch (NCCL): NCCL has no ", static_cast<int>(kind), " reduction (bitwise ops)");
  }
  return r;
}

// Note [Process-group watchdogs at exit]
// The watchdog retires finished works, and a work it retires may hold the last reference to a tensor Python
// owns: freeing that tensor takes the GIL, and once the interpreter is finalizing a thread that asks for the GIL
// is ended inside a noexcept destructor, aborting the process ("terminate called without an active exception",
// about one run in ten of a script that leaves a group alive, on the emulated build). At exit
// (python/mytorch/__init__.py, before finalization) quiesceWatchdogsForExit() returns once no watchdog is inside
// a retirement; from then on the watchdogs keep the works they would retire (never freed: the process is
// ending) instead of dropping them. Waiters are not affected: a blocking wait asks the device.
struct ExitState {
  std::mutex mu;
  std::condition_variable cv;
  bool exiting = false;
  int retiring = 0;  // watchdogs inside a retirement
};
ExitState& exitState() {
  static auto* state = new ExitState();  // used by exit handlers: never destroyed
  return *state;
}

std::string statusText(rt::Status s) { return std::string(rt::status_name(s)) + ": " + rt::last_error(); }

class NcclPath final : public Path {
  struct Pending {
    c10::intrusive_ptr<WorkMytorch> work;
    std::shared_ptr<c10::Event> end;
    std::chrono::steady_clock::time_point start;
  };

 public:
  explicit NcclPath(ProcessGroupMytorch& pg) : Path(pg) {
    blockingWait_ =
        std::getenv("MYTORCH_DIST_BLOCKING_WAIT") && std::string(std::getenv("MYTORCH_DIST_BLOCKING_WAIT")) == "1";
    watchdog_ = std::thread([this] { watch(); });
    health_->path = this;
  }

  // Why the group cannot be trusted ("" while healthy): broken, or an async error of the communicator.
  std::string failure() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!broken_.empty()) return broken_;
    if (!comm_) return "";
    std::shared_lock<std::shared_mutex> use(commUse_);
    rt::Status s = comm::async_error(comm_);
    return s == rt::Status::Success || s == rt::Status::NotReady ? "" : "NCCL reported " + statusText(s);
  }

  ~NcclPath() override { shutdown(false); }

  // Note [Ending a process group with work pending]
  // Idle, the communicator is destroyed. With work pending (a peer that never arrived, or a caller that did not
  // wait), it is aborted instead (ncclCommDestroy would wait for that work, perhaps forever) and the works fail
  // with the reason; on the emulated NCCL the other ranks then fail too, as they would when their NCCL saw the
  // connection drop.
  void shutdown(bool abort) override {
    {
      std::lock_guard<std::mutex> g(health_->mu);
      health_->path = nullptr;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      stop_ = true;
    }
    cv_.notify_all();
    if (watchdog_.joinable()) watchdog_.join();
    std::deque<Pending> left;
    comm::Comm cm = nullptr;
    std::string broken;
    {
      std::lock_guard<std::mutex> lock(mu_);
      left.swap(pending_);
      cm = comm_;
      comm_ = nullptr;
      broken = broken_;
      if (broken_.empty()) broken_ = "the process group was shut down";
    }
    if (cm && broken.empty()) {
      std::unique_lock<std::shared_mutex> use(commUse_);
      const bool idle = std::all_of(left.begin(), left.end(), [](const Pending& p) { return p.end->query(); });
      (void)(abort || !idle ? comm::abort(cm) : comm::destroy(cm));
    }
    finish(left, abort ? "the process group was aborted" : "the process group was destroyed with this work pending");
  }

  WorkPtr broadcast(const CallInfo& c, Tensors& ts, const c10d::BroadcastOptions& o) override {
    auto [v, d] = movable(ts[0]);
    return enqueue(c, ts, ts, [&, v = v, d = d](rt::Stream s, comm::Comm cm) {
      return comm::broadcast(v.data_ptr(), v.data_ptr(), v.numel(), d, static_cast<int>(o.rootRank), cm, s);
    });
  }

  WorkPtr allreduce(const CallInfo& c, Tensors& ts, const c10d::AllreduceOptions& o) override {
    return enqueue(c, ts, ts, [&](rt::Stream s, comm::Comm cm) {
      Reduction r = prepare(wide(ts[0]), o.reduceOp);
      rt::Status st = comm::all_reduce(r.tensor.data_ptr(), r.tensor.data_ptr(), r.tensor.numel(), r.type, r.op,
                                       premulOf(r), cm, s);
      narrowInto(ts[0]);
      return st;
    });
  }

  WorkPtr allreduceCoalesced(const CallInfo& c, Tensors& ts, const c10d::AllreduceCoalescedOptions& o) override {
    return enqueue(c, ts, ts, [&](rt::Stream s, comm::Comm cm) {
      return inGroup(true, [&] {
        rt::Status st = rt::Status::Success;
        for (size_t i = 0; i < ts.size() && st == rt::Status::Success; ++i) {
          Reduction r = prepare(wide(ts[i]), o.reduceOp);
          st = comm::all_reduce(r.tensor.data_ptr(), r.tensor.data_ptr(), r.tensor.numel(), r.type, r.op, premulOf(r),
                                cm, s);
          narrowInto(ts[i]);
        }
        return st;
      });
    });
  }

  WorkPtr reduce(const CallInfo& c, Tensors& ts, const c10d::ReduceOptions& o) override {
    return enqueue(c, ts, ts, [&](rt::Stream s, comm::Comm cm) {
      const bool root = pg_.getRank() == o.rootRank;
      // The pre-scaling of PREMUL_SUM must not touch a non-root's input: scale a copy there.
      at::Tensor input = !root && premulFactor(o.reduceOp) && !scalesInNccl(ts[0]) ? ts[0].clone() : ts[0];
      if (input.data_ptr() != ts[0].data_ptr()) keep_.push_back(input);
      Reduction r = prepare(wide(input), o.reduceOp);
      rt::Status st = comm::reduce(r.tensor.data_ptr(), r.tensor.data_ptr(), r.tensor.numel(), r.type, r.op,
                                   premulOf(r), static_cast<int>(o.rootRank), cm, s);
      if (root) narrowInto(ts[0]);
      else widened_.clear();
      return st;
    });
  }

  WorkPtr allgather(const CallInfo& c, std::vector<Tensors>& out, Tensors& in, const c10d::AllgatherOptions&) override {
    Tensors touched = in;
    touched.insert(touched.end(), out[0].begin(), out[0].end());
    return enqueue(c, touched, out[0], [&](rt::Stream s, comm::Comm cm) {
      auto [iv, d] = movable(in[0]);
      at::Tensor flat = at::empty({pg_.getSize() * iv.numel()}, iv.options());
      keep_.push_back(flat);
      rt::Status st = comm::all_gather(iv.data_ptr(), flat.data_ptr(), iv.numel(), d, cm, s);
      // After the collective: at once, or after ncclGroupEnd when coalescing (the copies would run first).
      after_.push_back([this, flat, outs = out[0], n = iv.numel()] {
        for (int r = 0; r < pg_.getSize(); ++r) movable(outs[r]).first.reshape({-1}).copy_(flat.narrow(0, r * n, n));
      });
      return st;
    });
  }

  WorkPtr allgatherBase(const CallInfo& c, Tensors& out, Tensors& in, const c10d::AllgatherOptions&) override {
    Tensors touched = in;
    touched.insert(touched.end(), out.begin(), out.end());
    return enqueue(c, touched, out, [&](rt::Stream s, comm::Comm cm) {
      return inGroup(in.size() > 1, [&] {
        rt::Status st = rt::Status::Success;
        for (size_t i = 0; i < in.size() && st == rt::Status::Success; ++i) {
          auto [iv, d] = movable(in[i]);
          st = comm::all_gather(iv.data_ptr(), out[i].data_ptr(), iv.numel(), d, cm, s);
        }
        return st;
      });
    });
  }

  WorkPtr gather(const CallInfo& c, std::vector<Tensors>& out, Tensors& in, const c10d::GatherOptions& o) override {
    Tensors touched = in, results;
    if (!out.empty()) touched.insert(touched.end(), out[0].begin(), out[0].end()), results = out[0];
    return enqueue(c, touched, results, [&](rt::Stream s, comm::Comm cm) {
      auto [iv, d] = movable(in[0]);
      const int root = static_cast<int>(o.rootRank);
      rt::Status st = inGroup(true, [&] {
        if (pg_.getRank() != root) return comm::send(iv.data_ptr(), iv.numel(), d, root, cm, s);
        rt::Status st = rt::Status::Success;
        for (int r = 0; r < pg_.getSize() && st == rt::Status::Success; ++r) {
          if (r != root) st = comm::recv(movable(out[0][r]).first.data_ptr(), iv.numel(), d, r, cm, s);
        }
        return st;
      });
      if (st == rt::Status::Success && pg_.getRank() == root) out[0][root].copy_(in[0]);
      return st;
    });
  }

  WorkPtr scatter(const CallInfo& c, Tensors& out, std::vector<Tensors>& in, const c10d::ScatterOptions& o) override {
    Tensors touched = out;
    if (!in.empty()) touched.insert(touched.end(), in[0].begin(), in[0].end());
    return enqueue(c, touched, out, [&](rt::Stream s, comm::Comm cm) {
      auto [ov, d] = movable(out[0]);
      const int root = static_cast<int>(o.rootRank);
      rt::Status st = inGroup(true, [&] {
        if (pg_.getRank() != root) return comm::recv(ov.data_ptr(), ov.numel(), d, root, cm, s);
        rt::Status st = rt::Status::Success;
        for (int r = 0; r < pg_.getSize() && st == rt::Status::Success; ++r) {
          if (r != root) st = comm::send(movable(in[0][r]).first.data_ptr(), ov.numel(), d, r, cm, s);
        }
        return st;
      });
      if (st == rt::Status::Success && pg_.getRank() == root) out[0].copy_(in[0][root]);
      return st;
    });
  }

  WorkPtr reduceScatter(const CallInfo& c, Tensors& out, std::vector<Tensors>& in,
                        const c10d::ReduceScatterOptions& o) override {
    Tensors touched = out;
    touched.insert(touched.end(), in[0].begin(), in[0].end());
    return enqueue(c, touched, out, [&](rt::Stream s, comm::Comm cm) {
      Tensors flat;
      for (auto& t : in[0]) flat.push_back(t.reshape({-1}));
      at::Tensor packed = at::cat(flat);
      keep_.push_back(packed);
      Reduction ri = prepare(wide(packed), o.reduceOp);
      widened_.clear();
      Reduction ro = reduction(wide(out[0]), o.reduceOp);
      rt::Status st = comm::reduce_scatter(ri.tensor.data_ptr(), ro.tensor.data_ptr(), ro.tensor.numel(), ri.type,
                                           ri.op, premulOf(ri), cm, s);
      narrowInto(out[0]);
      return st;
    });
  }

  WorkPtr reduceScatterBase(const CallInfo& c, Tensors& out, Tensors& in,
                            const c10d::ReduceScatterOptions& o) override {
    Tensors touched = out;
    touched.insert(touched.end(), in.begin(), in.end());
    return enqueue(c, touched, out, [&](rt::Stream s, comm::Comm cm) {
      return inGroup(in.size() > 1, [&] {
        rt::Status st = rt::Status::Success;
        for (size_t i = 0; i < in.size() && st == rt::Status::Success; ++i) {
          // The input must stay as it was: PREMUL_SUM that NCCL cannot do itself scales a copy.
          at::Tensor input = premulFactor(o.reduceOp) && !scalesInNccl(in[i]) ? in[i].clone() : in[i];
          if (input.data_ptr() != in[i].data_ptr()) keep_.push_back(input);
          Reduction ri = prepare(wide(input), o.reduceOp);
          widened_.clear();
          Reduction ro = reduction(wide(out[i]), o.reduceOp);
          st = comm::reduce_scatter(ri.tensor.data_ptr(), ro.tensor.data_ptr(), ro.tensor.numel(), ri.type, ri.op,
                                    premulOf(ri), cm, s);
          narrowInto(out[i]);
        }
        return st;
      });
    });
  }

  WorkPtr alltoallBase(const CallInfo& c, at::Tensor& out, at::Tensor& in, std::vector<int64_t>& outSplits,
                       std::vector<int64_t>& inSplits, const c10d::AllToAllOptions&) override {
    Tensors touched{in, out}, outs{out};
    return enqueue(c, touched, outs, [&](rt::Stream s, comm::Comm cm) {
      // Bytes, so that every dtype and row size moves the same way.
      const int64_t rowBytes = in.dim() && in.size(0)     ? in.nbytes() / in.size(0)
                               : out.dim() && out.size(0) ? out.nbytes() / out.size(0)
                                                          : 0;
      auto* src = static_cast<const char*>(in.data_ptr());
      auto* dst = static_cast<char*>(out.data_ptr());
      return inGroup(true, [&] {
        rt::Status st = rt::Status::Success;
        int64_t inAt = 0, outAt = 0;
        for (int r = 0; r < pg_.getSize() && st == rt::Status::Success; ++r) {
          const int64_t sendBytes = inSplits[r] * rowBytes, recvBytes = outSplits[r] * rowBytes;
          if (sendBytes) st = comm::send(src + inAt, sendBytes, DType::UInt8, r, cm, s);
          if (recvBytes && st == rt::Status::Success) st = comm::recv(dst + outAt, recvBytes, DType::UInt8, r, cm, s);
          inAt += sendBytes;
          outAt += recvBytes;
        }
        return st;
      });
    });
  }

  WorkPtr alltoall(const CallInfo& c, Tensors& out, Tensors& in, const c10d::AllToAllOptions&) override {
    Tensors touched = in;
    touched.insert(touched.end(), out.begin(), out.end());
    return enqueue(c, touched, out, [&](rt::Stream s, comm::Comm cm) {
      return inGroup(true, [&] {
        rt::Status st = rt::Status::Success;
        for (int r = 0; r < pg_.getSize() && st == rt::Status::Success; ++r) {
          if (in[r].nbytes()) st = comm::send(in[r].data_ptr(), in[r].nbytes(), DType::UInt8, r, cm, s);
          if (out[r].nbytes() && st == rt::Status::Success)
            st = comm::recv(out[r].data_ptr(), out[r].nbytes(), DType::UInt8, r, cm, s);
        }
        return st;
      });
    });
  }

  WorkPtr send(const CallInfo& c, Tensors& ts, int dst, int) override {
    return enqueue(c, ts, ts, [&](rt::Stream s, comm::Comm cm) {
      return comm::send(ts[0].data_ptr(), ts[0].nbytes(), DType::UInt8, dst, cm, s);
    });
  }

  WorkPtr recv(const CallInfo& c, Tensors& ts, int src, int) override {
    return enqueue(c, ts, ts, [&](rt::Stream s, comm::Comm cm) {
      return comm::recv(ts[0].data_ptr(), ts[0].nbytes(), DType::UInt8, src, cm, s);
    });
  }

  WorkPtr barrier(const CallInfo& c, const c10d::BarrierOptions& o) override {
    const c10::DeviceIndex dev =
        o.device.has_value() && o.device->has_index() ? o.device->index() : currentDeviceIndex();
    at::Tensor flag =
        at::empty({1}, at::TensorOptions().dtype(at::kFloat).device(c10::Device(c10::DeviceType::PrivateUse1, dev)));
    Tensors ts{flag};
    auto work = enqueue(c, ts, ts, [&](rt::Stream s, comm::Comm cm) {
      return comm::all_reduce(flag.data_ptr(), flag.data_ptr(), 1, DType::Float, ReduceOp::Sum, nullptr, cm, s);
    });
    // A barrier holds the host, as ProcessGroupNCCL's does.
    work->synchronize();
    return work;
  }

 private:
  // PREMUL_SUM NCCL does itself (float32/float64); other dtypes are scaled on the stream first.
  static bool scalesInNccl(const at::Tensor& t) {
    auto st = t.is_complex() ? c10::toRealValueType(t.scalar_type()) : t.scalar_type();
    return st == at::kFloat || st == at::kDouble;
  }
  Reduction prepare(const at::Tensor& t, const c10d::ReduceOp& op) {
    Reduction r = reduction(t, op);
    if (r.premul && !scalesInNccl(t)) {
      r.tensor.mul_(*r.premul); // on the internal stream (the caller set it current)
      r.premul.reset();
    }
    return r;
  }
  static const double* premulOf(const Reduction& r) { return r.premul ? &*r.premul : nullptr; }

  // Dtypes NCCL cannot reduce (int16, uint16) are reduced in int32, as the sim path widens them: `wide` returns the
  // tensor or its widened copy (on the internal stream) and remembers it; `narrowInto` copies the last one back
  // after the collective (queued with the call's other after-work).
  at::Tensor wide(const at::Tensor& t) {
    widened_.clear();
    if (t.scalar_type() != at::kShort && t.scalar_type() != at::kUInt16) return t;
    at::Tensor w = t.to(at::kInt);
    keep_.push_back(w);
    widened_.push_back(w);
    return w;
  }
  void narrowInto(const at::Tensor& dst) {
    if (widened_.empty()) return;
    after_.push_back([dst, src = widened_.back()]() mutable { dst.copy_(src); });
    widened_.clear();
  }

  // `calls` (returning the first failing status) inside one NCCL group when `grouped`.
  template <typename Calls>
  static rt::Status inGroup(bool grouped, Calls&& calls) {
    if (grouped) {
      rt::Status st = comm::group_start();
      if (st != rt::Status::Success) return st;
    }
    rt::Status st = calls();
    rt::Status end = grouped ? comm::group_end() : rt::Status::Success;
    return st != rt::Status::Success ? st : end;
  }

  // Note [Communicator setup and the timeout]
  // The first collective (or eagerConnectSingleDevice, when init_process_group got a device_id) creates the
  // communicator: rank 0 publishes NCCL's id in the store, the others wait for it, then every rank starts a
  // non-blocking ncclCommInitRankConfig on the calling thread, with the communicator's device current, and polls
  // ncclCommGetAsyncError until it is ready. Both waits are bounded by the group's timeout and neither holds mu_
  // (the watchdog keeps running): a rank that never arrives makes every other rank abort its half-made
  // communicator and raise after the timeout, and the group is broken.
  comm::Comm commFor(c10::DeviceIndex device, const CallInfo& c) {
    std::lock_guard<std::mutex> setup(initMu_);  // one setup at a time; collectives of other threads wait here
    {
      std::lock_guard<std::mutex> lock(mu_);
      TORCH_CHECK(broken_.empty(), "mytorch ", pg_.describe(c), ": the process group is broken: ", broken_);
      if (comm_) {
        TORCH_CHECK_VALUE(device == device_, "mytorch ", pg_.describe(c),
                          ": this process group uses mytorch:", static_cast<int>(device_),
                          " (one device per rank), but got a tensor on mytorch:", static_cast<int>(device));
        return comm_;
      }
    }
    const auto timeout = pg_.timeout();
    std::array<char, comm::kUniqueIdBytes> id{};
    const std::string key = "mytorch_nccl_id";
    if (pg_.getRank() == 0) {
      rt::Status s = comm::get_unique_id(id.data());
      TORCH_CHECK(s == rt::Status::Success, "mytorch ", pg_.describe(c), ": ", statusText(s));
      pg_.store()->set(key, std::vector<uint8_t>(id.begin(), id.end()));
    } else {
      try {
        pg_.store()->wait({key}, timeout);
      } catch (const std::exception& e) {
        fail(c, "rank 0 did not publish the NCCL id within the timeout (" + std::to_string(timeout.count()) +
                    " ms): " + e.what());
      }
      auto v = pg_.store()->get(key);
      TORCH_CHECK(v.size() == comm::kUniqueIdBytes, "mytorch: the NCCL id in the store has ", v.size(), " bytes");
      std::copy(v.begin(), v.end(), id.begin());
    }
    comm::Comm cm = nullptr;
    rt::Status s = comm::init_rank(&cm, pg_.getSize(), id.data(), pg_.getRank(), device, /*blocking=*/false);
    if (s != rt::Status::Success && s != rt::Status::NotReady) {
      fail(c, "NCCL communicator setup failed: " + statusText(s));
    }
    awaitReady(cm, c, "NCCL communicator setup");
    adopt(cm, device);
    return cm;
  }

  // Polls a non-blocking communicator until it is ready; aborts it and breaks the group on an error or the timeout.
  void awaitReady(comm::Comm cm, const CallInfo& c, const std::string& what) {
    const auto timeout = pg_.timeout();
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      rt::Status s = comm::async_error(cm);
      if (s == rt::Status::Success) return;
      std::string reason;
      if (s != rt::Status::NotReady) reason = what + " failed: " + statusText(s);
      else if (std::chrono::steady_clock::now() > deadline)
        reason = what + " did not finish within the timeout (" + std::to_string(timeout.count()) +
                 " ms): a rank never reached it";
      if (!reason.empty()) {
        (void)comm::abort(cm);
        fail(c, reason);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  void adopt(void* cm, int device) override {
    std::lock_guard<std::mutex> lock(mu_);
    comm_ = cm;
    device_ = static_cast<c10::DeviceIndex>(device);
    stream_ = streamFromPool(device_, /*high_priority=*/true);
  }

  void connect(c10::DeviceIndex device, const CallInfo& c) override { (void)commFor(device, c); }

  // Note [Subgroups by ncclCommSplit]
  // torch's split_group (DeviceMesh's way when the default group is bound to a device) calls split on every rank
  // of the parent; new_group with a bound default group calls perform_nocolor_split on the ranks outside the new
  // group and the backend creator (python/mytorch/distributed/__init__.py) splits on the members. Either way every rank of
  // the parent takes part in one ncclCommSplit, and the child's communicator needs no store round or fresh init.
  std::pair<void*, int> split(int color, int key, const CallInfo& c) override {
    const c10::DeviceIndex device = device_ >= 0 ? device_ : currentDeviceIndex();
    comm::Comm parent = commFor(device, c);
    comm::Comm child = nullptr;
    rt::Status s;
    {
      std::shared_lock<std::shared_mutex> use(commUse_);
      s = comm::split(parent, color, key, &child, device, /*blocking=*/false);
    }
    if (s != rt::Status::Success && s != rt::Status::NotReady) fail(c, "ncclCommSplit failed: " + statusText(s));
    if (child) awaitReady(child, c, "ncclCommSplit");
    return {child, device};
  }

  void startCoalescing() override {
    std::lock_guard<std::mutex> lock(mu_);
    TORCH_CHECK(!coalescing_, "mytorch: startCoalescing called twice without endCoalescing");
    coalescing_ = true;
    groupOpen_ = false;
    coalesced_.clear();
  }

  WorkPtr endCoalescing(const CallInfo& c) override {
    std::vector<c10::intrusive_ptr<WorkMytorch>> works;
    {
      std::lock_guard<std::mutex> lock(mu_);
      TORCH_CHECK(coalescing_, "mytorch: endCoalescing without startCoalescing");
      coalescing_ = false;
      works.swap(coalesced_);
    }
    rt::Status st = rt::Status::Success;
    if (groupOpen_) {
      groupOpen_ = false;
      std::shared_lock<std::shared_mutex> use(commUse_);
      st = comm::group_end();  // the calls since startCoalescing start here, together
      c10::StreamGuard guard(stream_);
      for (auto& f : afterGroup_) f();
    }
    afterGroup_.clear();
    TORCH_CHECK(st == rt::Status::Success, "mytorch ", pg_.describe(c), " failed: ", statusText(st));
    Tensors outputs;
    for (auto& w : works) {
      auto r = w->result();
      outputs.insert(outputs.end(), r.begin(), r.end());
    }
    auto work = makeWork(c, outputs, true);
    if (works.empty()) {
      work->complete(nullptr);
      return work;
    }
    works.push_back(work);
    track(works, device_);
    return work;
  }

  // Breaks the group with `reason` and raises it as torch's DistBackendError.
  [[noreturn]] void fail(const CallInfo& c, const std::string& reason) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (broken_.empty()) broken_ = reason;
    }
    throw c10::DistBackendError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
                                "mytorch " + pg_.describe(c) + " failed: " + reason);
  }

  template <typename Fn>
  WorkPtr enqueue(const CallInfo& c, const Tensors& touched, const Tensors& outputs, Fn&& fn) {
    const c10::DeviceIndex device = touched.empty() ? currentDeviceIndex() : touched.front().device().index();
    comm::Comm cm = commFor(device, c);
    c10::impl::VirtualGuardImpl impl(c10::DeviceType::PrivateUse1);
    c10::Stream caller = currentStream(device);
    c10::Event ready(c10::DeviceType::PrivateUse1);
    ready.record(caller);
    ready.block(stream_);
    for (const auto& t : touched) impl.recordDataPtrOnStream(t.storage().data_ptr(), stream_);
    keep_.clear();
    after_.clear();
    const bool coalescing = coalescing_;
    rt::Status st = rt::Status::Success;
    {
      std::shared_lock<std::shared_mutex> use(commUse_);  // the watchdog does not abort it under the call
      if (coalescing && !groupOpen_) {
        st = comm::group_start();
        groupOpen_ = st == rt::Status::Success;
      }
      c10::StreamGuard guard(stream_);  // copies and scaling inside fn run on the internal stream
      if (st == rt::Status::Success) st = fn(nativeHandle(stream_), cm);
      if (!coalescing) {
        for (auto& f : after_) f();
        after_.clear();
      }
    }
    for (auto& f : after_) afterGroup_.push_back(std::move(f));
    after_.clear();
    for (const auto& t : keep_) impl.recordDataPtrOnStream(t.storage().data_ptr(), stream_);
    keep_.clear();
    TORCH_CHECK(st == rt::Status::Success, "mytorch ", pg_.describe(c), " failed: ", statusText(st));
    auto work = makeWork(c, outputs, true);
    if (coalescing) {
      std::lock_guard<std::mutex> lock(mu_);
      coalesced_.push_back(work);  // ends with the group (endCoalescing)
      return work;
    }
    track({work}, device);
    return work;
  }

  // `works` end with the internal stream's work queued so far: their futures, wait() and synchronize() follow
  // an event recorded now, and the watchdog completes them.
  void track(const std::vector<c10::intrusive_ptr<WorkMytorch>>& works, c10::DeviceIndex device) {
    auto end = std::make_shared<c10::Event>(c10::DeviceType::PrivateUse1);
    end->record(stream_);
    const bool blocking = blockingWait_;
    auto timeout = pg_.timeout();
    for (const auto& work : works) {
      {
        c10::StreamGuard guard(stream_);
        work->getFuture()->markCompleted(c10::IValue(work->result()));  // consumers of the future wait on stream_
      }
      work->setDeviceHooks(
          [end, device, blocking, timeout, w = work.get(), health = health_] {
            if (!blocking) {
              end->block(currentStream(device));
              return;
            }
            auto start = std::chrono::steady_clock::now();
            while (!end->query() && !w->isCompleted()) {
              if (std::chrono::steady_clock::now() - start > timeout) {
                throw c10::DistBackendError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
                                            "mytorch " + w->what() + " did not finish within the timeout (" +
                                                std::to_string(timeout.count()) +
                                                " ms, blocking wait): a rank exited, hung, or called another "
                                                "collective");
              }
              std::this_thread::sleep_for(std::chrono::microseconds(100));
            }
            // Ended is not succeeded: a failed communicator's calls end too (as ProcessGroupNCCL's blocking wait,
            // ask NCCL for its async error before calling the work done).
            std::string why;
            {
              std::lock_guard<std::mutex> g(health->mu);
              if (health->path) why = health->path->failure();
            }
            if (!why.empty()) {
              throw c10::DistBackendError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
                                          "mytorch " + w->what() + " failed: " + why);
            }
          },
          [end] { end->synchronize(); }, [end] { return end->query(); });
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& work : works) pending_.push_back({work, end, std::chrono::steady_clock::now()});
    }
    cv_.notify_all();
  }

  // Completes works, success or `reason`, with the group's device current and no lock held: dropping a work's
  // last reference frees its tensors (and their device memory) and runs its future's callbacks.
  void finish(std::deque<Pending>& works, const std::string& reason) {
    if (works.empty()) return;
    std::optional<c10::DeviceGuard> guard;
    if (device_ >= 0) guard.emplace(c10::Device(c10::DeviceType::PrivateUse1, device_));
    for (auto& p : works) {
      if (reason.empty()) p.work->complete(nullptr);
      else
        p.work->complete(std::make_exception_ptr(
            c10::DistBackendError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, reason)));
    }
    works.clear();
  }

  // Finishes works whose end event passed; on a communicator error or a collective past the timeout,
  // aborts the communicator (so the others' calls return) and fails every pending work with the reason.
  void watch() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      cv_.wait_for(lock, std::chrono::milliseconds(50));
      if (stop_) break;
      std::deque<Pending> done, failed;
      while (!pending_.empty() && pending_.front().end->query()) {
        done.push_back(std::move(pending_.front()));
        pending_.pop_front();
      }
      std::string reason;
      comm::Comm cm = comm_;
      if (!pending_.empty() && cm) {
        rt::Status s = comm::async_error(cm);
        if (s != rt::Status::Success && s != rt::Status::NotReady) reason = "NCCL reported " + statusText(s);
        auto age = std::chrono::steady_clock::now() - pending_.front().start;
        if (reason.empty() && age > pg_.timeout()) {
          reason = pending_.front().work->what() + " did not finish within the timeout (" +
                   std::to_string(pg_.timeout().count()) + " ms): a rank exited, hung, or called another collective";
        }
        if (!reason.empty()) {
          broken_ = reason;
          comm_ = nullptr;
          failed.swap(pending_);
        }
      }
      lock.unlock();
      if (!reason.empty()) {
        std::unique_lock<std::shared_mutex> use(commUse_);
        (void)comm::abort(cm);
      }
      retire(done, failed, reason);
      lock.lock();
    }
  }

  // Note [Process-group watchdogs at exit]
  void retire(std::deque<Pending>& done, std::deque<Pending>& failed, const std::string& reason) {
    if (done.empty() && failed.empty()) return;
    ExitState& ex = exitState();
    {
      std::lock_guard<std::mutex> g(ex.mu);
      if (ex.exiting) {
        static auto* kept = new std::deque<Pending>();  // the process is ending: never freed
        for (auto* works : {&done, &failed})
          for (auto& p : *works) kept->push_back(std::move(p));
        return;
      }
      ++ex.retiring;
    }
    finish(done, "");
    finish(failed, reason);
    std::lock_guard<std::mutex> g(ex.mu);
    --ex.retiring;
    ex.cv.notify_all();
  }

  // What the works' blocking waits ask after the path: cleared when it shuts down.
  struct Health {
    std::mutex mu;
    NcclPath* path = nullptr;
  };
  std::shared_ptr<Health> health_ = std::make_shared<Health>();
  std::mutex mu_;
  std::mutex initMu_;  // Note [Communicator setup and the timeout]
  std::shared_mutex commUse_;  // calls into NCCL hold it shared; abort and destroy exclusively
  std::condition_variable cv_;
  std::deque<Pending> pending_;
  bool stop_ = false;
  std::thread watchdog_;
  comm::Comm comm_ = nullptr;
  c10::DeviceIndex device_ = -1;
  c10::Stream stream_{c10::Stream::DEFAULT, c10::Device(c10::DeviceType::PrivateUse1, 0)};
  std::string broken_;
  bool blockingWait_ = false;
  bool coalescing_ = false, groupOpen_ = false;
  std::vector<c10::intrusive_ptr<WorkMytorch>> coalesced_;
  std::vector<std::function<void()>> after_, afterGroup_;  // work queued after the call's NCCL calls
  Tensors keep_; // temporaries of the call being enqueued
  Tensors widened_;
};

} // namespace

std::unique_ptr<Path> makeNcclPath(ProcessGroupMytorch& pg) { return std::make_unique<NcclPath>(pg); }

void quiesceWatchdogsForExit() {
  ExitState& ex = exitState();
  std::unique_lock<std::mutex> lock(ex.mu);
  ex.exiting = true;
  ex.cv.wait(lock, [&] { return ex.retiring == 0; });
}

} // namespace mytorch::dist
