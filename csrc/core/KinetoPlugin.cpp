// A Kineto activity-profiler plugin for the mytorch device, so that
// torch.profiler.profile(activities=[..., ProfilerActivity.PrivateUse1]) records device activity.
//
// Note [Device activity in the profiler]
// While a session runs, a global RecordFunction callback brackets every top-level operator that has
// mytorch inputs with two timing events on the op's current stream. At trace processing the events are
// turned into kernel-type activities on the device's timeline (device = mytorch index, resource = stream),
// placed on the host clock through one anchor event per device, and named after the op, so that
// key_averages() shows device rows per op as it shows CUDA kernel rows. They carry the op's correlation id
// (the next id the profiler pushes on the thread after the op is bracketed) as a flow to the CPU op in the
// Chrome trace. (Attaching device time to the CPU op rows themselves would need a linked activity that
// torch can find; Kineto copies what plugins log, so a plugin cannot provide one.) On cuda the time is GPU time; on sim, where work
// runs at submission, it is the host time the device work took.
// Kineto's activity class formats metadata with fmt inline; torch keeps its fmt build private, so this file
// compiles fmt from torch's shipped headers.
#define FMT_HEADER_ONLY 1
#include <ATen/record_function.h>
#include <c10/core/Device.h>
#include <kineto/GenericTraceActivity.h>
#include <kineto/IActivityProfiler.h>
#include <kineto/libkineto.h>
#include <kineto/output_base.h>
#include <kineto/time_since_epoch.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "csrc/core/Runtime.h"
#include "csrc/core/Stream.h"
#include "mytorch/runtime.h"

namespace mytorch {
namespace {

struct Pending {
  std::string name;
  int device;
  int64_t stream;
  int32_t correlation;
  rt::Event start;
  rt::Event end;
  int64_t host_start_ns;
  int64_t host_end_ns;
  int32_t thread;
};

int64_t hostNowNs() { return libkineto::timeSinceEpoch(std::chrono::system_clock::now()); }

class Session;
std::mutex g_session_mu;
Session* g_session = nullptr;
thread_local int t_depth = 0;
// The op bracketed last on this thread, until the profiler pushes its correlation id: our callback can run
// before the profiler's own, so the next id pushed on the thread is that op's.
thread_local Pending* t_awaiting = nullptr;

bool mytorchInput(const at::RecordFunction& fn, int* device) {
  for (const c10::IValue& v : fn.inputs()) {
    if (v.isTensor() && v.toTensor().defined() && v.toTensor().device().type() == c10::DeviceType::PrivateUse1) {
      *device = v.toTensor().device().index();
      return true;
    }
  }
  return false;
}

struct OpContext : public at::ObserverContext { Pending pending; };

class Session final : public libkineto::IActivityProfilerSession {
 public:
  ~Session() override { stop(); }

  void start() override {
    const int n = rt::device_count();
    for (int d = 0; d < n; ++d) {
      MT_RT_CHECK(rt::device_synchronize(d));
      rt::Event e = nullptr;
      MT_RT_CHECK(rt::event_create(d, true, &e));
      MT_RT_CHECK(rt::event_record(d, e, nativeHandle(currentStream(d))));
      MT_RT_CHECK(rt::event_synchronize(e));
      anchors_.push_back(e);
    }
    anchor_ns_ = libkineto::timeSinceEpoch(std::chrono::system_clock::now());
    {
      std::lock_guard<std::mutex> lock(g_session_mu);
      g_session = this;
    }
    handle_ = at::addGlobalCallback(
        at::RecordFunctionCallback(&onEnter, &onExit).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    if (handle_) {
      at::removeCallback(*handle_);
      handle_.reset();
    }
    std::lock_guard<std::mutex> lock(g_session_mu);
    if (g_session == this) g_session = nullptr;
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger& logger) override {
    for (int d = 0; d < static_cast<int>(anchors_.size()); ++d) MT_RT_CHECK(rt::device_synchronize(d));
    std::lock_guard<std::mutex> lock(mu_);
    for (Pending& p : pending_) {
      float a = 0, b = 0;
      MT_RT_CHECK(rt::event_elapsed_ms(anchors_[static_cast<size_t>(p.device)], p.start, &a));
      MT_RT_CHECK(rt::event_elapsed_ms(anchors_[static_cast<size_t>(p.device)], p.end, &b));
      libkineto::GenericTraceActivity& act =
          activities_.emplace_back(span_, libkineto::ActivityType::CONCURRENT_KERNEL, p.name);
      act.startTime = anchor_ns_ + static_cast<int64_t>(a * 1e6);
      act.endTime = anchor_ns_ + static_cast<int64_t>(b * 1e6);
      act.id = p.correlation;
      act.device = p.device;
      act.resource = static_cast<int32_t>(p.stream);
      act.flow.id = static_cast<uint32_t>(p.correlation);
      act.flow.type = libkineto::kLinkAsyncCpuGpu;
      act.flow.start = false;
      act.addMetadataQuoted("device", "mytorch:" + std::to_string(p.device));
      act.addMetadata("stream", p.stream);
      streams_.insert({p.device, p.stream});
      (void)rt::event_destroy(p.start);
      (void)rt::event_destroy(p.end);
      logger.handleGenericActivity(act);
    }
    pending_.clear();
    status_ = libkineto::TraceStatus::READY;
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    return std::make_unique<libkineto::DeviceInfo>(libkineto::DeviceInfo{0, 0, "mytorch", "mytorch device"});
  }
  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> out;
    for (const auto& [d, s] : streams_) {
      out.push_back(libkineto::ResourceInfo{s, s, d, "mytorch stream " + std::to_string(s)});
    }
    return out;
  }
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return nullptr; }
  void pushCorrelationId(uint64_t id) override {
    if (t_awaiting != nullptr) {
      t_awaiting->correlation = static_cast<int32_t>(id);
      t_awaiting = nullptr;
    }
  }
  void popCorrelationId() override {}

  void add(Pending p) {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back(std::move(p));
  }

 private:
  static std::unique_ptr<at::ObserverContext> onEnter(const at::RecordFunction& fn) {
    int device = 0;
    if (t_depth > 0 || !mytorchInput(fn, &device)) {
      if (t_depth > 0) ++t_depth;
      return nullptr;
    }
    ++t_depth;
    auto ctx = std::make_unique<OpContext>();
    Pending& p = ctx->pending;
    p.name = fn.name();
    p.device = device;
    const c10::Stream s = currentStream(static_cast<c10::DeviceIndex>(device));
    p.stream = s.id();
    p.correlation = 0;
    t_awaiting = &p;
    p.thread = static_cast<int32_t>(syscall(SYS_gettid));
    p.host_start_ns = hostNowNs();
    MT_RT_CHECK(rt::event_create(device, true, &p.start));
    MT_RT_CHECK(rt::event_create(device, true, &p.end));
    MT_RT_CHECK(rt::event_record(device, p.start, nativeHandle(s)));
    return ctx;
  }

  static void onExit(const at::RecordFunction& fn, at::ObserverContext* raw) {
    if (t_depth > 0) --t_depth;
    auto* ctx = static_cast<OpContext*>(raw);
    if (ctx == nullptr) return;
    Pending& p = ctx->pending;
    if (t_awaiting == &p) t_awaiting = nullptr;
    p.host_end_ns = hostNowNs();
    MT_RT_CHECK(
        rt::event_record(p.device, p.end, nativeHandle(currentStream(static_cast<c10::DeviceIndex>(p.device)))));
    std::lock_guard<std::mutex> lock(g_session_mu);
    if (g_session) g_session->add(std::move(p));
  }

  libkineto::TraceSpan span_{0, 0, "mytorch"};
  std::vector<rt::Event> anchors_;
  int64_t anchor_ns_ = 0;
  std::optional<at::CallbackHandle> handle_;
  std::mutex mu_;
  std::vector<Pending> pending_;
  std::deque<libkineto::GenericTraceActivity> activities_;
  std::set<std::pair<int, int64_t>> streams_;
};

class MytorchActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<libkineto::ActivityType>& availableActivities() const override { return types_; }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<libkineto::ActivityType>&,
                                                                 const libkineto::Config&) override {
    return std::make_unique<Session>();
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t, int64_t,
                                                                 const std::set<libkineto::ActivityType>&,
                                                                 const libkineto::Config&) override {
    return std::make_unique<Session>();
  }

 private:
  const std::string name_ = "mytorch";
  const std::set<libkineto::ActivityType> types_{
      libkineto::ActivityType::CONCURRENT_KERNEL, libkineto::ActivityType::GPU_MEMCPY,
      libkineto::ActivityType::GPU_MEMSET, libkineto::ActivityType::PRIVATEUSE1_RUNTIME,
      libkineto::ActivityType::PRIVATEUSE1_DRIVER};
};

const bool kRegistered = [] {
  libkineto::api().registerProfilerFactory([] { return std::make_unique<MytorchActivityProfiler>(); });
  return true;
}();

} // namespace
} // namespace mytorch
