// The two data paths of ProcessGroupMytorch, behind one interface: the sim path hands collectives to Gloo
// over CPU views (ProcessGroupMytorchHost.cpp), the cuda path enqueues NCCL on internal streams
// (ProcessGroupMytorchNccl.cpp). Arguments arrive validated and agreed across ranks (ProcessGroupMytorch.cpp).
#pragma once

#include "csrc/distributed/ProcessGroupMytorch.hpp"

namespace mytorch::dist {

using WorkPtr = c10::intrusive_ptr<c10d::Work>;
using Tensors = std::vector<at::Tensor>;

class Path {
 public:
  explicit Path(ProcessGroupMytorch& pg) : pg_(pg) {}
  virtual ~Path() = default;
  virtual WorkPtr broadcast(const CallInfo& c, Tensors& ts, const c10d::BroadcastOptions& o) = 0;
  virtual WorkPtr allreduce(const CallInfo& c, Tensors& ts, const c10d::AllreduceOptions& o) = 0;
  virtual WorkPtr allreduceCoalesced(const CallInfo& c, Tensors& ts, const c10d::AllreduceCoalescedOptions& o) = 0;
  virtual WorkPtr reduce(const CallInfo& c, Tensors& ts, const c10d::ReduceOptions& o) = 0;
  virtual WorkPtr allgather(const CallInfo& c, std::vector<Tensors>& out, Tensors& in,
                            const c10d::AllgatherOptions& o) = 0;
  virtual WorkPtr allgatherBase(const CallInfo& c, Tensors& out, Tensors& in, const c10d::AllgatherOptions& o) = 0;
  virtual WorkPtr gather(const CallInfo& c, std::vector<Tensors>& out, Tensors& in, const c10d::GatherOptions& o) = 0;
  virtual WorkPtr scatter(const CallInfo& c, Tensors& out, std::vector<Tensors>& in, const c10d::ScatterOptions& o) = 0;
  virtual WorkPtr reduceScatter(const CallInfo& c, Tensors& out, std::vector<Tensors>& in,
                                const c10d::ReduceScatterOptions& o) = 0;
  virtual WorkPtr reduceScatterBase(const CallInfo& c, Tensors& out, Tensors& in,
                                    const c10d::ReduceScatterOptions& o) = 0;
  virtual WorkPtr alltoallBase(const CallInfo& c, at::Tensor& out, at::Tensor& in, std::vector<int64_t>& outSplits,
                               std::vector<int64_t>& inSplits, const c10d::AllToAllOptions& o) = 0;
  virtual WorkPtr alltoall(const CallInfo& c, Tensors& out, Tensors& in, const c10d::AllToAllOptions& o) = 0;
  virtual WorkPtr send(const CallInfo& c, Tensors& ts, int dst, int tag) = 0;
  virtual WorkPtr recv(const CallInfo& c, Tensors& ts, int src, int tag) = 0;
  virtual WorkPtr barrier(const CallInfo& c, const c10d::BarrierOptions& o) = 0;
  // NCCL path only (the process group says so through supportsCoalescing/supportsSplitting).
  virtual void startCoalescing() { TORCH_CHECK(false, "mytorch: coalescing needs the NCCL path"); }
  virtual WorkPtr endCoalescing(const CallInfo&) { TORCH_CHECK(false, "mytorch: coalescing needs the NCCL path"); }
  // ncclCommSplit of this group's communicator: the child's (null for a negative color) and its device.
  virtual std::pair<void*, int> split(int /*color*/, int /*key*/, const CallInfo&) {
    TORCH_CHECK(false, "mytorch: splitting needs the NCCL path");
  }
  virtual void adopt(void* /*comm*/, int /*device*/) {}
  virtual void connect(c10::DeviceIndex /*device*/, const CallInfo&) {}
  virtual void shutdown(bool /*abort*/) {}
  // The agreement check's all-to-all of `mine` into all[r] by a faster channel than Gloo's point-to-point, if any.
  virtual bool exchangeCheck(const at::Tensor& /*mine*/, std::vector<at::Tensor>& /*all*/) { return false; }
  virtual bool symmetricMemory() const { return false; }

 protected:
  c10::intrusive_ptr<WorkMytorch> makeWork(const CallInfo& c, Tensors outputs, bool cuda) const {
    return c10::make_intrusive<WorkMytorch>(pg_.getRank(), c.type, pg_.describe(c), std::move(outputs), cuda);
  }
  ProcessGroupMytorch& pg_;
};

std::unique_ptr<Path> makeHostPath(ProcessGroupMytorch& pg);
std::unique_ptr<Path> makeNcclPath(ProcessGroupMytorch& pg);
// Note [Process-group watchdogs at exit] (ProcessGroupMytorchNccl.cpp).
void quiesceWatchdogsForExit();
// The intra-host path in front of `gloo` where the group qualifies (Note [Intra-host collectives through
// symmetric memory]), else `gloo` itself. Collective over the group's store.
std::unique_ptr<Path> makeIntraHostPath(ProcessGroupMytorch& pg, std::unique_ptr<Path> gloo);

// The factor of a PREMUL_SUM, or nullopt for the other ops.
std::optional<double> premulFactor(const c10d::ReduceOp& op);

} // namespace mytorch::dist
