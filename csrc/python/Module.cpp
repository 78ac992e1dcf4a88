// pybind11 bindings behind torch.mytorch (python/mytorch/): runtime, devices, memory, generators, fallback.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <ATen/ops/zeros.h>
#include <c10/core/AutogradState.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/autograd/autograd.h>

#include "csrc/core/Graph.h"
#include "csrc/aten/glue/HostRoute.h"
#include "csrc/aten/glue/MetaCache.h"
#include "csrc/aten/glue/OpTables.h"
#include "csrc/core/DeviceErrors.h"
#include "csrc/core/DeviceAllocator.h"
#include "csrc/core/Fallback.h"
#include "csrc/core/Generator.h"
#include "csrc/core/HostAllocator.h"
#include "csrc/core/OpTrace.h"
#include "csrc/core/Runtime.h"
#include "csrc/core/Stream.h"
#include "mytorch/parallel.h"
#include "mytorch/sim_isa.h"
#include "mytorch/runtime.h"

namespace py = pybind11;

namespace mytorch {
namespace {

py::dict statArray(const c10::CachingAllocator::StatArray& a) {
  static const char* names[] = {"all", "small_pool", "large_pool"};
  py::dict out;
  for (size_t i = 0; i < a.size(); ++i) {
    py::dict d;
    d["current"] = a[i].current;
    d["peak"] = a[i].peak;
    d["allocated"] = a[i].allocated;
    d["freed"] = a[i].freed;
    out[names[i]] = d;
  }
  return out;
}

py::dict stat(const c10::CachingAllocator::Stat& s) {
  py::dict d;
  d["current"] = s.current;
  d["peak"] = s.peak;
  d["allocated"] = s.allocated;
  d["freed"] = s.freed;
  return d;
}

// Same nesting as torch.cuda's _cuda_memoryStats, flattened in Python to "allocated_bytes.all.current"...
py::dict memoryStats(int device) {
  const auto s = deviceAllocator()->getDeviceStats(static_cast<c10::DeviceIndex>(device));
  py::dict d;
  d["allocation"] = statArray(s.allocation);
  d["segment"] = statArray(s.segment);
  d["active"] = statArray(s.active);
  d["inactive_split"] = statArray(s.inactive_split);
  d["allocated_bytes"] = statArray(s.allocated_bytes);
  d["reserved_bytes"] = statArray(s.reserved_bytes);
  d["active_bytes"] = statArray(s.active_bytes);
  d["inactive_split_bytes"] = statArray(s.inactive_split_bytes);
  d["requested_bytes"] = statArray(s.requested_bytes);
  d["oversize_allocations"] = stat(s.oversize_allocations);
  d["oversize_segments"] = stat(s.oversize_segments);
  d["num_alloc_retries"] = s.num_alloc_retries;
  d["num_ooms"] = s.num_ooms;
  d["num_sync_all_streams"] = s.num_sync_all_streams;
  d["num_device_alloc"] = s.num_device_alloc;
  d["num_device_free"] = s.num_device_free;
  d["max_split_size"] = s.max_split_size;
  return d;
}

py::dict hostMemoryStats() {
  const auto s = hostAllocator()->get_stats();
  py::dict d;
  d["active_requests"] = stat(s.active_requests);
  d["active_bytes"] = stat(s.active_bytes);
  d["allocations"] = stat(s.allocations);
  d["allocated_bytes"] = stat(s.allocated_bytes);
  d["num_host_alloc"] = s.num_host_alloc;
  d["num_host_free"] = s.num_host_free;
  return d;
}

void check(rt::Status s, const char* what) {
  if (s != rt::Status::Success) throwRuntimeError(s, what);
}

} // namespace
} // namespace mytorch

namespace mytorch {
void addInductorBindings(PyObject* module);  // csrc/python/Inductor.cpp
void addIpcBindings(pybind11::module& m);    // csrc/python/Ipc.cpp
int simParallelProbe(int64_t n);             // csrc/core/SimParallel.cpp
int64_t simGemmOneDnnCalls();               // csrc/core/SimBlas.cpp
} // namespace mytorch

namespace mytorch::dist {
void initDistributedBindings(pybind11::module& parent); // csrc/distributed/Init.cpp
} // namespace mytorch::dist

PYBIND11_MODULE(_C, m) {
  using namespace mytorch;
  m.doc() = "mytorch native extension (torch glue over the mytorch device layer)";

  addInductorBindings(m.ptr());
  addIpcBindings(m);
  m.def("_init", [] { check(rt::init(), "init"); });
  m.def("_is_initialized", [] { return rt::initialized(); });
  m.def("_in_bad_fork", [] { return rt::in_bad_fork(); });
  m.def("_runtime", [] { return std::string(rt::kind_name()); });
  m.def("_built_with_cuda", [] { return rt::built_with_cuda(); });
  if (const rt::EmuHooks* emu = rt::emu_hooks()) {
    // Emulated CUDA build only: whether the emulated runtime created a device's primary context (tests of the
    // "maybe set device" rule).
    m.def("_emu_primary_context_active", [emu](int d) { return emu->primary_context_active(d); });
    // Note [GPU performance model]: every later launch appends its trace line to `path` ("" stops).
    m.def("_emu_trace", [emu](const std::string& path) {
      if (!emu->trace_to(path.c_str())) throw std::runtime_error("cannot open the trace file " + path);
    });
  }
  // Note [Autograd threads at exit]
  // The autograd engine runs a mytorch backward on its device thread, which drops its reference to the graph
  // task after the caller has already been woken. If the interpreter is finalizing by then, that last
  // reference frees Python-owned tensors, the thread's GIL acquire ends the thread inside a noexcept
  // destructor, and the process aborts (seen for a script whose last line is a backward). At exit
  // (python/mytorch/__init__.py) this runs one backward of C++-only tensors on each device thread, with the
  // GIL released: the device thread processes tasks in order, so when it returns every earlier graph task
  // is gone, and the last one it holds owns no Python object.
  m.def(
      "_drain_autograd_threads",
      [] {
        if (!rt::initialized() || rt::in_bad_fork()) return;
        // On the device threads even where this thread runs its own backwards (Note [Backward on the calling
        // thread], python/mytorch/__init__.py): another thread's backward may have used them.
        struct DeviceThreads {
          bool was = c10::AutogradState::get_tls_state().get_multithreading_enabled();
          DeviceThreads() { c10::AutogradState::get_tls_state().set_multithreading_enabled(true); }
          ~DeviceThreads() { c10::AutogradState::get_tls_state().set_multithreading_enabled(was); }
        } on_device_threads;
        for (int d = 0; d < rt::device_count(); ++d) {
          at::Tensor x =
              at::zeros({1}, at::TensorOptions().device(c10::Device(c10::DeviceType::PrivateUse1, d))).requires_grad_();
          torch::autograd::backward({x.sum()});
        }
      },
      pybind11::call_guard<pybind11::gil_scoped_release>());
  m.def("_device_count", [] { return rt::device_count(); });
  m.def("_get_device", [] { return static_cast<int>(currentDeviceIndex()); });
  m.def("_set_device", [](int d) {
    checkDeviceIndex(static_cast<c10::DeviceIndex>(d));
    check(rt::set_device(d), "set_device");
  });
  m.def("_synchronize", [](int d) {
    const c10::DeviceIndex dev = resolveDevice(static_cast<c10::DeviceIndex>(d));
    {
      py::gil_scoped_release nogil;
      check(rt::device_synchronize(dev), "synchronize");
    }
    raiseDeviceError(dev);  // Note [Device-side errors]
  });
  m.def("_set_launch_blocking", [](bool on) { setLaunchBlocking(on); });
  m.def("_launch_blocking", [] { return launchBlocking(); });
  m.def("_set_sync_debug_mode", [](int mode) { setSyncDebugMode(mode); });
  m.def("_get_sync_debug_mode", [] { return syncDebugMode(); });
  m.def("_device_properties", [](int d) {
    checkDeviceIndex(static_cast<c10::DeviceIndex>(d));
    rt::DeviceProps p{};
    check(rt::get_device_properties(d, &p), "get_device_properties");
    py::dict out;
    out["name"] = std::string(p.name);
    out["total_memory"] = p.total_memory;
    out["major"] = p.major;
    out["minor"] = p.minor;
    out["multi_processor_count"] = p.multi_processor_count;
    out["warp_size"] = p.warp_size;
    out["L2_cache_size"] = p.l2_cache_size;
    return out;
  });
  m.def("_mem_get_info", [](int d) { return deviceAllocator()->getMemoryInfo(static_cast<c10::DeviceIndex>(d)); });

  auto streamTuple = [](const c10::Stream& s) {
    return py::make_tuple(s.id(), static_cast<int>(s.device_index()), static_cast<int>(s.device_type()));
  };
  m.def("_current_stream", [=](int d) { return streamTuple(currentStream(static_cast<c10::DeviceIndex>(d))); });
  m.def("_default_stream", [=](int d) { return streamTuple(defaultStream(static_cast<c10::DeviceIndex>(d))); });
  m.def("_set_stream", [](int64_t id, int d) {
    setCurrentStream(c10::Stream(c10::Stream::UNSAFE,
                                 c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(d)), id));
  });

  m.def("_memory_stats", &memoryStats);
  m.def("_reset_peak_memory_stats", [](int d) { deviceAllocator()->resetPeakStats(static_cast<c10::DeviceIndex>(d)); });
  m.def("_reset_accumulated_memory_stats",
        [](int d) { deviceAllocator()->resetAccumulatedStats(static_cast<c10::DeviceIndex>(d)); });
  m.def("_empty_cache", [] { deviceAllocator()->emptyCache({0, 0}); });
  m.def("_cached_block_count",
        [](int d) { return deviceAllocator()->cachedBlockCount(static_cast<c10::DeviceIndex>(d)); });
  m.def("_set_memory_fraction",
        [](double f, int d) { deviceAllocator()->setMemoryFraction(f, static_cast<c10::DeviceIndex>(d)); });
  m.def("_record_memory_history",
        [](bool enabled, size_t max_entries) { deviceAllocator()->recordHistory(enabled, max_entries); });
  m.def("_snapshot", [] {
    const MemorySnapshot snap = deviceAllocator()->snapshot();
    py::list segments;
    for (const SegmentSnapshot& seg : snap.segments) {
      py::list blocks;
      for (const BlockSnapshot& b : seg.blocks) {
        py::dict d;
        d["address"] = b.addr;
        d["size"] = b.size;
        d["requested_size"] = b.requested;
        d["state"] = b.state;
        d["frames"] = py::list();
        blocks.append(d);
      }
      py::dict d;
      d["device"] = seg.device;
      d["address"] = seg.addr;
      d["total_size"] = seg.total;
      d["allocated_size"] = seg.allocated;
      d["active_size"] = seg.active;
      d["requested_size"] = seg.requested;
      d["stream"] = seg.stream;
      d["segment_type"] = seg.small ? "small" : "large";
      d["segment_pool_id"] = py::make_tuple(0, 0);
      d["is_expandable"] = false;
      d["frames"] = py::list();
      d["blocks"] = blocks;
      segments.append(d);
    }
    py::list traces;
    for (const auto& device_trace : snap.traces) {
      py::list events;
      for (const TraceEvent& e : device_trace) {
        py::dict d;
        d["action"] = e.action;
        d["addr"] = e.addr;
        d["size"] = e.size;
        d["stream"] = e.stream;
        d["time_us"] = e.time_us;
        d["frames"] = py::list();
        events.append(d);
      }
      traces.append(events);
    }
    py::dict out;
    out["segments"] = segments;
    out["device_traces"] = traces;
    return out;
  });
  m.def("_host_memory_stats", &hostMemoryStats);
  m.def("_host_empty_cache", [] { hostAllocator()->empty_cache(); });

  m.def("_default_generator", [](int d) {
    const at::Generator& g = defaultGenerator(static_cast<c10::DeviceIndex>(d));
    return py::reinterpret_steal<py::object>(THPGenerator_initDefaultGenerator(g));
  });

  m.def("_set_fallback_mode", &setFallbackMode);
  m.def("_register_graph_impl", &registerGraphImpl);
  m.def("_graph_pool_handle", [] {
    const auto id = graphPoolHandle();
    return std::make_tuple(id.first, id.second);
  });
  m.def("_is_current_stream_capturing", [] { return capturing(); });
  m.def("_refuse_during_capture", [](const std::string& what) { refuseDuringCapture(what.c_str()); });
  m.def("_get_fallback_mode", &fallbackMode);
  m.def("_fallback_stats", [] {
    py::dict out;
    for (const auto& [op, c] : fallbackStats()) {
      py::dict d;
      d["calls"] = c.calls;
      d["bytes_to_cpu"] = c.bytes_to_cpu;
      d["bytes_to_device"] = c.bytes_to_device;
      out[py::str(op)] = d;
    }
    return out;
  });
  m.def("_reset_fallback_stats", &resetFallbackStats);
  // Note [Sim host route]: calls per family of the sim's host route
  m.def("_host_route_stats", &hostRouteStats);
  m.def("_reset_host_route_stats", &resetHostRouteStats);
  // The process group's classes derive from torch's c10d bindings, which exist once torch.distributed is
  // imported: python/mytorch/distributed/__init__.py calls this then.
  m.def("_init_distributed", [m]() mutable { dist::initDistributedBindings(m); });
  m.def("_sim_gemm_onednn_calls", &mytorch::simGemmOneDnnCalls);  // GEMMs oneDNN ran (Note [Sim GEMM library])
  m.def("_sim_parallel_probe", &mytorch::simParallelProbe,  // threads a sim parallel_for used (its test)
        py::arg("n"));
  m.def("_sim_threads", [] { return mytorch::par::threads(); });  // Note [Sim parallelism]
  m.def("_sim_isa", [] { return std::string(mytorch::sim::sim_isa_name()); });  // Note [Sim ISA variants]
  m.def("_meta_cache_entries", [] { return mytorch::meta_cache::entries(); });  // Note [Cached meta results]
  m.def("_op_tables", [] {  // the op tables' rows (kernels/include/mytorch/tables/*.def), for their test
    py::list rows;
    for (const OpTableRow& r : opTableRows()) {
      py::dict d;
      d["table"] = r.table;
      d["name"] = r.name;
      d["arity"] = r.arity;
      d["dtypes"] = r.dtypes;
      d["result"] = r.result;
      d["group"] = r.group;
      d["glue"] = r.glue;
      d["aten"] = r.aten;
      d["overload"] = r.overload;
      d["foreach"] = r.foreach;
      rows.append(d);
    }
    return rows;
  });
  m.def("_op_trace_start", &startOpTrace);
  m.def("_op_trace_stop", &stopOpTrace);
  m.def("_fallback_totals", [] {
    const FallbackCounter c = fallbackTotals();
    return py::make_tuple(c.calls, c.bytes_to_cpu + c.bytes_to_device);
  });

  // Direct runtime access for tests of the device layer (the allocator normally owns these calls).
  m.def("_runtime_malloc", [](int d, size_t n) {
    void* p = nullptr;
    check(rt::device_malloc(d, n, &p), "device_malloc");
    return reinterpret_cast<uintptr_t>(p);
  });
  m.def("_runtime_free",
        [](int d, uintptr_t p) { check(rt::device_free(d, reinterpret_cast<void*>(p)), "device_free"); });
}
