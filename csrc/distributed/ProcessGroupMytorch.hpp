// ProcessGroupMytorch: the c10d backend named "mytorch", for tensors on the mytorch device (DESIGN.md,
// "Distributed").
//
// Note [Ordering and stream contract]
// Collectives follow torch.distributed's rules: every rank calls the same collectives in the same order;
// a call returns a Work, and the collective's result may be used once that Work's wait() has returned.
//  - cuda runtime: NCCL. Each collective is enqueued on an internal mytorch stream of the tensors' device
//    that first waits on the caller's current stream (so it sees every kernel the caller queued before it).
//    The tensors are recorded on the internal stream (the caching allocator will not reuse their memory
//    before the collective ends). Work::wait() makes the caller's current stream wait for the collective
//    and does not block the host (as ProcessGroupNCCL); Work::synchronize() blocks the host. A watchdog
//    thread aborts a collective that runs past the timeout and reports it, with the collective, rank and
//    sizes, on every later call and wait of this process group.
//  - sim runtime: device memory is host memory and kernels run at submission, so the collective is handed
//    to PyTorch's Gloo over CPU views of the same bytes (no copies, except for dtypes Gloo cannot reduce,
//    which are widened). wait() blocks the host until the data is in place and raises Gloo's failure
//    (a timeout, a peer that died) with the collective, rank and sizes named.
//  - Both runtimes check, before a collective starts, that every rank passed the same collective, dtype and
//    element count (and consistent all-to-all splits, point-to-point sizes) when checking is on
//    (MYTORCH_DIST_CHECK; on by default on sim, where Gloo aborts the process on a size mismatch; off by
//    default on cuda, where it costs a host round trip). A mismatch raises the same error on every rank.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace mytorch::dist {

class Path; // the sim (Gloo) or cuda (NCCL) data path (Paths.h)

// Runs a callable with the GIL released when the calling thread holds it (set by the Python bindings,
// Init.cpp; without Python it just runs it).
std::function<void(const std::function<void()>&)>& withoutGil();

class WorkMytorch : public c10d::Work {
 public:
  WorkMytorch(int rank, c10d::OpType type, std::string what, std::vector<at::Tensor> outputs,
              bool cudaSemantics);
  ~WorkMytorch() override;

  bool isCompleted() override;
  std::vector<at::Tensor> result() override { return outputs_; }
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void synchronize() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  // sim: finish when every Gloo work has finished, then run `onSuccess` (narrowing widened dtypes). Works
  // with a future finish through its callbacks; the others (Gloo's send, recv, reduce_scatter) in wait().
  // `keep`: tensors the collective reads or writes.
  void completeWithFutures(const std::vector<c10::intrusive_ptr<c10d::Work>>& inner,
                           std::function<void()> onSuccess, std::vector<at::Tensor> keep);
  // Finish now (from any thread): success when `error` is null.
  void complete(std::exception_ptr error);
  // cuda: how wait() orders the caller's stream after the collective and synchronize() blocks the host
  // (ProcessGroupMytorchNccl.cpp); the watchdog calls complete().
  // `ended`: whether the device reached the collective's end (isCompleted() asks it, as ProcessGroupNCCL's does).
  void setDeviceHooks(std::function<void()> streamWait, std::function<void()> hostWait,
                      std::function<bool()> ended = nullptr) {
    streamWait_ = std::move(streamWait);
    hostWait_ = std::move(hostWait);
    ended_ = std::move(ended);
  }
  const std::string& what() const { return what_; }
  std::exception_ptr wrap(std::exception_ptr error) const;

 private:
  std::string what_;
  std::vector<at::Tensor> outputs_;
  std::vector<at::Tensor> keep_;
  bool cuda_;
  std::function<void()> onSuccess_;
  std::atomic<int> remaining_{0};
  std::mutex innerMutex_;
  std::vector<c10::intrusive_ptr<c10d::Work>> lateInner_; // Gloo works without a future
  std::function<void(std::exception_ptr)> lateDone_;
  void finishLate(bool inThread, std::chrono::milliseconds timeout = kNoTimeout);
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::function<void()> streamWait_, hostWait_;
  std::function<bool()> ended_;
};

// One collective's description: checked across ranks, named in every message about it.
struct CallInfo {
  const char* name;
  c10d::OpType type;
  at::ScalarType dtype = at::kByte;
  int64_t count = 0;   // elements this rank contributes (per tensor for lists)
  int64_t tensors = 1;
  int64_t root = -1;
  int64_t reduceOp = -1;
  int64_t peer = -1;   // point-to-point
  std::vector<int64_t> shape;
  std::vector<int64_t> inSplits, outSplits; // all-to-all, in elements
};

class ProcessGroupMytorch : public c10d::Backend {
 public:
  // `host`: the Gloo backend over the same ranks (the sim data path, and the channel of the agreement
  // checks on both runtimes); null only for a group split on the NCCL path, which then cannot check.
  // `groupName`: for messages. `comm`, `device`: the communicator of a split group (NCCL path), else null.
  ProcessGroupMytorch(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                      std::chrono::milliseconds timeout, c10::intrusive_ptr<c10d::Backend> host,
                      std::string groupName, void* comm = nullptr, int device = -1);
  ~ProcessGroupMytorch() override;

  const std::string getBackendName() const override { return "mytorch"; }
  c10::intrusive_ptr<Options> getBackendOptions() override;
  void setTimeout(std::chrono::milliseconds timeout) override { timeout_ = timeout; }
  // Sequence numbers are the Gloo backend's (every rank issues the same Gloo operations): what torch's
  // TORCH_DISTRIBUTED_DEBUG=DETAIL wrapper needs to compare collectives across ranks. A split group without
  // Gloo counts its own collectives.
  void setSequenceNumberForGroup() override;
  uint64_t getSequenceNumberForGroup() override;
  bool checking() const { return check_; }
  // The data path: NCCL on the cuda runtime and on the emulated build (the emulated NCCL), Gloo on sim.
  bool usesNccl() const;
  bool usesSymmetricMemory() const;  // the intra-host path (Note [Intra-host collectives through symmetric memory])

  // NCCL path: batch_isend_irecv and _coalescing_manager put their calls in one NCCL group; subgroups are split
  // from this group's communicator (Note [Subgroups by ncclCommSplit] in ProcessGroupMytorchNccl.cpp).
  bool supportsCoalescing() const override { return usesNccl(); }
  bool supportsSplitting() const override { return usesNccl(); }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<Options>& opts) override;
  void eagerConnectSingleDevice(at::Device device) override;
  // Ends the communicator: destroyed when idle, aborted with work pending (which fails, naming the reason).
  void shutdown() override;
  void abort() override;
  std::chrono::milliseconds timeout() const { return timeout_; }
  const c10::intrusive_ptr<c10d::Backend>& host() const { return host_; }
  const c10::intrusive_ptr<c10d::Store>& store() const { return store_; }
  const std::string& groupName() const { return groupName_; }
  std::string describe(const CallInfo& call) const;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits,
                                               std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts = {}) override;

 private:
  void checkAgreement(const CallInfo& call);
  void checkTensor(const CallInfo& call, const at::Tensor& t, const char* role) const;
  void checkSameDevice(const CallInfo& call, const std::vector<at::Tensor>& ts) const;
  CallInfo info(const char* name, c10d::OpType type, const std::vector<at::Tensor>& ts, const char* role);

  c10::intrusive_ptr<c10d::Store> store_;
  std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<c10d::Backend> host_;
  std::string groupName_;
  bool check_;
  // A collective's check and its data are posted as one step, so calls from several threads stay in the
  // same order on every rank.
  std::mutex callMutex_;
  std::unique_ptr<Path> path_;
  std::atomic<uint64_t> seq_{0};  // without a Gloo host
};

} // namespace mytorch::dist
