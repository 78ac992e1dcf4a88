// CUDA FFTs through cuFFT (Note [FFT family]). The library is opened on first use (dynlib.h) — torch's CUDA wheels
// have usually loaded it already — and its plans are cached per (device, problem): making a plan costs far more
// than executing one, and models repeat the same shapes. A plan is tied to one device; executions set its stream
// under the cache's lock, since two streams may share a plan.
#include <cstring>
#include <list>
#include <mutex>
#include <string>
#include <utility>

#include "common.cuh"
#include "cufft_api.h"
#include "mytorch/dynlib.h"
#include "mytorch/fft.h"

namespace mytorch::cuda {
namespace {

// clang-format off: a list of the library's functions, one X-macro entry each
#define MT_FFT_FUNCS(_)                                                                                  \
  _(cufftCreate) _(cufftDestroy) _(cufftMakePlanMany64) _(cufftSetStream) _(cufftExecC2C) _(cufftExecR2C) \
  _(cufftExecC2R) _(cufftExecZ2Z) _(cufftExecD2Z) _(cufftExecZ2D)
// clang-format on

#if defined(MYTORCH_EMU_ACTIVE)
// The emulated build links the emulator's library instead (kernels/emu/): its functions, no loading.
MT_DYNLIB_LINKED(Fft, lib, MT_FFT_FUNCS)
#else
MT_DYNLIB(Fft, lib, MT_FFT_FUNCS, "cuFFT", "install the CUDA toolkit's cuFFT or the nvidia-cufft wheel",
          "libcufft.so.12", "libcufft.so.11", "libcufft.so")
#endif

#if defined(MYTORCH_EMU_ACTIVE)
}  // namespace
}  // namespace mytorch::cuda
namespace mytorch::emu {
const char* cufft_last_reason();  // why the emulated cuFFT refused (kernels/emu/cufft.cpp)
}
namespace mytorch::cuda {
namespace {
#endif

rt::Status fail(const char* what, cufftResult r) {
  std::string msg = std::string("fft: ") + what + " failed with cuFFT status " + std::to_string(int(r));
#if defined(MYTORCH_EMU_ACTIVE)
  msg += std::string(" (emu: ") + mytorch::emu::cufft_last_reason() + ")";
#endif
  return rt::report(rt::Status::Unknown, msg.c_str());
}

struct PlanKey {
  int device;
  FftKind kind;
  DType dtype;
  int rank;
  int64_t n[3];
  int64_t batch;
  bool operator==(const PlanKey& o) const {
    return device == o.device && kind == o.kind && dtype == o.dtype && rank == o.rank && batch == o.batch &&
           std::memcmp(n, o.n, sizeof(n)) == 0;
  }
};

// Plans in most-recent-first order, at most kMaxPlans (the oldest is destroyed beyond that).
constexpr size_t kMaxPlans = 64;
std::mutex g_mu;
std::list<std::pair<PlanKey, cufftHandle>>& plans() {
  static auto* p = new std::list<std::pair<PlanKey, cufftHandle>>();  // never destroyed (outlives the library)
  return *p;
}

cufftType type_of(FftKind kind, DType t) {
  const bool dbl = t == DType::Double;
  switch (kind) {
    case FftKind::C2C: return dbl ? CUFFT_Z2Z : CUFFT_C2C;
    case FftKind::R2C: return dbl ? CUFFT_D2Z : CUFFT_R2C;
    case FftKind::C2R: return dbl ? CUFFT_Z2D : CUFFT_C2R;
  }
  return CUFFT_C2C;
}

// The cached plan for `key`, made on first use (called with g_mu held).
rt::Status plan_for(const PlanKey& key, cufftHandle* out) {
  auto& list = plans();
  for (auto it = list.begin(); it != list.end(); ++it) {
    if (it->first == key) {
      list.splice(list.begin(), list, it);
      *out = list.front().second;
      return rt::Status::Success;
    }
  }
  cufftHandle h = 0;
  if (cufftResult r = lib().cufftCreate(&h); r != CUFFT_SUCCESS) return fail("cufftCreate", r);
  long long n[3];
  long long signal = 1, half = 1;
  for (int i = 0; i < key.rank; ++i) {
    n[i] = key.n[i];
    signal *= key.n[i];
    half *= i == key.rank - 1 ? key.n[i] / 2 + 1 : key.n[i];
  }
  // Contiguous signals: the basic layout (no embeds), distances of one signal (the complex side of a real
  // transform holds the one-sided half).
  const long long idist = key.kind == FftKind::C2R ? half : signal;
  const long long odist = key.kind == FftKind::R2C ? half : signal;
  size_t work = 0;
  if (cufftResult r = lib().cufftMakePlanMany64(h, key.rank, n, nullptr, 1, idist, nullptr, 1, odist,
                                                type_of(key.kind, key.dtype), key.batch, &work);
      r != CUFFT_SUCCESS) {
    lib().cufftDestroy(h);
    return fail("cufftMakePlanMany64", r);
  }
  list.emplace_front(key, h);
  if (list.size() > kMaxPlans) {
    lib().cufftDestroy(list.back().second);
    list.pop_back();
  }
  *out = h;
  return rt::Status::Success;
}

} // namespace

rt::Status fft(const FftArgs& a, rt::Stream stream) {
  if (a.batch == 0) return rt::Status::Success;
  if (a.rank < 1 || a.rank > 3 || (a.dtype != DType::Float && a.dtype != DType::Double))
    return rt::report(rt::Status::InvalidValue, "fft: expected 1 to 3 dimensions in float32 or float64");
  for (int i = 0; i < a.rank; ++i)
    if (a.n[i] < 1) return rt::report(rt::Status::InvalidValue, "fft: every signal size must be positive");
  if (!lib().error.empty()) return rt::report(rt::Status::Unavailable, lib().error.c_str());
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return check_launch("fft");
  PlanKey key{device, a.kind, a.dtype, a.rank, {1, 1, 1}, a.batch};
  for (int i = 0; i < a.rank; ++i) key.n[i] = a.n[i];
  std::lock_guard<std::mutex> lock(g_mu);
  cufftHandle h = 0;
  if (rt::Status st = plan_for(key, &h); st != rt::Status::Success) return st;
  if (cufftResult r = lib().cufftSetStream(h, native(stream)); r != CUFFT_SUCCESS) return fail("cufftSetStream", r);
  void* in = const_cast<void*>(a.in);
  const bool dbl = a.dtype == DType::Double;
  const int dir = a.forward ? CUFFT_FORWARD : CUFFT_INVERSE;
  cufftResult r = CUFFT_SUCCESS;
  switch (a.kind) {
    case FftKind::C2C: r = dbl ? lib().cufftExecZ2Z(h, in, a.out, dir) : lib().cufftExecC2C(h, in, a.out, dir); break;
    case FftKind::R2C: r = dbl ? lib().cufftExecD2Z(h, in, a.out) : lib().cufftExecR2C(h, in, a.out); break;
    case FftKind::C2R: r = dbl ? lib().cufftExecZ2D(h, in, a.out) : lib().cufftExecC2R(h, in, a.out); break;
  }
  if (r != CUFFT_SUCCESS) return fail("cufftExec", r);
  return check_launch("fft");
}

} // namespace mytorch::cuda
