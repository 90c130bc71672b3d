#include "partition/downsets.h"

#include <string>
#include <unordered_set>

namespace gp::partition {

bool Downsets::subset(int a, int b) const {
  uint64_t const* x = set(a);
  uint64_t const* y = set(b);
  for (int w = 0; w < words; ++w) {
    if (x[w] & ~y[w]) return false;
  }
  return true;
}

std::vector<int> Downsets::difference(int b, int a) const {
  std::vector<int> nodes;
  for (int v = 0; v < num_nodes; ++v) {
    if (contains(b, v) && !contains(a, v)) nodes.push_back(v);
  }
  return nodes;
}

namespace {

Downsets empty_family(Problem const& p) {
  Downsets ds;
  ds.num_nodes = static_cast<int>(p.nodes.size());
  ds.words = (ds.num_nodes + 63) / 64;
  ds.bits.assign(ds.words, 0);
  ds.size.push_back(0);
  ds.parent.push_back(-1);
  ds.added.push_back(-1);
  return ds;
}

void push_extension(Downsets& ds, int parent, int node) {
  std::size_t const start = ds.bits.size();
  ds.bits.resize(start + ds.words);
  for (int w = 0; w < ds.words; ++w) ds.bits[start + w] = ds.bits[static_cast<std::size_t>(parent) * ds.words + w];
  ds.bits[start + (node >> 6)] |= uint64_t{1} << (node & 63);
  ds.size.push_back(ds.size[parent] + 1);
  ds.parent.push_back(parent);
  ds.added.push_back(node);
}

}  // namespace

Result<Downsets> enumerate_downsets(Problem const& p, int64_t max_downsets) {
  Downsets ds = empty_family(p);
  int const n = ds.num_nodes;
  int layer_begin = 0;
  for (int layer = 0; layer < n; ++layer) {
    int const layer_end = ds.count();
    // Sets of the next layer, deduplicated by their bits.
    std::unordered_set<std::string> seen;
    for (int i = layer_begin; i < layer_end; ++i) {
      for (int v = 0; v < n; ++v) {
        if (ds.contains(i, v)) continue;
        bool ready = true;
        for (int e : p.in_edges[v]) {
          if (!ds.contains(i, p.edges[e].src)) {
            ready = false;
            break;
          }
        }
        if (!ready) continue;
        push_extension(ds, i, v);
        int const j = ds.count() - 1;
        std::string key(reinterpret_cast<char const*>(ds.set(j)), ds.words * sizeof(uint64_t));
        if (!seen.insert(std::move(key)).second) {
          ds.bits.resize(ds.bits.size() - ds.words);
          ds.size.pop_back();
          ds.parent.pop_back();
          ds.added.pop_back();
          continue;
        }
        if (ds.count() > max_downsets)
          return infeasible("the DAG has more than " + std::to_string(max_downsets) +
                            " downsets (antichain cuts); a DP over downsets would not finish");
      }
    }
    layer_begin = layer_end;
  }
  return ds;
}

Downsets prefix_downsets(Problem const& p) {
  Downsets ds = empty_family(p);
  for (int v = 0; v < ds.num_nodes; ++v) push_extension(ds, v, v);
  return ds;
}

}  // namespace gp::partition
