// The emulated NCCL's transport (Note [The emulated NCCL] in nccl.cpp): one shared-memory segment per
// communicator, named by its unique id, mapped by every rank process of the machine. Device memory of the emulated
// build is host memory of each process, so a collective copies its data through the segment.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nccl.h"

namespace mytorch::emu::nccl {

constexpr int kMaxRanks = 8;

// What failed, and why (the communicator's async error and last-error text).
struct Status {
  ncclResult_t result = ncclSuccess;
  std::string why;
  bool ok() const { return result == ncclSuccess; }
};

// One collective as every rank must describe it (compared across ranks before any data moves).
struct OpDesc {
  int32_t kind = 0, type = 0, op = 0, root = -1;
  uint64_t count = 0;
};

// A point-to-point transfer in progress (the group progresses all of its transfers together).
struct Transfer {
  bool send = false;
  int peer = 0;
  char* buf = nullptr;
  size_t bytes = 0;
  bool begun = false, checked = false, finished = false;
  size_t done = 0;
  uint64_t seq = 0;
};

struct Segment;

class Link {
 public:
  // Maps (creating when first) the segment `name` and waits until all `nranks` ranks joined; `cancelled` is
  // polled while waiting (a non-blocking init's abort).
  static Status open(const std::string& name, int nranks, int rank, const std::atomic<bool>* cancelled,
                     std::shared_ptr<Link>* out);
  ~Link();
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }

  // Marks the communicator failed for every rank (an abort, an error, a peer that exited): their waits return
  // `why` as ncclRemoteError from then on.
  void fail(const std::string& why);
  Status failure() const;
  std::atomic<bool> aborted{false};  // this process aborted it: its waits end at once

  // The collectives: one chunk at a time through the ranks' slots, two barriers a chunk.
  Status all_reduce(const OpDesc& d, const char* send, char* recv, double premul, bool has_premul);
  Status reduce(const OpDesc& d, const char* send, char* recv, double premul, bool has_premul);
  Status broadcast(const OpDesc& d, const char* send, char* recv);
  Status all_gather(const OpDesc& d, const char* send, char* recv);
  Status reduce_scatter(const OpDesc& d, const char* send, char* recv, double premul, bool has_premul);
  // Progresses point-to-point transfers together until all are done: a send starts only once its receiver has
  // posted the matching receive (NCCL's rendezvous), so an ungrouped send/recv pair in the wrong order waits.
  Status transfers(std::vector<Transfer>& ts);
  // Host side of ncclCommSplit: every rank's (color, key), in rank order.
  Status exchange_split(int color, int key, std::vector<std::pair<int, int>>* all);
  // Blocks until every rank called `hang` or the communicator failed (fault injection: a collective that hangs).
  Status hang();

 private:
  Link() = default;
  template <typename Ready>
  Status wait(Ready&& ready, const char* what);
  Status barrier(std::atomic<uint64_t>* counters, uint64_t* round, const char* what);
  Status agree(const OpDesc& d);
  template <typename Fill, typename Use>
  Status rounds(const OpDesc& d, size_t chunk, Fill&& fill, Use&& use);
  Status reduce_rounds(const OpDesc& d, const char* send, char* recv, double premul, bool has_premul, int root);
  bool step(Transfer& t, Status* st);
  void ring();
  char* slot(int r) const;
  char* pair_buffer(int src, int dst) const;
  Status check_peers();

  Segment* seg_ = nullptr;
  size_t bytes_ = 0;
  int rank_ = 0, nranks_ = 0;
  uint64_t round_ = 0, split_round_ = 0;
  uint64_t sent_[kMaxRanks] = {}, received_[kMaxRanks] = {};
  uint64_t sent_bytes_[kMaxRanks] = {}, received_bytes_[kMaxRanks] = {};
  bool send_busy_[kMaxRanks] = {}, recv_busy_[kMaxRanks] = {};
};

size_t type_size(ncclDataType_t t);  // 0 for an unknown type
const char* op_name(int kind);

}  // namespace mytorch::emu::nccl
