// Note [Intra-host collectives through symmetric memory]
// On sim, the ranks of one host share memory (the sim's IPC, Note [Symmetric memory on mytorch]); Gloo would
// move every byte through TCP sockets on the loopback. This path, in front of the Gloo one, gives each rank a
// symmetric workspace (kWorkspace bytes) at the group's creation and runs the collectives every size uses
// through it, in rounds of at most one workspace:
//  - all_reduce (sum, avg; floating dtypes): up to kOneShotBytes one-shot (copy in, barrier, every rank reduces
//    the whole message from every workspace), above it two-shot (every rank reduces its 1/world of the round
//    into its workspace, then gathers the others' parts): the symm_reduce kernels, ranks added in rank order, so
//    every rank gets the same bits;
//  - all_gather_into_tensor: copy in, barrier, copy every rank's part out, barrier;
//  - reduce_scatter_tensor (sum, avg; floating dtypes): the round's block of every destination into the
//    workspace, then symm_reduce's reduce-scatter;
//  - all_to_all_single: every (source, destination) pair streams through the source's workspace slot for it,
//    with pairwise ready/free signals (no global rounds); the sends go first, then the rank's own block is copied
//    directly while the peers copy in. A slot's last "free" is waited for only when the slot is next written
//    (or another collective takes the workspace: settle()), so a rank does not wait at the end of the call for
//    its peers to finish reading. A pair of at least kDirectBytes whose source lies in a segment of the caching
//    allocator moves in one copy instead of two (Note [Direct all_to_all reads]);
//  - the agreement check's exchange (MYTORCH_DIST_CHECK) goes through two small areas past the workspace, used
//    alternately: one barrier per check (a rank writing area k again has passed the barrier of the check in
//    between, which every rank reaches only after reading area k).
//
// Note [Direct all_to_all reads]
// Through the slots every byte of a pair is copied twice (into the source's slot, out of it), and a 1 MiB
// all_to_all is bound by those copies. For a pair of kDirectBytes or more, the source instead writes a
// descriptor (its segment's IPC handle, the block's offset and length) into the pair's descriptor area past the
// workspace and signals "ready"; the destination maps the segment (rt::ipc_open_mem_handle; the first export
// moves the segment into a memory file, Note [Sharing sim memory between processes]), copies the block straight
// into its output and signals "free", which the source waits for before the call returns (the caller may write
// its input at once). The descriptor says which way the pair goes, so a source whose memory cannot be exported
// (not the allocator's, or mapped from another process) streams through the slots and the destination follows.
// Mappings are cached per handle (a handle names one memory file, and a mapping keeps its file alive, so a
// cached handle never names other memory), at most kMappings, the least recently used closed first; a peer
// segment freed since stays mapped (its pages held) until evicted or the group is destroyed.
// Everything else (other dtypes and ops, broadcast, gather, scatter, point-to-point, barrier) stays on Gloo. The
// work is done by the calling thread (sim work runs at submission); a peer that exits or stops answering fails
// the collective within the group's timeout. Chosen at the group's creation: every rank on one host (ranks
// compare host name and boot id through the store), world size > 1, the sim runtime, and
// MYTORCH_DIST_SYMM_MEM not 0 (every rank must set it alike: the ranks compare it). data_path reports
// "symmetric-memory" for such a group.
#include <ATen/core/Tensor.h>

#include <cstring>
#include <list>
#include <string>
#include <utility>

#include "csrc/core/DeviceAllocator.h"
#include "csrc/core/DeviceErrors.h"
#include "csrc/core/KernelDType.h"
#include "csrc/core/Runtime.h"
#include "csrc/core/Stream.h"
#include "csrc/distributed/Paths.h"
#include "csrc/distributed/SymmetricMemory.h"
#include "mytorch/runtime.h"

namespace mytorch::dist {
namespace {

constexpr size_t kWorkspace = size_t(8) << 20;
constexpr size_t kOneShotBytes = size_t(64) << 10;
constexpr size_t kCheckArea = size_t(8) << 10;  // each of the agreement check's two areas past the workspace
constexpr int64_t kDirectBytes = int64_t(256) << 10;  // all_to_all pairs from this size read the source directly
constexpr size_t kMappings = 16;                      // peers' segments kept mapped for direct reads

// A pair's descriptor (Note [Direct all_to_all reads]), one per destination past the check areas.
struct DirectDesc {
  uint32_t direct;  // 1: read the block from the segment below; 0: it streams through the slot
  uint32_t pad;
  int64_t offset, bytes, segment;  // the block in the segment, and the segment's size
  rt::IpcMemHandle handle;
};
constexpr size_t kDescSlot = 128;
static_assert(sizeof(DirectDesc) <= kDescSlot, "DirectDesc outgrew its slot");
constexpr size_t kDescArea = kWorkspace + 2 * kCheckArea;

bool reducible(const at::Tensor& t, const c10d::ReduceOp& op) {
  return kernelFloating(t.scalar_type()) && t.is_contiguous() &&
         (op.op_ == c10d::ReduceOp::SUM || op.op_ == c10d::ReduceOp::AVG);
}

class ShmPath final : public Path {
 public:
  ShmPath(ProcessGroupMytorch& pg, std::unique_ptr<Path> gloo, OwnedSymmetricMemory ws)
      : Path(pg), gloo_(std::move(gloo)), ws_(std::move(ws)) {
    for (void* p : ws_.handle->get_buffer_ptrs()) peers_.push_back(static_cast<char*>(p));
    owed_.assign(peers_.size(), 0);
  }

  ~ShmPath() override {
    if (ws_.handle) closeMappings();
  }

  WorkPtr allreduce(const CallInfo& c, Tensors& ts, const c10d::AllreduceOptions& o) override {
    if (ts.size() != 1 || !reducible(ts[0], o.reduceOp)) return gloo_->allreduce(c, ts, o);
    return run(c, ts, [&] {
      at::Tensor t = ts[0];
      char* data = static_cast<char*>(t.data_ptr());
      const int64_t elem = t.element_size(), total = t.numel();
      const int64_t per = static_cast<int64_t>(kWorkspace) / elem;
      const bool oneShot = total * elem <= static_cast<int64_t>(kOneShotBytes);
      for (int64_t at = 0; at < total; at += per) {
        const int64_t n = std::min(per, total - at);
        if (!oneShot) std::memcpy(mine(), data + at * elem, static_cast<size_t>(n * elem));
        reduce(oneShot ? SymmReduceMode::OneShot : SymmReduceMode::TwoShotOut, t.scalar_type(), n,
               oneShot ? data + at * elem : nullptr, data + at * elem);
      }
      if (o.reduceOp.op_ == c10d::ReduceOp::AVG) hostView(t).div_(pg_.getSize());
    });
  }

  WorkPtr allgatherBase(const CallInfo& c, Tensors& out, Tensors& in, const c10d::AllgatherOptions& o) override {
    if (in.size() != 1 || !in[0].is_contiguous() || !out[0].is_contiguous()) return gloo_->allgatherBase(c, out, in, o);
    return run(c, out, [&] {
      const char* src = static_cast<const char*>(in[0].const_data_ptr());
      char* dst = static_cast<char*>(out[0].data_ptr());
      const int64_t bytes = in[0].numel() * in[0].element_size();
      for (int64_t at = 0; at < bytes; at += static_cast<int64_t>(kWorkspace)) {
        const int64_t n = std::min<int64_t>(static_cast<int64_t>(kWorkspace), bytes - at);
        std::memcpy(mine(), src + at, static_cast<size_t>(n));
        barrier();
        for (int r = 0; r < world(); ++r) std::memcpy(dst + r * bytes + at, peer(r), static_cast<size_t>(n));
        barrier();
      }
    });
  }

  WorkPtr reduceScatterBase(const CallInfo& c, Tensors& out, Tensors& in,
                            const c10d::ReduceScatterOptions& o) override {
    if (in.size() != 1 || !reducible(in[0], o.reduceOp) || !out[0].is_contiguous())
      return gloo_->reduceScatterBase(c, out, in, o);
    return run(c, out, [&] {
      const char* src = static_cast<const char*>(in[0].const_data_ptr());
      char* dst = static_cast<char*>(out[0].data_ptr());
      const int64_t elem = in[0].element_size(), n = out[0].numel();
      const int64_t per = static_cast<int64_t>(kWorkspace) / elem / world();
      for (int64_t at = 0; at < n; at += per) {
        const int64_t k = std::min(per, n - at);
        for (int d = 0; d < world(); ++d)
          std::memcpy(mine() + d * k * elem, src + (d * n + at) * elem, static_cast<size_t>(k * elem));
        reduce(SymmReduceMode::ReduceScatter, in[0].scalar_type(), k * world(), nullptr, dst + at * elem);
      }
      if (o.reduceOp.op_ == c10d::ReduceOp::AVG) hostView(out[0]).div_(pg_.getSize());
    });
  }

  WorkPtr alltoallBase(const CallInfo& c, at::Tensor& out, at::Tensor& in, std::vector<int64_t>& outSplits,
                       std::vector<int64_t>& inSplits, const c10d::AllToAllOptions& o) override {
    if (!in.is_contiguous() || !out.is_contiguous() || in.dim() == 0)
      return gloo_->alltoallBase(c, out, in, outSplits, inSplits, o);
    Tensors outs{out};
    return run(
        c, outs,
        [&] {
          const int w = world();
          const int64_t rowIn = in.numel() / std::max<int64_t>(in.size(0), 1) * in.element_size();
          const int64_t rowOut = out.numel() / std::max<int64_t>(out.size(0), 1) * out.element_size();
          std::vector<int64_t> sendB(w), sendAt(w), recvB(w), recvAt(w);
          int64_t a = 0, b = 0, longest = 0;  // this rank's longest pair
          for (int r = 0; r < w; ++r) {
            sendB[r] = (inSplits.empty() ? in.size(0) / w : inSplits[r]) * rowIn;
            recvB[r] = (outSplits.empty() ? out.size(0) / w : outSplits[r]) * rowOut;
            sendAt[r] = a;
            recvAt[r] = b;
            a += sendB[r];
            b += recvB[r];
            longest = std::max({longest, sendB[r], recvB[r]});
          }
          const int me = pg_.getRank();
          const char* src = static_cast<const char*>(in.const_data_ptr());
          char* dst = static_cast<char*>(out.data_ptr());
          // Each (source, destination) pair streams through the source's slot for that destination, slot bytes a
          // round, with its own flow control: "ready" (channel 1) from the source, "free" (channel 2) back. Both ends
          // know the pair's byte count, so no rank waits on pairs it is not in and no round is agreed globally; a
          // round's sends come before its receives on every rank, so every wait is answered.
          const int64_t slot = std::min<int64_t>(static_cast<int64_t>(kWorkspace) / w / 16 * 16, int64_t(128) << 10);
          bool anyDirect = false;  // export the input's segment only when a pair can use it
          for (int d = 0; d < w; ++d) anyDirect |= d != me && sendB[d] >= kDirectBytes;
          const DirectDesc exported = anyDirect ? exportOf(in) : DirectDesc{};
          std::vector<char> directSend(static_cast<size_t>(w), 0), directRecv(static_cast<size_t>(w), 0);
          for (int64_t at = 0; at < longest; at += slot) {
            for (int d = 0; d < w; ++d) {
              if (d == me || sendB[d] <= at || directSend[static_cast<size_t>(d)]) continue;
              waitFree(d);
              if (at == 0) {  // the pair's descriptor says which way it goes
                DirectDesc desc = exported;
                desc.direct = exported.direct && sendB[d] >= kDirectBytes;
                desc.offset += sendAt[d];
                desc.bytes = sendB[d];
                std::memcpy(mine() + kDescArea + static_cast<size_t>(d) * kDescSlot, &desc, sizeof(desc));
                directSend[static_cast<size_t>(d)] = static_cast<char>(desc.direct);
              }
              if (!directSend[static_cast<size_t>(d)])
                std::memcpy(mine() + d * slot, src + sendAt[d] + at,
                            static_cast<size_t>(std::min(slot, sendB[d] - at)));
              ws_.handle->put_signal(d, kReady, timeoutMs());
              owed_[static_cast<size_t>(d)] = 1;
            }
            if (at == 0) std::memcpy(dst + recvAt[me], src + sendAt[me], static_cast<size_t>(recvB[me]));
            for (int s = 0; s < w; ++s) {
              if (s == me || recvB[s] <= at || directRecv[static_cast<size_t>(s)]) continue;
              ws_.handle->wait_signal(s, kReady, timeoutMs());
              if (at == 0) {
                DirectDesc desc;
                std::memcpy(&desc, peer(s) + kDescArea + static_cast<size_t>(me) * kDescSlot, sizeof(desc));
                if (desc.direct) {
                  directRecv[static_cast<size_t>(s)] = 1;
                  readDirect(s, desc, dst + recvAt[s], recvB[s]);
                  continue;
                }
              }
              std::memcpy(dst + recvAt[s] + at, peer(s) + me * slot,
                          static_cast<size_t>(std::min(slot, recvB[s] - at)));
              ws_.handle->put_signal(s, kFree, timeoutMs());
            }
          }
          for (int d = 0; d < w; ++d)  // the peers read this rank's input: done before the caller may write it
            if (directSend[static_cast<size_t>(d)]) waitFree(d);
        },
        /*settleFirst=*/false);
  }

  bool exchangeCheck(const at::Tensor& mineRow, std::vector<at::Tensor>& all) override {
    const size_t n = static_cast<size_t>(mineRow.numel() * mineRow.element_size());
    if (n > kCheckArea) return false;
    const size_t area = kWorkspace + kCheckArea * (checks_++ & 1);
    std::memcpy(mine() + area, mineRow.const_data_ptr(), n);
    barrier();
    for (int r = 0; r < world(); ++r) std::memcpy(all[r].data_ptr(), peer(r) + area, n);
    return true;
  }

  // The rest: Gloo.
  WorkPtr broadcast(const CallInfo& c, Tensors& ts, const c10d::BroadcastOptions& o) override {
    return gloo_->broadcast(c, ts, o);
  }
  WorkPtr allreduceCoalesced(const CallInfo& c, Tensors& ts, const c10d::AllreduceCoalescedOptions& o) override {
    return gloo_->allreduceCoalesced(c, ts, o);
  }
  WorkPtr reduce(const CallInfo& c, Tensors& ts, const c10d::ReduceOptions& o) override {
    return gloo_->reduce(c, ts, o);
  }
  WorkPtr allgather(const CallInfo& c, std::vector<Tensors>& out, Tensors& in,
                    const c10d::AllgatherOptions& o) override {
    return gloo_->allgather(c, out, in, o);
  }
  WorkPtr gather(const CallInfo& c, std::vector<Tensors>& out, Tensors& in, const c10d::GatherOptions& o) override {
    return gloo_->gather(c, out, in, o);
  }
  WorkPtr scatter(const CallInfo& c, Tensors& out, std::vector<Tensors>& in, const c10d::ScatterOptions& o) override {
    return gloo_->scatter(c, out, in, o);
  }
  WorkPtr reduceScatter(const CallInfo& c, Tensors& out, std::vector<Tensors>& in,
                        const c10d::ReduceScatterOptions& o) override {
    return gloo_->reduceScatter(c, out, in, o);
  }
  WorkPtr alltoall(const CallInfo& c, Tensors& out, Tensors& in, const c10d::AllToAllOptions& o) override {
    return gloo_->alltoall(c, out, in, o);
  }
  WorkPtr send(const CallInfo& c, Tensors& ts, int dst, int tag) override { return gloo_->send(c, ts, dst, tag); }
  WorkPtr recv(const CallInfo& c, Tensors& ts, int src, int tag) override { return gloo_->recv(c, ts, src, tag); }
  WorkPtr barrier(const CallInfo& c, const c10d::BarrierOptions& o) override { return gloo_->barrier(c, o); }
  void shutdown(bool abort) override {
    gloo_->shutdown(abort);
    if (ws_.handle) closeMappings();
    ws_ = OwnedSymmetricMemory{};  // the peers' mappings closed, the workspace back to the allocator
  }
  bool symmetricMemory() const override { return true; }

 private:
  int world() const { return pg_.getSize(); }
  char* mine() const { return static_cast<char*>(ws_.memory.get()); }
  const char* peer(int r) const { return peers_[static_cast<size_t>(r)]; }

  static constexpr int kReady = 1, kFree = 2;  // all_to_all's channels (barriers use 0)
  size_t timeoutMs() const { return static_cast<size_t>(pg_.timeout().count()); }

  // Waits for the "free" a slot's reader owes since this rank last wrote it (all_to_all).
  void waitFree(int d) {
    if (!owed_[static_cast<size_t>(d)]) return;
    ws_.handle->wait_signal(d, kFree, timeoutMs());
    owed_[static_cast<size_t>(d)] = 0;
  }
  // The descriptor of the input's segment for direct reads (Note [Direct all_to_all reads]); direct = 0 when
  // the memory is not a segment of the caching allocator or cannot be exported.
  static DirectDesc exportOf(const at::Tensor& in) {
    DirectDesc d{};
    const c10::DeviceIndex dev = in.device().index();
    const auto [base, size] = deviceAllocator()->segmentOf(in.const_data_ptr(), dev);
    if (base == nullptr || rt::ipc_get_mem_handle(dev, base, &d.handle) != rt::Status::Success) return d;
    d.direct = 1;
    d.offset = static_cast<const char*>(in.const_data_ptr()) - static_cast<const char*>(base);
    d.segment = static_cast<int64_t>(size);
    return d;
  }

  // Copies rank s's block, described by desc, into out (expected: `bytes`), then answers "free".
  void readDirect(int s, const DirectDesc& desc, char* out, int64_t bytes) {
    const bool fits = desc.offset >= 0 && desc.bytes >= 0 && desc.offset + desc.bytes <= desc.segment;
    if (fits && desc.bytes == bytes) std::memcpy(out, mapped(desc.handle) + desc.offset, static_cast<size_t>(bytes));
    ws_.handle->put_signal(s, kFree, timeoutMs());
    TORCH_CHECK(fits && desc.bytes == bytes, "mytorch all_to_all_single: rank ", s, " sends ", desc.bytes,
                " bytes to rank ", pg_.getRank(), ", which expects ", bytes,
                " (the ranks' split sizes disagree; MYTORCH_DIST_CHECK=1 names the call)");
  }

  // A peer's segment mapped here, cached by handle (least recently used closed first).
  const char* mapped(const rt::IpcMemHandle& h) {
    const std::string key(reinterpret_cast<const char*>(h.bytes), sizeof(h.bytes));
    for (auto it = maps_.begin(); it != maps_.end(); ++it) {
      if (it->first != key) continue;
      maps_.splice(maps_.begin(), maps_, it);
      return static_cast<const char*>(maps_.front().second);
    }
    void* p = nullptr;
    MT_RT_CHECK(rt::ipc_open_mem_handle(ws_.handle->get_device().index(), h, &p));
    maps_.emplace_front(key, p);
    if (maps_.size() > kMappings) {
      (void)rt::ipc_close_mem_handle(ws_.handle->get_device().index(), maps_.back().second);
      maps_.pop_back();
    }
    return static_cast<const char*>(p);
  }
  void closeMappings() {
    for (auto& m : maps_) (void)rt::ipc_close_mem_handle(ws_.handle->get_device().index(), m.second);
    maps_.clear();
  }

  // Every slot read: the whole workspace is this rank's to write again.
  void settle() {
    TORCH_CHECK(ws_.handle, "mytorch: the process group was shut down");
    for (int d = 0; d < world(); ++d) waitFree(d);
  }

  void barrier() {
    TORCH_CHECK(ws_.handle, "mytorch: the process group was shut down");
    ws_.handle->barrier(0, timeoutMs());
  }

  void reduce(SymmReduceMode mode, at::ScalarType st, int64_t numel, const void* local, void* out) {
    TORCH_CHECK(ws_.handle, "mytorch: the process group was shut down");
    SymmReduceArgs a;
    a.sync = ws_.handle->sync(timeoutMs());
    a.bufs = reinterpret_cast<void* const*>(ws_.handle->get_buffer_ptrs_dev());
    a.numel = numel;
    a.local_in = local;
    a.out = out;
    a.dtype = toKernelDType(st);
    a.mode = mode;
    MT_RT_CHECK(kernels::symm_reduce(a, nullptr));
    afterErrorCheckedLaunch(ws_.handle->get_device());
  }

  template <typename F>
  WorkPtr run(const CallInfo& c, const Tensors& outputs, F body, bool settleFirst = true) {
    auto work = makeWork(c, outputs, false);
    try {
      if (settleFirst) settle();
      body();
      work->complete(nullptr);
    } catch (...) {
      work->complete(std::current_exception());
    }
    return work;
  }

  std::unique_ptr<Path> gloo_;
  OwnedSymmetricMemory ws_;
  std::vector<char*> peers_;  // every rank's workspace, mapped here
  std::vector<char> owed_;    // owed_[d]: rank d has not yet answered "free" for this rank's slot for it
  uint64_t checks_ = 0;       // agreement checks so far: which of the two areas the next one uses
  std::list<std::pair<std::string, void*>> maps_;  // peers' segments mapped for direct reads, most recent first
};

} // namespace

std::unique_ptr<Path> makeIntraHostPath(ProcessGroupMytorch& pg, std::unique_ptr<Path> gloo) {
  const int world = pg.getSize(), rank = pg.getRank();
  // (all_to_all's pairwise signals use channels 1 and 2 of the pad)
  if (world < 2 || rt::kind() != rt::Kind::Sim || c10d::symmetric_memory::get_signal_pad_size() / 4 / world < 3)
    return gloo;
  const char* env = std::getenv("MYTORCH_DIST_SYMM_MEM");
  const bool wanted = !(env && std::string(env) == "0");
  const auto& store = pg.store();
  store->set("mytorch_symm/wanted/" + std::to_string(rank), std::vector<uint8_t>{static_cast<uint8_t>(wanted)});
  for (int r = 0; r < world; ++r) {
    const auto v = store->get("mytorch_symm/wanted/" + std::to_string(r));
    TORCH_CHECK(!v.empty() && static_cast<bool>(v[0]) == wanted, "ProcessGroupMytorch: MYTORCH_DIST_SYMM_MEM is ",
                wanted ? "on" : "0", " on rank ", rank, " but not on rank ", r, "; set it the same way on every rank");
  }
  if (!wanted || !sameHost(store, rank, world, "mytorch_symm/host")) return gloo;
  int device = 0;
  MT_RT_CHECK(rt::get_device(&device));
  auto ws = allocateSymmetric(kDescArea + static_cast<size_t>(world) * kDescSlot,
                              c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device)), store,
                              rank, world, "mytorch_symm/workspace");
  return std::make_unique<ShmPath>(pg, std::move(gloo), std::move(ws));
}

} // namespace mytorch::dist
