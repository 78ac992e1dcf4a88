// See AllocatorConfig.h.
#include "csrc/core/AllocatorConfig.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <sstream>

namespace mytorch {

AllocatorConfig parseAllocatorConfig(const std::string& text) {
  AllocatorConfig cfg;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    const auto colon = item.find(':');
    TORCH_CHECK(colon != std::string::npos, "MYTORCH_ALLOC_CONF expects key:value pairs, but got '", item, "'");
    const std::string key = item.substr(0, colon), value = item.substr(colon + 1);
    TORCH_CHECK(key == "max_split_size_mb" || key == "garbage_collection_threshold",
                "MYTORCH_ALLOC_CONF: unknown key '", key, "' (known: max_split_size_mb, garbage_collection_threshold)");
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    TORCH_CHECK(end != value.c_str() && *end == '\0', "MYTORCH_ALLOC_CONF: ", key, " expects a number, but got '",
                value, "'");
    if (key == "max_split_size_mb") {
      TORCH_CHECK(v > 1, "MYTORCH_ALLOC_CONF: max_split_size_mb must be more than 1, but got ", value);
      cfg.max_split_size = static_cast<size_t>(v * 1024 * 1024);
    } else {
      TORCH_CHECK(v > 0 && v < 1, "MYTORCH_ALLOC_CONF: garbage_collection_threshold must be in (0, 1), but got ",
                  value);
      cfg.gc_threshold = v;
    }
  }
  return cfg;
}

const AllocatorConfig& allocatorConfig() {
  static const AllocatorConfig cfg = [] {
    const char* env = std::getenv("MYTORCH_ALLOC_CONF");
    return parseAllocatorConfig(env ? env : "");
  }();
  return cfg;
}

} // namespace mytorch
