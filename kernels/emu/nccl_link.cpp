// The emulated NCCL's transport (nccl_link.h): the shared segment, waits on a futex in it, the collectives'
// rounds and the point-to-point rendezvous.
#include "nccl_link.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include <c10/util/BFloat16.h>
#include <c10/util/Float8_e4m3fn.h>
#include <c10/util/Float8_e5m2.h>
#include <c10/util/Half.h>

#include "mytorch/runtime.h"

namespace mytorch::emu::nccl {

// Per rank for the collectives' rounds, and per ordered pair of ranks for point-to-point: small, so that a
// collective of any size crosses several rounds (the chunking is exercised by every test, not only by big ones).
constexpr size_t kSlotBytes = 256 << 10;
constexpr size_t kPairBytes = 64 << 10;
constexpr uint64_t kMagic = 0x4d54454d554e4343ull;  // "MTEMUNCC"

struct Pair {
  std::atomic<uint64_t> posted;   // receives the destination has posted for the source (the last one in progress)
  std::atomic<uint64_t> started;  // sends the source has started (the last one's size in `bytes`)
  std::atomic<uint64_t> bytes;
  std::atomic<uint64_t> head, tail;  // bytes written and read through the pair's ring
};

struct Segment {
  std::atomic<uint64_t> magic;
  std::atomic<int32_t> nranks;
  std::atomic<uint32_t> bell;  // bumped (and woken) on every change: the futex every wait sleeps on
  std::atomic<int32_t> joined;
  std::atomic<int32_t> failed;  // 0 healthy, 1 being failed, 2 failed (why below)
  char why[512];
  std::atomic<int32_t> pid[kMaxRanks];
  std::atomic<uint64_t> arrive[kMaxRanks];
  std::atomic<uint64_t> split_arrive[kMaxRanks];
  int32_t split_color[kMaxRanks], split_key[kMaxRanks];
  OpDesc desc[kMaxRanks];
  Pair pair[kMaxRanks][kMaxRanks];
};
static_assert(std::atomic<uint32_t>::is_always_lock_free && std::atomic<uint64_t>::is_always_lock_free,
              "the segment's atomics must work across processes");

namespace {

constexpr size_t kDataOffset = (sizeof(Segment) + 4095) / 4096 * 4096;

size_t segment_bytes(int nranks) {
  return kDataOffset + static_cast<size_t>(nranks) * kSlotBytes + static_cast<size_t>(nranks) * nranks * kPairBytes;
}

// --- arithmetic: every rank folds the ranks' inputs in rank order, so every rank gets the same bits ---------

template <typename T>
T load(const char* p, size_t i) {
  T v;
  std::memcpy(&v, p + i * sizeof(T), sizeof(T));
  return v;
}
template <typename T>
void store(char* p, size_t i, T v) {
  std::memcpy(p + i * sizeof(T), &v, sizeof(T));
}

template <typename T>
double widen(T v) {
  if constexpr (std::is_same_v<T, double>) return v;
  else return static_cast<double>(static_cast<float>(v));
}

template <typename T>
void combine_float(int op, const char* const* ins, int n, char* out, size_t count, double premul, bool has_premul) {
  for (size_t i = 0; i < count; ++i) {
    double acc = 0;
    for (int r = 0; r < n; ++r) {
      double x = widen(load<T>(ins[r], i));
      if (has_premul) x = widen(static_cast<T>(x * premul));  // scaled in the data's type, as NCCL does
      if (r == 0) acc = x;
      else if (op == ncclProd) acc *= x;
      else if (op == ncclMax) acc = (std::isnan(x) || x > acc) ? x : acc;
      else if (op == ncclMin) acc = (std::isnan(x) || x < acc) ? x : acc;
      else acc += x;  // ncclSum, ncclAvg and PreMulSum
    }
    if (op == ncclAvg) acc /= n;
    store<T>(out, i, static_cast<T>(acc));
  }
}

template <typename T>
void combine_int(int op, const char* const* ins, int n, char* out, size_t count, double premul, bool has_premul) {
  using U = std::make_unsigned_t<T>;
  for (size_t i = 0; i < count; ++i) {
    U acc = 0;  // sums and products wrap, as the hardware's
    T best = 0;
    for (int r = 0; r < n; ++r) {
      T x = load<T>(ins[r], i);
      if (has_premul) x = static_cast<T>(std::llround(static_cast<double>(x) * premul));
      if (r == 0) acc = static_cast<U>(x), best = x;
      else if (op == ncclProd) acc = static_cast<U>(acc * static_cast<U>(x));
      else if (op == ncclMax) best = std::max(best, x);
      else if (op == ncclMin) best = std::min(best, x);
      else acc = static_cast<U>(acc + static_cast<U>(x));
    }
    T result = op == ncclMax || op == ncclMin ? best : static_cast<T>(acc);
    if (op == ncclAvg) result = static_cast<T>(result / n);
    store<T>(out, i, result);
  }
}

void combine(int type, int op, const char* const* ins, int n, char* out, size_t count, double premul, bool has_premul) {
  switch (type) {
    case ncclInt8: return combine_int<int8_t>(op, ins, n, out, count, premul, has_premul);
    case ncclUint8: return combine_int<uint8_t>(op, ins, n, out, count, premul, has_premul);
    case ncclInt32: return combine_int<int32_t>(op, ins, n, out, count, premul, has_premul);
    case ncclUint32: return combine_int<uint32_t>(op, ins, n, out, count, premul, has_premul);
    case ncclInt64: return combine_int<int64_t>(op, ins, n, out, count, premul, has_premul);
    case ncclUint64: return combine_int<uint64_t>(op, ins, n, out, count, premul, has_premul);
    case ncclFloat16: return combine_float<c10::Half>(op, ins, n, out, count, premul, has_premul);
    case ncclFloat32: return combine_float<float>(op, ins, n, out, count, premul, has_premul);
    case ncclFloat64: return combine_float<double>(op, ins, n, out, count, premul, has_premul);
    case ncclBfloat16: return combine_float<c10::BFloat16>(op, ins, n, out, count, premul, has_premul);
    case ncclFloat8e4m3: return combine_float<c10::Float8_e4m3fn>(op, ins, n, out, count, premul, has_premul);
    case ncclFloat8e5m2: return combine_float<c10::Float8_e5m2>(op, ins, n, out, count, premul, has_premul);
    default: return;
  }
}

std::string describe(const OpDesc& d) {
  return std::string(op_name(d.kind)) + "(count " + std::to_string(d.count) + ", type " + std::to_string(d.type) +
         (d.kind == 0 || d.kind == 2 || d.kind == 4 ? ", op " + std::to_string(d.op) : "") +
         (d.root >= 0 ? ", root " + std::to_string(d.root) : "") + ")";
}

}  // namespace

size_t type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64: return 8;
    default: return 0;
  }
}

const char* op_name(int kind) {
  static const char* names[] = {"ncclAllReduce", "ncclBroadcast", "ncclReduce", "ncclAllGather", "ncclReduceScatter"};
  return kind >= 0 && kind < 5 ? names[kind] : "?";
}

Status Link::open(const std::string& name, int nranks, int rank, const std::atomic<bool>* cancelled,
                  std::shared_ptr<Link>* out) {
  const size_t bytes = segment_bytes(nranks);
  int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
  if (fd < 0) return {ncclSystemError, "shm_open(" + name + "): " + std::strerror(errno)};
  struct stat st{};
  if (fstat(fd, &st) != 0 || (st.st_size != 0 && static_cast<size_t>(st.st_size) != bytes)) {
    close(fd);
    return {ncclInvalidUsage,
            "the ranks of " + name + " disagree on the number of ranks (this one says " + std::to_string(nranks) + ")"};
  }
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    close(fd);
    return {ncclSystemError, "ftruncate(" + name + "): " + std::strerror(errno)};
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return {ncclSystemError, "mmap(" + name + "): " + std::strerror(errno)};
  std::shared_ptr<Link> link(new Link());
  link->seg_ = static_cast<Segment*>(p);  // zero-filled when new: every atomic starts at 0
  link->bytes_ = bytes;
  link->rank_ = rank;
  link->nranks_ = nranks;
  Segment& s = *link->seg_;
  uint64_t expected = 0;
  if (s.magic.compare_exchange_strong(expected, 1)) {
    s.nranks.store(nranks);
    s.magic.store(kMagic);
  }
  while (s.magic.load() != kMagic) sched_yield();
  if (s.nranks.load() != nranks) {
    return {ncclInvalidUsage, "rank " + std::to_string(rank) + " joined " + name + " with " + std::to_string(nranks) +
                                  " ranks, but it has " + std::to_string(s.nranks.load())};
  }
  int32_t none = 0;
  if (!s.pid[rank].compare_exchange_strong(none, static_cast<int32_t>(getpid()))) {
    return {ncclInvalidUsage, "two processes joined the communicator as rank " + std::to_string(rank)};
  }
  s.joined.fetch_add(1);
  link->ring();
  Status ok =
      link->wait([&] { return s.joined.load() == nranks || (cancelled && cancelled->load()); }, "communicator setup");
  if (!ok.ok()) return ok;
  if (cancelled && cancelled->load()) return {ncclInvalidUsage, "the communicator was aborted during its setup"};
  shm_unlink(name.c_str());  // every rank has it mapped: the name is no longer needed (the first unlink wins)
  *out = std::move(link);
  return {};
}

Link::~Link() {
  if (seg_) munmap(seg_, bytes_);
}

char* Link::slot(int r) const { return reinterpret_cast<char*>(seg_) + kDataOffset + r * kSlotBytes; }
char* Link::pair_buffer(int src, int dst) const {
  return reinterpret_cast<char*>(seg_) + kDataOffset + nranks_ * kSlotBytes + (src * nranks_ + dst) * kPairBytes;
}

void Link::ring() {
  seg_->bell.fetch_add(1, std::memory_order_release);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&seg_->bell), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void Link::fail(const std::string& why) {
  int32_t healthy = 0;
  if (seg_->failed.compare_exchange_strong(healthy, 1)) {
    std::snprintf(seg_->why, sizeof(seg_->why), "%s", why.c_str());
    seg_->failed.store(2);
  }
  ring();
}

Status Link::failure() const {
  if (seg_->failed.load() != 2) return {};
  return {ncclRemoteError, seg_->why};
}

Status Link::check_peers() {
  for (int r = 0; r < nranks_; ++r) {
    const int pid = seg_->pid[r].load();
    if (r == rank_ || pid == 0 || !mytorch::rt::process_exited(pid)) continue;
    fail("rank " + std::to_string(r) + " (pid " + std::to_string(pid) + ") exited");
    return failure();
  }
  return {};
}

template <typename Ready>
Status Link::wait(Ready&& ready, const char* what) {
  using Clock = std::chrono::steady_clock;
  auto checked = Clock::now();
  for (int spins = 0;; ++spins) {
    const uint32_t bell = seg_->bell.load(std::memory_order_acquire);
    if (ready()) return {};
    Status failed = failure();
    if (!failed.ok()) return failed;
    if (aborted.load()) return {ncclInvalidUsage, std::string(what) + ": the communicator was aborted"};
    if (spins < 8) {
      sched_yield();
      continue;
    }
    if (Clock::now() - checked > std::chrono::milliseconds(20)) {
      Status peers = check_peers();
      if (!peers.ok()) return peers;
      checked = Clock::now();
    }
    struct timespec ts{0, 2000000};  // 2 ms: aborts and exited peers are noticed without a ring
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&seg_->bell), FUTEX_WAIT, bell, &ts, nullptr, 0);
  }
}

Status Link::barrier(std::atomic<uint64_t>* counters, uint64_t* round, const char* what) {
  const uint64_t mine = ++*round;
  counters[rank_].store(mine, std::memory_order_release);
  ring();
  return wait(
      [&] {
        for (int r = 0; r < nranks_; ++r) {
          if (counters[r].load(std::memory_order_acquire) < mine) return false;
        }
        return true;
      },
      what);
}

Status Link::agree(const OpDesc& d) {
  for (int r = 0; r < nranks_; ++r) {
    const OpDesc& o = seg_->desc[r];
    if (o.kind == d.kind && o.type == d.type && o.op == d.op && o.root == d.root && o.count == d.count) continue;
    Status st{ncclInvalidUsage, "rank " + std::to_string(r) + " called " + describe(o) + " while rank " +
                                    std::to_string(rank_) + " called " + describe(d)};
    fail(st.why);
    return st;
  }
  return {};
}

// A collective in rounds of `chunk` elements: `fill(off, n)` puts this rank's part of the round into the slots, a
// barrier (the first round also checks that the ranks agree on the call), `use(off, n)` reads them, a barrier.
template <typename Fill, typename Use>
Status Link::rounds(const OpDesc& d, size_t chunk, Fill&& fill, Use&& use) {
  size_t off = 0;
  bool first = true;
  do {
    const size_t n = std::min<size_t>(chunk, d.count - off);
    if (n) fill(off, n);  // a count of 0 still takes one round: the ranks stay in step and agree
    if (first) seg_->desc[rank_] = d;
    Status st = barrier(seg_->arrive, &round_, op_name(d.kind));
    if (st.ok() && first) st = agree(d);
    if (!st.ok()) return st;
    if (n) use(off, n);
    st = barrier(seg_->arrive, &round_, op_name(d.kind));
    if (!st.ok()) return st;
    off += n;
    first = false;
  } while (off < d.count);
  return {};
}

Status Link::reduce_rounds(const OpDesc& d, const char* send, char* recv, double premul, bool has_premul, int root) {
  const size_t es = type_size(static_cast<ncclDataType_t>(d.type));
  return rounds(
      d, kSlotBytes / es, [&](size_t off, size_t n) { std::memcpy(slot(rank_), send + off * es, n * es); },
      [&](size_t off, size_t n) {
        if (root >= 0 && root != rank_) return;
        const char* ins[kMaxRanks];
        for (int r = 0; r < nranks_; ++r) ins[r] = slot(r);
        combine(d.type, d.op, ins, nranks_, recv + off * es, n, premul, has_premul);
      });
}

Status Link::all_reduce(const OpDesc& d, const char* send, char* recv, double premul, bool has_premul) {
  return reduce_rounds(d, send, recv, premul, has_premul, -1);
}

Status Link::reduce(const OpDesc& d, const char* send, char* recv, double premul, bool has_premul) {
  return reduce_rounds(d, send, recv, premul, has_premul, d.root);
}

Status Link::broadcast(const OpDesc& d, const char* send, char* recv) {
  const size_t es = type_size(static_cast<ncclDataType_t>(d.type));
  return rounds(
      d, kSlotBytes / es,
      [&](size_t off, size_t n) {
        if (rank_ == d.root) std::memcpy(slot(rank_), send + off * es, n * es);
      },
      [&](size_t off, size_t n) { std::memmove(recv + off * es, slot(d.root), n * es); });
}

Status Link::all_gather(const OpDesc& d, const char* send, char* recv) {
  const size_t es = type_size(static_cast<ncclDataType_t>(d.type));
  return rounds(
      d, kSlotBytes / es, [&](size_t off, size_t n) { std::memcpy(slot(rank_), send + off * es, n * es); },
      [&](size_t off, size_t n) {
        for (int r = 0; r < nranks_; ++r) std::memcpy(recv + (r * d.count + off) * es, slot(r), n * es);
      });
}

Status Link::reduce_scatter(const OpDesc& d, const char* send, char* recv, double premul, bool has_premul) {
  const size_t es = type_size(static_cast<ncclDataType_t>(d.type)), chunk = kSlotBytes / (es * nranks_);
  return rounds(
      d, chunk,
      [&](size_t off, size_t n) {
        for (int r = 0; r < nranks_; ++r)
          std::memcpy(slot(rank_) + r * chunk * es, send + (r * d.count + off) * es, n * es);
      },
      [&](size_t off, size_t n) {
        const char* ins[kMaxRanks];
        for (int r = 0; r < nranks_; ++r) ins[r] = slot(r) + rank_ * chunk * es;
        combine(d.type, d.op, ins, nranks_, recv + off * es, n, premul, has_premul);
      });
}

bool Link::step(Transfer& t, Status* st) {
  bool progress = false;
  const int p = t.peer;
  if (t.send) {
    Pair& pr = seg_->pair[rank_][p];
    if (!t.begun) {
      if (send_busy_[p] || pr.posted.load(std::memory_order_acquire) < sent_[p] + 1) return false;  // rendezvous
      t.seq = sent_[p] + 1;
      t.begun = send_busy_[p] = progress = true;
      pr.bytes.store(t.bytes);
      pr.started.store(t.seq, std::memory_order_release);
    }
    uint64_t head = sent_bytes_[p];
    const uint64_t tail = pr.tail.load(std::memory_order_acquire);
    char* ring_buf = pair_buffer(rank_, p);
    while (t.done < t.bytes && head - tail < kPairBytes) {
      const size_t pos = head % kPairBytes;
      const size_t n = std::min({kPairBytes - (head - tail), kPairBytes - pos, t.bytes - t.done});
      std::memcpy(ring_buf + pos, t.buf + t.done, n);
      head += n;
      t.done += n;
      progress = true;
    }
    sent_bytes_[p] = head;
    pr.head.store(head, std::memory_order_release);
    if (t.done == t.bytes) {
      t.finished = true;
      sent_[p] = t.seq;
      send_busy_[p] = false;
    }
  } else {
    Pair& pr = seg_->pair[p][rank_];
    if (!t.begun) {
      if (recv_busy_[p]) return false;
      t.seq = received_[p] + 1;
      t.begun = recv_busy_[p] = progress = true;
      pr.posted.store(t.seq, std::memory_order_release);
    }
    if (pr.started.load(std::memory_order_acquire) < t.seq) return progress;
    if (!t.checked) {
      const uint64_t sent = pr.bytes.load();
      if (sent != t.bytes) {
        *st = {ncclInvalidUsage, "rank " + std::to_string(p) + " sent " + std::to_string(sent) + " bytes to rank " +
                                     std::to_string(rank_) + ", which posted a receive of " + std::to_string(t.bytes) +
                                     " bytes"};
        fail(st->why);
        return true;
      }
      t.checked = progress = true;
    }
    uint64_t tail = received_bytes_[p];
    const uint64_t head = pr.head.load(std::memory_order_acquire);
    const char* ring_buf = pair_buffer(p, rank_);
    while (tail < head && t.done < t.bytes) {
      const size_t pos = tail % kPairBytes;
      const size_t n = std::min({static_cast<size_t>(head - tail), kPairBytes - pos, t.bytes - t.done});
      std::memcpy(t.buf + t.done, ring_buf + pos, n);
      tail += n;
      t.done += n;
      progress = true;
    }
    received_bytes_[p] = tail;
    pr.tail.store(tail, std::memory_order_release);
    if (t.done == t.bytes) {
      t.finished = true;
      received_[p] = t.seq;
      recv_busy_[p] = false;
    }
  }
  return progress;
}

Status Link::transfers(std::vector<Transfer>& ts) {
  for (;;) {
    const uint32_t bell = seg_->bell.load(std::memory_order_acquire);
    bool all = true, progress = false;
    Status st;
    for (auto& t : ts) {
      if (t.finished) continue;
      progress |= step(t, &st);
      if (!st.ok()) return st;
      all &= t.finished;
    }
    if (progress) ring();
    if (all) return {};
    if (progress) continue;
    st = wait([&] { return seg_->bell.load(std::memory_order_acquire) != bell; }, "ncclSend/ncclRecv");
    if (!st.ok()) return st;
  }
}

Status Link::exchange_split(int color, int key, std::vector<std::pair<int, int>>* all) {
  seg_->split_color[rank_] = color;
  seg_->split_key[rank_] = key;
  Status st = barrier(seg_->split_arrive, &split_round_, "ncclCommSplit");
  if (!st.ok()) return st;
  all->clear();
  for (int r = 0; r < nranks_; ++r) all->emplace_back(seg_->split_color[r], seg_->split_key[r]);
  return barrier(seg_->split_arrive, &split_round_, "ncclCommSplit");  // nobody writes the next split's before
}

Status Link::hang() {
  return wait([] { return false; }, "a collective that hangs (MYTORCH_EMU_NCCL_FAULT)");
}

}  // namespace mytorch::emu::nccl
