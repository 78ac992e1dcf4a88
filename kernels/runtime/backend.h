// The interface both runtimes implement; runtime.cpp picks one per process and forwards runtime.h to it.
#pragma once

#include <string>

#include "mytorch/runtime.h"

namespace mytorch::rt::detail {

// Records the calling thread's error message and returns the status, so backends can
// `return fail(Status::X, "...")`.
Status fail(Status s, std::string message);

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Kind kind() const = 0;
  virtual int device_count() = 0;
  virtual Status get_device(int* device) = 0;
  virtual Status set_device(int device) = 0;
  virtual Status maybe_set_device(int device) { return set_device(device); }
  virtual Status get_device_properties(int device, DeviceProps* props) = 0;
  virtual Status device_synchronize(int device) = 0;
  virtual Status mem_get_info(int device, size_t* free_bytes, size_t* total_bytes) = 0;
  virtual Status pointer_device(const void* ptr, int* device) = 0;
  virtual Status device_malloc(int device, size_t nbytes, void** ptr) = 0;
  virtual Status device_free(int device, void* ptr) = 0;
  virtual Status host_malloc(size_t nbytes, void** ptr) = 0;
  virtual Status host_free(void* ptr) = 0;
  virtual Status ipc_get_mem_handle(int device, void* base, IpcMemHandle* handle) = 0;
  virtual Status ipc_open_mem_handle(int device, const IpcMemHandle& handle, void** ptr) = 0;
  virtual Status ipc_close_mem_handle(int device, void* ptr) = 0;
  virtual Status memcpy_async(void* dst, const void* src, size_t nbytes, CopyKind kind, Stream s) = 0;
  virtual Status memcpy_peer_async(void* dst, int dst_device, const void* src, int src_device, size_t nbytes,
                                   Stream s) = 0;
  virtual Status memset_async(void* dst, int value, size_t nbytes, Stream s) = 0;
  virtual Status stream_create(int device, int priority, Stream* s) = 0;
  virtual Status stream_destroy(int device, Stream s) = 0;
  virtual Status stream_synchronize(int device, Stream s) = 0;
  virtual Status stream_query(int device, Stream s) = 0;
  virtual Status stream_wait_event(int device, Stream s, Event e) = 0;
  virtual Status event_create(int device, bool timing, Event* e) = 0;
  virtual Status event_destroy(Event e) = 0;
  virtual Status event_record(int device, Event e, Stream s) = 0;
  virtual Status event_query(Event e) = 0;
  virtual Status event_synchronize(Event e) = 0;
  virtual Status event_elapsed_ms(Event start, Event end, float* ms) = 0;
  // Graph capture (runtime.h); the sim's is graph.cpp's recording.
  virtual Status stream_begin_capture(int device, Stream s, CaptureMode mode) = 0;
  virtual Status stream_end_capture(int device, Stream s, Graph* g) = 0;
  virtual Status stream_is_capturing(int device, Stream s, bool* capturing) = 0;
  virtual Status graph_launch(Graph g, Stream s) = 0;
  virtual Status graph_destroy(Graph g) = 0;
  virtual Status graph_debug_dump(Graph g, const char* path) = 0;
  virtual Status graph_node_count(Graph g, size_t* count) = 0;
};

Backend* make_sim_backend();

// The sim's graph capture (graph.cpp): what the sim backend forwards to, and what its copies, memsets and
// synchronisations ask. The refusals fail with `what` named and invalidate the capture.
Status sim_begin_capture(int device, Stream s, CaptureMode mode);
Status sim_end_capture(int device, Stream s, Graph* g);
Status sim_capture_refuse(Stream s, const char* what);  // when `s` captures
Status sim_capture_refuse_any(const char* what);        // when any stream captures
Status sim_graph_launch(Graph g);
Status sim_graph_destroy(Graph g);
Status sim_graph_debug_dump(Graph g, const char* path);
Status sim_graph_node_count(Graph g, size_t* count);
Status sim_graph_set_philox(Graph g, int slot, uint64_t seed, uint64_t base);
#if MYTORCH_WITH_CUDA
// nullptr (with last_error set) when no usable GPU is present; in the MYTORCH_EMU build, the same backend over the
// emulated CUDA runtime, reporting Kind::Emu.
Backend* make_cuda_backend();
int cuda_device_count() noexcept;
#endif

} // namespace mytorch::rt::detail
