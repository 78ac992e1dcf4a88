// The emulated cuFFT (kernels/cuda/cufft_api.h): a reference DFT in double precision, in stream order, that
// refuses what the real library refuses, so that kernels/cuda/fft.cu's use of it is checked without a GPU.
//
// Note [What the emulated cuFFT checks]
//  - a plan is made once (cufftMakePlanMany64 on a handle from cufftCreate), for rank 1 to 3 and positive sizes,
//    and executed on the device it was made on, with the exec function of its type (C2C/Z2Z with a direction);
//  - every signal of the batch lies, input and output, inside one live allocation of that device;
//  - C2R and Z2D overwrite their input with NaN after reading it: cuFFT documents that an out-of-place
//    complex-to-real transform may overwrite its input, so a caller that reads it afterwards is caught here.
// Each transform is separable: a direct DFT along each dimension, twiddles exp(-+2 pi i (jk mod n)/n) in double.
#include <cmath>
#include <complex>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cufft_api.h"
#include "internal.h"

namespace mytorch::emu {
namespace {

using cd = std::complex<double>;

struct Plan {
  bool made = false;
  int device = 0;
  int rank = 0;
  long long n[3] = {1, 1, 1};
  long long idist = 0, odist = 0, batch = 0;
  cufftType type = CUFFT_C2C;
  cudaStream_t stream = nullptr;
};

std::mutex g_mu;
std::map<cufftHandle, Plan>& table() {
  static auto* t = new std::map<cufftHandle, Plan>();
  return *t;
}
int g_next = 1;
thread_local std::string t_reason;

cufftResult refuse(cufftResult r, std::string why) {
  t_reason = std::move(why);
  return r;
}

bool is_double(cufftType t) { return t == CUFFT_Z2Z || t == CUFFT_D2Z || t == CUFFT_Z2D; }
bool complex_in(cufftType t) { return t == CUFFT_C2C || t == CUFFT_Z2Z || t == CUFFT_C2R || t == CUFFT_Z2D; }
bool complex_out(cufftType t) { return t == CUFFT_C2C || t == CUFFT_Z2Z || t == CUFFT_R2C || t == CUFFT_D2Z; }

// A direct DFT along dimension `axis` of a row-major array of `shape` (sign -1 forward, +1 inverse).
void dft_axis(std::vector<cd>& x, const std::vector<long long>& shape, size_t axis, int sign) {
  long long outer = 1, inner = 1;
  for (size_t i = 0; i < axis; ++i) outer *= shape[i];
  for (size_t i = axis + 1; i < shape.size(); ++i) inner *= shape[i];
  const long long n = shape[axis];
  std::vector<cd> tw(n), line(n);
  for (long long k = 0; k < n; ++k) tw[k] = std::polar(1.0, sign * 2.0 * M_PI * static_cast<double>(k) / n);
  for (long long o = 0; o < outer; ++o)
    for (long long in = 0; in < inner; ++in) {
      const long long base = o * n * inner + in;
      for (long long k = 0; k < n; ++k) {
        cd acc = 0;
        for (long long j = 0; j < n; ++j) acc += x[base + j * inner] * tw[(j * k) % n];
        line[k] = acc;
      }
      for (long long k = 0; k < n; ++k) x[base + k * inner] = line[k];
    }
}

cd load(const void* p, bool dbl, bool cplx, long long i) {
  if (cplx) {
    return dbl ? static_cast<const cd*>(p)[i]
               : cd(static_cast<const std::complex<float>*>(p)[i].real(),
                    static_cast<const std::complex<float>*>(p)[i].imag());
  }
  return dbl ? cd(static_cast<const double*>(p)[i], 0) : cd(static_cast<const float*>(p)[i], 0);
}

void store(void* p, bool dbl, bool cplx, long long i, cd v) {
  if (cplx) {
    if (dbl) static_cast<cd*>(p)[i] = v;
    else
      static_cast<std::complex<float>*>(p)[i] =
          std::complex<float>(static_cast<float>(v.real()), static_cast<float>(v.imag()));
  } else if (dbl) {
    static_cast<double*>(p)[i] = v.real();
  } else {
    static_cast<float*>(p)[i] = static_cast<float>(v.real());
  }
}

// One signal: `in` at signal offset, written to `out`.
void transform(const Plan& p, const void* in, void* out, long long b, int direction) {
  const bool dbl = is_double(p.type);
  std::vector<long long> full(p.n, p.n + p.rank), half = full;
  half.back() = full.back() / 2 + 1;
  long long nfull = 1, nhalf = 1;
  for (int i = 0; i < p.rank; ++i) {
    nfull *= full[i];
    nhalf *= half[i];
  }
  if (p.type == CUFFT_C2C || p.type == CUFFT_Z2Z) {
    std::vector<cd> x(nfull);
    for (long long i = 0; i < nfull; ++i) x[i] = load(in, dbl, true, b * p.idist + i);
    for (int ax = 0; ax < p.rank; ++ax) dft_axis(x, full, ax, direction == CUFFT_FORWARD ? -1 : 1);
    for (long long i = 0; i < nfull; ++i) store(out, dbl, true, b * p.odist + i, x[i]);
  } else if (p.type == CUFFT_R2C || p.type == CUFFT_D2Z) {
    std::vector<cd> x(nfull);
    for (long long i = 0; i < nfull; ++i) x[i] = load(in, dbl, false, b * p.idist + i);
    for (int ax = 0; ax < p.rank; ++ax) dft_axis(x, full, ax, -1);
    const long long last = full.back(), hl = half.back();
    for (long long r = 0; r < nfull / last; ++r)
      for (long long k = 0; k < hl; ++k) store(out, dbl, true, b * p.odist + r * hl + k, x[r * last + k]);
  } else {
    // C2R: the inverse over the leading dimensions on the half spectrum, then the last one as a Hermitian sum
    // (the imaginary parts of the zero and Nyquist terms do not contribute, as in every C2R).
    std::vector<cd> x(nhalf);
    for (long long i = 0; i < nhalf; ++i) x[i] = load(in, dbl, true, b * p.idist + i);
    for (int ax = 0; ax + 1 < p.rank; ++ax) dft_axis(x, half, ax, 1);
    const long long last = full.back(), hl = half.back();
    for (long long r = 0; r < nhalf / hl; ++r)
      for (long long t = 0; t < last; ++t) {
        double acc = x[r * hl].real();
        for (long long k = 1; k < hl; ++k) {
          const cd w = std::polar(1.0, 2.0 * M_PI * static_cast<double>((k * t) % last) / last);
          const double term = (x[r * hl + k] * w).real();
          acc += (2 * k == last) ? term : 2 * term;
        }
        store(out, dbl, false, b * p.odist + r * last + t, cd(acc, 0));
      }
  }
}

cufftResult exec(cufftHandle h, cufftType want, const void* in, void* out, int direction) {
  Plan p;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = table().find(h);
    if (it == table().end() || !it->second.made) return refuse(CUFFT_INVALID_PLAN, "no plan was made on this handle");
    p = it->second;
  }
  if (p.type != want)
    return refuse(CUFFT_INVALID_TYPE, "the plan's type is " + std::to_string(int(p.type)) + ", not the exec's " +
                                          std::to_string(int(want)));
  if ((want == CUFFT_C2C || want == CUFFT_Z2Z) && direction != CUFFT_FORWARD && direction != CUFFT_INVERSE)
    return refuse(CUFFT_INVALID_VALUE, "direction must be CUFFT_FORWARD or CUFFT_INVERSE");
  if (p.device != current_device())
    return refuse(CUFFT_INVALID_DEVICE, "the plan was made on device " + std::to_string(p.device) + " but device " +
                                            std::to_string(current_device()) + " is current");
  const bool dbl = is_double(p.type);
  const size_t real = dbl ? 8 : 4;
  const size_t ibytes = complex_in(p.type) ? 2 * real : real, obytes = complex_out(p.type) ? 2 * real : real;
  long long nfull = 1, nhalf = 1;
  for (int i = 0; i < p.rank; ++i) {
    nfull *= p.n[i];
    nhalf *= i == p.rank - 1 ? p.n[i] / 2 + 1 : p.n[i];
  }
  const long long ilen = (p.type == CUFFT_C2R || p.type == CUFFT_Z2D) ? nhalf : nfull;
  const long long olen = (p.type == CUFFT_R2C || p.type == CUFFT_D2Z) ? nhalf : nfull;
  const size_t ispan = ((p.batch - 1) * p.idist + ilen) * ibytes, ospan = ((p.batch - 1) * p.odist + olen) * obytes;
  if (device_of_range(in, ispan) != p.device)
    return refuse(CUFFT_INVALID_VALUE, "the input is not inside one live allocation of the plan's device");
  if (device_of_range(out, ospan) != p.device)
    return refuse(CUFFT_INVALID_VALUE, "the output is not inside one live allocation of the plan's device");
  const bool clobber = p.type == CUFFT_C2R || p.type == CUFFT_Z2D;
  void* mutable_in = const_cast<void*>(in);
  cudaError_t e = submit(p.stream, [=] {
    for (long long b = 0; b < p.batch; ++b) transform(p, in, out, b, direction);
    if (clobber) {
      const cd nan(std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::quiet_NaN());
      for (long long i = 0; i < (p.batch - 1) * p.idist + ilen; ++i) store(mutable_in, dbl, true, i, nan);
    }
  });
  if (e != cudaSuccess) return refuse(CUFFT_EXEC_FAILED, std::string("launch: ") + cudaGetErrorName(e));
  return CUFFT_SUCCESS;
}

}  // namespace

const char* cufft_last_reason() { return t_reason.c_str(); }

}  // namespace mytorch::emu

using mytorch::emu::exec;
using mytorch::emu::refuse;

cufftResult cufftCreate(cufftHandle* plan) {
  std::lock_guard<std::mutex> lock(mytorch::emu::g_mu);
  *plan = mytorch::emu::g_next++;
  mytorch::emu::table()[*plan] = mytorch::emu::Plan{};
  return CUFFT_SUCCESS;
}

cufftResult cufftDestroy(cufftHandle plan) {
  std::lock_guard<std::mutex> lock(mytorch::emu::g_mu);
  if (mytorch::emu::table().erase(plan) == 0) return refuse(CUFFT_INVALID_PLAN, "destroying an unknown plan");
  return CUFFT_SUCCESS;
}

cufftResult cufftMakePlanMany64(cufftHandle plan, int rank, long long int* n, long long int* inembed,
                                long long int istride, long long int idist, long long int* onembed,
                                long long int ostride, long long int odist, cufftType type, long long int batch,
                                size_t* work_size) {
  if (rank < 1 || rank > 3) return refuse(CUFFT_INVALID_SIZE, "rank must be 1, 2 or 3");
  if (batch < 1) return refuse(CUFFT_INVALID_SIZE, "batch must be positive");
  for (int i = 0; i < rank; ++i)
    if (n[i] < 1) return refuse(CUFFT_INVALID_SIZE, "every size must be positive");
  if (inembed != nullptr || onembed != nullptr || istride != 1 || ostride != 1)
    return refuse(CUFFT_NOT_IMPLEMENTED, "the emulated cuFFT takes the basic (contiguous) layout only");
  switch (type) {
    case CUFFT_R2C:
    case CUFFT_C2R:
    case CUFFT_C2C:
    case CUFFT_D2Z:
    case CUFFT_Z2D:
    case CUFFT_Z2Z: break;
    default: return refuse(CUFFT_INVALID_TYPE, "unknown transform type");
  }
  std::lock_guard<std::mutex> lock(mytorch::emu::g_mu);
  auto it = mytorch::emu::table().find(plan);
  if (it == mytorch::emu::table().end()) return refuse(CUFFT_INVALID_PLAN, "the handle did not come from cufftCreate");
  if (it->second.made) return refuse(CUFFT_INVALID_PLAN, "a plan was already made on this handle");
  mytorch::emu::Plan& p = it->second;
  p.made = true;
  p.device = mytorch::emu::current_device();
  p.rank = rank;
  for (int i = 0; i < rank; ++i) p.n[i] = n[i];
  p.idist = idist;
  p.odist = odist;
  p.type = type;
  p.batch = batch;
  if (work_size) *work_size = 0;
  return CUFFT_SUCCESS;
}

cufftResult cufftSetStream(cufftHandle plan, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mytorch::emu::g_mu);
  auto it = mytorch::emu::table().find(plan);
  if (it == mytorch::emu::table().end()) return refuse(CUFFT_INVALID_PLAN, "setting the stream of an unknown plan");
  it->second.stream = stream;
  return CUFFT_SUCCESS;
}

cufftResult cufftExecC2C(cufftHandle plan, void* idata, void* odata, int direction) {
  return exec(plan, CUFFT_C2C, idata, odata, direction);
}
cufftResult cufftExecZ2Z(cufftHandle plan, void* idata, void* odata, int direction) {
  return exec(plan, CUFFT_Z2Z, idata, odata, direction);
}
cufftResult cufftExecR2C(cufftHandle plan, void* idata, void* odata) { return exec(plan, CUFFT_R2C, idata, odata, 0); }
cufftResult cufftExecD2Z(cufftHandle plan, void* idata, void* odata) { return exec(plan, CUFFT_D2Z, idata, odata, 0); }
cufftResult cufftExecC2R(cufftHandle plan, void* idata, void* odata) { return exec(plan, CUFFT_C2R, idata, odata, 0); }
cufftResult cufftExecZ2D(cufftHandle plan, void* idata, void* odata) { return exec(plan, CUFFT_Z2D, idata, odata, 0); }
