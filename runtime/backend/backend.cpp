// create_backend() and kv_format() over the registered backends. See backend.h.
#include "backend/backend.h"

#include <algorithm>
#include <optional>

namespace swz::backend {
namespace {

const BackendEntry& entry_for(const std::string& target) {
  std::string known;
  for (const BackendEntry* e : registered_backends()) {
    if (e->runs(target)) return *e;
    known += std::string(known.empty() ? "" : "; ") + e->targets + " -> " + e->name;
  }
  throw Error("no backend for package target '" + target + "' (known: " + known + ")");
}

}  // namespace

std::unique_ptr<Backend> create_backend(const std::string& target, const std::string& select, int n_threads) {
  return entry_for(target).create(select, n_threads);
}

std::string kv_format(const std::string& target) { return entry_for(target).kv_format(target); }

std::vector<std::vector<int>> graph_dependencies(std::span<const LaunchDesc> launches) {
  std::vector<std::vector<int>> deps(launches.size());
  int main = -1;
  std::vector<std::pair<int, int>> open;  // branch -> its last launch since `main`
  for (size_t i = 0; i < launches.size(); ++i) {
    const int branch = launches[i].branch;
    auto it = std::find_if(open.begin(), open.end(), [&](const auto& b) { return b.first == branch; });
    if (branch == 0) {
      for (const auto& b : open) deps[i].push_back(b.second);
      if (open.empty() && main >= 0) deps[i].push_back(main);
      main = static_cast<int>(i);
      open.clear();
    } else {
      if (it != open.end()) {
        deps[i].push_back(it->second);
        it->second = static_cast<int>(i);
      } else {
        if (main >= 0) deps[i].push_back(main);
        open.emplace_back(branch, static_cast<int>(i));
      }
    }
  }
  return deps;
}

// The default launch graphs: the launches kept and replayed through launch().

int Backend::create_graph(std::span<const LaunchDesc> launches) {
  size_t g = 0;
  while (g < replay_graphs_.size() && replay_graphs_[g]) ++g;
  if (g == replay_graphs_.size()) replay_graphs_.emplace_back();
  replay_graphs_[g].emplace(launches.begin(), launches.end());
  return static_cast<int>(g);
}

namespace {
std::vector<LaunchDesc>& replay_graph(std::vector<std::optional<std::vector<LaunchDesc>>>& graphs, int graph) {
  if (graph < 0 || static_cast<size_t>(graph) >= graphs.size() || !graphs[graph])
    throw Error("launch graph " + std::to_string(graph) + " does not exist");
  return *graphs[graph];
}
}  // namespace

void Backend::update_graph(int graph, size_t index, const LaunchDesc& launch) {
  std::vector<LaunchDesc>& g = replay_graph(replay_graphs_, graph);
  if (index >= g.size())
    throw Error("launch graph " + std::to_string(graph) + " has no launch " + std::to_string(index));
  if (g[index].kernel != launch.kernel)
    throw Error("launch graph " + std::to_string(graph) + ": launch " + std::to_string(index) + " runs kernel " +
                std::to_string(g[index].kernel) + ", not " + std::to_string(launch.kernel));
  g[index] = launch;
}

void Backend::launch_graph(int graph) {
  for (const LaunchDesc& l : replay_graph(replay_graphs_, graph)) launch(l.kernel, l.grid, l.dynamic_smem, l.args);
}

void Backend::destroy_graph(int graph) {
  replay_graph(replay_graphs_, graph);  // throws for an unknown graph
  replay_graphs_[static_cast<size_t>(graph)].reset();
}

}  // namespace swz::backend
