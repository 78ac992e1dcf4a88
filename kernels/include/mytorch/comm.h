// Collective communication between devices of different processes: the runtime-level API under the
// process group (csrc/distributed). On the cuda runtime it is NCCL, opened with dlopen (libnccl.so.2 from the
// CUDA toolkit or the nvidia-nccl-cu13 wheel, as torch's CUDA wheels ship it); on the emulated build the emulated
// NCCL linked in (kernels/emu/nccl.cpp); on sim every call returns
// Unavailable (the process group hands sim collectives to Gloo instead). Like runtime.h: every call returns
// a Status and never throws; on failure rt::last_error() holds NCCL's own message.
#pragma once

#include <cstddef>
#include <cstdint>

#include "mytorch/dtype.h"
#include "mytorch/launch.h"

namespace mytorch::comm {

using Comm = void*;
constexpr size_t kUniqueIdBytes = 128; // NCCL_UNIQUE_ID_BYTES

// Element types are the kernels' DType (dtype.h); the reduction of a collective is its own set (NCCL's).
enum class ReduceOp : int { Sum, Prod, Max, Min, Avg };

rt::Status available();   // Success when NCCL can be loaded and the cuda runtime is active
int version();            // NCCL's version code (e.g. 22907), 0 when unavailable
rt::Status get_unique_id(char id[kUniqueIdBytes]);
// `blocking` false: returns NotReady at once and connects in the background; async_error says when it is done.
rt::Status init_rank(Comm* comm, int nranks, const char id[kUniqueIdBytes], int rank, int device, bool blocking);
// ncclCommSplit over `parent` (every rank of it calls): ranks of one color >= 0 form a communicator, ordered by
// key; a negative color takes no part (*out is null).
rt::Status split(Comm parent, int color, int key, Comm* out, int device, bool blocking);
rt::Status destroy(Comm comm);
rt::Status abort(Comm comm);
rt::Status async_error(Comm comm); // Success while the communicator is healthy, NotReady while it connects

// `premul`: when non-null, a PREMUL_SUM: each input is multiplied by *premul before the sum.
rt::Status all_reduce(const void* send, void* recv, size_t count, DType t, ReduceOp op, const double* premul, Comm comm,
                      rt::Stream stream);
rt::Status broadcast(const void* send, void* recv, size_t count, DType t, int root, Comm comm, rt::Stream stream);
rt::Status reduce(const void* send, void* recv, size_t count, DType t, ReduceOp op, const double* premul, int root,
                  Comm comm, rt::Stream stream);
rt::Status all_gather(const void* send, void* recv, size_t send_count, DType t, Comm comm, rt::Stream stream);
rt::Status reduce_scatter(const void* send, void* recv, size_t recv_count, DType t, ReduceOp op, const double* premul,
                          Comm comm, rt::Stream stream);
rt::Status send(const void* buf, size_t count, DType t, int peer, Comm comm, rt::Stream stream);
rt::Status recv(void* buf, size_t count, DType t, int peer, Comm comm, rt::Stream stream);
rt::Status group_start();
rt::Status group_end();

} // namespace mytorch::comm
