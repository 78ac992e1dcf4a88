// Settings of the caching device allocator, from MYTORCH_ALLOC_CONF (torch.cuda's PYTORCH_CUDA_ALLOC_CONF
// syntax: comma-separated key:value pairs).
//   max_split_size_mb:N            blocks of N MiB or more are never split, and are not handed to requests
//                                  smaller than N MiB (limits fragmentation from large cached blocks)
//   garbage_collection_threshold:F before growing past F (0 < F < 1) of the usable capacity, release cached
//                                  blocks that are wholly free, least recently used first
#pragma once

#include <cstddef>
#include <limits>
#include <string>

namespace mytorch {

struct AllocatorConfig {
  size_t max_split_size = std::numeric_limits<size_t>::max();
  double gc_threshold = 0.0; // 0: off
};

AllocatorConfig parseAllocatorConfig(const std::string& text); // TORCH_CHECKs bad keys and values
const AllocatorConfig& allocatorConfig();                       // parsed once from the environment

} // namespace mytorch
