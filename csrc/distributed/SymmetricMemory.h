// torch.distributed's symmetric memory on the mytorch device: a c10d SymmetricMemoryAllocator registered for
// PrivateUse1 and its SymmetricMemory handles (Note [Symmetric memory on mytorch] in SymmetricMemory.cpp).
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/symm_mem/SymmetricMemory.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "mytorch/symm_mem.h"

namespace mytorch::dist {

class MytorchSymmetricMemory final : public c10d::symmetric_memory::SymmetricMemory {
 public:
  struct Peer {
    void* buffer = nullptr;
    uint32_t* pad = nullptr;
    void* mapping = nullptr;  // the peer's segment as opened here (nullptr for this rank's own)
    int32_t pid = 0;
    int global_rank = 0;
  };
  MytorchSymmetricMemory(std::vector<Peer> peers, int rank, size_t size, size_t pad_size, c10::Device device,
                         std::chrono::milliseconds timeout);
  ~MytorchSymmetricMemory() override;

  std::vector<void*> get_buffer_ptrs() override;
  std::vector<void*> get_signal_pad_ptrs() override;
  void** get_buffer_ptrs_dev() override { return static_cast<void**>(buffers_dev_.get()); }
  void** get_signal_pad_ptrs_dev() override { return static_cast<void**>(pads_dev_.get()); }
  size_t get_buffer_size() override { return size_; }
  size_t get_offset() override { return 0; }
  bool has_multicast_support() override { return false; }
  void* get_multicast_ptr() override { return nullptr; }
  void barrier(int channel, size_t timeout_ms) override;
  void put_signal(int dst_rank, int channel, size_t timeout_ms) override;
  void wait_signal(int src_rank, int channel, size_t timeout_ms) override;
  int get_rank() override { return rank_; }
  int get_world_size() override { return static_cast<int>(peers_.size()); }
  c10::Device get_device() override { return device_; }
  const std::vector<int>& get_rank_to_global_rank() override { return global_ranks_; }
  int* get_rank_to_global_rank_dev() override { return static_cast<int*>(global_ranks_dev_.get()); }
  bool world_within_direct_access() override { return true; }

  // The synchronisation a kernel over this memory uses: pads, rank, timeout (0: the group's), error site.
  SymmSync sync(size_t timeout_ms);
  // Launches a signal operation on the current stream; raises (at once on sim, else at the next
  // synchronisation) when a wait times out.
  void signal(SymmSignalOp op, int peer, int channel, size_t timeout_ms);

 private:
  std::vector<Peer> peers_;
  std::vector<int32_t> pids_;
  std::vector<int> global_ranks_;
  int rank_;
  size_t size_, pad_size_;
  c10::Device device_;
  std::chrono::milliseconds timeout_;
  c10::DataPtr buffers_dev_, pads_dev_, global_ranks_dev_;
  ErrorSite error_;  // where a timed-out wait is recorded (this device's slot)
};

// Whether `t`'s storage was allocated by symm_mem.empty() on mytorch (torch 2.12's
// c10d::symmetric_memory::is_symm_mem_tensor, which 2.11 lacks).
bool isSymmetricTensor(const at::Tensor& t);
// The allocator's handle of a tensor's memory for a group: collective (every rank of the group calls it), cached.
c10::intrusive_ptr<MytorchSymmetricMemory> symmetricMemoryOf(const at::Tensor& t, const std::string& group);

// Symmetric memory for a process group's own use (the intra-host collectives): allocated and rendezvoused over
// `store` by the group's ranks together; freed when the returned pointer's owner drops it.
struct OwnedSymmetricMemory {
  c10::DataPtr memory;
  c10::intrusive_ptr<MytorchSymmetricMemory> handle;
};
OwnedSymmetricMemory allocateSymmetric(size_t size, c10::Device device, const c10::intrusive_ptr<c10d::Store>& store,
                                       int rank, int world, const std::string& key);

// Whether every rank that published through `store` under `key` runs on this host (the ranks exchange their
// host identity; collective).
bool sameHost(const c10::intrusive_ptr<c10d::Store>& store, int rank, int world, const std::string& key);

void registerSymmetricMemoryAllocator();

} // namespace mytorch::dist
