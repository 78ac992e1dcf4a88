// The sim data path of ProcessGroupMytorch: collectives handed to PyTorch's Gloo over CPU views of the same
// bytes (sim device memory is host memory and kernels run at submission, so the bytes are final when the
// collective is issued). Dtypes Gloo cannot move travel as bytes; dtypes it cannot reduce are widened into a
// temporary and narrowed back when the collective ends.
#include <ATen/core/ivalue.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/view_as_real.h>
#include <ATen/ops/zeros.h>

#include <thread>

#include "csrc/core/Runtime.h"
#include "csrc/distributed/Paths.h"

namespace mytorch::dist {
namespace {

bool glooNative(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
    case at::kDouble:
    case at::kHalf:
    case at::kBFloat16:
    case at::kChar:
    case at::kByte:
    case at::kInt:
    case at::kLong:
    case at::kBool: return true;
    default: return false;
  }
}

// A CPU view Gloo can move: the tensor itself, or its bytes (first dimension kept, for all-to-all rows).
at::Tensor movable(const at::Tensor& t) {
  at::Tensor v = hostView(t);
  if (glooNative(v.scalar_type())) return v;
  if (v.is_complex()) v = at::view_as_real(v);
  if (glooNative(v.scalar_type())) return v;
  at::Tensor rows = v.dim() == 0 ? v.reshape({1}) : v.reshape({v.size(0), -1});
  return rows.view(at::kByte);
}

// What Gloo reduces for one tensor: the view itself or a widened copy, with the op to use and the step that
// writes a widened result back.
struct Reducible {
  at::Tensor tensor;
  c10d::ReduceOp op;
  std::function<void()> narrow;
};

Reducible reducibleAs(const at::Tensor& t, const c10d::ReduceOp& op, bool writesBack, bool isInputOnly);

// Gloo averages by dividing in the data's dtype, which integers refuse: sum, then divide rounding toward
// zero (NCCL's integer average).
Reducible reducible(const at::Tensor& t, const c10d::ReduceOp& op, bool writesBack, bool isInputOnly, int world) {
  Reducible r = reducibleAs(t, op, writesBack, isInputOnly);
  const auto rt = r.tensor.scalar_type();
  if (op.op_ == c10d::ReduceOp::AVG && !at::isFloatingType(rt) && !at::isComplexType(rt)) {
    r.op = c10d::ReduceOp(c10d::ReduceOp::SUM);
    if (writesBack) {
      at::Tensor sum = r.tensor;
      auto narrow = r.narrow;
      r.narrow = [sum, narrow, world] {
        sum.div_(world, "trunc");
        if (narrow) narrow();
      };
    }
  }
  return r;
}

Reducible reducibleAs(const at::Tensor& t, const c10d::ReduceOp& op, bool writesBack, bool isInputOnly) {
  at::Tensor v = hostView(t);
  Reducible r{v, op, nullptr};
  const auto kind = op.op_;
  if (auto f = premulFactor(op)) {
    // Gloo has no PREMUL_SUM: scale, then sum (a copy when the input must stay as it was).
    r.tensor = isInputOnly ? v.mul(*f) : v.mul_(*f);
    r.op = c10d::ReduceOp(c10d::ReduceOp::SUM);
    if (!glooNative(r.tensor.scalar_type())) {
      at::Tensor wide = r.tensor.to(at::kFloat);
      at::Tensor target = r.tensor;
      r.tensor = wide;
      if (writesBack) r.narrow = [target, wide] { target.copy_(wide); };
    }
    return r;
  }
  if (v.is_complex()) {
    TORCH_CHECK_VALUE(kind == c10d::ReduceOp::SUM || kind == c10d::ReduceOp::AVG, "mytorch: complex tensors can ",
                      "only be reduced with SUM or AVG, but got op ", static_cast<int>(kind));
    r.tensor = at::view_as_real(v);
  }
  if (glooNative(r.tensor.scalar_type())) return r;
  const auto st = v.scalar_type();
  // (AVG: the sum, then a signed division: exact while the sum stays below 2^63.)
  if (st == at::kUInt64 &&
      (kind == c10d::ReduceOp::SUM || kind == c10d::ReduceOp::AVG || kind == c10d::ReduceOp::PRODUCT ||
       kind == c10d::ReduceOp::BAND || kind == c10d::ReduceOp::BOR || kind == c10d::ReduceOp::BXOR)) {
    r.tensor = v.view(at::kLong); // two's complement: the same bits modulo 2^64
    return r;
  }
  if (st == at::kUInt64 && (kind == c10d::ReduceOp::MIN || kind == c10d::ReduceOp::MAX)) {
    // Flipping the top bit maps unsigned order onto signed order.
    at::Tensor flipped = v.view(at::kLong).bitwise_xor(std::numeric_limits<int64_t>::min());
    r.tensor = flipped;
    if (writesBack)
      r.narrow = [v, flipped] { v.view(at::kLong).copy_(flipped.bitwise_xor(std::numeric_limits<int64_t>::min())); };
    return r;
  }
  at::ScalarType wideType;
  if (st == at::kUInt16 || st == at::kUInt32 || st == at::kShort) wideType = at::kLong;
  else if (at::isFloat8Type(st)) wideType = at::kFloat;
  else TORCH_CHECK_VALUE(false, "mytorch: cannot reduce ", st, " tensors");
  at::Tensor wide = v.to(wideType);
  r.tensor = wide;
  if (writesBack) r.narrow = [v, wide] { v.copy_(wide); };
  return r;
}

c10d::ReduceOp glooOp(const c10d::ReduceOp& op) { return premulFactor(op) ? c10d::ReduceOp(c10d::ReduceOp::SUM) : op; }

std::function<void()> chain(std::vector<std::function<void()>> steps) {
  steps.erase(std::remove_if(steps.begin(), steps.end(), [](const auto& f) { return !f; }), steps.end());
  if (steps.empty()) return nullptr;
  return [steps] {
    for (const auto& f : steps) f();
  };
}

constexpr int kHeaderTag = 1 << 29; // point-to-point size headers travel on tag + kHeaderTag

class HostPath final : public Path {
 public:
  using Path::Path;

  WorkPtr broadcast(const CallInfo& c, Tensors& ts, const c10d::BroadcastOptions& o) override {
    Tensors views{movable(ts[0])};
    return track(c, ts, {host()->broadcast(views, o)}, nullptr, views);
  }

  WorkPtr allreduce(const CallInfo& c, Tensors& ts, const c10d::AllreduceOptions& o) override {
    Reducible r = reducible(ts[0], o.reduceOp, true, false, pg_.getSize());
    Tensors views{r.tensor};
    c10d::AllreduceOptions go = o;
    go.reduceOp = r.op;
    return track(c, ts, {host()->allreduce(views, go)}, r.narrow, views);
  }

  WorkPtr allreduceCoalesced(const CallInfo& c, Tensors& ts, const c10d::AllreduceCoalescedOptions& o) override {
    Tensors views;
    std::vector<std::function<void()>> narrows;
    c10d::AllreduceCoalescedOptions go = o;
    for (auto& t : ts) {
      Reducible r = reducible(t, o.reduceOp, true, false, pg_.getSize());
      views.push_back(r.tensor);
      narrows.push_back(r.narrow);
      go.reduceOp = r.op;
    }
    return track(c, ts, {host()->allreduce_coalesced(views, go)}, chain(narrows), views);
  }

  WorkPtr reduce(const CallInfo& c, Tensors& ts, const c10d::ReduceOptions& o) override {
    const bool root = pg_.getRank() == o.rootRank;
    Reducible r = reducible(ts[0], o.reduceOp, root, !root, pg_.getSize());
    // Gloo uses every rank's buffer as scratch; NCCL leaves a non-root's input alone, and so do we.
    if (!root && r.tensor.data_ptr() == hostView(ts[0]).data_ptr()) r.tensor = r.tensor.clone();
    Tensors views{r.tensor};
    c10d::ReduceOptions go = o;
    go.reduceOp = r.op;
    return track(c, ts, {host()->reduce(views, go)}, r.narrow, views);
  }

  WorkPtr allgather(const CallInfo& c, std::vector<Tensors>& out, Tensors& in,
                    const c10d::AllgatherOptions& o) override {
    Tensors ins{movable(in[0])};
    std::vector<Tensors> outs(1);
    for (auto& t : out[0]) outs[0].push_back(movable(t));
    Tensors keep = ins;
    keep.insert(keep.end(), outs[0].begin(), outs[0].end());
    return track(c, out[0], {host()->allgather(outs, ins, o)}, nullptr, keep);
  }

  WorkPtr allgatherBase(const CallInfo& c, Tensors& out, Tensors& in, const c10d::AllgatherOptions& o) override {
    std::vector<WorkPtr> works;
    Tensors keep;
    for (size_t i = 0; i < in.size(); ++i) {
      // Flat views: the output's rank blocks are the inputs in rank order.
      at::Tensor iv = movable(in[i].reshape({-1})), ov = movable(out[i].reshape({-1}));
      works.push_back(host()->_allgather_base(ov, iv, o));
      keep.push_back(iv);
      keep.push_back(ov);
    }
    return track(c, out, works, nullptr, keep);
  }

  WorkPtr gather(const CallInfo& c, std::vector<Tensors>& out, Tensors& in, const c10d::GatherOptions& o) override {
    Tensors ins{movable(in[0])};
    std::vector<Tensors> outs;
    Tensors keep = ins, results;
    if (!out.empty()) {
      outs.emplace_back();
      for (auto& t : out[0]) outs[0].push_back(movable(t)), keep.push_back(outs[0].back()), results.push_back(t);
    }
    return track(c, results, {host()->gather(outs, ins, o)}, nullptr, keep);
  }

  WorkPtr scatter(const CallInfo& c, Tensors& out, std::vector<Tensors>& in, const c10d::ScatterOptions& o) override {
    Tensors outs{movable(out[0])};
    std::vector<Tensors> ins;
    Tensors keep = outs;
    if (!in.empty()) {
      ins.emplace_back();
      for (auto& t : in[0]) ins[0].push_back(movable(t)), keep.push_back(ins[0].back());
    }
    return track(c, out, {host()->scatter(outs, ins, o)}, nullptr, keep);
  }

  WorkPtr reduceScatter(const CallInfo& c, Tensors& out, std::vector<Tensors>& in,
                        const c10d::ReduceScatterOptions& o) override {
    Reducible ro = reducible(out[0], o.reduceOp, true, false, pg_.getSize());
    Tensors outs{ro.tensor};
    std::vector<Tensors> ins(1);
    for (auto& t : in[0]) ins[0].push_back(inputFor(t, o.reduceOp, ro.tensor.scalar_type()));
    c10d::ReduceScatterOptions go = o;
    go.reduceOp = glooOp(ro.op);
    Tensors keep = outs;
    keep.insert(keep.end(), ins[0].begin(), ins[0].end());
    return track(c, out, {host()->reduce_scatter(outs, ins, go)}, ro.narrow, keep);
  }

  WorkPtr reduceScatterBase(const CallInfo& c, Tensors& out, Tensors& in,
                            const c10d::ReduceScatterOptions& o) override {
    std::vector<WorkPtr> works;
    std::vector<std::function<void()>> narrows;
    Tensors keep;
    for (size_t i = 0; i < in.size(); ++i) {
      Reducible ro = reducible(out[i].reshape({-1}), o.reduceOp, true, false, pg_.getSize());
      at::Tensor iv = inputFor(in[i].reshape({-1}), o.reduceOp, ro.tensor.scalar_type());
      c10d::ReduceScatterOptions go = o;
      go.reduceOp = glooOp(ro.op);
      works.push_back(host()->_reduce_scatter_base(ro.tensor, iv, go));
      narrows.push_back(ro.narrow);
      keep.push_back(ro.tensor);
      keep.push_back(iv);
    }
    return track(c, out, works, chain(narrows), keep);
  }

  WorkPtr alltoallBase(const CallInfo& c, at::Tensor& out, at::Tensor& in, std::vector<int64_t>& outSplits,
                       std::vector<int64_t>& inSplits, const c10d::AllToAllOptions& o) override {
    at::Tensor ov = movable(out), iv = movable(in);
    Tensors outs{out};
    return track(c, outs, {host()->alltoall_base(ov, iv, outSplits, inSplits, o)}, nullptr, {ov, iv});
  }

  WorkPtr alltoall(const CallInfo& c, Tensors& out, Tensors& in, const c10d::AllToAllOptions& o) override {
    // Gloo's list form wants equal sizes: pack into one buffer, exchange with splits, unpack.
    Tensors ivs, ovs;
    std::vector<int64_t> inSplits, outSplits;
    for (auto& t : in) ivs.push_back(movable(t).reshape({-1})), inSplits.push_back(ivs.back().numel());
    for (auto& t : out) ovs.push_back(movable(t).reshape({-1})), outSplits.push_back(ovs.back().numel());
    at::Tensor packed = at::cat(ivs);
    int64_t total = 0;
    for (auto n : outSplits) total += n;
    at::Tensor received = at::empty({total}, packed.options());
    auto unpack = [ovs, received, outSplits] {
      int64_t at = 0;
      for (size_t r = 0; r < ovs.size(); ++r) {
        ovs[r].copy_(received.narrow(0, at, outSplits[r]));
        at += outSplits[r];
      }
    };
    return track(c, out, {host()->alltoall_base(received, packed, outSplits, inSplits, o)}, unpack, {packed, received});
  }

  WorkPtr send(const CallInfo& c, Tensors& ts, int dst, int tag) override {
    Tensors payload{movable(ts[0])};
    auto work = makeWork(c, ts, false);
    std::vector<WorkPtr> inner;
    if (pg_.checking()) {
      Tensors header{headerOf(ts[0])};
      inner.push_back(host()->send(header, dst, tag + kHeaderTag));
    }
    inner.push_back(host()->send(payload, dst, tag));
    work->completeWithFutures(inner, nullptr, {});
    return work;
  }

  WorkPtr recv(const CallInfo& c, Tensors& ts, int src, int tag) override {
    auto work = makeWork(c, ts, false);
    if (!pg_.checking()) {
      Tensors payload{movable(ts[0])};
      work->completeWithFutures({host()->recv(payload, src, tag)}, nullptr, {});
      return work;
    }
    // The payload's receive is posted once its header said it fits (Gloo aborts the process on a message
    // larger than the posted buffer); a thread per receive, so receives from different peers and tags
    // never wait on one another.
    Tensors header{at::zeros({3}, at::TensorOptions().dtype(at::kLong))};
    WorkPtr headerWork = host()->recv(header, src, tag + kHeaderTag);
    at::Tensor mine = headerOf(ts[0]);
    auto backend = pg_.host();
    auto timeout = pg_.timeout();
    at::Tensor target = ts[0];
    std::thread([work, headerWork, header, mine, backend, timeout, target, src, tag]() mutable {
      try {
        headerWork->wait(timeout);
        const int64_t* got = header[0].data_ptr<int64_t>();
        const int64_t* want = mine.data_ptr<int64_t>();
        if (got[0] != want[0] || got[1] != want[1]) {
          // Drain the message so the sender finishes, then fail this receive only.
          Tensors scratch{at::empty({got[2]}, at::TensorOptions().dtype(at::kByte))};
          backend->recv(scratch, src, tag)->wait(timeout);
          C10_THROW_ERROR(ValueError, "rank " + std::to_string(src) + " sent " + std::to_string(got[1]) +
                                          " elements of " + c10::toString(static_cast<at::ScalarType>(got[0])) +
                                          " but this receive expects " + std::to_string(want[1]) + " elements of " +
                                          c10::toString(static_cast<at::ScalarType>(want[0])));
        }
        Tensors payload{movable(target)};
        backend->recv(payload, src, tag)->wait(timeout);
        work->complete(nullptr);
      } catch (...) {
        work->complete(std::current_exception());
      }
    }).detach();
    return work;
  }

  WorkPtr barrier(const CallInfo& c, const c10d::BarrierOptions& o) override {
    c10d::BarrierOptions go = o;
    go.device = std::nullopt;
    return track(c, {}, {host()->barrier(go)}, nullptr, {});
  }

 private:
  const c10::intrusive_ptr<c10d::Backend>& host() const { return pg_.host(); }

  WorkPtr track(const CallInfo& c, const Tensors& outputs, const std::vector<WorkPtr>& inner,
                std::function<void()> narrow, Tensors keep) {
    auto work = makeWork(c, outputs, false);
    work->completeWithFutures(inner, std::move(narrow), std::move(keep));
    return work;
  }

  // A reduce-scatter input in the dtype the output is reduced in (scaled for PREMUL_SUM).
  static at::Tensor inputFor(const at::Tensor& t, const c10d::ReduceOp& op, at::ScalarType reduced) {
    Reducible r = reducibleAs(t, op, false, true);
    return r.tensor.scalar_type() == reduced ? r.tensor : r.tensor.to(reduced);
  }

  // dtype, element count, byte count of a point-to-point payload.
  static at::Tensor headerOf(const at::Tensor& t) {
    at::Tensor h = at::empty({3}, at::TensorOptions().dtype(at::kLong));
    int64_t* p = h.data_ptr<int64_t>();
    p[0] = static_cast<int64_t>(t.scalar_type());
    p[1] = t.numel();
    p[2] = static_cast<int64_t>(t.numel() * t.element_size());
    return h;
  }
};

} // namespace

std::unique_ptr<Path> makeHostPath(ProcessGroupMytorch& pg) { return std::make_unique<HostPath>(pg); }

} // namespace mytorch::dist
