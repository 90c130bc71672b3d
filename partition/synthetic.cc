#include "partition/synthetic.h"

#include <charconv>
#include <string>
#include <utility>
#include <vector>

namespace gp::partition {
namespace {

// Affine in the sample count; backward input and weight parts equal to the forward.
class AffineTimer : public NodeTimer {
 public:
  explicit AffineTimer(std::vector<double> per_sample) : per_sample_(std::move(per_sample)) {}
  NodeTime time(int node, int64_t samples, Device const&) const override {
    double const f = 20e-6 + per_sample_[static_cast<std::size_t>(node)] * static_cast<double>(samples);
    return {f, f, f};
  }

 private:
  std::vector<double> per_sample_;
};

constexpr int kBranchyBranches = 4, kBranchyLength = 6;

std::string spec_name(SyntheticSpec const& spec) {
  if (spec.shape == SyntheticShape::kChain) return "chain" + std::to_string(spec.chain_nodes);
  std::string name =
      "branchy" + std::to_string(spec.branches) + "x" + std::to_string(spec.length) + "x" + std::to_string(spec.blocks);
  if (spec.tail > 0) name += "+" + std::to_string(spec.tail);
  return name;
}

Status check_spec(SyntheticSpec const& spec) {
  auto const at_least = [](char const* field, int64_t value, int64_t min) -> Status {
    if (value >= min) return Status::ok();
    return invalid_argument("synthetic graph: " + std::string(field) + " is " + std::to_string(value) +
                            ", it must be at least " + std::to_string(min));
  };
  if (spec.shape == SyntheticShape::kChain) {
    RETURN_IF_ERROR(at_least("chain_nodes", spec.chain_nodes, 1));
  } else {
    RETURN_IF_ERROR(at_least("blocks", spec.blocks, 1));
    RETURN_IF_ERROR(at_least("branches", spec.branches, 1));
    RETURN_IF_ERROR(at_least("length", spec.length, 1));
    RETURN_IF_ERROR(at_least("tail", spec.tail, 0));
  }
  RETURN_IF_ERROR(at_least("weight_bytes", spec.weight_bytes, 0));
  RETURN_IF_ERROR(at_least("activation_bytes_per_sample", spec.activation_bytes_per_sample, 0));
  RETURN_IF_ERROR(at_least("edge_bytes_per_sample", spec.edge_bytes_per_sample, 0));
  int64_t const per_block = int64_t{spec.branches} * spec.length + 2;
  int64_t const nodes = spec.shape == SyntheticShape::kChain ? spec.chain_nodes : spec.blocks * per_block + spec.tail;
  if (nodes > Problem::kMaxNodes) {
    return invalid_argument("synthetic graph of " + std::to_string(nodes) + " nodes: the planners take at most " +
                            std::to_string(Problem::kMaxNodes) + "; make it smaller");
  }
  return Status::ok();
}

int parse_count(std::string_view digits) {
  int value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  return ec == std::errc() && end == digits.data() + digits.size() ? value : -1;
}

}  // namespace

int SyntheticSpec::node_count() const {
  if (shape == SyntheticShape::kChain) return chain_nodes;
  return blocks * (branches * length + 2) + tail;
}

Result<Problem> synthetic_problem(SyntheticSpec const& spec) {
  RETURN_IF_ERROR(check_spec(spec));
  int const n = spec.node_count();
  std::vector<std::pair<int, int>> edges;
  if (spec.shape == SyntheticShape::kChain) {
    for (int v = 1; v < n; ++v) edges.emplace_back(v - 1, v);
  } else {
    int prev_join = -1;
    for (int k = 0; k < spec.blocks; ++k) {
      int const fork = k * (spec.branches * spec.length + 2);
      int const join = fork + spec.branches * spec.length + 1;
      if (prev_join >= 0) edges.emplace_back(prev_join, fork);
      for (int b = 0; b < spec.branches; ++b) {
        int prev = fork;
        for (int i = 0; i < spec.length; ++i) {
          int const v = fork + 1 + b * spec.length + i;
          edges.emplace_back(prev, v);
          prev = v;
        }
        edges.emplace_back(prev, join);
      }
      prev_join = join;
    }
    for (int v = prev_join + 1; v < n; ++v) edges.emplace_back(v - 1, v);
  }
  Problem p;
  p.model = spec_name(spec);
  uint64_t state = spec.seed;
  std::vector<double> per_sample(static_cast<std::size_t>(n));
  p.nodes.reserve(static_cast<std::size_t>(n));
  for (int v = 0; v < n; ++v) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    per_sample[static_cast<std::size_t>(v)] =
        (0.5 + static_cast<double>(state >> 11) / static_cast<double>(1ULL << 53)) * 1e-3;
    p.nodes.push_back({"n" + std::to_string(v), "synthetic", spec.weight_bytes, spec.activation_bytes_per_sample});
  }
  p.edges.reserve(edges.size());
  for (auto [a, b] : edges) p.edges.push_back({a, b, spec.edge_bytes_per_sample, {"t" + std::to_string(a)}});
  p.timer = std::make_shared<AffineTimer>(std::move(per_sample));
  p.cluster = spec.cluster;
  p.batch = spec.batch;
  RETURN_IF_ERROR(p.finalize());
  return p;
}

Result<SyntheticSpec> synthetic_spec(std::string_view name) {
  SyntheticSpec spec;
  if (name == "branch16") {
    spec.shape = SyntheticShape::kBranchy;
    spec.blocks = 1;
    spec.branches = 16;
    spec.length = 96;
    spec.tail = 8;
    return spec;
  }
  auto const fail = [&](std::string const& why) {
    return invalid_argument("unknown synthetic graph '" + std::string(name) + "'" + why +
                            ": use chainN (N >= 1), branchyN (N >= 26) or branch16");
  };
  if (name.starts_with("chain")) {
    int const n = parse_count(name.substr(5));
    if (n < 1) return fail("");
    spec.chain_nodes = n;
  } else if (name.starts_with("branchy")) {
    int const n = parse_count(name.substr(7));
    int const per_block = kBranchyBranches * kBranchyLength + 2;
    if (n < 0) return fail("");
    if (n < per_block) return fail(" (fewer nodes than one block of " + std::to_string(per_block) + ")");
    spec.shape = SyntheticShape::kBranchy;
    spec.branches = kBranchyBranches;
    spec.length = kBranchyLength;
    spec.blocks = n / per_block;
    spec.tail = n % per_block;
  } else {
    return fail("");
  }
  RETURN_IF_ERROR(check_spec(spec));
  return spec;
}

Result<Problem> synthetic_problem(std::string_view name) {
  ASSIGN_OR_RETURN(SyntheticSpec spec, synthetic_spec(name));
  ASSIGN_OR_RETURN(Problem p, synthetic_problem(spec));
  p.model = std::string(name);
  return p;
}

}  // namespace gp::partition
