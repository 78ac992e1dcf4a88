// Graph capture on the sim runtime: the recording behind rt::stream_begin_capture / graph_launch.
//
// Note [Graph capture]
// A CUDA graph is the work a stream capture saw, instantiated once and launched again and again without the
// host code that made it: no dispatcher, no Python, no allocator, each launch's arguments fixed at capture. The
// device API has it in three homes:
//  - cuda: cudaStreamBeginCapture on the capturing stream, cudaStreamEndCapture + cudaGraphInstantiate,
//    cudaGraphLaunch (cuda.cpp); the emulated runtime has no graph API yet, so emu refuses to capture.
//  - sim: work runs at submission, so capture is a recording. While a thread captures (one capture per thread;
//    capture on sim is per thread whatever the stream, since every stream runs at submission), every kernel
//    launcher (MT_LAUNCHER, launch.h) records its sim twin with a copy of its arguments instead of running it,
//    device-to-device copies, memsets and copies from pinned host memory are recorded, and a replay runs the
//    records in order. Arguments that point to host memory the caller frees when the launch returns (the
//    multi-tensor lists) are copied into the record (capture_own); random launches read the graph's Philox
//    base at replay (capture_replay_fix, Note [Random numbers in a captured graph]).
//  - what a stream capture cannot hold fails while capturing, naming the call (runtime.h): synchronisations and
//    queries, copies to the host, pageable uploads, frees of device memory, pinned host allocations. The glue
//    refuses more (the CPU fallback, host routes without a recording, csrc/core/Graph.cpp).
// Memory: a record holds raw device addresses; the glue's graph keeps them valid (the caching allocator's
// private pool of the graph, Note [Graph memory pools]).
#include <cstdio>
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

thread_local SimGraph* t_capture = nullptr;
thread_local const SimGraph* t_replaying = nullptr;

}  // namespace

bool recording() { return t_capture != nullptr; }

Status record(const char* name, std::function<Status()> work) {
  if (t_capture == nullptr) return work();
  t_capture->nodes.push_back(Node{name, std::move(work)});
  return Status::Success;
}

bool sim_capturing() { return t_capture != nullptr; }

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

Status sim_capture_refuse(const char* what) {
  if (t_capture == nullptr) return Status::Success;
  if (t_capture->invalid.empty()) t_capture->invalid = what;
  return fail(Status::InvalidValue, std::string(what) +
                                        " is not permitted while this thread captures a graph "
                                        "(operation not permitted when stream is capturing)");
}

Status sim_begin_capture(int device, CaptureMode) {
  if (t_capture != nullptr) return fail(Status::InvalidValue, "this thread is already capturing a graph");
  t_capture = new SimGraph{device, {}};
  return Status::Success;
}

Status sim_end_capture(int device, Graph* g) {
  *g = nullptr;
  if (t_capture == nullptr) return fail(Status::InvalidValue, "this thread is not capturing a graph");
  if (t_capture->device != device)
    return fail(Status::InvalidValue, "the capture began on device " + std::to_string(t_capture->device) +
                                          " and ends on device " + std::to_string(device));
  std::unique_ptr<SimGraph> graph(t_capture);
  t_capture = nullptr;
  if (!graph->invalid.empty())
    return fail(Status::InvalidValue, "the capture was invalidated: " + graph->invalid +
                                          " is not permitted while capturing (operation failed due to a previous "
                                          "error during capture)");
  *g = graph.release();
  return Status::Success;
}

Status sim_graph_launch(Graph g) {
  if (g == nullptr) return fail(Status::InvalidValue, "graph_launch: no graph");
  if (t_capture != nullptr) return fail(Status::InvalidValue, "graph_launch inside a capture is not supported");
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
