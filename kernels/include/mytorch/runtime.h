// The device API of mytorch: a small CUDA-like runtime owned by the project.
//
// Everything above kernels/ (allocator, guard, streams, ops, process group) is written once against this
// API. Two implementations sit behind it (kernels/runtime/): `cuda` (the CUDA runtime on a real GPU) and
// `sim` (device memory is host memory owned by the simulator; streams execute in order). The choice is
// made once per process, on first use (MYTORCH_RUNTIME=auto|cuda|sim|emu; emu in the MYTORCH_EMU build).
//
// Every call returns a Status and never throws or exits; on failure last_error() holds the runtime's own
// message for the calling thread.
#pragma once

#include <cstddef>
#include <cstdint>

#include "mytorch/launch.h"

namespace mytorch::rt {

// Statuses, stream and event handles and kind() are in launch.h (what kernel launchers see).

enum class CopyKind : int { HostToDevice, DeviceToHost, DeviceToDevice, HostToHost };

struct DeviceProps {
  char name[256];
  size_t total_memory;
  int major;
  int minor;
  int multi_processor_count;
  int warp_size;
  size_t l2_cache_size;
};

// --- selection and state ---------------------------------------------------------------------------------
Status init();                 // idempotent: picks the runtime, creates nothing else
bool initialized();
bool built_with_cuda();
bool in_bad_fork();            // a child forked after the parent initialised the runtime
// The emulated CUDA build's test hooks (kernels/emu), or nullptr in any other build: the glue asks at run time,
// so that it compiles the same in every flavour (Note [One glue for every flavour], launch.h).
struct EmuHooks {
  bool (*primary_context_active)(int device); // whether the emulated runtime created the device's primary context
  bool (*trace_to)(const char* path);         // Note [GPU performance model]: a trace line per launch ("" stops)
};
const EmuHooks* emu_hooks();

// --- devices ---------------------------------------------------------------------------------------------
int device_count() noexcept;   // never initialises a CUDA context; 0 when there is none
Status get_device(int* device);
Status set_device(int device);
// Makes `device` current only where that creates no context: on cuda, only when its primary context already
// exists (torch.cuda's MaybeSetDevice), so restoring device 0 in a thread that never used it costs no memory.
Status maybe_set_device(int device);
Status get_device_properties(int device, DeviceProps* props);
Status device_synchronize(int device);
Status mem_get_info(int device, size_t* free_bytes, size_t* total_bytes);
Status pointer_device(const void* ptr, int* device); // which device owns a device pointer

// --- memory ----------------------------------------------------------------------------------------------
Status device_malloc(int device, size_t nbytes, void** ptr);
Status device_free(int device, void* ptr);
Status host_malloc(size_t nbytes, void** ptr); // pinned host memory
Status host_free(void* ptr);
Status memcpy_async(void* dst, const void* src, size_t nbytes, CopyKind kind, Stream stream);
Status memcpy_peer_async(void* dst, int dst_device, const void* src, int src_device, size_t nbytes, Stream stream);
Status memset_async(void* dst, int value, size_t nbytes, Stream stream);

// --- sharing device memory between processes (CUDA IPC) -------------------------------------------------
// A handle names one allocation of device_malloc (its start address) for another process on this machine,
// which maps the same memory with ipc_open_mem_handle while the exporting process keeps the allocation. The
// bytes are the runtime's own: cudaIpcMemHandle_t on cuda; on sim and emu, the exporter's pid and a memory
// file the allocation is moved onto at its first export (Note [Sharing sim memory between processes]).
struct IpcMemHandle { unsigned char bytes[64]; };
Status ipc_get_mem_handle(int device, void* base, IpcMemHandle* handle);
Status ipc_open_mem_handle(int device, const IpcMemHandle& handle, void** ptr);
Status ipc_close_mem_handle(int device, void* ptr);
// Host memory files another process on this machine can open (the sim runtime's IPC, and the reference
// counts of shared tensors): a new memory file of `size` bytes, and another process's descriptor reopened
// through /proc/<pid>/fd/<fd> after checking it is still the same file (inode). Both give a descriptor
// (close-on-exec) or fail with last_error set.
Status shared_file_create(const char* name, size_t size, int* fd, uint64_t* inode);
Status shared_file_open(int pid, int fd, uint64_t inode, int* out_fd, size_t* size);
// Whether process `pid` of this machine has exited (gone, or a zombie not yet reaped): how the ranks of one
// machine notice a peer that died while they wait on shared memory.
bool process_exited(int pid);

// --- streams and events ----------------------------------------------------------------------------------
Status stream_create(int device, int priority, Stream* stream);
Status stream_destroy(int device, Stream stream);
Status stream_synchronize(int device, Stream stream);
Status stream_query(int device, Stream stream); // Success when idle, NotReady when work is pending
Status stream_wait_event(int device, Stream stream, Event event);
Status event_create(int device, bool enable_timing, Event* event);
Status event_destroy(Event event);
Status event_record(int device, Event event, Stream stream);
Status event_query(Event event);
Status event_synchronize(Event event);
Status event_elapsed_ms(Event start, Event end, float* ms);

// --- graph capture and replay (Note [Graph capture], graph.cpp) ----------------------------------------
// cudaStreamBeginCapture / EndCapture / GraphInstantiate / GraphLaunch. On cuda the stream's work is captured
// by the CUDA runtime; on sim the launches, device-to-device copies and memsets given the capturing stream are
// recorded instead of run, and a replay runs the recording in order. While a capture is under way, what it cannot
// hold fails with InvalidValue and a message naming it (Note [Graph capture]): a stream / event / device
// synchronisation or query, a copy to the host (a host read), a copy from pageable host memory, freeing device
// memory, allocating or freeing pinned host memory.
using Graph = void*;
enum class CaptureMode : int { Global = 0, ThreadLocal = 1, Relaxed = 2 };
Status stream_begin_capture(int device, Stream stream, CaptureMode mode);
// Ends the capture begun on `stream` by this thread; *graph is instantiated (ready to launch).
Status stream_end_capture(int device, Stream stream, Graph* graph);
// Whether `stream` is capturing.
Status stream_is_capturing(int device, Stream stream, bool* capturing);
Status graph_launch(Graph graph, Stream stream);
Status graph_destroy(Graph graph);
// A text description of the graph, one node a line (sim), or CUDA's DOT file (cuda).
Status graph_debug_dump(Graph graph, const char* path);
// The nodes a captured graph holds.
Status graph_node_count(Graph graph, size_t* count);
// Fails with InvalidValue naming `what` (and invalidates the capture, whose end then fails) when `stream`
// captures on sim; Success otherwise (what the glue refuses itself: the CPU fallback, host routes).
Status capture_refuse(Stream stream, const char* what);
// The Philox state generator `slot` gives the graph's next launch (Note [Random numbers in a captured graph]):
// random launches recorded with a captured offset draw from (seed, base + their offset in the capture). Sim
// only for now (cuda: Unavailable; its random kernels take their state by value).
Status graph_set_philox(Graph graph, int slot, uint64_t seed, uint64_t base);

} // namespace mytorch::rt
