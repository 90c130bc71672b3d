#include "partition/pipedream_profile.h"

#include <charconv>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <queue>
#include <set>
#include <sstream>

namespace gp::partition {

namespace {

class ProfileTimer : public NodeTimer {
 public:
  ProfileTimer(std::vector<double> fwd_ms, std::vector<double> bwd_ms, int64_t profile_batch)
      : fwd_ms_(std::move(fwd_ms)), bwd_ms_(std::move(bwd_ms)), profile_batch_(static_cast<double>(profile_batch)) {}
  NodeTime time(int node, int64_t samples, Device const& device) const override {
    double const scale = 1e-3 * static_cast<double>(samples) / profile_batch_ / device.speed;
    return {fwd_ms_[node] * scale, bwd_ms_[node] * scale, 0.0};
  }

 private:
  std::vector<double> fwd_ms_, bwd_ms_;
  double profile_batch_;
};

std::string trim(std::string const& s) {
  auto begin = s.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  auto end = s.find_last_not_of(" \t\r");
  return s.substr(begin, end - begin + 1);
}

struct RawNode {
  std::string name, description;
  double fwd_ms = 0, bwd_ms = 0, activation = 0, parameters = 0;
};

// "forward_compute_time=1.5, backward_compute_time=2, activation_size=[1; 2], parameter_size=0"
Status parse_attributes(std::string const& text, RawNode& node, std::string const& where) {
  std::map<std::string, double> values;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t eq = text.find('=', pos);
    if (eq == std::string::npos) break;
    std::string key = trim(text.substr(pos, eq - pos));
    std::size_t end = eq + 1;
    std::string value;
    if (end < text.size() && text[end] == '[') {
      std::size_t close = text.find(']', end);
      if (close == std::string::npos) return parse_error(where + ": unterminated list for '" + key + "'");
      value = text.substr(end, close - end + 1);
      end = close + 1;
    } else {
      std::size_t comma = text.find(',', end);
      value = text.substr(end, comma == std::string::npos ? std::string::npos : comma - end);
      end = comma == std::string::npos ? text.size() : comma;
    }
    double sum = 0;
    std::string body = trim(value);
    if (!body.empty() && body.front() == '[') body = body.substr(1, body.size() - 2);
    std::stringstream parts(body);
    std::string part;
    bool any = false;
    while (std::getline(parts, part, ';')) {
      part = trim(part);
      if (part.empty()) continue;
      try {
        std::size_t used = 0;
        sum += std::stod(part, &used);
        if (used != part.size()) throw std::invalid_argument(part);
      } catch (...) {
        return parse_error(where + ": '" + key + "' has a value that is not a number: '" + trim(value) + "'");
      }
      any = true;
    }
    if (!any) return parse_error(where + ": '" + key + "' has no value");
    values[key] = sum;
    pos = end < text.size() && text[end] == ',' ? end + 1 : end;
  }
  for (char const* key : {"forward_compute_time", "backward_compute_time", "activation_size", "parameter_size"}) {
    if (!values.count(key)) return parse_error(where + ": missing '" + key + "='");
  }
  node.fwd_ms = values["forward_compute_time"];
  node.bwd_ms = values["backward_compute_time"];
  node.activation = values["activation_size"];
  node.parameters = values["parameter_size"];
  return Status::ok();
}

// "node12" -> 12 for ordering; names without a number sort after, by name.
std::pair<long, std::string> order_key(std::string const& name) {
  std::size_t i = name.size();
  while (i > 0 && std::isdigit(static_cast<unsigned char>(name[i - 1]))) --i;
  long number = -1;  // no digits, or too many for a long: sorted after, by name
  if (i < name.size()) {
    auto const [end, ec] = std::from_chars(name.data() + i, name.data() + name.size(), number);
    if (ec != std::errc{} || end != name.data() + name.size()) number = -1;
  }
  return {number < 0 ? std::numeric_limits<long>::max() : number, name};
}

}  // namespace

Result<Problem> parse_pipedream_profile(std::string const& text, std::string const& model,
                                        PipeDreamProfileOptions const& options) {
  if (options.profile_batch <= 0) return invalid_argument("profile batch must be positive");
  std::vector<RawNode> raw;
  std::map<std::string, int> index;
  std::vector<std::pair<std::string, std::string>> raw_edges;
  std::stringstream in(text);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    std::string const where = model + ":" + std::to_string(line_no);
    if (trim(line).empty()) continue;
    std::size_t const first = line.find(" -- ");
    if (first == std::string::npos) return parse_error(where + ": expected 'nodeN -- ...' or '\\tnodeA -- nodeB'");
    if (line[0] == '\t' || line[0] == ' ') {
      raw_edges.emplace_back(trim(line.substr(0, first)), trim(line.substr(first + 4)));
      continue;
    }
    std::size_t const last = line.rfind(" -- ");
    if (last == first) return parse_error(where + ": a node line needs 'name -- description -- attributes'");
    RawNode node;
    node.name = trim(line.substr(0, first));
    node.description = trim(line.substr(first + 4, last - first - 4));
    RETURN_IF_ERROR(parse_attributes(line.substr(last + 4), node, where));
    if (index.count(node.name)) return parse_error(where + ": node '" + node.name + "' is defined twice");
    index[node.name] = static_cast<int>(raw.size());
    raw.push_back(std::move(node));
  }
  if (raw.empty()) return parse_error(model + ": no nodes (is this a PipeDream graph.txt?)");
  int const n = static_cast<int>(raw.size());
  std::vector<std::set<int>> succ(n);
  std::vector<int> indegree(n, 0);
  for (auto const& [a, b] : raw_edges) {
    auto ia = index.find(a), ib = index.find(b);
    if (ia == index.end() || ib == index.end())
      return parse_error(model + ": edge " + a + " -- " + b + " names an undefined node '" +
                         (ia == index.end() ? a : b) + "'");
    if (ia->second == ib->second) return parse_error(model + ": self-loop on '" + a + "'");
    if (succ[ia->second].insert(ib->second).second) ++indegree[ib->second];
  }
  // Kahn's algorithm, smallest node number first, for deterministic ids.
  auto cmp = [&](int x, int y) { return order_key(raw[x].name) > order_key(raw[y].name); };
  std::priority_queue<int, std::vector<int>, decltype(cmp)> ready(cmp);
  for (int v = 0; v < n; ++v) {
    if (indegree[v] == 0) ready.push(v);
  }
  std::vector<int> new_id(n, -1), order;
  while (!ready.empty()) {
    int v = ready.top();
    ready.pop();
    new_id[v] = static_cast<int>(order.size());
    order.push_back(v);
    for (int w : succ[v]) {
      if (--indegree[w] == 0) ready.push(w);
    }
  }
  if (static_cast<int>(order.size()) != n) return parse_error(model + ": the layer graph has a cycle");

  double const batch = static_cast<double>(options.profile_batch);
  Problem p;
  p.model = model;
  std::vector<double> fwd(n), bwd(n);
  for (int i = 0; i < n; ++i) {
    RawNode const& r = raw[order[i]];
    Node node;
    node.name = r.name;
    node.kind = r.description;
    node.weight_bytes = static_cast<int64_t>(std::llround(r.parameters));
    node.activation_bytes_per_sample = static_cast<int64_t>(std::llround(r.activation / batch));
    p.nodes.push_back(node);
    bool const input = r.description.rfind("Input", 0) == 0;
    fwd[i] = input ? 0.0 : r.fwd_ms;
    bwd[i] = r.bwd_ms;
  }
  for (int i = 0; i < n; ++i) {
    for (int w : succ[order[i]]) {
      Edge e;
      e.src = i;
      e.dst = new_id[w];
      e.bytes_per_sample = p.nodes[i].activation_bytes_per_sample;
      p.edges.push_back(e);
    }
  }
  std::sort(p.edges.begin(), p.edges.end(),
            [](Edge const& a, Edge const& b) { return std::pair(a.src, a.dst) < std::pair(b.src, b.dst); });
  p.timer = std::make_shared<ProfileTimer>(std::move(fwd), std::move(bwd), options.profile_batch);
  return p;
}

Result<Problem> read_pipedream_profile(std::string const& path, PipeDreamProfileOptions const& options) {
  std::ifstream in(path);
  if (!in) return not_found("cannot open PipeDream profile '" + path + "'");
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string model = path;
  // ".../alexnet/graph.txt" -> "alexnet"
  std::size_t slash = model.rfind('/');
  if (slash != std::string::npos && model.substr(slash + 1) == "graph.txt") {
    model = model.substr(0, slash);
    slash = model.rfind('/');
  }
  if (slash != std::string::npos) model = model.substr(slash + 1);
  return parse_pipedream_profile(buffer.str(), model, options);
}

}  // namespace gp::partition
