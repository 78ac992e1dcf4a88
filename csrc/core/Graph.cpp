// torch.accelerator.Graph on the mytorch device (REGISTER_GRAPH_IMPL for PrivateUse1): capture through the
// device API's stream capture (rt::stream_begin_capture; Note [Graph capture]), graph-private memory pools in
// the caching allocator, and the generators' Philox state advanced per replay.
//
// Note [Graph memory pools]
// As torch.cuda's: while a thread captures, the caching allocator serves that thread from the graph's private
// pool (a pool id: the graph's own, or one shared between graphs through graph_pool_handle() / pool=). Blocks
// freed during the capture go back to that pool only, so the addresses a graph's records hold are never handed
// to other tensors while the graph lives; reset() or the graph's end releases its use of the pool, and the
// pool's memory goes back to the device once no graph uses it and its tensors are gone. Nothing is freed to the
// device during a capture (a free would synchronise).
//
// Note [Random numbers in a captured graph]
// A random launch takes (seed, offset) from its generator, and each launch advances the offset by one. During a
// capture, the generator hands out tagged offsets (rt::detail::kCapturedOffset, the generator's slot in the
// capture, the launch's offset k within the capture) and does not advance. At each replay the graph reads every
// captured generator's (seed, offset), gives the records base = that offset (rt::graph_set_philox), and advances
// the generator by what the capture drew, so replay n draws exactly what the same eager calls would have drawn
// from the generator's state at that moment: dropout differs from replay to replay and matches an eager run
// seeded the same way (as CUDA's graph-registered generator state does).
#include "csrc/core/Graph.h"

#include "csrc/core/TorchVersion.h"
#if MYTORCH_TORCH_AT_LEAST(2, 12)
#include <ATen/core/GraphImplInterface.h>
#endif
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "csrc/core/DeviceAllocator.h"
#include "csrc/core/DeviceErrors.h"
#include "csrc/core/Generator.h"
#include "csrc/core/Runtime.h"
#include "csrc/core/Stream.h"
#include "mytorch/device_error.h"
#include "mytorch/runtime.h"

namespace mytorch {
namespace {

constexpr size_t kMaxGenerators = 16;  // generators one capture may draw from

struct Capture {
  c10::Stream stream;
  std::string invalid;  // what the glue refused during it (the device API's own refusals invalidate it there)
  const uint64_t* philox_dev = nullptr;  // cuda, emu: where replays put [seed, base] per generator slot
  std::vector<std::pair<c10::intrusive_ptr<c10::GeneratorImpl>, uint64_t>> generators;  // (generator, steps)
};
// Captures under way, by stream: work on a capturing stream is captured whichever thread submits it (autograd
// runs a backward on its device thread, on the forward's stream).
std::mutex g_mu;
std::vector<Capture*> g_captures;
std::atomic<int> g_active{0};

// The capture of the calling thread's current stream, or null. Caller holds g_mu.
Capture* currentLocked() {
  const c10::Stream s = currentStream(currentDeviceIndex());
  for (Capture* c : g_captures)
    if (c->stream == s) return c;
  return nullptr;
}
Capture* current() {
  if (g_active.load(std::memory_order_acquire) == 0) return nullptr;
  std::lock_guard<std::mutex> lock(g_mu);
  return currentLocked();
}

std::atomic<uint64_t> g_pool_uid{1};

#if MYTORCH_TORCH_AT_LEAST(2, 12)  // torch.accelerator.Graph (older torch: registerGraphImpl() returns false)
class MytorchGraph final : public at::GraphImplInterface {
 public:
  explicit MytorchGraph(const at::GraphImplArgs& args) : keep_graph_(args.keep_graph) {}
  ~MytorchGraph() override {
    try {
      reset();
    } catch (...) {  // a destructor must not throw; reset's errors are reported by an explicit reset()
    }
  }

  void capture_begin(c10::MempoolId_t pool, at::GraphCaptureMode mode) override {
    TORCH_CHECK(graph_ == nullptr && !capturing_,
                "mytorch graph: this graph already holds a capture; reset() it first");
    device_ = currentDeviceIndex();
    const c10::Stream stream = currentStream(device_);
    TORCH_CHECK(stream != defaultStream(device_),
                "mytorch graph: capture on a side stream, not the device's default stream (as CUDA requires): "
                "`with torch.Stream(device='mytorch'), graph:` or torch.mytorch.graph(...), which does it for you");
    if (pool.first == 0 && pool.second == 0) pool = {g_pool_uid.fetch_add(1), 0};  // this graph's own
    pool_ = pool;
    stream_ = stream;
    if (rt::kind() != rt::Kind::Sim && !philox_dev_)  // a CUDA graph's random launches read their state here
      philox_dev_ = deviceAllocator()->allocate(kMaxGenerators * 2 * sizeof(uint64_t));
    // The device's error slot is pinned host memory, made at first use: made now, since a capture cannot allocate it
    (void)deviceErrorSite(c10::Device(c10::DeviceType::PrivateUse1, device_), "graph capture",
                          DeviceErrorFormat::IndexOutOfBounds, true);
    deviceAllocator()->beginAllocateToPool(device_, pool_, stream_);
    const rt::CaptureMode m = mode == at::GraphCaptureMode::Relaxed       ? rt::CaptureMode::Relaxed
                              : mode == at::GraphCaptureMode::ThreadLocal ? rt::CaptureMode::ThreadLocal
                                                                          : rt::CaptureMode::Global;
    const rt::Status s = rt::stream_begin_capture(device_, nativeHandle(stream_), m);
    if (s != rt::Status::Success) {
      deviceAllocator()->endAllocateToPool(device_, pool_, stream_);
      deviceAllocator()->releasePool(device_, pool_);
      MT_RT_CHECK(s);
    }
    capture_ = std::make_unique<Capture>(Capture{stream_, {}, static_cast<const uint64_t*>(philox_dev_.get()), {}});
    {
      std::lock_guard<std::mutex> lock(g_mu);
      g_captures.push_back(capture_.get());
      g_active.fetch_add(1, std::memory_order_acq_rel);
    }
    capturing_ = true;
  }

  void capture_end() override {
    TORCH_CHECK(capturing_, "mytorch graph: capture_end() without capture_begin()");
    {
      std::lock_guard<std::mutex> lock(g_mu);
      g_captures.erase(std::find(g_captures.begin(), g_captures.end(), capture_.get()));
      g_active.fetch_sub(1, std::memory_order_acq_rel);
    }
    capturing_ = false;
    deviceAllocator()->endAllocateToPool(device_, pool_, stream_);
    rt::Graph g = nullptr;
    const rt::Status s = rt::stream_end_capture(device_, nativeHandle(stream_), &g);
    if (s != rt::Status::Success) {
      deviceAllocator()->releasePool(device_, pool_);
      capture_.reset();
      MT_RT_CHECK(s);
    }
    if (!capture_->invalid.empty()) {  // refused by the glue: the device API may not know (cuda, emu)
      const std::string why = capture_->invalid;
      capture_.reset();
      (void)rt::graph_destroy(g);
      deviceAllocator()->releasePool(device_, pool_);
      TORCH_CHECK(false, "mytorch graph: the capture was invalidated: ", why, " is not permitted while capturing");
    }
    graph_ = g;
    generators_ = std::move(capture_->generators);
    capture_.reset();
    if (!keep_graph_) instantiate();
  }

  void instantiate() override {
    TORCH_CHECK(graph_ != nullptr, "mytorch graph: nothing captured to instantiate");
    instantiated_ = true;  // the device API instantiates at the end of the capture
  }

  void replay() override {
    TORCH_CHECK(graph_ != nullptr, "mytorch graph: replay() before a capture ended");
    if (!instantiated_) instantiate();
    c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device_));
    const rt::Stream stream = nativeHandle(currentStream(device_));
    std::vector<uint64_t> state(2 * generators_.size());
    for (size_t slot = 0; slot < generators_.size(); ++slot) {
      auto& [gen, steps] = generators_[slot];
      std::lock_guard<std::mutex> lock(gen->mutex_);
      state[2 * slot] = gen->current_seed();
      state[2 * slot + 1] = gen->get_offset();
      gen->set_offset(state[2 * slot + 1] + steps);
      if (rt::kind() == rt::Kind::Sim)
        MT_RT_CHECK(rt::graph_set_philox(graph_, static_cast<int>(slot), state[2 * slot], state[2 * slot + 1]));
    }
    if (!state.empty() && rt::kind() != rt::Kind::Sim)  // from pageable memory: staged before the call returns
      MT_RT_CHECK(rt::memcpy_async(philox_dev_.get(), state.data(), state.size() * sizeof(uint64_t),
                                   rt::CopyKind::HostToDevice, stream));
    MT_RT_CHECK(rt::graph_launch(graph_, stream));
    // A recorded kernel's device-side error (an index out of range): raised now on sim, where the replay has run,
    // as an error-checked launch does (Note [Device-side errors]); on a GPU at the next synchronisation.
    if (rt::kind() == rt::Kind::Sim) raiseDeviceError(device_);
  }

  void reset() override {
    if (capturing_) return;  // torch.cuda's reset() during a capture is also left to capture_end
    if (graph_ != nullptr) {
      rt::Graph g = graph_;
      graph_ = nullptr;
      MT_RT_CHECK(rt::graph_destroy(g));
      deviceAllocator()->releasePool(device_, pool_);
    }
    generators_.clear();
    instantiated_ = false;
  }

  c10::MempoolId_t pool() const override {
    TORCH_CHECK(pool_.first != 0 || pool_.second != 0, "mytorch graph: pool() before a capture began");
    return pool_;
  }

  void enable_debug_mode() override { debug_ = true; }

  void debug_dump(const std::string& path) override {
    TORCH_CHECK(debug_, "mytorch graph: debug_dump() needs enable_debug_mode() before the capture");
    TORCH_CHECK(graph_ != nullptr, "mytorch graph: nothing captured to dump");
    MT_RT_CHECK(rt::graph_debug_dump(graph_, path.c_str()));
  }

 private:
  const bool keep_graph_;
  bool capturing_ = false, instantiated_ = false, debug_ = false;
  c10::DeviceIndex device_ = 0;
  c10::Stream stream_{c10::Stream::DEFAULT, c10::Device(c10::DeviceType::PrivateUse1, 0)};
  c10::MempoolId_t pool_{0, 0};
  rt::Graph graph_ = nullptr;
  std::unique_ptr<Capture> capture_;
  c10::DataPtr philox_dev_;  // cuda, emu: the replays' Philox state (Capture::philox_dev)
  std::vector<std::pair<c10::intrusive_ptr<c10::GeneratorImpl>, uint64_t>> generators_;
};
#endif

}  // namespace

bool capturing() { return current() != nullptr; }

void refuseDuringCapture(const char* what) {
  Capture* c = current();
  if (c == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (c->invalid.empty()) c->invalid = what;  // its end then fails
  }
  (void)rt::capture_refuse(nativeHandle(c->stream), what);
  TORCH_CHECK(false, what, " is not permitted while capturing a graph on mytorch (as CUDA forbids it during stream ",
              "capture); the capture is invalidated");
}

void runOrRecord(const char* name, std::function<void()> work) {
  Capture* c = rt::kind() == rt::Kind::Sim ? current() : nullptr;
  if (c == nullptr) {
    work();
    return;
  }
  MT_RT_CHECK(rt::detail::record(nativeHandle(c->stream), name, [work = std::move(work), name]() {
    try {
      work();
      return rt::Status::Success;
    } catch (const std::exception& e) {
      return rt::report(rt::Status::Unknown, (std::string("replaying ") + name + ": " + e.what()).c_str());
    }
  }));
}

bool capturedPhiloxOffset(MytorchGeneratorImpl* gen, uint64_t step, uint64_t* offset) {
  if (g_active.load(std::memory_order_acquire) == 0) return false;
  std::lock_guard<std::mutex> lock(g_mu);
  Capture* c = currentLocked();
  if (c == nullptr) return false;
  auto& gens = c->generators;
  size_t slot = 0;
  while (slot < gens.size() && gens[slot].first.get() != gen) ++slot;
  TORCH_CHECK(slot < kMaxGenerators, "mytorch graph: a capture may draw from at most ", kMaxGenerators, " generators");
  if (slot == gens.size()) gens.emplace_back(c10::intrusive_ptr<c10::GeneratorImpl>::reclaim_copy(gen), 0);
  *offset = rt::detail::kCapturedOffset | (uint64_t(slot) << rt::detail::kCapturedSlotShift) | gens[slot].second;
  gens[slot].second += step;
  return true;
}

const uint64_t* capturedPhiloxState() {
  Capture* c = current();
  return c == nullptr ? nullptr : c->philox_dev;
}

c10::MempoolId_t graphPoolHandle() { return {0, g_pool_uid.fetch_add(1)}; }

bool registerGraphImpl() {
#if MYTORCH_TORCH_AT_LEAST(2, 12)
  // The registry's key is the device type's name, which is the backend's name once PrivateUse1 is renamed.
  const std::string key = c10::DeviceTypeName(c10::DeviceType::PrivateUse1, /*lower_case=*/false);
  if (!at::GraphImplRegistry()->Has(key)) {
    at::GraphImplRegistry()->Register(key, [](at::GraphImplArgs args) -> std::unique_ptr<at::GraphImplInterface> {
      return std::make_unique<MytorchGraph>(args);
    });
  }
  return true;
#else
  return false;
#endif
}

}  // namespace mytorch
