// Graph capture and replay on the mytorch device: torch.accelerator.Graph's implementation for PrivateUse1
// (Note [Graph capture] in kernels/runtime/graph.cpp; Note [Graph memory pools]; Note [Random numbers in a
// captured graph]).
#pragma once

#include <c10/core/Allocator.h>

#include <cstdint>
#include <functional>

namespace mytorch {

class MytorchGeneratorImpl;

// Whether the calling thread is capturing a graph on the mytorch device.
bool capturing();
// Raises (and invalidates the capture) when the calling thread captures: `what` cannot be captured.
void refuseDuringCapture(const char* what);
// Runs `work` now, or, while the calling thread captures on sim, records it to run at each replay instead (the
// sim's host routes: ATen's CPU kernels on host views of device memory, Note [Sim host route]).
void runOrRecord(const char* name, std::function<void()> work);
// A generator step of `step` elements during capture: the offset a launch records (slot and offset within the
// capture, resolved at each replay); false when the current stream is not capturing. Caller holds the
// generator's mutex.
bool capturedPhiloxOffset(MytorchGeneratorImpl* gen, uint64_t step, uint64_t* offset);
// cuda, emu: the device memory a captured random launch reads its replay's Philox state from (the launch's
// philox_dev); null on sim (its records are patched) and outside a capture.
const uint64_t* capturedPhiloxState();
// A new pool id for graphs to share (torch.cuda.graph_pool_handle()).
c10::MempoolId_t graphPoolHandle();
// torch.accelerator.Graph's implementation for the device, under its name (after the PrivateUse1 rename); false
// where the torch compiled against has no torch.accelerator.Graph (before 2.12: csrc/core/TorchVersion.h).
bool registerGraphImpl();

} // namespace mytorch
