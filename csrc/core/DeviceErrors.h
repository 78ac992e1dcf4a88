// Errors kernels find in their data, recorded on the device (kernels/include/mytorch/device_error.h).
//
// Note [Device-side errors]
// An index out of bounds (the gather/scatter family, indexing, embedding's backward) or a class target out of range
// (nll_loss) is found by the kernel, which skips the element and records the first such value in its device's
// DeviceError: pinned host memory the device writes directly, so reading it copies nothing. Where the launch is
// already synchronous (the sim runtime) or the user asked for it (MYTORCH_LAUNCH_BLOCKING=1 or
// CUDA_LAUNCH_BLOCKING=1, read at import; torch.mytorch.set_launch_blocking), the launching op synchronises its
// stream and raises at once, with the CPU's exception and message. Otherwise (cuda and emu) nothing waits: the
// error is raised at the device's next synchronisation point (torch.mytorch.synchronize, a stream's or event's
// synchronize, a copy to the host such as .cpu() or .item()), naming the op that recorded it, as torch.cuda
// raises a device-side assertion at its next synchronising call; unlike CUDA's, the device stays usable (the
// record is cleared when raised). Only the first error since the last raise is kept.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>

namespace mytorch {

struct ErrorSite;  // mytorch/device_error.h: only the ops that launch such kernels see it (narrow includes)

enum class DeviceErrorFormat : int32_t {
  IndexOutOfBounds,   // "index V is out of bounds for dimension D with size S" (dim < 0: "the dimension it indexes")
  TargetOutOfBounds,  // "Target V is out of bounds."
  EmbeddingIndex,     // "embedding_dense_backward: index V is out of bounds for S embeddings"
  SignalTimeout,      // a symmetric-memory wait on rank V over channel D gave up after S ms
  AssertFailed,       // aten::_assert_async: the message is the site's `op` string (assertSite below)
};

// Where a launch on `device` records its error; `op` (a string literal) names it in a deferred message;
// index_error: IndexError (else RuntimeError).
ErrorSite deviceErrorSite(const c10::Device& device, const char* op, DeviceErrorFormat format, bool index_error,
                          int64_t dim = -1, int64_t size = -1);
// A site for aten::_assert_async whose message is `message` (kept for the process; at most 32 distinct messages,
// further ones share a generic one).
ErrorSite assertSite(const c10::Device& device, const std::string& message);
// After the launch: raises at once where launches are synchronous or launch-blocking is on, else nothing.
void afterErrorCheckedLaunch(const c10::Device& device);
// At a synchronisation point: raises the device's recorded error, if any, and clears it.
void raiseDeviceError(c10::DeviceIndex device);
// Every device's (torch.mytorch.synchronize() of all devices, event synchronisation).
void raiseDeviceErrors();
void setLaunchBlocking(bool on);
bool launchBlocking();

// torch.cuda.set_sync_debug_mode's model: 0 off, 1 a warning, 2 an error at every point where an op makes the
// host wait for the device (a blocking copy to or from pageable host memory, item(), a stream's synchronize) —
// what a graph capture or a sync-free MoE layer must not do. Explicit device synchronisation is not flagged.
void setSyncDebugMode(int mode);
int syncDebugMode();
void warnOrErrorOnSync();

} // namespace mytorch
