// The emulator's own checks (Note [CUDA emulation]): correct kernels give the right answers, and each class of
// mistake a GPU punishes is reported as the GPU would. Built only in the emulated build (target
// mytorch_emu_selftest, through the same rewrite as kernels/cuda); run by test/test_emu.py, one case per process
// because faults are sticky:   mytorch_emu_selftest CASE   -> prints "ok ..." or the error, exit code 0 / 1.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

__global__ void reverse_in_shared(const int* in, int* out, int n) {
  extern __shared__ int tile[];
  const int t = threadIdx.x;
  if (t < n) tile[t] = in[t];
  __syncthreads();
  if (t < n) out[t] = tile[n - 1 - t];
}

__global__ void early_exit_then_barrier(int* out) {
  if (threadIdx.x < 16) return;  // threads 0..15 never reach the barrier
  __syncthreads();
  out[threadIdx.x] = 1;
}

__global__ void warp_sum(const float* in, float* out) {
  float v = in[blockIdx.x * blockDim.x + threadIdx.x];
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  if ((threadIdx.x & 31) == 0) out[(blockIdx.x * blockDim.x + threadIdx.x) / 32] = v;
}

__global__ void shuffle_after_divergence(float* out) {
  if ((threadIdx.x & 31) == 5) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
}

__global__ void misaligned_store(char* p) { *reinterpret_cast<long long*>(p + 4) = 1; }

__global__ void write_shared(int n) {
  extern __shared__ unsigned char bytes[];
  bytes[threadIdx.x] = 1;  // one byte per thread: past the end when n < blockDim.x
  (void)n;
}

__global__ void noop(int*) {}

// Thread t reads what its neighbour wrote without a barrier in between: the result depends on the order.
__global__ void racy_neighbour(int* out) {
  __shared__ int cell[64];
  cell[threadIdx.x] = static_cast<int>(threadIdx.x) + 1;
  out[threadIdx.x] = cell[(threadIdx.x + 1) % 64];
}

// The same with the barrier: the order no longer matters.
__global__ void synced_neighbour(int* out) {
  __shared__ int cell[64];
  cell[threadIdx.x] = static_cast<int>(threadIdx.x) + 1;
  __syncthreads();
  out[threadIdx.x] = cell[(threadIdx.x + 1) % 64];
}

template <typename T>
T* device_copy(const std::vector<T>& host) {
  void* p = nullptr;
  cudaMalloc(&p, host.size() * sizeof(T));
  cudaMemcpyAsync(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  return static_cast<T*>(p);
}

template <typename T>
std::vector<T> host_copy(const T* dev, size_t n) {
  std::vector<T> host(n);
  cudaMemcpyAsync(host.data(), dev, n * sizeof(T), cudaMemcpyDeviceToHost);
  cudaDeviceSynchronize();
  return host;
}

int report(cudaError_t err) {
  std::printf("%s: %s\n", cudaGetErrorName(err), cudaGetErrorString(err));
  return err == cudaSuccess ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string c = argc > 1 ? argv[1] : "";
  if (c == "barrier") {
    std::vector<int> in(100);
    for (int i = 0; i < 100; ++i) in[i] = i * 7;
    int* d_in = device_copy(in);
    int* d_out = device_copy(std::vector<int>(100, 0));
    reverse_in_shared<<<1, 128, 100 * sizeof(int)>>>(d_in, d_out, 100);
    auto out = host_copy(d_out, 100);
    for (int i = 0; i < 100; ++i)
      if (out[i] != in[99 - i]) return std::printf("wrong at %d: %d\n", i, out[i]), 1;
    return std::printf("ok barrier\n"), 0;
  }
  if (c == "partial_barrier") {
    int* d = device_copy(std::vector<int>(64, 0));
    early_exit_then_barrier<<<1, 64>>>(d);
    return report(cudaDeviceSynchronize());
  }
  if (c == "shuffle") {
    std::vector<float> in(256);
    for (int i = 0; i < 256; ++i) in[i] = static_cast<float>(i % 13);
    float* d_in = device_copy(in);
    float* d_out = device_copy(std::vector<float>(8, 0.f));
    warp_sum<<<2, 128>>>(d_in, d_out);
    auto out = host_copy(d_out, 8);
    for (int w = 0; w < 8; ++w) {
      float want = 0;
      for (int i = 0; i < 32; ++i) want += in[w * 32 + i];
      if (out[w] != want) return std::printf("warp %d: %f != %f\n", w, out[w], want), 1;
    }
    return std::printf("ok shuffle\n"), 0;
  }
  if (c == "partial_shuffle") {
    float* d = device_copy(std::vector<float>(32, 0.f));
    shuffle_after_divergence<<<1, 32>>>(d);
    return report(cudaDeviceSynchronize());
  }
  if (c == "misaligned") {
    char* d = reinterpret_cast<char*>(device_copy(std::vector<long long>(4, 0)));
    misaligned_store<<<1, 1>>>(d);
    return report(cudaDeviceSynchronize());
  }
  if (c == "shared_overrun") {  // caught by AddressSanitizer (exact-size shared memory), not by the emulator
    write_shared<<<1, 64, 48>>>(48);
    return report(cudaDeviceSynchronize());
  }
  if (c == "launch_limits") {
    int* d = device_copy(std::vector<int>(1, 0));
    noop<<<1, 1025>>>(d);
    const cudaError_t block = cudaGetLastError();
    noop<<<dim3(1, 65536), 1>>>(d);
    const cudaError_t grid = cudaGetLastError();
    noop<<<1, 32, 64 << 10>>>(d);
    const cudaError_t smem = cudaGetLastError();
    const cudaError_t cleared = cudaGetLastError();
    const cudaError_t optin = cudaFuncSetAttribute(noop, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 << 10);
    noop<<<1, 32, 64 << 10>>>(d);
    const cudaError_t after = cudaGetLastError();
    const cudaError_t too_big = cudaFuncSetAttribute(noop, cudaFuncAttributeMaxDynamicSharedMemorySize, 240 << 10);
    (void)cudaGetLastError();
    std::printf("block=%s grid=%s smem=%s cleared=%s optin=%s after=%s too_big=%s sync=%s\n", cudaGetErrorName(block),
                cudaGetErrorName(grid), cudaGetErrorName(smem), cudaGetErrorName(cleared), cudaGetErrorName(optin),
                cudaGetErrorName(after), cudaGetErrorName(too_big), cudaGetErrorName(cudaDeviceSynchronize()));
    return 0;
  }
  if (c == "sticky") {
    char* d = reinterpret_cast<char*>(device_copy(std::vector<long long>(4, 0)));
    misaligned_store<<<1, 1>>>(d);
    cudaDeviceSynchronize();
    const cudaError_t first = cudaGetLastError(), second = cudaGetLastError();
    void* p = nullptr;
    const cudaError_t malloc_after = cudaMalloc(&p, 16);
    std::printf("first=%s second=%s malloc=%s\n", cudaGetErrorName(first), cudaGetErrorName(second),
                cudaGetErrorName(malloc_after));
    return 0;
  }
  if (c == "racy" || c == "synced") {
    int* d = device_copy(std::vector<int>(64, 0));
    if (c == "racy") racy_neighbour<<<1, 64>>>(d);
    else synced_neighbour<<<1, 64>>>(d);
    auto out = host_copy(d, 64);
    unsigned long long h = 1469598103934665603ull;
    for (int v : out) h = (h ^ static_cast<unsigned>(v)) * 1099511628211ull;
    return std::printf("hash %llu\n", h), 0;
  }
  std::printf("unknown case '%s'\n", c.c_str());
  return 2;
}
