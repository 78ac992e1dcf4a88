// CUDA radix sort and radix select of long slices (Note [CUDA radix sort and select] in sort.h); cuda/sort.cu
// launches them.
#include "common.cuh"
#include "mytorch/ops_math.h"
#include "mytorch/sort.h"
#include "sort_radix.cuh"

namespace mytorch::cuda {
namespace {

// The key of v in the sort's direction, only its low sort_key_bits<T>() bits set.
template <typename T>
__device__ inline sort_key_t<T> key_of(T v, bool descending) {
  using K = sort_key_t<T>;
  K k = sort_key(v);
  if (descending) k = ~k;
  if constexpr (sort_key_bits<T>() < int(8 * sizeof(K))) k &= (K(1) << sort_key_bits<T>()) - 1;
  return k;
}

// The value whose key (key_of, same direction) is `key`; *exact false for the keys several bit patterns share
// (a float zero, whose sign was folded, and NaN), whose value must be read from the input.
template <typename T>
__device__ inline T value_of_key(sort_key_t<T> key, bool descending, bool* exact) {
  using K = sort_key_t<T>;
  constexpr int bits = sort_key_bits<T>();
  if (descending) key = ~key;
  if constexpr (bits < int(8 * sizeof(K))) key &= (K(1) << bits) - 1;
  *exact = true;
  if constexpr (std::is_same_v<T, bool>) {
    return key != 0;
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    if constexpr (std::is_signed_v<T>)
      return static_cast<T>(static_cast<U>(static_cast<U>(key) ^ (U(1) << (bits - 1))));
    else return static_cast<T>(key);
  } else {
    const K sign = K(1) << (bits - 1), all = bits < int(8 * sizeof(K)) ? (K(1) << bits) - 1 : ~K(0);
    if (key == sign || key == all) {
      *exact = false;
      return T{};
    }
    const K b = (key & sign) ? (key ^ sign) : (~key & all);
    if constexpr (sizeof(T) == 2) {
      T r;
      r.x = static_cast<uint16_t>(b);
      return r;
    } else {
      T r;
      memcpy(&r, &b, sizeof(T));
      return r;
    }
  }
}

// Where a radix pass's pairs come from and go (the input and the outputs of SortArgs for the first and last).
struct RadixPass {
  const void* keys_in = nullptr;
  const uint32_t* pay_in = nullptr;
  void* keys_out = nullptr;
  uint32_t* pay_out = nullptr;
  uint32_t* hist = nullptr;    // [slices][kRadixBins][tiles]: counts, then (scanned) offsets in the slice
  uint32_t* totals = nullptr;  // [slices][kRadixBins]: this pass's digit counts per slice (zeroed before)
  int64_t tiles = 0;
  int shift = 0;
};

template <typename T, bool kFromInput>
__device__ inline sort_key_t<T> load_key(const SortArgs& a, const RadixPass& p, int64_t g) {
  if constexpr (kFromInput) return key_of(mt_load(static_cast<const T*>(a.in) + g), a.descending);
  else return static_cast<const sort_key_t<T>*>(p.keys_in)[g];
}

// Pass, step 1: each tile's digit counts (a thread's counts packed 4 bits a digit: at most kRadixItems = 8).
template <typename T, bool kFromInput>
__global__ void __launch_bounds__(kRadixThreads) radix_count_kernel(SortArgs a, RadixPass p) {
  static_assert(kRadixItems < 16 && kRadixBins * 4 <= 64, "packed per-thread digit counts");
  __shared__ uint32_t counts[kRadixBins];
  const int64_t s = blockIdx.x / p.tiles, tile = blockIdx.x % p.tiles, start = tile * kRadixTile;
  const int64_t n = a.length - start < kRadixTile ? a.length - start : kRadixTile;
  const int t = int(threadIdx.x);
  if (t < kRadixBins) counts[t] = 0;
  __syncthreads();
  uint64_t packed = 0;
  for (int j = 0; j < kRadixItems; ++j) {
    const int i = j * kRadixThreads + t;
    if (i < n)
      packed += uint64_t(1) << (4 * ((load_key<T, kFromInput>(a, p, s * a.length + start + i) >> p.shift) &
                                     (kRadixBins - 1)));
  }
  for (int d = 0; d < kRadixBins; ++d) {
    const uint32_t c = uint32_t(packed >> (4 * d)) & 15u;
    if (c) atomicAdd(&counts[d], c);
  }
  __syncthreads();
  if (t < kRadixBins) {
    p.hist[(s * kRadixBins + t) * p.tiles + tile] = counts[t];
    if (counts[t]) atomicAdd(&p.totals[s * kRadixBins + t], counts[t]);
  }
}

// Exclusive prefix sums of rows of `len` counts, in place, a block per row; with `totals`, row r (slice r / groups,
// group r % groups) starts from the sum of its slice's totals of the groups before it.
__global__ void __launch_bounds__(1024)
    exclusive_scan_rows_kernel(uint32_t* data, int64_t len, const uint32_t* totals, int groups) {
  __shared__ uint32_t warp_sums[32];
  uint32_t* row = data + int64_t(blockIdx.x) * len;
  uint32_t carry = 0;
  if (totals) {
    const int64_t s = blockIdx.x / groups;
    for (int g = 0; g < int(blockIdx.x % groups); ++g) carry += totals[s * groups + g];
  }
  for (int64_t base = 0; base < len; base += blockDim.x) {
    const int64_t i = base + threadIdx.x;
    const uint32_t v = i < len ? row[i] : 0u;
    uint32_t total;
    const uint32_t ex = block_exclusive_sum(v, warp_sums, &total);
    if (i < len) row[i] = carry + ex;
    carry += total;
  }
}

// Pass, step 3: a tile's pairs ranked stably by digit in shared memory, then written out digit run by digit run.
// Shared memory: keys and payloads (padded_slot(kRadixTile) each), then the (digit, thread) counters.
template <typename T>
constexpr size_t radix_scatter_smem() {
  return size_t(padded_slot(int(kRadixTile))) * (sizeof(sort_key_t<T>) + 4) +
         size_t(padded_slot(kRadixBins * kRadixThreads)) * 4;
}

template <typename T, bool kFromInput, bool kToOutput>
__global__ void __launch_bounds__(kRadixThreads) radix_scatter_kernel(SortArgs a, RadixPass p) {
  using K = sort_key_t<T>;
  extern __shared__ unsigned char smem[];
  K* keys = reinterpret_cast<K*>(smem);
  uint32_t* pay = reinterpret_cast<uint32_t*>(keys + padded_slot(int(kRadixTile)));
  uint32_t* cnt = pay + padded_slot(int(kRadixTile));
  __shared__ uint32_t warp_sums[kRadixThreads / 32];
  __shared__ uint32_t tile_start[kRadixBins];
  __shared__ uint32_t slice_at[kRadixBins];
  const int64_t s = blockIdx.x / p.tiles, tile = blockIdx.x % p.tiles, start = tile * kRadixTile;
  const int n = int(a.length - start < kRadixTile ? a.length - start : kRadixTile);
  const int t = int(threadIdx.x);
  const int64_t row = s * a.length;
  auto digit = [&](K k) { return int((k >> p.shift) & (kRadixBins - 1)); };
  for (int j = 0; j < kRadixItems; ++j) {  // coalesced: element j * threads + t
    const int i = j * kRadixThreads + t;
    if (i < n) {
      keys[padded_slot(i)] = load_key<T, kFromInput>(a, p, row + start + i);
      pay[padded_slot(i)] = kFromInput ? uint32_t(start + i) : p.pay_in[row + start + i];
    }
  }
  __syncthreads();
  K k[kRadixItems];
  uint32_t v[kRadixItems];
  for (int d = 0; d < kRadixBins; ++d) cnt[padded_slot(d * kRadixThreads + t)] = 0;
  for (int j = 0; j < kRadixItems; ++j) {  // thread t takes elements t * items .. + items - 1 (in order)
    const int i = t * kRadixItems + j;
    if (i < n) {
      k[j] = keys[padded_slot(i)];
      v[j] = pay[padded_slot(i)];
      ++cnt[padded_slot(digit(k[j]) * kRadixThreads + t)];
    }
  }
  __syncthreads();
  // exclusive scan of the counters in (digit, thread) order: thread t scans entries t * bins .. + bins - 1
  uint32_t run = 0;
  for (int e = 0; e < kRadixBins; ++e) {
    uint32_t& c = cnt[padded_slot(t * kRadixBins + e)];
    const uint32_t x = c;
    c = run;
    run += x;
  }
  uint32_t total;
  const uint32_t before = block_exclusive_sum(run, warp_sums, &total);
  for (int e = 0; e < kRadixBins; ++e) cnt[padded_slot(t * kRadixBins + e)] += before;
  __syncthreads();
  if (t < kRadixBins) {
    tile_start[t] = cnt[padded_slot(t * kRadixThreads)];
    slice_at[t] = p.hist[(s * kRadixBins + t) * p.tiles + tile];
  }
  __syncthreads();
  for (int j = 0; j < kRadixItems; ++j) {  // the tile in digit order, ties in element order (stable)
    if (t * kRadixItems + j < n) {
      const uint32_t at = cnt[padded_slot(digit(k[j]) * kRadixThreads + t)]++;
      keys[padded_slot(int(at))] = k[j];
      pay[padded_slot(int(at))] = v[j];
    }
  }
  __syncthreads();
  for (int j = 0; j < kRadixItems; ++j) {  // coalesced within each digit's run
    const int i = j * kRadixThreads + t;
    if (i < n) {
      const K key = keys[padded_slot(i)];
      const int d = digit(key);
      const int64_t g = row + slice_at[d] + (i - tile_start[d]);
      const uint32_t u = pay[padded_slot(i)];
      if constexpr (kToOutput) {
        bool exact;
        const T val = value_of_key<T>(key, a.descending, &exact);
        static_cast<T*>(a.values)[g] = exact ? val : static_cast<const T*>(a.in)[row + u];
        a.indices[g] = a.in_indices ? a.in_indices[row + u] : int64_t(u);
      } else {
        static_cast<K*>(p.keys_out)[g] = key;
        p.pay_out[g] = u;
      }
    }
  }
}

// Select, pass step 1: the histogram of the next digit of the keys that share the prefix found so far, per tile in
// shared memory, added into the slice's (hist[slice][digit], zeroed before).
template <typename T>
__global__ void __launch_bounds__(kSelectBins)
    select_hist_kernel(SortArgs a, const SelectState* state, uint32_t* hist, int64_t tiles, int shift) {
  __shared__ uint32_t h[kSelectBins];
  const int64_t s = blockIdx.x / tiles, tile = blockIdx.x % tiles, start = tile * kSelectTile;
  const int t = int(threadIdx.x);
  __shared__ SelectState st;  // read once a block
  h[t] = 0;
  if (t == 0) st = state[s];
  __syncthreads();
  const T* row = static_cast<const T*>(a.in) + s * a.length;
  for (int j = 0; j < kSelectItems; ++j) {
    const int64_t i = start + j * kSelectBins + t;
    if (i < a.length) {
      const uint64_t key = key_of(mt_load(row + i), a.descending);
      if (((key ^ st.prefix) & st.mask) == 0) atomicAdd(&h[(key >> shift) & (kSelectBins - 1)], 1u);
    }
  }
  __syncthreads();
  if (h[t]) atomicAdd(&hist[s * kSelectBins + t], h[t]);
}

// Select, pass step 2: a block per slice (thread = digit) takes the digit where the count of keys below reaches k.
__global__ void __launch_bounds__(kSelectBins)
    select_choose_kernel(SelectState* state, const uint32_t* hist, int64_t k, int shift) {
  __shared__ uint32_t warp_sums[kSelectBins / 32];
  const int64_t s = blockIdx.x;
  const int b = int(threadIdx.x);
  const SelectState st = state[s];
  const uint32_t c = hist[s * kSelectBins + b];
  uint32_t total;
  const uint32_t ex = block_exclusive_sum(c, warp_sums, &total);
  const int64_t need = k - st.below;  // >= 1
  if (c > 0 && int64_t(ex) < need && need <= int64_t(ex) + c) {
    state[s] = SelectState{st.prefix | (uint64_t(b) << shift), st.mask | (uint64_t(kSelectBins - 1) << shift),
                           st.below + int64_t(ex)};
  }
}

// Select, step 3: per tile, the keys below the k-th key and those equal to it: counts[s][0][tile], [s][1][tile].
template <typename T>
__global__ void __launch_bounds__(kSelectBins)
    select_count_kernel(SortArgs a, const SelectState* state, uint32_t* counts, int64_t tiles) {
  __shared__ uint32_t below, equal;
  const int64_t s = blockIdx.x / tiles, tile = blockIdx.x % tiles, start = tile * kSelectTile;
  const int t = int(threadIdx.x);
  __shared__ uint64_t kth;
  if (t == 0) {
    below = equal = 0;
    kth = state[s].prefix;
  }
  __syncthreads();
  const T* row = static_cast<const T*>(a.in) + s * a.length;
  uint32_t lt = 0, eq = 0;
  for (int j = 0; j < kSelectItems; ++j) {
    const int64_t i = start + j * kSelectBins + t;
    if (i < a.length) {
      const uint64_t key = key_of(mt_load(row + i), a.descending);
      lt += key < kth;
      eq += key == kth;
    }
  }
  if (lt) atomicAdd(&below, lt);
  if (eq) atomicAdd(&equal, eq);
  __syncthreads();
  if (t == 0) {
    counts[(s * 2) * tiles + tile] = below;
    counts[(s * 2 + 1) * tiles + tile] = equal;
  }
}

// Select, step 4 (after the counts' scan per slice): the keys below the k-th, then the first ties, compacted in
// element order into [slices, k] pairs (value, element index).
template <typename T>
__global__ void __launch_bounds__(kSelectBins)
    select_write_kernel(SortArgs a, const SelectState* state, const uint32_t* offsets, int64_t tiles, T* sel_values,
                        int64_t* sel_indices) {
  __shared__ uint32_t warp_sums[kSelectBins / 32];
  const int64_t s = blockIdx.x / tiles, tile = blockIdx.x % tiles, start = tile * kSelectTile;
  const int t = int(threadIdx.x);
  __shared__ uint64_t kth;
  __shared__ uint32_t at[2];
  if (t == 0) {
    kth = state[s].prefix;
    at[0] = offsets[(s * 2) * tiles + tile];
    at[1] = offsets[(s * 2 + 1) * tiles + tile];
  }
  __syncthreads();
  uint32_t lt_at = at[0], eq_at = at[1];
  const T* row = static_cast<const T*>(a.in) + s * a.length;
  T* vout = sel_values + s * a.k;
  int64_t* iout = sel_indices + s * a.k;
  for (int j = 0; j < kSelectItems; ++j) {
    const int64_t i = start + j * kSelectBins + t;
    T v{};
    uint64_t key = 0;
    if (i < a.length) {
      v = mt_load(row + i);
      key = key_of(v, a.descending);
    }
    const bool lt = i < a.length && key < kth, eq = i < a.length && key == kth;
    uint32_t total;  // both ranks at once: below in the low 16 bits, ties in the high (a tile has < 2^16)
    const uint32_t ex = block_exclusive_sum(uint32_t(lt) | (uint32_t(eq) << 16), warp_sums, &total);
    if (lt) {
      const uint32_t at = lt_at + (ex & 0xffffu);
      vout[at] = v;
      iout[at] = i;
    } else if (eq) {
      const uint32_t at = eq_at + (ex >> 16);  // offsets of ties start after every key below
      if (at < a.k) {
        vout[at] = v;
        iout[at] = i;
      }
    }
    lt_at += total & 0xffffu;
    eq_at += total >> 16;
  }
}

template <typename T, bool kFromInput, bool kToOutput>
void launch_pass(const SortArgs& a, const RadixPass& p, unsigned grid, cudaStream_t st) {
  radix_count_kernel<T, kFromInput><<<grid, kRadixThreads, 0, st>>>(a, p);
  exclusive_scan_rows_kernel<<<static_cast<unsigned>(a.slices * kRadixBins), 1024, 0, st>>>(p.hist, p.tiles, p.totals,
                                                                                            kRadixBins);
  radix_scatter_kernel<T, kFromInput, kToOutput><<<grid, kRadixThreads, radix_scatter_smem<T>(), st>>>(a, p);
}

template <typename T>
rt::Status radix_sort_typed(const SortArgs& a, const SortPlan& plan, cudaStream_t st) {
  char* ws = static_cast<char*>(a.scratch);
  const int64_t blocks = a.slices * plan.tiles;
  if (blocks > 0x7fffffff || a.slices * kRadixBins > 0x7fffffff || a.length > 0xffffffffll) {
    return rt::report(rt::Status::InvalidValue, "sort: more than 2^31 - 1 tiles or 2^32 elements a slice");
  }
  auto* totals = reinterpret_cast<uint32_t*>(ws + plan.totals);
  if (cudaMemsetAsync(totals, 0, size_t(plan.passes * a.slices * kRadixBins) * 4, st) != cudaSuccess) {
    return check_launch("sort: clearing the digit totals");
  }
  const unsigned grid = static_cast<unsigned>(blocks);
  RadixPass p;
  p.tiles = plan.tiles;
  p.hist = reinterpret_cast<uint32_t*>(ws + plan.hist);
  for (int pass = 0; pass < plan.passes; ++pass) {
    p.shift = pass * kRadixBits;
    p.totals = totals + pass * a.slices * kRadixBins;
    const int src = (pass + 1) % 2, dst = pass % 2;  // pass 0 writes buffer 0, pass 1 reads it, ...
    p.keys_in = ws + plan.keys[src];
    p.pay_in = reinterpret_cast<const uint32_t*>(ws + plan.pay[src]);
    p.keys_out = ws + plan.keys[dst];
    p.pay_out = reinterpret_cast<uint32_t*>(ws + plan.pay[dst]);
    const bool first = pass == 0, last = pass == plan.passes - 1;
    if (first && last) launch_pass<T, true, true>(a, p, grid, st);
    else if (first) launch_pass<T, true, false>(a, p, grid, st);
    else if (last) launch_pass<T, false, true>(a, p, grid, st);
    else launch_pass<T, false, false>(a, p, grid, st);
  }
  return check_launch("sort (radix)");
}

template <typename T>
rt::Status radix_select_typed(const SortArgs& a, const SortPlan& plan, cudaStream_t st) {
  char* ws = static_cast<char*>(a.scratch);
  const int64_t blocks = a.slices * plan.sel_tiles;
  if (blocks > 0x7fffffff) return rt::report(rt::Status::InvalidValue, "topk: more than 2^31 - 1 tiles");
  const unsigned grid = static_cast<unsigned>(blocks), slices = static_cast<unsigned>(a.slices);
  auto* state = reinterpret_cast<SelectState*>(ws + plan.sel_state);
  auto* hist = reinterpret_cast<uint32_t*>(ws + plan.sel_hist);
  auto* counts = reinterpret_cast<uint32_t*>(ws + plan.sel_counts);
  const int passes = (sort_key_bits<T>() + kSelectBits - 1) / kSelectBits;
  // the state and the histograms are consecutive in the workspace (sort_plan): one clear
  if (cudaMemsetAsync(hist, 0, plan.sel_state - plan.sel_hist + a.slices * sizeof(SelectState), st) != cudaSuccess) {
    return check_launch("topk: clearing the select state");
  }
  for (int pass = passes - 1; pass >= 0; --pass) {
    uint32_t* h = hist + pass * a.slices * kSelectBins;
    select_hist_kernel<T><<<grid, kSelectBins, 0, st>>>(a, state, h, plan.sel_tiles, pass * kSelectBits);
    select_choose_kernel<<<slices, kSelectBins, 0, st>>>(state, h, a.k, pass * kSelectBits);
  }
  select_count_kernel<T><<<grid, kSelectBins, 0, st>>>(a, state, counts, plan.sel_tiles);
  exclusive_scan_rows_kernel<<<slices, 1024, 0, st>>>(counts, 2 * plan.sel_tiles, nullptr, 1);
  select_write_kernel<T><<<grid, kSelectBins, 0, st>>>(a, state, counts, plan.sel_tiles,
                                                       reinterpret_cast<T*>(ws + plan.sel_values),
                                                       reinterpret_cast<int64_t*>(ws + plan.sel_indices));
  return check_launch("topk (radix select)");
}

} // namespace

// dtype -> the typed launcher; complex types are not sortable (the glue refuses them first).
template <typename Launch>
rt::Status visit_sortable(DType dtype, const char* what, Launch launch) {
  rt::Status st = rt::Status::Success;
  bool launched = false;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!is_complex_t<T>::value) {
      st = launch(T{});
      launched = true;
    }
  });
  return launched ? st : rt::report(rt::Status::InvalidValue, what);
}

rt::Status radix_sort(const SortArgs& a, const SortPlan& plan, rt::Stream stream) {
  return visit_sortable(a.dtype, "sort: unsupported dtype",
                        [&](auto tag) { return radix_sort_typed<decltype(tag)>(a, plan, native(stream)); });
}

rt::Status radix_select(const SortArgs& a, const SortPlan& plan, rt::Stream stream) {
  return visit_sortable(a.dtype, "topk: unsupported dtype",
                        [&](auto tag) { return radix_select_typed<decltype(tag)>(a, plan, native(stream)); });
}

} // namespace mytorch::cuda
