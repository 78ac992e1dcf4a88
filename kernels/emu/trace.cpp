// Note [GPU performance model]
// The emulated build runs every kernel's loads and stores on the CPU, so it can count them: the emulated
// kernels (the rewritten kernels/cuda/*.cu) are compiled with the address sanitizer's instrumentation in its
// outline form (GCC: -fsanitize=kernel-address, or -fsanitize=address in the ASan flavour, with
// --param asan-instrumentation-with-call-threshold=0), which turns every memory access of the kernel objects
// into a call of __asan_{load,store}{1,2,4,8,16,N}. This file defines those calls for the build (in the ASan
// flavour it forwards each to the sanitizer runtime after counting it), so the kernels' sources are unchanged.
//
// With MYTORCH_EMU_TRACE=<file> (or torch.mytorch's mytorch._C._emu_trace(path)), each launch appends one JSON
// object (a line) to the file once its grid ran:
//   kernel, site (file:line), grid, block, smem (dynamic + static bytes), regs (and regs_source),
//   bytes_read, bytes_written (global memory, as the kernel asked for them), sectors (the distinct 32-byte sectors
//   read plus the distinct sectors written: the DRAM traffic if every sector moved once each way), requests (warp-wide global
//   memory instructions), sectors_per_request and ideal_sectors_per_request (the sectors the same bytes need
//   when packed: coalescing), shared_requests, bank_conflicts (extra shared-memory wavefronts), mma (warp-wide
//   mma.sync.m16n8k16 instructions), blocks_per_sm, waves, est_us (the model's time on its device) and bound (which
//   term of the model set it).
// A warp's request k is the k-th global load (store, shared load, shared store) of each of its lanes: exact
// for kernels whose lanes run the same instructions, approximate where lanes diverge.
//
// The model (estimate() below; docs/gpu.md): an H100 SXM (132 SMs, 3.35 TB/s, 1.755 GHz), or with MYTORCH_EMU_GPU=h200
// an H200 SXM (the same, at 4.8 TB/s). Occupancy from the
// block size, the shared memory and the registers ptxas reports for the kernel (MYTORCH_EMU_PTXAS=<file>:
// "name<TAB>registers" lines, written by scripts/ptxas_check.py --regs-table; 32 when unknown); waves over the
// SMs; DRAM time = sectors x 32 bytes / the bandwidth the resident warps can keep in flight (Little's law:
// a warp keeps two requests of its average size in flight over ~600 ns, capped by the SMs in use and the
// device's bandwidth); L2 time = the sectors the warps' requests ask for (a sector asked for by several
// requests counts each time: uncoalesced access) x 32 bytes / 5.5 TB/s of the SMs in use; shared-memory time
// = wavefronts / one per clock per SM; tensor-core time = mma FLOPs / 660 TFLOP/s (what mma.sync reaches on
// an H100, wgmma being needed for the rest of the 990); plus 2 us of launch and drain. The estimate is the
// largest term plus the launch. It sees no caches (a sector read twice costs once), clocks or scheduling.
#include "trace.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace mytorch::emu::trace {
namespace {

struct Access {
  uintptr_t addr;
  uint32_t size;
};
enum Kind { GlobalLoad, GlobalStore, SharedLoad, SharedStore, kKinds };

struct Grid {
  const LaunchRec* launch = nullptr;
  // the running block
  uintptr_t dyn_lo = 0, dyn_hi = 0;
  std::vector<std::pair<uintptr_t, uintptr_t>> statics;
  size_t static_bytes = 0;
  bool first_block = true;
  int nthreads = 0;
  std::vector<std::vector<Access>> seq[kKinds]; // per thread of the block
  // which 4 KiB pages are device memory (device allocations are page-mapped: a page is one or the other)
  std::unordered_map<uintptr_t, bool> pages;
  uintptr_t last_page = ~uintptr_t(0);
  bool last_global = false;
  // the launch's totals
  uint64_t bytes_read = 0, bytes_written = 0;
  std::unordered_set<uintptr_t> sectors_read, sectors_written; // a sector both read and written moves twice
  uint64_t requests = 0, request_sectors = 0, ideal_sectors = 0;
  uint64_t shared_requests = 0, wavefronts = 0, ideal_wavefronts = 0;
  uint64_t mma_lanes = 0;
};

thread_local Grid* t_grid = nullptr;
std::atomic<int> g_active{0}; // grids being traced now, on any thread: the instrumentation's fast exit

std::mutex g_mu;
std::FILE* g_file = nullptr;
bool g_on = false;
bool g_env_read = false;

void read_env_locked() {
  if (g_env_read) return;
  g_env_read = true;
  const char* p = std::getenv("MYTORCH_EMU_TRACE");
  if (p && *p) {
    g_file = std::fopen(p, "a");
    g_on = g_file != nullptr;
  }
}

// ---- registers from ptxas --------------------------------------------------------------------------------
std::string base_name(std::string full) {
  const std::string anon = "(anonymous namespace)::";
  for (size_t at; (at = full.find(anon)) != std::string::npos;) full.erase(at, anon.size());
  std::string s = full.substr(0, full.find_first_of("<("));
  const size_t sp = s.rfind(' ');
  if (sp != std::string::npos) s = s.substr(sp + 1);
  const size_t ns = s.rfind("::");
  return ns == std::string::npos ? s : s.substr(ns + 2);
}

const std::unordered_map<std::string, int>& register_table() {
  static const std::unordered_map<std::string, int> table = [] {
    std::unordered_map<std::string, int> t;
    const char* p = std::getenv("MYTORCH_EMU_PTXAS");
    if (p == nullptr) return t;
    std::ifstream in(p);
    std::string line;
    while (std::getline(in, line)) {
      const size_t tab = line.find('\t');
      if (tab == std::string::npos) continue;
      const int regs = std::atoi(line.c_str() + tab + 1);
      int& slot = t[base_name(line.substr(0, tab))];
      slot = std::max(slot, regs); // several instantiations: the heaviest
    }
    return t;
  }();
  return table;
}

// ---- the model -------------------------------------------------------------------------------------------
// The device whose constants the model uses: MYTORCH_EMU_GPU=h100 (the default: the H100 SXM, which the model was
// compared with once, docs/gpu.md) or h200 (the H200 SXM: the same GH100 chip, 132 SMs at the same clocks, with
// 141 GB of HBM3e at 4.8 TB/s instead of 80 GB of HBM3 at 3.35 TB/s). Every record names it ("device").
struct GpuModel {
  const char* name;
  double sms, clock_hz, dram_bytes_s, dram_efficiency;
  double latency_s, requests_in_flight, l2_bytes_s, mma_flops_s, launch_us;
  int threads_per_sm, blocks_per_sm, regs_per_sm, smem_per_sm, smem_reserved_per_block;
  double per_sm_bytes_s() const { return 2.0 * dram_bytes_s / sms; } // one SM alone pulls about twice its share
};
constexpr GpuModel kH100{"H100 SXM", 132, 1.755e9, 3.35e12, 0.92,  600e-9, 2,   5.5e12,
                         660e12,     2.0, 2048,    32,      65536, 233472, 1024};
constexpr GpuModel kH200{"H200 SXM", 132, 1.755e9, 4.8e12, 0.92,  600e-9, 2,   5.5e12,
                         660e12,     2.0, 2048,    32,     65536, 233472, 1024};

const GpuModel& gpu() {
  static const GpuModel& m = []() -> const GpuModel& {
    const char* p = std::getenv("MYTORCH_EMU_GPU");
    return p && std::string(p) == "h200" ? kH200 : kH100;
  }();
  return m;
}

struct Estimate {
  int regs = 32;
  bool regs_known = false;
  int blocks_per_sm = 0;
  double waves = 0, est_us = 0;
  const char* bound = "launch";
};

Estimate estimate(const Grid& g, const LaunchRec& L, size_t smem) {
  Estimate e;
  const GpuModel& d = gpu();
  const auto& table = register_table();
  auto it = table.find(base_name(L.site.name));
  if (it != table.end()) {
    e.regs = it->second;
    e.regs_known = true;
  }
  const double blocks = double(L.grid.x) * L.grid.y * L.grid.z;
  const int threads = static_cast<int>(L.block.x * L.block.y * L.block.z);
  const int warps = (threads + 31) / 32;
  const int regs_per_warp = (e.regs * 32 + 255) / 256 * 256;
  int bpsm = d.blocks_per_sm;
  bpsm = std::min(bpsm, d.threads_per_sm / (warps * 32));
  bpsm = std::min(bpsm, d.regs_per_sm / std::max(1, regs_per_warp * warps));
  bpsm = std::min(bpsm, static_cast<int>(d.smem_per_sm / (smem + d.smem_reserved_per_block)));
  e.blocks_per_sm = std::max(bpsm, 0);
  if (e.blocks_per_sm == 0) { // does not fit an SM: the launch fails on hardware
    e.est_us = INFINITY;
    e.bound = "does not fit";
    return e;
  }
  const double slots = d.sms * e.blocks_per_sm;
  e.waves = std::ceil(blocks / slots);
  const double active_sms = std::min(d.sms, blocks);
  const double resident_warps = std::min(blocks, slots) * warps;
  const double bytes = double(g.bytes_read + g.bytes_written);
  const double per_request = g.requests ? bytes / double(g.requests) : 128.0;
  double bw = d.dram_bytes_s * d.dram_efficiency;
  bw = std::min(bw, active_sms * d.per_sm_bytes_s());
  bw = std::min(bw, resident_warps * d.requests_in_flight * per_request / d.latency_s);
  const double t_dram = double(g.sectors_read.size() + g.sectors_written.size()) * 32.0 / bw;
  const double t_l2 = double(g.request_sectors) * 32.0 / (d.l2_bytes_s * active_sms / d.sms);
  const double t_smem = double(g.wavefronts) / (active_sms * d.clock_hz);
  const double t_mma = double(g.mma_lanes / 32) * 2.0 * 16 * 8 * 16 / (d.mma_flops_s * active_sms / d.sms);
  double t = 0;
  auto take = [&](double v, const char* name) {
    if (v > t) {
      t = v;
      e.bound = name;
    }
  };
  take(t_dram, bw < d.dram_bytes_s * d.dram_efficiency ? "latency" : "dram");
  take(t_l2, "l2");
  take(t_smem, "smem");
  take(t_mma, "mma");
  e.est_us = d.launch_us + t * 1e6;
  return e;
}

// ---- warp requests ---------------------------------------------------------------------------------------
void global_requests(Grid& g, int lo, int hi, Kind k) {
  size_t longest = 0;
  for (int t = lo; t < hi; ++t) longest = std::max(longest, g.seq[k][size_t(t)].size());
  std::vector<uintptr_t> secs;
  std::vector<std::pair<uintptr_t, uintptr_t>> spans;
  for (size_t i = 0; i < longest; ++i) {
    secs.clear();
    spans.clear();
    for (int t = lo; t < hi; ++t) {
      const auto& s = g.seq[k][size_t(t)];
      if (i >= s.size()) continue;
      const Access a = s[i];
      for (uintptr_t x = a.addr >> 5; x <= (a.addr + a.size - 1) >> 5; ++x) secs.push_back(x);
      spans.emplace_back(a.addr, a.addr + a.size);
    }
    std::sort(secs.begin(), secs.end());
    const size_t distinct = size_t(std::unique(secs.begin(), secs.end()) - secs.begin());
    std::sort(spans.begin(), spans.end());
    uintptr_t covered = 0, end = 0;
    for (const auto& [b, e] : spans) {
      if (b >= end) covered += e - b;
      else if (e > end) covered += e - end;
      end = std::max(end, e);
    }
    g.requests++;
    g.request_sectors += distinct;
    g.ideal_sectors += std::max<uintptr_t>(1, (covered + 31) / 32);
  }
}

void shared_requests(Grid& g, int lo, int hi, Kind k) {
  size_t longest = 0;
  for (int t = lo; t < hi; ++t) longest = std::max(longest, g.seq[k][size_t(t)].size());
  std::vector<uintptr_t> words[32];
  for (size_t i = 0; i < longest; ++i) {
    uint32_t widest = 1;
    for (int t = lo; t < hi; ++t) {
      const auto& s = g.seq[k][size_t(t)];
      if (i < s.size()) widest = std::max(widest, s[i].size);
    }
    // 8-byte accesses are served a half-warp per wavefront at best, 16-byte ones a quarter-warp
    const int per_phase = widest >= 16 ? 8 : widest >= 8 ? 16 : 32;
    for (int p = lo; p < hi; p += per_phase) {
      for (auto& w : words) w.clear();
      for (int t = p; t < std::min(hi, p + per_phase); ++t) {
        const auto& s = g.seq[k][size_t(t)];
        if (i >= s.size()) continue;
        for (uintptr_t w = s[i].addr >> 2; w <= (s[i].addr + s[i].size - 1) >> 2; ++w) words[w & 31].push_back(w);
      }
      size_t worst = 1;
      for (auto& w : words) {
        std::sort(w.begin(), w.end());
        worst = std::max(worst, size_t(std::unique(w.begin(), w.end()) - w.begin()));
      }
      g.wavefronts += worst;
      g.ideal_wavefronts += 1;
    }
    g.shared_requests++;
  }
}

bool is_global(Grid& g, uintptr_t a) {
  const uintptr_t page = a >> 12;
  if (page == g.last_page) return g.last_global;
  auto it = g.pages.find(page);
  bool global;
  if (it != g.pages.end()) {
    global = it->second;
  } else {
    global = device_of_range(reinterpret_cast<const void*>(a), 1) >= 0;
    g.pages.emplace(page, global);
  }
  g.last_page = page;
  g.last_global = global;
  return global;
}

__attribute__((no_sanitize_address)) void on_access(uintptr_t a, size_t n, bool store) {
  Grid* g = t_grid;
  if (g == nullptr || n == 0) return;
  Kind k;
  bool shared = a >= g->dyn_lo && a < g->dyn_hi;
  for (size_t i = 0; !shared && i < g->statics.size(); ++i)
    shared = a >= g->statics[i].first && a < g->statics[i].second;
  if (shared) {
    k = store ? SharedStore : SharedLoad;
  } else if (is_global(*g, a)) {
    k = store ? GlobalStore : GlobalLoad;
    (store ? g->bytes_written : g->bytes_read) += n;
    auto& sectors = store ? g->sectors_written : g->sectors_read;
    for (uintptr_t x = a >> 5; x <= (a + n - 1) >> 5; ++x) sectors.insert(x);
  } else {
    return; // the thread's own stack (local variables), the emulator's state
  }
  const int t = self().linear;
  if (t >= 0 && t < g->nthreads) g->seq[k][size_t(t)].push_back(Access{a, static_cast<uint32_t>(n)});
}

std::string json_dim(dim3 d) {
  return "[" + std::to_string(d.x) + ", " + std::to_string(d.y) + ", " + std::to_string(d.z) + "]";
}

std::string escaped(const char* s) {
  std::string out;
  for (; *s; ++s) {
    if (*s == '"' || *s == '\\') out += '\\';
    out += *s;
  }
  return out;
}

} // namespace

bool enabled() {
  std::lock_guard<std::mutex> l(g_mu);
  read_env_locked();
  return g_on;
}

bool set_file(const char* path) {
  std::lock_guard<std::mutex> l(g_mu);
  read_env_locked();
  if (g_file) std::fclose(g_file);
  g_file = nullptr;
  g_on = false;
  if (path && *path) {
    g_file = std::fopen(path, "a");
    g_on = g_file != nullptr;
    return g_on;
  }
  return true;
}

void launch_begin(const LaunchRec& L) {
  if (!enabled()) return;
  Grid* g = new Grid;
  g->launch = &L;
  t_grid = g;
  g_active.fetch_add(1);
}

void block_begin(int nthreads, const void* dyn, size_t bytes) {
  Grid* g = t_grid;
  if (!g) return;
  g->dyn_lo = reinterpret_cast<uintptr_t>(dyn);
  g->dyn_hi = g->dyn_lo + (dyn ? bytes : 0);
  g->statics.clear();
  g->nthreads = nthreads;
  for (auto& s : g->seq) s.assign(size_t(nthreads), {});
}

void static_shared(const void* p, size_t bytes) {
  Grid* g = t_grid;
  if (!g) return;
  g->statics.emplace_back(reinterpret_cast<uintptr_t>(p), reinterpret_cast<uintptr_t>(p) + bytes);
  if (g->first_block) g->static_bytes += bytes;
}

void block_end() {
  Grid* g = t_grid;
  if (!g) return;
  for (int lo = 0; lo < g->nthreads; lo += 32) {
    const int hi = std::min(g->nthreads, lo + 32);
    global_requests(*g, lo, hi, GlobalLoad);
    global_requests(*g, lo, hi, GlobalStore);
    shared_requests(*g, lo, hi, SharedLoad);
    shared_requests(*g, lo, hi, SharedStore);
  }
  g->first_block = false;
}

void mma() {
  if (t_grid) t_grid->mma_lanes++;
}

void launch_end(const LaunchRec& L, bool faulted) {
  Grid* g = t_grid;
  if (!g) return;
  t_grid = nullptr;
  g_active.fetch_sub(1);
  const size_t smem = L.shm + g->static_bytes;
  const Estimate e = estimate(*g, L, smem);
  std::ostringstream o;
  o.precision(6);
  o << "{\"kernel\": \"" << escaped(L.site.name) << "\", \"site\": \"" << escaped(L.site.file) << ":" << L.site.line
    << "\", \"grid\": " << json_dim(L.grid) << ", \"block\": " << json_dim(L.block) << ", \"smem\": " << smem
    << ", \"regs\": " << e.regs << ", \"regs_source\": \"" << (e.regs_known ? "ptxas" : "assumed")
    << "\", \"bytes_read\": " << g->bytes_read << ", \"bytes_written\": " << g->bytes_written
    << ", \"sectors\": " << g->sectors_read.size() + g->sectors_written.size() << ", \"requests\": " << g->requests
    << ", \"sectors_per_request\": " << (g->requests ? double(g->request_sectors) / double(g->requests) : 0.0)
    << ", \"ideal_sectors_per_request\": " << (g->requests ? double(g->ideal_sectors) / double(g->requests) : 0.0)
    << ", \"shared_requests\": " << g->shared_requests
    << ", \"bank_conflicts\": " << (g->wavefronts - g->ideal_wavefronts) << ", \"mma\": " << g->mma_lanes / 32
    << ", \"blocks_per_sm\": " << e.blocks_per_sm << ", \"waves\": " << e.waves
    << ", \"est_us\": " << (std::isfinite(e.est_us) ? e.est_us : -1.0) << ", \"launch_us\": " << gpu().launch_us
    << ", \"bound\": \"" << e.bound << "\", \"device\": \"" << gpu().name << "\""
    << (faulted ? ", \"fault\": true" : "") << "}\n";
  delete g;
  std::lock_guard<std::mutex> l(g_mu);
  if (g_file) {
    std::fputs(o.str().c_str(), g_file);
    std::fflush(g_file);
  }
}

} // namespace mytorch::emu::trace

// ---- the instrumentation's calls -------------------------------------------------------------------------
// The extension exports none of them (CMakeLists.txt: --exclude-libs), so that its kernels bind to these
// definitions. They are on every load and store of every emulated kernel, so the common case is short: no grid is
// traced (one relaxed load), and in the ASan flavour the access is checked against ASan's shadow inline (x86-64
// Linux: a byte per 8 bytes at (a >> 3) + 0x7fff8000, 0 when all 8 are addressable); only an access the shadow
// does not clear goes to the sanitizer runtime's own check (found by name, the runtime being loaded first), which
// reports it. Measured on test_gpu.py, test_gpu_nn.py and test_op_tables.py under ASan: see docs/gpu.md.
namespace mytorch::emu::trace {
__attribute__((no_sanitize_address)) void on_access_hook(uintptr_t a, size_t n, bool store) { on_access(a, n, store); }
} // namespace mytorch::emu::trace

namespace {
__attribute__((always_inline, no_sanitize_address)) inline void count(void* a, size_t n, bool store) {
  if (__builtin_expect(mytorch::emu::trace::g_active.load(std::memory_order_relaxed) != 0, 0)) {
    mytorch::emu::trace::on_access_hook(reinterpret_cast<uintptr_t>(a), n, store);
  }
}
#if MYTORCH_EMU_ASAN
__attribute__((always_inline, no_sanitize_address)) inline bool shadow_clear(void* p, size_t n) {
#if defined(__x86_64__) && defined(__linux__)
  if (n == 0 || n > 64) return false;
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  for (uintptr_t s = a >> 3; s <= (a + n - 1) >> 3; ++s) {
    if (*reinterpret_cast<const volatile signed char*>(s + 0x7fff8000) != 0) return false;
  }
  return true;
#else
  return false;
#endif
}
#endif
} // namespace

#define MT_STR2(x) #x
#define MT_STR(x) MT_STR2(x)
#if MYTORCH_EMU_ASAN
#define MT_TRACE_SUFFIX
#define MT_TRACE_FORWARD(name, n, ...)                                                     \
  if (shadow_clear(a, n)) return;                                                          \
  static auto real = reinterpret_cast<decltype(&name)>(dlsym(RTLD_DEFAULT, MT_STR(name))); \
  real(__VA_ARGS__);
#else
#define MT_TRACE_SUFFIX _noabort
#define MT_TRACE_FORWARD(name, n, ...)
#endif
#define MT_CAT2(a, b) a##b
#define MT_CAT(a, b) MT_CAT2(a, b)
#define MT_TRACE_FIXED(kind, n, store)                                                                      \
  extern "C" __attribute__((no_sanitize_address)) void MT_CAT(__asan_##kind##n, MT_TRACE_SUFFIX)(void* a) { \
    count(a, n, store);                                                                                     \
    MT_TRACE_FORWARD(MT_CAT(__asan_##kind##n, MT_TRACE_SUFFIX), n, a)                                       \
  }
#define MT_TRACE_SIZED(kind, store)                                                                                 \
  extern "C" __attribute__((no_sanitize_address)) void MT_CAT(__asan_##kind##N, MT_TRACE_SUFFIX)(void* a, long n) { \
    count(a, static_cast<size_t>(n), store);                                                                        \
    MT_TRACE_FORWARD(MT_CAT(__asan_##kind##N, MT_TRACE_SUFFIX), static_cast<size_t>(n), a, n)                       \
  }

MT_TRACE_FIXED(load, 1, false)
MT_TRACE_FIXED(load, 2, false)
MT_TRACE_FIXED(load, 4, false)
MT_TRACE_FIXED(load, 8, false)
MT_TRACE_FIXED(load, 16, false)
MT_TRACE_FIXED(store, 1, true)
MT_TRACE_FIXED(store, 2, true)
MT_TRACE_FIXED(store, 4, true)
MT_TRACE_FIXED(store, 8, true)
MT_TRACE_FIXED(store, 16, true)
MT_TRACE_SIZED(load, false)
MT_TRACE_SIZED(store, true)

// An access an emulated instruction makes as one (a vector atomic: atomicAdd(float2*)), whose emulation runs
// uninstrumented host atomics: counted, and checked in the ASan flavour, as that one access.
namespace mytorch::emu {
__attribute__((no_sanitize_address)) void instruction_access(void* a, size_t n, bool store) {
  if (store) MT_CAT(__asan_storeN, MT_TRACE_SUFFIX)(a, static_cast<long>(n));
  else MT_CAT(__asan_loadN, MT_TRACE_SUFFIX)(a, static_cast<long>(n));
}
} // namespace mytorch::emu

#if !MYTORCH_EMU_ASAN
// -fsanitize=kernel-address also calls this before every noreturn call (a throw, abort); with no fake stacks
// (asan-use-after-return is off) there is nothing to do. The ASan flavour's libasan has its own. Without it the
// plain emu flavour did not load (undefined symbol).
extern "C" void __asan_handle_no_return() {}
#endif
