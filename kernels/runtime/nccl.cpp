// comm.h on the cuda runtime: NCCL, opened on first use (dynlib.h; the toolkit's copy or the
// nvidia-nccl-cu13 wheel's, which torch's CUDA wheels depend on), so the build needs only nccl.h. The emulated
// build links the emulated NCCL instead (kernels/emu/nccl.cpp, Note [The emulated NCCL]): the same calls.
#include <nccl.h>

#include <cstring>
#include <mutex>
#include <string>

#include "mytorch/comm.h"
#include "mytorch/dynlib.h"
#include "mytorch/runtime.h"

namespace mytorch::comm {
namespace {

// clang-format off: a list of the library's functions, one X-macro entry each
#define MT_NCCL_FUNCS(_)                                                                                   \
  _(ncclGetVersion) _(ncclGetUniqueId) _(ncclCommInitRank) _(ncclCommDestroy) _(ncclCommAbort)             \
  _(ncclCommGetAsyncError) _(ncclGetErrorString) _(ncclGetLastError) _(ncclAllReduce) _(ncclBroadcast)     \
  _(ncclReduce) _(ncclAllGather) _(ncclReduceScatter) _(ncclSend) _(ncclRecv) _(ncclGroupStart)           \
  _(ncclGroupEnd) _(ncclRedOpCreatePreMulSum) _(ncclRedOpDestroy) _(ncclCommInitRankConfig) _(ncclCommSplit)
// clang-format on

#if defined(MYTORCH_EMU_ACTIVE)
MT_DYNLIB_LINKED(Lib, lib, MT_NCCL_FUNCS)
#else
MT_DYNLIB(Lib, lib, MT_NCCL_FUNCS, "NCCL", "install the CUDA toolkit's NCCL or the nvidia-nccl-cu13 wheel",
          "libnccl.so.2", "libnccl.so")
#endif

// The oldest NCCL the calls here need (ncclCommSplit: 2.18; the non-blocking config and ncclGetLastError older).
constexpr int kMinVersion = NCCL_VERSION(2, 18, 0);

// Why NCCL cannot be used ("" when it can): not loadable, or a library of another major version than the header
// mytorch was built against, or older than the calls need. Checked once, at the first use.
const std::string& problem() {
  static const std::string why = []() -> std::string {
    if (!lib().error.empty()) return lib().error;
    int v = 0;
    if (lib().ncclGetVersion(&v) != ncclSuccess) return "NCCL: ncclGetVersion failed";
    const int header_major = NCCL_MAJOR, major = v >= 10000 ? v / 10000 : v / 1000;
    if (major != header_major || v < kMinVersion) {
      return "NCCL: the library loaded is version " + std::to_string(v) + ", but mytorch was built against " +
             std::to_string(NCCL_VERSION_CODE) + " and needs the same major version, at least " +
             std::to_string(kMinVersion);
    }
    return "";
  }();
  return why;
}

bool runtimeActive() { return rt::kind() == rt::Kind::Cuda || rt::kind() == rt::Kind::Emu; }

rt::Status unavailable() {
  if (!runtimeActive()) return rt::report(rt::Status::Unavailable, "NCCL: the cuda runtime is not active");
  return rt::report(rt::Status::Unavailable, problem().c_str());
}

bool ready() { return runtimeActive() && problem().empty(); }

rt::Status check(ncclResult_t r, const char* what, Comm comm = nullptr) {
  if (r == ncclSuccess) return rt::Status::Success;
  if (r == ncclInProgress) return rt::Status::NotReady;
  std::string msg = std::string(what) + " failed: " + lib().ncclGetErrorString(r);
  const char* last = lib().ncclGetLastError ? lib().ncclGetLastError(static_cast<ncclComm_t>(comm)) : nullptr;
  if (last && *last) msg += std::string(" (") + last + ")";
  return rt::report(r == ncclInvalidArgument || r == ncclInvalidUsage ? rt::Status::InvalidValue : rt::Status::Unknown,
                    msg.c_str());
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::Int8: return ncclInt8;
    case DType::UInt8: return ncclUint8;
    case DType::Int32: return ncclInt32;
    case DType::UInt32: return ncclUint32;
    case DType::Int64: return ncclInt64;
    case DType::UInt64: return ncclUint64;
    case DType::Half: return ncclFloat16;
    case DType::Float: return ncclFloat32;
    case DType::Double: return ncclFloat64;
    case DType::BFloat16: return ncclBfloat16;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 24, 0)
    case DType::Float8e4m3: return version() >= NCCL_VERSION(2, 24, 0) ? ncclFloat8e4m3 : ncclNumTypes;
    case DType::Float8e5m2: return version() >= NCCL_VERSION(2, 24, 0) ? ncclFloat8e5m2 : ncclNumTypes;
#endif
    default: return ncclNumTypes;
  }
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Prod: return ncclProd;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Min: return ncclMin;
    default: return ncclAvg;
  }
}

// A PREMUL_SUM op for one call, destroyed after it was enqueued (NCCL allows that).
struct Op {
  ncclRedOp_t op;
  ncclComm_t comm;
  bool custom = false;
  rt::Status status = rt::Status::Success;
  Op(ReduceOp o, const double* premul, ncclDataType_t t, ncclComm_t c) : op(nccl_op(o)), comm(c) {
    if (!premul) return;
    // The scalar has the data's type; the process group scales half and bfloat16 data itself.
    if (t == ncclFloat64) {
      double d = *premul;
      status =
          check(lib().ncclRedOpCreatePreMulSum(&op, &d, t, ncclScalarHostImmediate, c), "ncclRedOpCreatePreMulSum", c);
    } else if (t == ncclFloat32) {
      float f = static_cast<float>(*premul);
      status =
          check(lib().ncclRedOpCreatePreMulSum(&op, &f, t, ncclScalarHostImmediate, c), "ncclRedOpCreatePreMulSum", c);
    } else {
      status = rt::report(rt::Status::InvalidValue, "NCCL PREMUL_SUM here takes float32 or float64 data");
      return;
    }
    custom = status == rt::Status::Success;
  }
  ~Op() {
    if (custom) lib().ncclRedOpDestroy(op, comm);
  }
};

#define MT_NCCL_TYPE(var, t)         \
  ncclDataType_t var = nccl_type(t); \
  if (var == ncclNumTypes) return rt::report(rt::Status::InvalidValue, "NCCL: this NCCL has no such dtype");

// The common part of the reductions: the dtype, the op (a PREMUL_SUM op lives for the call), the status.
template <typename Call>
rt::Status reducing(DType t, ReduceOp op, const double* premul, Comm comm, const char* what, Call&& call) {
  if (!ready()) return unavailable();
  MT_NCCL_TYPE(nt, t)
  auto c = static_cast<ncclComm_t>(comm);
  Op o(op, premul, nt, c);
  if (o.status != rt::Status::Success) return o.status;
  return check(call(nt, o.op, c), what, comm);
}

} // namespace

rt::Status available() { return ready() ? rt::Status::Success : unavailable(); }

int version() {
  if (!runtimeActive() || !lib().error.empty()) return 0;
  int v = 0;
  return lib().ncclGetVersion(&v) == ncclSuccess ? v : 0;
}

rt::Status get_unique_id(char id[kUniqueIdBytes]) {
  if (!ready()) return unavailable();
  static_assert(sizeof(ncclUniqueId) == kUniqueIdBytes, "ncclUniqueId size");
  ncclUniqueId u;
  rt::Status s = check(lib().ncclGetUniqueId(&u), "ncclGetUniqueId");
  if (s == rt::Status::Success) std::memcpy(id, u.internal, kUniqueIdBytes);
  return s;
}

// NCCL binds a communicator to the current device: switch for the call, then restore the caller's.
template <typename Call>
rt::Status onDevice(int device, Call&& call) {
  int previous = 0;
  rt::Status s = rt::get_device(&previous);
  if (s != rt::Status::Success) return s;
  s = rt::set_device(device);
  if (s != rt::Status::Success) return s;
  s = call();
  rt::Status back = rt::set_device(previous);
  return s != rt::Status::Success ? s : back;
}

rt::Status init_rank(Comm* comm, int nranks, const char id[kUniqueIdBytes], int rank, int device, bool blocking) {
  if (!ready()) return unavailable();
  return onDevice(device, [&] {
    ncclUniqueId u;
    std::memcpy(u.internal, id, kUniqueIdBytes);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = blocking ? 1 : 0;
    ncclComm_t c = nullptr;
    rt::Status s = check(lib().ncclCommInitRankConfig(&c, nranks, u, rank, &config), "ncclCommInitRankConfig");
    *comm = c;
    return s;
  });
}

rt::Status split(Comm parent, int color, int key, Comm* out, int device, bool blocking) {
  if (!ready()) return unavailable();
  return onDevice(device, [&] {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = blocking ? 1 : 0;
    ncclComm_t c = nullptr;
    rt::Status s = check(
        lib().ncclCommSplit(static_cast<ncclComm_t>(parent), color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &c, &config),
        "ncclCommSplit", parent);
    *out = c;
    return s;
  });
}

rt::Status destroy(Comm comm) {
  if (!ready()) return unavailable();
  return check(lib().ncclCommDestroy(static_cast<ncclComm_t>(comm)), "ncclCommDestroy");
}

rt::Status abort(Comm comm) {
  if (!ready()) return unavailable();
  return check(lib().ncclCommAbort(static_cast<ncclComm_t>(comm)), "ncclCommAbort");
}

rt::Status async_error(Comm comm) {
  if (!ready()) return unavailable();
  ncclResult_t r = ncclSuccess;
  rt::Status s = check(lib().ncclCommGetAsyncError(static_cast<ncclComm_t>(comm), &r), "ncclCommGetAsyncError", comm);
  if (s != rt::Status::Success) return s;
  return check(r, "NCCL communicator", comm);
}

rt::Status all_reduce(const void* send, void* recv, size_t count, DType t, ReduceOp op, const double* premul, Comm comm,
                      rt::Stream stream) {
  return reducing(t, op, premul, comm, "ncclAllReduce", [&](ncclDataType_t nt, ncclRedOp_t o, ncclComm_t c) {
    return lib().ncclAllReduce(send, recv, count, nt, o, c, static_cast<cudaStream_t>(stream));
  });
}

rt::Status broadcast(const void* send, void* recv, size_t count, DType t, int root, Comm comm, rt::Stream stream) {
  if (!ready()) return unavailable();
  MT_NCCL_TYPE(nt, t)
  return check(lib().ncclBroadcast(send, recv, count, nt, root, static_cast<ncclComm_t>(comm),
                                   static_cast<cudaStream_t>(stream)),
               "ncclBroadcast", comm);
}

rt::Status reduce(const void* send, void* recv, size_t count, DType t, ReduceOp op, const double* premul, int root,
                  Comm comm, rt::Stream stream) {
  return reducing(t, op, premul, comm, "ncclReduce", [&](ncclDataType_t nt, ncclRedOp_t o, ncclComm_t c) {
    return lib().ncclReduce(send, recv, count, nt, o, root, c, static_cast<cudaStream_t>(stream));
  });
}

rt::Status all_gather(const void* send, void* recv, size_t send_count, DType t, Comm comm, rt::Stream stream) {
  if (!ready()) return unavailable();
  MT_NCCL_TYPE(nt, t)
  return check(
      lib().ncclAllGather(send, recv, send_count, nt, static_cast<ncclComm_t>(comm), static_cast<cudaStream_t>(stream)),
      "ncclAllGather", comm);
}

rt::Status reduce_scatter(const void* send, void* recv, size_t recv_count, DType t, ReduceOp op, const double* premul,
                          Comm comm, rt::Stream stream) {
  return reducing(t, op, premul, comm, "ncclReduceScatter", [&](ncclDataType_t nt, ncclRedOp_t o, ncclComm_t c) {
    return lib().ncclReduceScatter(send, recv, recv_count, nt, o, c, static_cast<cudaStream_t>(stream));
  });
}

rt::Status send(const void* buf, size_t count, DType t, int peer, Comm comm, rt::Stream stream) {
  if (!ready()) return unavailable();
  MT_NCCL_TYPE(nt, t)
  return check(lib().ncclSend(buf, count, nt, peer, static_cast<ncclComm_t>(comm), static_cast<cudaStream_t>(stream)),
               "ncclSend", comm);
}

rt::Status recv(void* buf, size_t count, DType t, int peer, Comm comm, rt::Stream stream) {
  if (!ready()) return unavailable();
  MT_NCCL_TYPE(nt, t)
  return check(lib().ncclRecv(buf, count, nt, peer, static_cast<ncclComm_t>(comm), static_cast<cudaStream_t>(stream)),
               "ncclRecv", comm);
}

rt::Status group_start() { return ready() ? check(lib().ncclGroupStart(), "ncclGroupStart") : unavailable(); }
rt::Status group_end() { return ready() ? check(lib().ncclGroupEnd(), "ncclGroupEnd") : unavailable(); }

} // namespace mytorch::comm
