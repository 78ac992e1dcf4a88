// Graph capture on the sim runtime: the recording behind rt::stream_begin_capture / graph_launch.
//
// Note [Graph capture]
// A CUDA graph is the work a stream capture saw, instantiated once and launched again and again without the
// host code that made it: no dispatcher, no Python, no allocator, each launch's arguments fixed at capture. The
// device API has it in three homes:
//  - cuda: cudaStreamBeginCapture on the capturing stream, cudaStreamEndCapture + cudaGraphInstantiate,
//    cudaGraphLaunch (cuda.cpp); the emulated runtime has no graph API yet, so emu refuses to capture.
//  - sim: work runs at submission, so capture is a recording. While a stream captures, every kernel launcher
//    (MT_LAUNCHER, launch.h) given that stream records its sim twin with a copy of its arguments instead of
//    running it, whichever thread launches (autograd's device thread runs a backward on the forward's stream);
//    device-to-device copies, memsets and copies from pinned host memory on it are recorded, and a replay runs
//    the records in order. Arguments that point to host memory the caller frees when the launch returns (the
//    multi-tensor lists) are copied into the record (capture_own); random launches read the graph's Philox
//    base at replay (capture_replay_fix, Note [Random numbers in a captured graph]).
//  - what a stream capture cannot hold fails while capturing, naming the call, and invalidates the capture (its
//    end fails), as CUDA's global capture mode: copies to the host and pageable uploads on the capturing stream;
//    from any thread while a capture is under way, synchronisations and queries, frees of device memory and
//    pinned host allocations. The glue
//    refuses more (the CPU fallback, host routes without a recording, csrc/core/Graph.cpp).
// Memory: a record holds raw device addresses; the glue's graph keeps them valid (the caching allocator's
// private pool of the graph, Note [Graph memory pools]).
#include <atomic>
#include <cstdio>
#include <mutex>
#include <memory>
#include <string>
#include <vector>

#include "backend.h"

namespace mytorch::rt::detail {
namespace {

struct Node {
  std::string name;
  std::function<Status()> work;
};

struct SimGraph {
  int device = 0;
  std::vector<Node> nodes;
  std::vector<uint64_t> philox;  // per generator slot: seed, base offset of the next launch
  std::string invalid;           // what invalidated the capture (its end then fails)
};

std::mutex g_mu;
std::vector<std::pair<Stream, SimGraph*>> g_captures;  // capturing streams
std::atomic<int> g_active{0};
thread_local const SimGraph* t_replaying = nullptr;

SimGraph* capture_of(Stream s) {
  if (g_active.load(std::memory_order_acquire) == 0) return nullptr;
  std::lock_guard<std::mutex> lock(g_mu);
  for (auto& [stream, graph] : g_captures)
    if (stream == s) return graph;
  return nullptr;
}

Status refused(const char* what) {
  return fail(Status::InvalidValue, std::string(what) +
                                        " is not permitted while a graph is being captured "
                                        "(operation not permitted when stream is capturing)");
}

}  // namespace

bool any_capture() { return g_active.load(std::memory_order_acquire) != 0; }
bool recording(Stream s) { return capture_of(s) != nullptr; }

Status record(Stream s, const char* name, std::function<Status()> work) {
  SimGraph* g = capture_of(s);
  if (g == nullptr) return work();
  std::lock_guard<std::mutex> lock(g_mu);
  g->nodes.push_back(Node{name, std::move(work)});
  return Status::Success;
}

Status sim_capture_refuse(Stream s, const char* what) {
  SimGraph* g = capture_of(s);
  if (g == nullptr) return Status::Success;
  std::lock_guard<std::mutex> lock(g_mu);
  if (g->invalid.empty()) g->invalid = what;
  return refused(what);
}

// CUDA's global capture mode: a call that could synchronise with a capture fails, and invalidates every capture.
Status sim_capture_refuse_any(const char* what) {
  if (g_active.load(std::memory_order_acquire) == 0) return Status::Success;
  std::lock_guard<std::mutex> lock(g_mu);
  for (auto& [stream, graph] : g_captures)
    if (graph->invalid.empty()) graph->invalid = what;
  return refused(what);
}

bool replay_philox(int slot, uint64_t* seed, uint64_t* base) {
  if (t_replaying == nullptr || slot < 0) return false;
  if (2 * static_cast<size_t>(slot) + 1 >= t_replaying->philox.size()) return false;
  *seed = t_replaying->philox[2 * static_cast<size_t>(slot)];
  *base = t_replaying->philox[2 * static_cast<size_t>(slot) + 1];
  return true;
}

Status sim_graph_set_philox(Graph g, int slot, uint64_t seed, uint64_t base) {
  if (g == nullptr || slot < 0 || slot >= (1 << 14))
    return fail(Status::InvalidValue, "graph_set_philox: bad graph or slot");
  auto& p = static_cast<SimGraph*>(g)->philox;
  if (p.size() < 2 * static_cast<size_t>(slot) + 2) p.resize(2 * static_cast<size_t>(slot) + 2, 0);
  p[2 * static_cast<size_t>(slot)] = seed;
  p[2 * static_cast<size_t>(slot) + 1] = base;
  return Status::Success;
}

Status sim_begin_capture(int device, Stream s, CaptureMode) {
  if (s == nullptr) return fail(Status::InvalidValue, "a capture needs a stream other than the default stream");
  if (capture_of(s) != nullptr) return fail(Status::InvalidValue, "this stream is already capturing a graph");
  std::lock_guard<std::mutex> lock(g_mu);
  g_captures.emplace_back(s, new SimGraph{device, {}, {}, {}});
  g_active.fetch_add(1, std::memory_order_acq_rel);
  return Status::Success;
}

Status sim_end_capture(int device, Stream s, Graph* g) {
  *g = nullptr;
  std::unique_ptr<SimGraph> graph;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    for (auto it = g_captures.begin(); it != g_captures.end(); ++it) {
      if (it->first != s) continue;
      graph.reset(it->second);
      g_captures.erase(it);
      g_active.fetch_sub(1, std::memory_order_acq_rel);
      break;
    }
  }
  if (!graph) return fail(Status::InvalidValue, "this stream is not capturing a graph");
  if (graph->device != device)
    return fail(Status::InvalidValue, "the capture began on device " + std::to_string(graph->device) +
                                          " and ends on device " + std::to_string(device));
  if (!graph->invalid.empty())
    return fail(Status::InvalidValue, "the capture was invalidated: " + graph->invalid +
                                          " is not permitted while capturing (operation failed due to a previous "
                                          "error during capture)");
  *g = graph.release();
  return Status::Success;
}

Status sim_graph_launch(Graph g) {
  if (g == nullptr) return fail(Status::InvalidValue, "graph_launch: no graph");
  struct Replaying {
    explicit Replaying(const SimGraph* g) { t_replaying = g; }
    ~Replaying() { t_replaying = nullptr; }
  } on(static_cast<const SimGraph*>(g));
  for (const Node& n : static_cast<SimGraph*>(g)->nodes) {
    if (Status s = n.work(); s != Status::Success) return s;
  }
  return Status::Success;
}

Status sim_graph_destroy(Graph g) {
  delete static_cast<SimGraph*>(g);
  return Status::Success;
}

Status sim_graph_node_count(Graph g, size_t* count) {
  if (g == nullptr) return fail(Status::InvalidValue, "graph_node_count: no graph");
  *count = static_cast<SimGraph*>(g)->nodes.size();
  return Status::Success;
}

Status sim_graph_debug_dump(Graph g, const char* path) {
  if (g == nullptr) return fail(Status::InvalidValue, "graph_debug_dump: no graph");
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path, "w"), &std::fclose);
  if (!f) return fail(Status::InvalidValue, std::string("graph_debug_dump: cannot write ") + path);
  const auto& nodes = static_cast<SimGraph*>(g)->nodes;
  std::fprintf(f.get(), "# mytorch sim graph: %zu nodes, replayed in this order\n", nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) std::fprintf(f.get(), "%zu %s\n", i, nodes[i].name.c_str());
  return Status::Success;
}

}  // namespace mytorch::rt::detail
