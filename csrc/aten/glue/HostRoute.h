// The sim's host route (Note [Sim host route]): the one name of every place where the sim runtime runs ATen's own
// CPU kernels on host views of device memory instead of a kernels/sim twin.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace mytorch {

// Note [Sim host route]
// On the sim runtime a few families hand their arithmetic to the CPU libraries torch itself uses, on host views of
// the device's memory (hostView: the sim's device memory is host memory), as the cuda runtime hands it to cuBLAS,
// cuSOLVER and cuFFT: the GEMMs (the CPU BLAS, Note [Sim GEMM library]), torch._grouped_mm (ATen's CPU grouped
// GEMM), the dense solvers (LAPACK, Note [Dense solver family]; LDL's sytrf and sytrs too, which the cuda runtime
// still composes where torch.cuda calls cuSOLVER: Note [LDL]), the FFTs (Note [FFT family]), embedding_bag's forward
// (ATen's CPU kernel) and the large convolutions' forward and data-gradient passes (oneDNN, Note [Sim convolution
// host route]). Each such branch is written `if (simHostRoute(HostRoute::X))`, so
//     grep -rn simHostRoute csrc
// lists every place the sim runs no kernels/sim twin, and each call is counted per family
// (torch.mytorch.host_route_stats(); the alignment report counts these cases as "native, host route"). It is not
// the CPU fallback: the operator is mytorch's registration with mytorch's checks, its results are allocated on the
// device by the caching allocator, nothing is copied; only the loops are the CPU library's. When a host route is
// acceptable and when a family needs a twin: docs/contributing.md, "The sim's host route".
enum class HostRoute : int { Gemm, GroupedGemm, Solver, Fft, EmbeddingBag, Conv, Count };

// True on the sim runtime (the call then takes the host route, and is counted for `family`), false on cuda and emu.
bool simHostRoute(HostRoute family);
// Calls per family since the start or the last reset: {"gemm": n, ...} (families without calls left out).
std::map<std::string, int64_t> hostRouteStats();
void resetHostRouteStats();

} // namespace mytorch
