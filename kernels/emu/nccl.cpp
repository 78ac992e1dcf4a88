// The emulated NCCL (include/nccl.h): what kernels/runtime/nccl.cpp calls, across the rank processes of one machine,
// so that the NCCL path of the process group runs under the emulated build.
//
// Note [The emulated NCCL]
// A communicator is a shared-memory segment named by its unique id (nccl_link.cpp), which every rank maps at
// ncclCommInitRank; a split communicator's segment is named after its parent's. Every call is a task in stream
// order: cudaLaunchHostFunc on the caller's stream (of the communicator's device), so it starts after the kernels
// queued before it and the kernels queued after it wait for it. Where NCCL's semantics show, they are kept:
//  - a send completes only once its receiver posted the matching receive, so a send and a receive posted outside a
//    group in the order that deadlocks on NCCL deadlocks here too (until a watchdog aborts the communicator);
//  - the calls between ncclGroupStart and ncclGroupEnd become one task per (communicator, stream), whose
//    transfers progress together; collectives inside a group run first, in issue order;
//  - a communicator's tasks run in the order they were issued, even across streams;
//  - every rank must call the same collectives with the same counts, types, ops and roots: a disagreement fails
//    the communicator on every rank with ncclInvalidUsage, naming both calls (NCCL would hang or corrupt);
//  - buffers must lie in live device memory of the communicator's device (ncclInvalidArgument otherwise);
//  - an error is the communicator's async error; from then on its calls run nothing; ncclCommAbort also fails it for
//    the other ranks, and a rank whose process exited fails it for the others within milliseconds;
//  - a non-blocking config makes init and split return ncclInProgress and finish in the background.
// Fault injection: MYTORCH_EMU_NCCL_FAULT=<hang|error|exit>@<n> makes this process's n-th task hang until the
// communicator is aborted, fail with ncclSystemError, or end the process (with status 0, so that a launcher such
// as torch.multiprocessing does not stop the other ranks before they notice).
// The arithmetic folds the ranks' inputs in rank order in double (integers in their own type, wrapping) and rounds
// once, so every rank gets the same bits. Bandwidth, NVLink and the network are not modelled (docs/distributed.md).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "internal.h"
#include "nccl.h"
#include "nccl_link.h"

namespace mytorch::emu::nccl {

struct State;

}  // namespace mytorch::emu::nccl

struct EmuNcclComm { std::shared_ptr<mytorch::emu::nccl::State> s; };

namespace mytorch::emu::nccl {
namespace {

constexpr char kIdMagic[] = "mytorch-emu-nccl";

enum Kind { kAllReduce = 0, kBroadcast, kReduce, kAllGather, kReduceScatter, kSend, kRecv };

struct Call {
  int kind = 0;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  ncclDataType_t type = ncclFloat32;
  int op = ncclSum;
  double premul = 1;
  bool has_premul = false;
  int root = -1;  // the peer of a send or receive
};

}  // namespace

struct State {
  int rank = 0, nranks = 0, device = 0;
  std::string name;
  std::shared_ptr<Link> link;                  // set before `result` becomes ncclSuccess
  std::atomic<int> result{ncclInProgress};     // the async error; ncclInProgress while connecting
  std::atomic<bool> cancelled{false};
  std::mutex mu;
  std::string why;                             // ncclGetLastError's text
  std::map<int, double> premul;                // PreMulSum ops: their scalars
  int next_op = ncclNumOps, splits = 0;
  std::mutex order_mu;                         // issue order of the tasks
  std::condition_variable order_cv;
  uint64_t issued = 0, executed = 0;

  void set_error(const Status& st) {  // the first error stays
    std::lock_guard<std::mutex> g(mu);
    const int r = result.load();
    if (r != ncclSuccess && r != ncclInProgress) return;
    why = st.why;
    result.store(st.result);
  }
};

namespace {

thread_local std::string t_last;
thread_local int t_depth = 0;
struct Pending {
  std::shared_ptr<State> comm;
  cudaStream_t stream;
  Call call;
};
thread_local std::vector<Pending> t_pending;

std::mutex g_live_mu;
std::set<const EmuNcclComm*> g_live;  // handles not yet destroyed: a stale one is refused, not followed

ncclResult_t refuse(ncclResult_t r, std::string why, State* s = nullptr) {
  if (s) {
    std::lock_guard<std::mutex> g(s->mu);
    s->why = why;
  }
  t_last = std::move(why);
  return r;
}

std::shared_ptr<State> live(const EmuNcclComm* c) {
  std::lock_guard<std::mutex> g(g_live_mu);
  return c && g_live.count(c) ? c->s : nullptr;
}

EmuNcclComm* publish(std::shared_ptr<State> s) {
  auto* c = new EmuNcclComm{std::move(s)};
  std::lock_guard<std::mutex> g(g_live_mu);
  g_live.insert(c);
  return c;
}

void retire(EmuNcclComm* c) {
  {
    std::lock_guard<std::mutex> g(g_live_mu);
    g_live.erase(c);
  }
  delete c;
}

// Connects `s` (its name, rank and size set) now, or in the background when not blocking.
ncclResult_t connect(const std::shared_ptr<State>& s, bool blocking) {
  auto run = [s] {
    std::shared_ptr<Link> link;
    Status st = Link::open(s->name, s->nranks, s->rank, &s->cancelled, &link);
    if (!st.ok()) {
      s->set_error(st);
      return;
    }
    s->link = std::move(link);
    int expected = ncclInProgress;
    s->result.compare_exchange_strong(expected, ncclSuccess);
  };
  if (!blocking) {
    std::thread(run).detach();
    return ncclInProgress;
  }
  run();
  return static_cast<ncclResult_t>(s->result.load());
}

struct Fault {
  enum { None, Hang, Error, Exit } kind = None;
  long at = 0;
  std::string text;
};

const Fault& fault() {
  static const Fault f = [] {
    Fault f;
    const char* v = std::getenv("MYTORCH_EMU_NCCL_FAULT");
    if (!v || !*v) return f;
    f.text = v;
    const char* at = std::strchr(v, '@');
    const std::string kind = at ? std::string(v, at - v) : std::string(v);
    f.at = at ? std::atol(at + 1) : 1;
    f.kind = kind == "hang" ? Fault::Hang : kind == "error" ? Fault::Error : kind == "exit" ? Fault::Exit : Fault::None;
    if (f.kind == Fault::None) std::fprintf(stderr, "mytorch emu: MYTORCH_EMU_NCCL_FAULT=%s is not understood\n", v);
    return f;
  }();
  return f;
}

Status execute(State& c, std::vector<Call>& calls) {
  static std::atomic<long> tasks{0};
  const long n = ++tasks;
  const Fault& f = fault();
  if (f.kind != Fault::None && n == f.at) {
    if (f.kind == Fault::Exit) {
      std::fprintf(stderr, "mytorch emu: MYTORCH_EMU_NCCL_FAULT=%s: rank %d exits\n", f.text.c_str(), c.rank);
      std::fflush(stderr);
      _exit(0);  // silently, as a rank whose script ended early: its launcher does not stop the others
    }
    if (f.kind == Fault::Error) return {ncclSystemError, "injected error (MYTORCH_EMU_NCCL_FAULT=" + f.text + ")"};
    return c.link->hang();
  }
  Link& l = *c.link;
  std::vector<Transfer> transfers;
  for (auto& k : calls) {
    OpDesc d;
    d.kind = k.kind;
    d.type = k.type;
    d.op = k.has_premul ? -1 : k.op;
    d.root = k.kind == kBroadcast || k.kind == kReduce ? k.root : -1;
    d.count = k.count;
    auto* send = static_cast<const char*>(k.send);
    auto* recv = static_cast<char*>(k.recv);
    Status st;
    switch (k.kind) {
      case kAllReduce: st = l.all_reduce(d, send, recv, k.premul, k.has_premul); break;
      case kBroadcast: st = l.broadcast(d, send, recv); break;
      case kReduce: st = l.reduce(d, send, recv, k.premul, k.has_premul); break;
      case kAllGather: st = l.all_gather(d, send, recv); break;
      case kReduceScatter: st = l.reduce_scatter(d, send, recv, k.premul, k.has_premul); break;
      default: {
        Transfer t;
        t.send = k.kind == kSend;
        t.peer = k.root;
        t.buf = t.send ? const_cast<char*>(send) : recv;
        t.bytes = k.count * type_size(k.type);
        transfers.push_back(t);
      }
    }
    if (!st.ok()) return st;
  }
  return transfers.empty() ? Status{} : l.transfers(transfers);
}

struct Task {
  std::shared_ptr<State> comm;
  std::vector<Call> calls;
  uint64_t ticket = 0;
};

void run_task(void* p) {
  std::unique_ptr<Task> t(static_cast<Task*>(p));
  State& c = *t->comm;
  {
    std::unique_lock<std::mutex> lk(c.order_mu);
    c.order_cv.wait(lk, [&] { return c.executed == t->ticket; });
  }
  if (c.result.load() == ncclSuccess) {  // a failed communicator runs nothing more
    Status st = execute(c, t->calls);
    if (!st.ok()) c.set_error(st);
  }
  {
    std::lock_guard<std::mutex> lk(c.order_mu);
    ++c.executed;
  }
  c.order_cv.notify_all();
}

// One task on `stream` for `calls`, launched with the communicator's device current (as NCCL does).
ncclResult_t launch(const std::shared_ptr<State>& s, std::vector<Call> calls, cudaStream_t stream) {
  int previous = 0;
  cudaGetDevice(&previous);
  std::lock_guard<std::mutex> lk(s->order_mu);
  auto* task = new Task{s, std::move(calls), s->issued};
  cudaError_t e = cudaSetDevice(s->device);
  if (e == cudaSuccess) e = cudaLaunchHostFunc(stream, run_task, task);
  cudaSetDevice(previous);
  if (e != cudaSuccess) {
    delete task;
    cudaGetLastError();
    return refuse(ncclUnhandledCudaError,
                  std::string("cannot launch on the stream (") + cudaGetErrorName(e) +
                      "): a stream of another device than the communicator's (mytorch:" + std::to_string(s->device) +
                      ")?",
                  s.get());
  }
  ++s->issued;
  return ncclSuccess;
}

ncclResult_t ready(ncclComm_t comm, std::shared_ptr<State>* out) {
  auto s = live(comm);
  if (!s) return refuse(ncclInvalidArgument, "invalid communicator (null or destroyed)");
  const int r = s->result.load();
  if (r == ncclInProgress) {
    return refuse(ncclInvalidUsage,
                  "the communicator is still connecting (wait until ncclCommGetAsyncError "
                  "returns ncclSuccess)",
                  s.get());
  }
  if (r != ncclSuccess) {
    std::lock_guard<std::mutex> g(s->mu);
    t_last = s->why;
    return static_cast<ncclResult_t>(r);
  }
  *out = std::move(s);
  return ncclSuccess;
}

ncclResult_t check_buffer(State& s, const void* p, size_t bytes, const char* what) {
  if (bytes == 0) return ncclSuccess;
  if (p == nullptr || device_of_range(p, bytes) != s.device) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "%s (%p, %zu bytes) is not live memory of the communicator's device %d", what, p,
                  bytes, s.device);
    return refuse(ncclInvalidArgument, buf, &s);
  }
  return ncclSuccess;
}

// Validates one call and queues it (inside a group) or launches it.
ncclResult_t enqueue(ncclComm_t comm, Call k, cudaStream_t stream) {
  std::shared_ptr<State> s;
  ncclResult_t r = ready(comm, &s);
  if (r != ncclSuccess) return r;
  const size_t es = type_size(k.type);
  if (es == 0) return refuse(ncclInvalidArgument, "invalid datatype " + std::to_string(k.type), s.get());
  const bool reduces = k.kind == kAllReduce || k.kind == kReduce || k.kind == kReduceScatter;
  if (reduces && k.op >= ncclNumOps) {
    std::lock_guard<std::mutex> g(s->mu);
    auto it = s->premul.find(k.op);
    if (it == s->premul.end()) {
      t_last = s->why = "invalid reduction op " + std::to_string(k.op);
      return ncclInvalidArgument;
    }
    k.premul = it->second;
    k.has_premul = true;
    k.op = ncclSum;
  } else if (reduces && k.op < 0) {
    return refuse(ncclInvalidArgument, "invalid reduction op " + std::to_string(k.op), s.get());
  }
  const bool rooted = k.kind == kBroadcast || k.kind == kReduce || k.kind == kSend || k.kind == kRecv;
  if (rooted && (k.root < 0 || k.root >= s->nranks)) {
    return refuse(ncclInvalidArgument,
                  std::string(k.kind >= kSend ? "peer " : "root ") + std::to_string(k.root) + " is not a rank of " +
                      std::to_string(s->nranks),
                  s.get());
  }
  const size_t bytes = k.count * es, all = bytes * s->nranks;
  const bool root = k.root == s->rank;
  struct {
    const void* p;
    size_t n;
    const char* what;
  } bufs[2] = {{nullptr, 0, ""}, {nullptr, 0, ""}};
  switch (k.kind) {
    case kAllReduce: bufs[0] = {k.send, bytes, "sendbuff"}, bufs[1] = {k.recv, bytes, "recvbuff"}; break;
    case kBroadcast: bufs[0] = {k.send, root ? bytes : 0, "sendbuff"}, bufs[1] = {k.recv, bytes, "recvbuff"}; break;
    case kReduce: bufs[0] = {k.send, bytes, "sendbuff"}, bufs[1] = {k.recv, root ? bytes : 0, "recvbuff"}; break;
    case kAllGather: bufs[0] = {k.send, bytes, "sendbuff"}, bufs[1] = {k.recv, all, "recvbuff"}; break;
    case kReduceScatter: bufs[0] = {k.send, all, "sendbuff"}, bufs[1] = {k.recv, bytes, "recvbuff"}; break;
    case kSend: bufs[0] = {k.send, bytes, "sendbuff"}; break;
    default: bufs[1] = {k.recv, bytes, "recvbuff"};
  }
  for (auto& b : bufs) {
    r = check_buffer(*s, b.p, b.n, b.what);
    if (r != ncclSuccess) return r;
  }
  if (t_depth > 0) {
    t_pending.push_back({s, stream, k});
    return ncclSuccess;
  }
  return launch(s, {k}, stream);
}

}  // namespace
}  // namespace mytorch::emu::nccl

using namespace mytorch::emu::nccl;  // NOLINT: the C API below implements NCCL's global functions

ncclResult_t ncclGetVersion(int* version) {
  if (!version) return ncclInvalidArgument;
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (!id) return refuse(ncclInvalidArgument, "ncclGetUniqueId: null id");
  std::memset(id->internal, 0, sizeof(id->internal));
  std::memcpy(id->internal, kIdMagic, sizeof(kIdMagic) - 1);
  std::random_device rd;
  for (int i = 0; i < 16; ++i) id->internal[16 + i] = static_cast<char>(rd() & 0xff);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t* config) {
  if (!comm) return refuse(ncclInvalidArgument, "ncclCommInitRank: null comm");
  *comm = nullptr;
  if (nranks < 1 || nranks > kMaxRanks) {
    return refuse(ncclInvalidArgument, "ncclCommInitRank: the emulated NCCL takes 1 to " + std::to_string(kMaxRanks) +
                                           " ranks, not " + std::to_string(nranks));
  }
  if (rank < 0 || rank >= nranks) {
    return refuse(ncclInvalidArgument,
                  "ncclCommInitRank: rank " + std::to_string(rank) + " is not in [0, " + std::to_string(nranks) + ")");
  }
  if (std::memcmp(id.internal, kIdMagic, sizeof(kIdMagic) - 1) != 0) {
    return refuse(ncclInvalidArgument, "ncclCommInitRank: the id did not come from ncclGetUniqueId");
  }
  auto s = std::make_shared<State>();
  s->rank = rank;
  s->nranks = nranks;
  cudaGetDevice(&s->device);
  char hex[40];
  for (int i = 0; i < 16; ++i) std::snprintf(hex + 2 * i, 3, "%02x", static_cast<unsigned char>(id.internal[16 + i]));
  s->name = std::string("/mytorch-nccl-") + hex;
  const bool blocking = !config || config->blocking != 0;
  ncclResult_t r = connect(s, blocking);
  if (r != ncclSuccess && r != ncclInProgress) {
    std::lock_guard<std::mutex> g(s->mu);
    t_last = s->why;
    return r;
  }
  *comm = publish(s);
  return r;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  return ncclCommInitRankConfig(comm, nranks, id, rank, nullptr);
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  std::shared_ptr<State> p;
  ncclResult_t r = ready(comm, &p);
  if (r != ncclSuccess) return r;
  if (!newcomm) return refuse(ncclInvalidArgument, "ncclCommSplit: null newcomm", p.get());
  *newcomm = nullptr;
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR) {
    return refuse(ncclInvalidArgument, "ncclCommSplit: color " + std::to_string(color) + " is negative", p.get());
  }
  std::vector<std::pair<int, int>> all;
  Status st = p->link->exchange_split(color, key, &all);
  if (!st.ok()) {
    p->set_error(st);
    return refuse(st.result, st.why, p.get());
  }
  const int split = p->splits++;
  if (color == NCCL_SPLIT_NOCOLOR) return ncclSuccess;
  std::vector<std::pair<int, int>> members;  // (key, parent rank)
  for (int i = 0; i < static_cast<int>(all.size()); ++i) {
    if (all[i].first == color) members.emplace_back(all[i].second, i);
  }
  std::sort(members.begin(), members.end());
  auto s = std::make_shared<State>();
  s->nranks = static_cast<int>(members.size());
  for (int i = 0; i < s->nranks; ++i) {
    if (members[i].second == p->rank) s->rank = i;
  }
  s->device = p->device;
  s->name = p->name + "." + std::to_string(split) + "c" + std::to_string(color);
  r = connect(s, !config || config->blocking != 0);
  if (r != ncclSuccess && r != ncclInProgress) {
    std::lock_guard<std::mutex> g(s->mu);
    t_last = s->why;
    return r;
  }
  *newcomm = publish(s);
  return r;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!live(comm)) return refuse(ncclInvalidArgument, "ncclCommDestroy: invalid communicator (null or destroyed)");
  retire(comm);  // queued tasks hold the state; the segment is unmapped after the last
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  auto s = live(comm);
  if (!s) return refuse(ncclInvalidArgument, "ncclCommAbort: invalid communicator (null or destroyed)");
  s->cancelled = true;
  s->set_error({ncclInvalidUsage, "the communicator was aborted"});
  if (s->link) {
    s->link->aborted = true;  // this process's waits end now; the other ranks' once they see the failure
    s->link->fail("rank " + std::to_string(s->rank) + " aborted the communicator");
  }
  retire(comm);
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
  auto s = live(comm);
  if (!s || !async_error) return refuse(ncclInvalidArgument, "ncclCommGetAsyncError: invalid communicator");
  *async_error = static_cast<ncclResult_t>(s->result.load());
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  auto s = live(comm);
  if (!s || !count) return refuse(ncclInvalidArgument, "ncclCommCount: invalid communicator");
  *count = s->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  auto s = live(comm);
  if (!s || !rank) return refuse(ncclInvalidArgument, "ncclCommUserRank: invalid communicator");
  *rank = s->rank;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t comm) {
  auto s = live(comm);
  if (!s) return t_last.c_str();
  std::lock_guard<std::mutex> g(s->mu);
  t_last = s->why;
  return t_last.c_str();
}

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t type,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  auto s = live(comm);
  if (!s || !op || !scalar) return refuse(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: invalid argument");
  if (residence != ncclScalarHostImmediate && residence != ncclScalarDevice) {
    return refuse(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: invalid residence", s.get());
  }
  double v = 0;
  switch (type) {
    case ncclFloat32: v = *static_cast<const float*>(scalar); break;
    case ncclFloat64: v = *static_cast<const double*>(scalar); break;
    case ncclFloat16: v = static_cast<float>(*static_cast<const c10::Half*>(scalar)); break;
    case ncclBfloat16: v = static_cast<float>(*static_cast<const c10::BFloat16*>(scalar)); break;
    default: return refuse(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: a floating-point type is needed", s.get());
  }
  std::lock_guard<std::mutex> g(s->mu);
  const int id = s->next_op++;
  s->premul[id] = v;
  *op = static_cast<ncclRedOp_t>(id);
  return ncclSuccess;
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  auto s = live(comm);
  if (!s) return refuse(ncclInvalidArgument, "ncclRedOpDestroy: invalid communicator");
  std::lock_guard<std::mutex> g(s->mu);
  if (!s->premul.erase(op)) return refuse(ncclInvalidArgument, "ncclRedOpDestroy: no such op");
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  return enqueue(comm, {kAllReduce, sendbuff, recvbuff, count, datatype, op}, stream);
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  return enqueue(comm, {kBroadcast, sendbuff, recvbuff, count, datatype, ncclSum, 1, false, root}, stream);
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  return enqueue(comm, {kReduce, sendbuff, recvbuff, count, datatype, op, 1, false, root}, stream);
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  return enqueue(comm, {kAllGather, sendbuff, recvbuff, sendcount, datatype}, stream);
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return enqueue(comm, {kReduceScatter, sendbuff, recvbuff, recvcount, datatype, op}, stream);
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return enqueue(comm, {kSend, sendbuff, nullptr, count, datatype, ncclSum, 1, false, peer}, stream);
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return enqueue(comm, {kRecv, nullptr, recvbuff, count, datatype, ncclSum, 1, false, peer}, stream);
}

ncclResult_t ncclGroupStart() {
  ++t_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (t_depth == 0) return refuse(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--t_depth > 0) return ncclSuccess;
  std::vector<Pending> pending;
  pending.swap(t_pending);
  // One task per (communicator, stream), in the order each first appeared.
  std::vector<std::pair<std::pair<State*, cudaStream_t>, std::vector<Call>>> tasks;
  std::vector<std::shared_ptr<State>> owners;
  for (auto& p : pending) {
    auto key = std::make_pair(p.comm.get(), p.stream);
    auto it = std::find_if(tasks.begin(), tasks.end(), [&](const auto& t) { return t.first == key; });
    if (it == tasks.end()) {
      tasks.push_back({key, {}});
      owners.push_back(p.comm);
      it = tasks.end() - 1;
    }
    it->second.push_back(p.call);
  }
  ncclResult_t r = ncclSuccess;
  for (size_t i = 0; i < tasks.size(); ++i) {
    ncclResult_t ri = launch(owners[i], std::move(tasks[i].second), tasks[i].first.second);
    if (r == ncclSuccess) r = ri;
  }
  return r;
}
