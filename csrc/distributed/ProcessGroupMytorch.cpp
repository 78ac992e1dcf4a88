// ProcessGroupMytorch: argument checks, the cross-rank agreement check, and the Work type shared by both
// data paths (Paths.h). Note [Ordering and stream contract] is in the header.
#include "csrc/distributed/ProcessGroupMytorch.hpp"

#include <c10/util/accumulate.h>
#include <ATen/core/ivalue.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <c10/util/irange.h>

#include <cstdlib>
#include <sstream>
#include <thread>

#include "csrc/distributed/Paths.h"
#include "mytorch/runtime.h"

namespace mytorch::dist {

// --- WorkMytorch -------------------------------------------------------------------------------------------

WorkMytorch::WorkMytorch(int rank, c10d::OpType type, std::string what, std::vector<at::Tensor> outputs,
                         bool cudaSemantics)
    : Work(rank, type), what_(std::move(what)), outputs_(std::move(outputs)), cuda_(cudaSemantics) {
  std::vector<c10::Device> devices;
  if (cuda_) {
    for (const auto& t : outputs_) {
      if (std::find(devices.begin(), devices.end(), t.device()) == devices.end()) devices.push_back(t.device());
    }
  }
  // On sim the future is CPU-like: once it completes, the bytes are in place (kernels run at submission).
  future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()), devices);
}

WorkMytorch::~WorkMytorch() = default;

std::exception_ptr WorkMytorch::wrap(std::exception_ptr error) const {
  try {
    std::rethrow_exception(error);
  } catch (const c10::DistBackendError& e) {
    return std::make_exception_ptr(
        c10::DistBackendError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
                              "mytorch " + what_ + " failed: " + e.what_without_backtrace()));
  } catch (const c10::Error& e) {
    return std::make_exception_ptr(
        c10::DistBackendError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
                              "mytorch " + what_ + " failed: " + e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return std::make_exception_ptr(c10::DistBackendError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
                                                         "mytorch " + what_ + " failed: " + e.what()));
  } catch (...) {
    return error;
  }
}

void WorkMytorch::complete(std::exception_ptr error) {
  if (!error && onSuccess_) {
    try {
      onSuccess_();
    } catch (...) {
      error = std::current_exception();
    }
  }
  onSuccess_ = nullptr;
  keep_.clear();
  if (error) {
    error = wrap(error);
    if (!future_->completed()) future_->setError(error);
    finish(error);
  } else {
    if (!future_->completed()) future_->markCompleted(c10::IValue(outputs_));
    finish();
  }
}

void WorkMytorch::completeWithFutures(const std::vector<c10::intrusive_ptr<c10d::Work>>& inner,
                                      std::function<void()> onSuccess, std::vector<at::Tensor> keep) {
  onSuccess_ = std::move(onSuccess);
  keep_ = std::move(keep);
  remaining_ = static_cast<int>(inner.size());
  if (inner.empty()) {
    complete(nullptr);
    return;
  }
  auto self = c10::intrusive_ptr<WorkMytorch>::reclaim_copy(this);
  auto firstError = std::make_shared<std::exception_ptr>();
  auto errorMutex = std::make_shared<std::mutex>();
  auto done = [self, firstError, errorMutex](std::exception_ptr e) {
    if (e) {
      std::lock_guard<std::mutex> lock(*errorMutex);
      if (!*firstError) *firstError = e;
    }
    if (--self->remaining_ == 0) self->complete(*firstError);
  };
  std::vector<c10::intrusive_ptr<c10d::Work>> withoutFuture;
  for (const auto& w : inner) {
    c10::intrusive_ptr<c10::ivalue::Future> fut;
    try {
      fut = w->getFuture();
    } catch (const c10::Error&) {
      // Gloo's reduce_scatter, send and recv: finished by wait(), or by a thread once getFuture() is asked for.
      withoutFuture.push_back(w);
      continue;
    }
    fut->addCallback([done](c10::ivalue::Future& f) { done(f.hasError() ? f.exception_ptr() : nullptr); });
  }
  if (!withoutFuture.empty()) {
    std::lock_guard<std::mutex> lock(innerMutex_);
    lateInner_ = std::move(withoutFuture);
    lateDone_ = std::move(done);
  }
}

void WorkMytorch::finishLate(bool inThread, std::chrono::milliseconds timeout) {
  std::vector<c10::intrusive_ptr<c10d::Work>> late;
  std::function<void(std::exception_ptr)> done;
  {
    std::lock_guard<std::mutex> lock(innerMutex_);
    late.swap(lateInner_);
    done.swap(lateDone_);
  }
  if (late.empty()) return;
  auto run = [late, done, timeout] {
    for (const auto& w : late) {
      std::exception_ptr e;
      try {
        w->wait(timeout);
      } catch (...) {
        e = std::current_exception();
      }
      done(e);
    }
  };
  if (inThread) std::thread(run).detach();
  else run();
}

c10::intrusive_ptr<c10::ivalue::Future> WorkMytorch::getFuture() {
  finishLate(true); // someone may wait on the future alone
  return future_;
}

bool WorkMytorch::isCompleted() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (completed_ || !ended_) return completed_;
  }
  return ended_();  // the device passed its end (the watchdog completes it formally within its period)
}

bool WorkMytorch::wait(std::chrono::milliseconds timeout) {
  finishLate(false, timeout);
  if (cuda_ && streamWait_) {
    // Like ProcessGroupNCCL: order the caller's stream after the collective; raise what the watchdog saw.
    streamWait_();
    std::lock_guard<std::mutex> lock(mutex_);
    if (exception_) std::rethrow_exception(exception_);
    return true;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  if (timeout == kNoTimeout) {
    cv_.wait(lock, [&] { return completed_; });
  } else if (!cv_.wait_for(lock, timeout, [&] { return completed_; })) {
    C10_THROW_ERROR(DistBackendError,
                    "mytorch " + what_ + ": wait() timed out after " + std::to_string(timeout.count()) + " ms");
  }
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

void WorkMytorch::synchronize() {
  if (cuda_ && hostWait_) {
    hostWait_();
    std::lock_guard<std::mutex> lock(mutex_);
    if (exception_) std::rethrow_exception(exception_);
    return;
  }
  wait();
}

// --- ProcessGroupMytorch -----------------------------------------------------------------------------------

namespace {

bool envFlag(const char* name, bool fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  std::string s(v);
  return !(s == "0" || s == "false" || s == "False" || s == "off" || s == "no");
}

// Collective names as one number, for the agreement check.
int64_t nameCode(const char* name) {
  uint64_t h = 1469598103934665603ull;
  for (const char* p = name; *p; ++p) h = (h ^ static_cast<unsigned char>(*p)) * 1099511628211ull;
  return static_cast<int64_t>(h >> 1);
}

const char* opName(int64_t op) {
  switch (op) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "?";
  }
}

// Fingerprint layout (int64): name, dtype, op, root, count, tensors, ndim, 7 dims, peer, pad, then the
// all-to-all splits (world size each, in and out).
constexpr int kHead = 16;
constexpr int kMaxShownDims = 7;
// Point-to-point tag of the agreement messages: above user tags (< 2^29) and size headers (2^29 + tag).
constexpr int kCheckTag = 1 << 30;

// Note [The agreement check's cost]
// Gloo aborts the process when a rank receives more bytes than it posted, so on sim every collective is
// preceded by an exchange of what each rank is about to do. It is one round of point-to-point messages
// (each rank to every other), posted and waited on in the calling thread; a Gloo all-gather would add a
// hand-off to Gloo's worker thread and world-size-1 sequential ring steps. Its cost is one network round
// trip per collective: measured by benchmarks/distributed.py (checked against unchecked columns).

} // namespace

std::optional<double> premulFactor(const c10d::ReduceOp& op) {
  if (op.op_ != c10d::ReduceOp::PREMUL_SUM) return std::nullopt;
  // NCCLPreMulSumSupplement: the name every torch from 2.11 to 2.13 has (newer ones alias it).
  auto sup = c10::static_intrusive_pointer_cast<c10d::NCCLPreMulSumSupplement>(op.supplement_);
  TORCH_CHECK(sup, "mytorch: PREMUL_SUM without its factor (make it with torch.distributed._make_nccl_premul_sum)");
  if (sup->tensor_factor.defined()) return sup->tensor_factor.to(at::kCPU).item<double>();
  return sup->double_factor;
}

ProcessGroupMytorch::ProcessGroupMytorch(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                         std::chrono::milliseconds timeout, c10::intrusive_ptr<c10d::Backend> host,
                                         std::string groupName, void* comm, int device)
    : Backend(rank, size), store_(store), timeout_(timeout), host_(std::move(host)), groupName_(std::move(groupName)) {
  TORCH_CHECK(host_ || usesNccl(), "ProcessGroupMytorch needs a Gloo backend over the same ranks on sim");
  check_ = envFlag("MYTORCH_DIST_CHECK", !usesNccl());
  TORCH_CHECK(host_ || !check_, "mytorch: a process group split from its parent (group '", groupName_,
              "') has no Gloo backend to check the ranks' agreement with; unset MYTORCH_DIST_CHECK");
  // Every rank must agree on checking: it adds a step to each collective's protocol. A split group has no
  // check (no Gloo) and needs no store round: its communicator comes from the split (and torch names a DeviceMesh
  // dimension's split groups differently on different ranks, so their stores are not shared).
  if (!comm) store_->set("mytorch_check/" + std::to_string(rank), std::vector<uint8_t>{static_cast<uint8_t>(check_)});
  for (int r = 0; r < size && !comm; ++r) {
    auto v = store_->get("mytorch_check/" + std::to_string(r));
    TORCH_CHECK(!v.empty() && static_cast<bool>(v[0]) == check_, "ProcessGroupMytorch: MYTORCH_DIST_CHECK is ",
                check_ ? "on" : "off", " on rank ", rank, " but ", check_ ? "off" : "on", " on rank ", r,
                "; set it the same way on every rank");
  }
  path_ = usesNccl() ? makeNcclPath(*this) : makeIntraHostPath(*this, makeHostPath(*this));
  if (comm) path_->adopt(comm, device);
}

c10::intrusive_ptr<c10d::Backend::Options> ProcessGroupMytorch::getBackendOptions() {
  auto o = c10::make_intrusive<Options>("mytorch", timeout_);
  o->group_name = groupName_;
  return o;
}

void ProcessGroupMytorch::setSequenceNumberForGroup() {
  if (host_) host_->setSequenceNumberForGroup();
  else seq_ = 0;
}

uint64_t ProcessGroupMytorch::getSequenceNumberForGroup() {
  return host_ ? host_->getSequenceNumberForGroup() : seq_.load();
}

void ProcessGroupMytorch::startCoalescing() {
  std::lock_guard<std::mutex> order(callMutex_);
  path_->startCoalescing();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMytorch::endCoalescing() {
  CallInfo c;
  c.name = "coalesced";
  c.type = c10d::OpType::COALESCED;
  c.tensors = 0;
  std::lock_guard<std::mutex> order(callMutex_);
  return path_->endCoalescing(c);
}

c10::intrusive_ptr<c10d::Backend> ProcessGroupMytorch::split(const c10::intrusive_ptr<c10d::Store>& store,
                                                             const std::vector<int>& ranks,
                                                             const c10::intrusive_ptr<Options>& opts) {
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  for (int r : sorted) {
    TORCH_CHECK_VALUE(r >= 0 && r < size_, "mytorch split: expected ranks in [0, ", size_, "), but got ", r);
  }
  auto me = std::find(sorted.begin(), sorted.end(), rank_);
  const bool member = me != sorted.end();
  CallInfo c;
  c.name = "split";
  c.type = c10d::OpType::UNKNOWN;
  c.tensors = 0;
  std::pair<void*, int> child;
  {
    std::lock_guard<std::mutex> order(callMutex_);
    // Disjoint groups of one split get different colors: each group's lowest rank.
    child = path_->split(member ? sorted.front() : -1, rank_, c);
  }
  if (!member) return nullptr;
  const auto timeout = opts ? opts->timeout : timeout_;
  const std::string name = opts && !opts->group_name.empty() ? opts->group_name : groupName_ + ":split";
  auto pg = c10::make_intrusive<ProcessGroupMytorch>(store, static_cast<int>(me - sorted.begin()),
                                                     static_cast<int>(sorted.size()), timeout, nullptr, name,
                                                     child.first, child.second);
  return pg;
}

void ProcessGroupMytorch::eagerConnectSingleDevice(at::Device device) {
  if (!usesNccl() || device.type() != c10::DeviceType::PrivateUse1) return;
  CallInfo c;
  c.name = "communicator setup";
  c.type = c10d::OpType::UNKNOWN;
  c.tensors = 0;
  std::lock_guard<std::mutex> order(callMutex_);
  path_->connect(device.has_index() ? device.index() : 0, c);
}

void ProcessGroupMytorch::shutdown() {
  withoutGil()([this] { path_->shutdown(false); });
}

void ProcessGroupMytorch::abort() {
  withoutGil()([this] { path_->shutdown(true); });
}

std::function<void(const std::function<void()>&)>& withoutGil() {
  static std::function<void(const std::function<void()>&)> run = [](const std::function<void()>& f) { f(); };
  return run;
}

ProcessGroupMytorch::~ProcessGroupMytorch() {
  // Gloo's destructor (and the NCCL watchdog's) joins threads that may be finishing a Work, and dropping a
  // Work's tensors can need the GIL: never join them while holding it (the Python binding's deallocation
  // does hold it).
  withoutGil()([this] {
    path_.reset();
    host_.reset();
  });
}

bool ProcessGroupMytorch::usesSymmetricMemory() const { return path_ && path_->symmetricMemory(); }
bool ProcessGroupMytorch::usesNccl() const { return rt::kind() == rt::Kind::Cuda || rt::kind() == rt::Kind::Emu; }

std::string ProcessGroupMytorch::describe(const CallInfo& c) const {
  std::ostringstream os;
  os << c.name << " (rank " << rank_ << " of " << size_ << ", group '" << groupName_ << "'";
  if (c.count > 0 || !c.shape.empty()) {
    os << ", " << c10::toString(c.dtype) << "[";
    for (size_t i = 0; i < c.shape.size(); ++i) os << (i ? ", " : "") << c.shape[i];
    os << "]";
    if (c.tensors > 1) os << " x" << c.tensors;
  }
  if (c.reduceOp >= 0) os << ", " << opName(c.reduceOp);
  if (c.root >= 0) os << ", root " << c.root;
  if (c.peer >= 0) os << ", peer " << c.peer;
  os << ")";
  return os.str();
}

void ProcessGroupMytorch::checkTensor(const CallInfo& c, const at::Tensor& t, const char* role) const {
  TORCH_CHECK_VALUE(t.defined(), "mytorch ", c.name, ": expected a tensor for ", role, ", but got an undefined one");
  TORCH_CHECK_VALUE(t.device().type() == c10::DeviceType::PrivateUse1, "mytorch ", c.name, ": expected ", role,
                    " on the mytorch device, but got a tensor on ", t.device(),
                    " (use a 'cpu:gloo,mytorch:mytorch' process group for CPU tensors)");
  TORCH_CHECK_VALUE(t.layout() == at::kStrided, "mytorch ", c.name, ": expected a dense ", role, ", but got layout ",
                    t.layout());
  TORCH_CHECK_VALUE(t.is_non_overlapping_and_dense() && t.is_contiguous(), "mytorch ", c.name,
                    ": expected a contiguous ", role, ", but got sizes ", t.sizes(), " with strides ", t.strides());
}

void ProcessGroupMytorch::checkSameDevice(const CallInfo& c, const std::vector<at::Tensor>& ts) const {
  for (const auto& t : ts) {
    TORCH_CHECK_VALUE(t.device() == ts.front().device() && t.scalar_type() == ts.front().scalar_type(), "mytorch ",
                      c.name, ": expected every tensor on one device with one dtype, but got ", ts.front().device(),
                      " ", ts.front().scalar_type(), " and ", t.device(), " ", t.scalar_type());
  }
}

CallInfo ProcessGroupMytorch::info(const char* name, c10d::OpType type, const std::vector<at::Tensor>& ts,
                                   const char* role) {
  CallInfo c;
  c.name = name;
  c.type = type;
  c.tensors = static_cast<int64_t>(ts.size());
  for (const auto& t : ts) checkTensor(c, t, role);
  if (!ts.empty()) {
    checkSameDevice(c, ts);
    // The host path hands Gloo CPU views of device memory. On sim a stream's work has run by the time it is
    // queued; on emu streams are asynchronous, so the device's work must have finished first.
    if (rt::kind() == rt::Kind::Emu && !usesNccl()) {
      rt::Status s = rt::device_synchronize(ts.front().device().index());
      TORCH_CHECK(s == rt::Status::Success, "mytorch ", name, ": ", rt::last_error());
    }
    c.dtype = ts.front().scalar_type();
    c.count = ts.front().numel();
    c.shape = ts.front().sizes().vec();
  }
  return c;
}

void ProcessGroupMytorch::checkAgreement(const CallInfo& c) {
  if (!host_) ++seq_;
  if (!check_ || size_ == 1) return;
  const int width = kHead + 2 * size_;
  at::Tensor mine = at::empty({width}, at::TensorOptions().dtype(at::kLong));
  int64_t* p = mine.data_ptr<int64_t>();
  std::fill(p, p + width, 0);
  p[0] = nameCode(c.name);
  p[1] = static_cast<int64_t>(c.dtype);
  p[2] = c.reduceOp;
  p[3] = c.root;
  p[4] = c.count;
  p[5] = c.tensors;
  p[6] = static_cast<int64_t>(c.shape.size());
  for (size_t i = 0; i < c.shape.size() && i < kMaxShownDims; ++i) p[7 + i] = c.shape[i];
  p[14] = c.peer;
  for (size_t i = 0; i < c.inSplits.size() && static_cast<int>(i) < size_; ++i) p[kHead + i] = c.inSplits[i];
  for (size_t i = 0; i < c.outSplits.size() && static_cast<int>(i) < size_; ++i) p[kHead + size_ + i] = c.outSplits[i];

  // One all-to-all round of point-to-point messages, waited on in this thread: no trip through Gloo's
  // collective queue and no ring of world-size steps (Note [The agreement check's cost]).
  std::vector<std::vector<at::Tensor>> out(1);
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  try {
    for (int r = 0; r < size_; ++r) {
      out[0].push_back(r == rank_ ? mine : at::empty({width}, at::TensorOptions().dtype(at::kLong)));
    }
    const bool exchanged = path_->exchangeCheck(mine, out[0]);  // the intra-host path's workspace, if any
    for (int r = 0; r < size_ && !exchanged; ++r) {
      if (r == rank_) continue;
      std::vector<at::Tensor> send{mine};
      works.push_back(host_->send(send, r, kCheckTag));
    }
    for (int r = 0; r < size_ && !exchanged; ++r) {
      if (r == rank_) continue;
      std::vector<at::Tensor> recv{out[0][r]};
      works.push_back(host_->recv(recv, r, kCheckTag));
    }
    for (auto& w : works) w->wait(timeout_);
  } catch (const std::exception& e) {
    C10_THROW_ERROR(DistBackendError, "mytorch " + describe(c) +
                                          " failed while checking that the ranks agree (a rank exited, hung or "
                                          "called another collective): " +
                                          e.what());
  }
  auto field = [&](int r, int i) { return out[0][r].data_ptr<int64_t>()[i]; };
  auto show = [&](int r) {
    std::ostringstream os;
    os << "rank " << r << ": ";
    if (field(r, 0) != p[0]) return os.str() + "another collective";
    os << c10::toString(static_cast<at::ScalarType>(field(r, 1))) << "[";
    for (int i = 0; i < std::min<int64_t>(field(r, 6), kMaxShownDims); ++i) os << (i ? ", " : "") << field(r, 7 + i);
    os << "]";
    if (field(r, 5) > 1) os << " x" << field(r, 5);
    if (field(r, 2) >= 0) os << " " << opName(field(r, 2));
    if (field(r, 3) >= 0) os << " root " << field(r, 3);
    return os.str();
  };
  std::string why;
  for (int r = 0; r < size_ && why.empty(); ++r) {
    if (field(r, 0) != p[0]) {
      why = "not every rank called " + std::string(c.name);
      break;
    }
    if (c.type == c10d::OpType::BARRIER) continue;
    if (field(r, 1) != p[1]) why = "the dtypes differ";
    else if (field(r, 2) != p[2]) why = "the reduction ops differ";
    else if (field(r, 3) != p[3]) why = "the roots differ";
    else if (field(r, 5) != p[5]) why = "the numbers of tensors differ";
    else if (c.type != c10d::OpType::ALLTOALL_BASE && c.type != c10d::OpType::ALLTOALL && field(r, 4) != p[4])
      why = "the element counts differ";
    else if (c.type == c10d::OpType::ALLTOALL_BASE || c.type == c10d::OpType::ALLTOALL) {
      if (field(r, 4) != p[4]) why = "the element counts per row differ";
      for (int j = 0; j < size_ && why.empty(); ++j) {
        // What rank r sends to j must be what j expects from r.
        if (field(r, kHead + j) != field(j, kHead + size_ + r)) {
          why = "rank " + std::to_string(r) + " sends " + std::to_string(field(r, kHead + j)) + " elements to rank " +
                std::to_string(j) + ", which expects " + std::to_string(field(j, kHead + size_ + r));
        }
      }
    }
  }
  if (why.empty()) return;
  std::ostringstream os;
  os << "mytorch " << c.name << " (group '" << groupName_ << "'): the ranks disagree, " << why << " (";
  for (int r = 0; r < size_; ++r) os << (r ? "; " : "") << show(r);
  os << "). Every rank must call the same collective with the same dtype and element count.";
  C10_THROW_ERROR(ValueError, os.str());
}

// --- collectives ---------------------------------------------------------------------------------------------

namespace {
void expectOne(const char* name, size_t n, const char* what) {
  TORCH_CHECK_VALUE(n == 1, "mytorch ", name, ": expected one ", what, " per process (one device per rank), but got ",
                    n);
}
} // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupMytorch::broadcast(std::vector<at::Tensor>& ts,
                                                              const c10d::BroadcastOptions& o) {
  expectOne("broadcast", ts.size(), "tensor");
  CallInfo c = info("broadcast", c10d::OpType::BROADCAST, ts, "tensor");
  TORCH_CHECK_VALUE(o.rootRank >= 0 && o.rootRank < size_, "mytorch broadcast: expected a root in [0, ", size_,
                    "), but got ", o.rootRank);
  c.root = o.rootRank;
  std::lock_guard<std::mutex> order(callMutex_);
  checkAgreement(c);
  return path_->broadcast(c, ts, o);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMytorch::allreduce(std::vector<at::Tensor>& ts,
                                                              const c10d::AllreduceOptions& o) {
  expectOne("allreduce", ts.size(), "tensor");
  TORCH_CHECK_VALUE(!o.sparseIndices.has_value(), "mytorch allreduce: sparse tensors are not supported");
  CallInfo c = info("allreduce", c10d::OpType::ALLREDUCE, ts, "tensor");
  c.reduceOp = o.reduceOp.op_;
  std::lock_guard<std::mutex> order(callMutex_);
  checkAgreement(c);
  return path_->allreduce(c, ts, o);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMytorch::allreduce_coalesced(std::vector<at::Tensor>& ts,
                                                                        const c10d::AllreduceCoalescedOptions& o) {
  TORCH_CHECK_VALUE(!ts.empty(), "mytorch allreduce_coalesced: expected at least one tensor, but got none");
  CallInfo c = info("allreduce_coalesced", c10d::OpType::ALLREDUCE_COALESCED, ts, "tensor");
  c.reduceOp = o.reduceOp.op_;
  c.count = 0;
  for (const auto& t : ts) c.count += t.numel();
  std::lock_guard<std::mutex> order(callMutex_);
  checkAgreement(c);
  return path_->allreduceCoalesced(c, ts, o);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMytorch::reduce(std::vector<at::Tensor>& ts, const c10d::ReduceOptions& o) {
  expectOne("reduce", ts.size(), "tensor");
  CallInfo c = info("reduce", c10d::OpType::REDUCE, ts, "tensor");
  TORCH_CHECK_VALUE(o.rootRank >= 0 && o.rootRank < size_, "mytorch reduce: expected a root in [0, ", size_,
                    "), but got ", o.rootRank);
  c.root = o.rootRank;
  c.reduceOp = o.reduceOp.op_;
  std::lock_guard<std::mutex> order(callMutex_);
  checkAgreement(c);
  return path_->reduce(c, ts, o);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMytorch::allgather(std::vector<std::vector<at::Tensor>>& outs,
                                                              std::vector<at::Tensor>& ins,
                                                              const c10d::AllgatherOptions& o) {
  expectOne("allgather", ins.size(), "input");
  expectOne("allgather", outs.size(), "output list");
  CallInfo c = info("allgather", c10d::OpType::ALLGATHER, ins, "input");
  TORCH_CHECK_VALUE(static_cast<int>(outs[0].size()) == size_, "mytorch allgather: expected ", size_,
                    " output tensors (the world size), but got ", outs[0].size());
  for (const auto& t : outs[0]) {
    checkTensor(c, t, "output");
    TORCH_CHECK_VALUE(
        t.numel() == ins[0].numel() && t.scalar_type() == ins[0].scalar_type() && t.device() == ins[0].device(),
        "mytorch allgather: expected every output like the input (", ins[0].scalar_type(), ", ", ins[0].numel(),
        " elements, ", ins[0].device(), "), but got ", t.scalar_type(), ", ", t.numel(), " elements, ", t.device());
  }
  std::lock_guard<std::mutex> order(callMutex_);
  checkAgreement(c);
  return path_->allgather(c, outs, ins, o);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMytorch::_allgather_base(at::Tensor& out, at::Tensor& in,
                                                                    const c10d::AllgatherOptions& o) {
  std::vector<at::Tensor> ins{in}, outs{out};
  return allgather_into_tensor_coalesced(outs, ins, o);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMytorch::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outs,
                                                                                    std::vector<at::Tensor>& ins,
                                                                                    const c10d::AllgatherOptions& o) {
  TORCH_CHECK_VALUE(!ins.empty() && ins.size() == outs.size(),
                    "mytorch allgather_into_tensor: expected as many "
                    "outputs as inputs (at least one), but got ",
                    outs.size(), " and ", ins.size());
  CallInfo c = info("allgather_into_tensor", c10d::OpType::_ALLGATHER_BASE, ins, "input");
  for (size_t i = 0; i < ins.size(); ++i) {
    checkTensor(c, outs[i], "output");
    TORCH_CHECK_VALUE(outs[i].numel() == ins[i].numel() * size_ && outs[i].scalar_type() == ins[i].scalar_type() &&
                          outs[i].device() == ins[i].device(),
                      "mytorch allgather_into_tensor: expected an output of ", ins[i].numel() * size_, " ",
                      ins[i].scalar_type(), " elements (world size x input) on ", ins[i].device(), ", but got ",
                      outs[i].numel(), " ", outs[i].scalar_type(), " elements on ", outs[i].device());
  }
  c.count = 0;
  for (const auto& t : ins) c.count += t.numel();
  std::lock_guard<std::mutex> order(callMutex_);
  checkAgreement(c);
  return path_->allgatherBase(c, outs, ins, o);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMytorch::gather(std::vector<std::vector<at::Tensor>>& outs,
                                                           std::vector<at::Tensor>& ins, const c10d::GatherOptions& o) {
  expectOne("gather", ins.size(), "input");
  CallInfo c = info("gather", c10d::OpType::GATHER, ins, "input");
  TORCH_CHECK_VALUE(o.rootRank >= 0 && o.rootRank < size_, "mytorch gather: expected a root in [0, ", size_,
                    "), but got ", o.rootRank);
  c.root = o.rootRank;
  if (rank_ == o.rootRank) {
    TORCH_CHECK_VALUE(outs.size() == 1 && static_cast<int>(outs[0].size()) == size_, "mytorch gather: expected ", size_,
                      " outputs on the root, but got ", outs.empty() ? 0 : outs[0].size());
    for (const auto& t : outs[0]) {
      checkTensor(c, t, "output");
      TORCH_CHECK_VALUE(t.numel() == ins[0].numel() && t.scalar_type() == ins[0].scalar_type(),
                        "mytorch gather: expected outputs of ", ins[0].numel(), " ", ins[0].scalar_type(),
                        " elements, but got ", t.numel(), " ", t.scalar_type());
    }
  } else {
    TORCH_CHECK_VALUE(outs.empty() || outs[0].empty(), "mytorch gather: expected no outputs on a non-root rank");
  }
  std::lock_guard<std::mutex> order(callMutex_);
  checkAgreement(c);
  return path_->gather(c, outs, ins, o);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMytorch::scatter(std::vector<at::Tensor>& outs,
                                                            std::vector<std::vector<at::Tensor>>& ins,
                                                            const c10d::ScatterOptions& o) {
  expectOne("scatter", outs.size(), "output");
  CallInfo c = info("scatter", c10d::OpType::SCATTER, outs, "output");
  TORCH_CHECK_VALUE(o.rootRank >= 0 && o.rootRank < size_, "mytorch scatter: expected a root in [0, ", size_,
                    "), but got ", o.rootRank);
  c.root = o.rootRank;
  if (rank_ == o.rootRank) {
    TORCH_CHECK_VALUE(ins.size() == 1 && static_cast<int>(ins[0].size()) == size_, "mytorch scatter: expected ", size_,
                      " inputs on the root, but got ", ins.empty() ? 0 : ins[0].size());
    for (const auto& t : ins[0]) {
      checkTensor(c, t, "input");
      TORCH_CHECK_VALUE(t.numel() == outs[0].numel() && t.scalar_type() == outs[0].scalar_type(),
                        "mytorch scatter: expected inputs of ", outs[0].numel(), " ", outs[0].scalar_type(),
                        " elements, but got ", t.numel(), " ", t.scalar_type());
    }
  } else {
    TORCH_CHECK_VALUE(ins.empty() || ins[0].empty(), "mytorch scatter: expected no inputs on a non-root rank");
  }
  std::lock_guard<std::mutex> order(callMutex_);
  checkAgreement(c);
  return path_->scatter(c, outs, ins, o);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMytorch::reduce_scatter(std::vector<at::Tensor>& outs,
                                                                   std::vector<std::vector<at::Tensor>>& ins,
                                                                   const c10d::ReduceScatterOptions& o) {
  expectOne("reduce_scatter", outs.size(), "output");
  expectOne("reduce_scatter", ins.size(), "input list");
  CallInfo c = info("reduce_scatter", c10d::OpType::REDUCE_SCATTER, outs, "output");
  c.reduceOp = o.reduceOp.op_;
  TORCH_CHECK_VALUE(static_cast<int>(ins[0].size()) == size_, "mytorch reduce_scatter: expected ", size_,
                    " inputs (the world size), but got ", ins[0].size());
  for (const auto& t : ins[0]) {
    checkTensor(c, t, "input");
    TORCH_CHECK_VALUE(
        t.numel() == outs[0].numel() && t.scalar_type() == outs[0].scalar_type() && t.device() == outs[0].device(),
        "mytorch reduce_scatter: expected inputs like the output (", outs[0].numel(), " ", outs[0].scalar_type(),
        " elements), but got ", t.numel(), " ", t.scalar_type());
  }
  std::lock_guard<std::mutex> order(callMutex_);
  checkAgreement(c);
  return path_->reduceScatter(c, outs, ins, o);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMytorch::_reduce_scatter_base(at::Tensor& out, at::Tensor& in,
                                                                         const c10d::ReduceScatterOptions& o) {
  std::vector<at::Tensor> ins{in}, outs{out};
  return reduce_scatter_tensor_coalesced(outs, ins, o);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMytorch::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outs, std::vector<at::Tensor>& ins, const c10d::ReduceScatterOptions& o) {
  TORCH_CHECK_VALUE(!ins.empty() && ins.size() == outs.size(),
                    "mytorch reduce_scatter_tensor: expected as many "
                    "outputs as inputs (at least one), but got ",
                    outs.size(), " and ", ins.size());
  CallInfo c = info("reduce_scatter_tensor", c10d::OpType::_REDUCE_SCATTER_BASE, outs, "output");
  c.reduceOp = o.reduceOp.op_;
  for (size_t i = 0; i < ins.size(); ++i) {
    checkTensor(c, ins[i], "input");
    TORCH_CHECK_VALUE(ins[i].numel() == outs[i].numel() * size_ && ins[i].scalar_type() == outs[i].scalar_type() &&
                          ins[i].device() == outs[i].device(),
                      "mytorch reduce_scatter_tensor: expected an input of ", outs[i].numel() * size_, " ",
                      outs[i].scalar_type(), " elements (world size x output) on ", outs[i].device(), ", but got ",
                      ins[i].numel(), " ", ins[i].scalar_type(), " elements on ", ins[i].device());
  }
  c.count = 0;
  for (const auto& t : outs) c.count += t.numel();
  std::lock_guard<std::mutex> order(callMutex_);
  checkAgreement(c);
  return path_->reduceScatterBase(c, outs, ins, o);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMytorch::alltoall_base(at::Tensor& out, at::Tensor& in,
                                                                  std::vector<int64_t>& outSplits,
                                                                  std::vector<int64_t>& inSplits,
                                                                  const c10d::AllToAllOptions& o) {
  CallInfo c = info("alltoall_base", c10d::OpType::ALLTOALL_BASE, {in}, "input");
  checkTensor(c, out, "output");
  TORCH_CHECK_VALUE(out.scalar_type() == in.scalar_type() && out.device() == in.device(),
                    "mytorch alltoall_base: expected the output's dtype and device to be the input's (",
                    in.scalar_type(), ", ", in.device(), "), but got ", out.scalar_type(), ", ", out.device());
  auto rows = [&](const at::Tensor& t, std::vector<int64_t> splits, const char* role) {
    const int64_t n = t.dim() ? t.size(0) : 1;
    if (splits.empty()) {
      TORCH_CHECK_VALUE(n % size_ == 0, "mytorch alltoall_base: without splits the ", role, "'s first dimension (", n,
                        ") must divide by the world size ", size_);
      splits.assign(size_, n / size_);
    }
    TORCH_CHECK_VALUE(static_cast<int>(splits.size()) == size_, "mytorch alltoall_base: expected ", size_, " ", role,
                      " splits, but got ", splits.size());
    int64_t sum = 0;
    for (int64_t s : splits) {
      TORCH_CHECK_VALUE(s >= 0, "mytorch alltoall_base: expected non-negative ", role, " splits, but got ", s);
      sum += s;
    }
    TORCH_CHECK_VALUE(sum == n, "mytorch alltoall_base: the ", role, " splits add up to ", sum,
                      " but the first dimension is ", n);
    return splits;
  };
  std::vector<int64_t> inRows = rows(in, inSplits, "input"), outRows = rows(out, outSplits, "output");
  // A row's elements from the trailing sizes: a rank sending no rows ([0, 256]) had rows of 0, refused by the check.
  auto rowOf = [](const at::Tensor& t) { return t.dim() ? c10::multiply_integers(t.sizes().slice(1)) : t.numel(); };
  const int64_t rowElems = rowOf(in), outRowElems = rowOf(out);
  TORCH_CHECK_VALUE(in.dim() == 0 || out.dim() == 0 || in.size(0) == 0 || out.size(0) == 0 || rowElems == outRowElems,
                    "mytorch alltoall_base: expected rows of the same size in input and output, but got ", rowElems,
                    " and ", outRowElems, " elements");
  c.count = rowElems;
  for (auto s : inRows) c.inSplits.push_back(s * rowElems);
  for (auto s : outRows) c.outSplits.push_back(s * outRowElems);
  std::lock_guard<std::mutex> order(callMutex_);
  checkAgreement(c);
  return path_->alltoallBase(c, out, in, outRows, inRows, o);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMytorch::alltoall(std::vector<at::Tensor>& outs,
                                                             std::vector<at::Tensor>& ins,
                                                             const c10d::AllToAllOptions& o) {
  TORCH_CHECK_VALUE(static_cast<int>(ins.size()) == size_ && static_cast<int>(outs.size()) == size_,
                    "mytorch alltoall: expected ", size_, " inputs and outputs (the world size), but got ", ins.size(),
                    " and ", outs.size());
  CallInfo c = info("alltoall", c10d::OpType::ALLTOALL, ins, "input");
  for (const auto& t : outs) checkTensor(c, t, "output");
  checkSameDevice(c, outs);
  TORCH_CHECK_VALUE(outs[0].scalar_type() == c.dtype, "mytorch alltoall: expected outputs of dtype ", c.dtype,
                    ", but got ", outs[0].scalar_type());
  c.count = 1;
  for (const auto& t : ins) c.inSplits.push_back(t.numel());
  for (const auto& t : outs) c.outSplits.push_back(t.numel());
  std::lock_guard<std::mutex> order(callMutex_);
  checkAgreement(c);
  return path_->alltoall(c, outs, ins, o);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMytorch::send(std::vector<at::Tensor>& ts, int dst, int tag) {
  expectOne("send", ts.size(), "tensor");
  CallInfo c = info("send", c10d::OpType::SEND, ts, "tensor");
  TORCH_CHECK_VALUE(dst >= 0 && dst < size_ && dst != rank_, "mytorch send: expected a peer rank in [0, ", size_,
                    ") other than ", rank_, ", but got ", dst);
  TORCH_CHECK_VALUE(tag >= 0 && tag < (1 << 29), "mytorch send: expected a tag in [0, 2^29), but got ", tag);
  c.peer = dst;
  std::lock_guard<std::mutex> order(callMutex_);
  return path_->send(c, ts, dst, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMytorch::recv(std::vector<at::Tensor>& ts, int src, int tag) {
  expectOne("recv", ts.size(), "tensor");
  CallInfo c = info("recv", c10d::OpType::RECV, ts, "tensor");
  TORCH_CHECK_VALUE(src >= 0 && src < size_ && src != rank_, "mytorch recv: expected a peer rank in [0, ", size_,
                    ") other than ", rank_, ", but got ", src, " (receiving from any source is not supported)");
  TORCH_CHECK_VALUE(tag >= 0 && tag < (1 << 29), "mytorch recv: expected a tag in [0, 2^29), but got ", tag);
  c.peer = src;
  std::lock_guard<std::mutex> order(callMutex_);
  return path_->recv(c, ts, src, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMytorch::barrier(const c10d::BarrierOptions& o) {
  CallInfo c;
  c.name = "barrier";
  c.type = c10d::OpType::BARRIER;
  c.tensors = 0;
  std::lock_guard<std::mutex> order(callMutex_);
  checkAgreement(c);
  return path_->barrier(c, o);
}

} // namespace mytorch::dist
