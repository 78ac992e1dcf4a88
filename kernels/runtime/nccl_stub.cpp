// comm.h on a build without CUDA: there is no NCCL, and sim collectives go through Gloo.
#include "mytorch/comm.h"

namespace mytorch::comm {
namespace {
rt::Status none() { return rt::report(rt::Status::Unavailable, "NCCL: this mytorch build has no CUDA"); }
} // namespace

rt::Status available() { return none(); }
int version() { return 0; }
rt::Status get_unique_id(char*) { return none(); }
rt::Status init_rank(Comm*, int, const char*, int, int, bool) { return none(); }
rt::Status split(Comm, int, int, Comm*, int, bool) { return none(); }
rt::Status destroy(Comm) { return none(); }
rt::Status abort(Comm) { return none(); }
rt::Status async_error(Comm) { return none(); }
rt::Status all_reduce(const void*, void*, size_t, DType, ReduceOp, const double*, Comm, rt::Stream) { return none(); }
rt::Status broadcast(const void*, void*, size_t, DType, int, Comm, rt::Stream) { return none(); }
rt::Status reduce(const void*, void*, size_t, DType, ReduceOp, const double*, int, Comm, rt::Stream) { return none(); }
rt::Status all_gather(const void*, void*, size_t, DType, Comm, rt::Stream) { return none(); }
rt::Status reduce_scatter(const void*, void*, size_t, DType, ReduceOp, const double*, Comm, rt::Stream) {
  return none();
}
rt::Status send(const void*, size_t, DType, int, Comm, rt::Stream) { return none(); }
rt::Status recv(void*, size_t, DType, int, Comm, rt::Stream) { return none(); }
rt::Status group_start() { return none(); }
rt::Status group_end() { return none(); }

} // namespace mytorch::comm
