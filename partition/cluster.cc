// Cluster YAML (every key optional except `devices`):
//
//   devices: 8                  # a count of identical devices, or a list of groups:
//   # devices:
//   #   - {count: 4, memory: 16GiB, speed: 1.0}
//   #   - {count: 4, memory: 32GiB, speed: 2.0, peak_flops: 31.4e12, memory_bandwidth: 1.8TB/s}
//   memory: 16GiB               # default for every device
//   speed: 1.0                  # relative compute speed
//   peak_flops: 15.7e12         # FLOP/s, for the analytic cost model
//   memory_bandwidth: 900GB/s   # for the roofline
//   devices_per_node: 8
//   intra_node: {bandwidth: 100GB/s, latency: 5us}
//   inter_node: {bandwidth: 12.5GB/s, latency: 10us}
//
// Devices are numbered in the order given and placed on nodes of devices_per_node each.
#include "partition/cluster.h"

#include <cctype>
#include <cmath>
#include <fstream>
#include <sstream>

#include <yaml-cpp/yaml.h>

namespace gp::partition {

Link const& Cluster::link(int a, int b) const {
  return devices.at(a).node == devices.at(b).node ? intra_node : inter_node;
}

Cluster Cluster::uniform(int n, int64_t memory_bytes) {
  Cluster c;
  c.devices.resize(std::max(n, 0));
  for (int i = 0; i < n; ++i) {
    c.devices[i].memory_bytes = memory_bytes;
    c.devices[i].node = i / c.devices_per_node;
  }
  return c;
}

bool Cluster::heterogeneous() const {
  for (Device const& d : devices) {
    Device const& f = devices.front();
    if (d.speed != f.speed || d.peak_flops != f.peak_flops || d.memory_bandwidth != f.memory_bandwidth ||
        d.memory_bytes != f.memory_bytes)
      return true;
  }
  return false;
}

namespace {

// A cluster YAML may describe at most this many devices (a typo like 8e12 is refused, not allocated).
constexpr int kMaxDevices = 1 << 20;

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

std::string trim(std::string const& s) {
  auto begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  auto end = s.find_last_not_of(" \t");
  return s.substr(begin, end - begin + 1);
}

// Splits "16GiB" into 16 and "gib"; fails on a missing or malformed number.
bool split_number(std::string const& text, double& value, std::string& unit) {
  std::string const s = trim(text);
  std::size_t pos = 0;
  try {
    value = std::stod(s, &pos);
  } catch (...) {
    return false;
  }
  unit = lower(trim(s.substr(pos)));
  return std::isfinite(value) && value >= 0;
}

bool byte_multiplier(std::string const& unit, double& mult) {
  static std::pair<char const*, double> const kUnits[] = {
      {"", 1},
      {"b", 1},
      {"k", 1e3},
      {"kb", 1e3},
      {"m", 1e6},
      {"mb", 1e6},
      {"g", 1e9},
      {"gb", 1e9},
      {"t", 1e12},
      {"tb", 1e12},
      {"kib", 1024.0},
      {"mib", 1048576.0},
      {"gib", 1073741824.0},
      {"tib", 1099511627776.0},
  };
  for (auto const& [name, m] : kUnits) {
    if (unit == name) {
      mult = m;
      return true;
    }
  }
  return false;
}

Result<double> parse_seconds(std::string const& text) {
  double value = 0;
  std::string unit;
  if (!split_number(text, value, unit))
    return invalid_argument("cannot read a time from '" + text + "' (e.g. 5us, 1e-5)");
  if (unit.empty() || unit == "s") return value;
  if (unit == "ms") return value * 1e-3;
  if (unit == "us") return value * 1e-6;
  if (unit == "ns") return value * 1e-9;
  return invalid_argument("unknown time unit in '" + text + "' (use s, ms, us or ns)");
}

std::string scalar(YAML::Node const& node) { return node.as<std::string>(); }

Status read_link(YAML::Node const& node, std::string const& key, Link& link) {
  if (!node) return Status::ok();
  if (!node.IsMap()) return invalid_argument("'" + key + "' must be a map with bandwidth and latency");
  for (auto const& kv : node) {
    std::string const name = kv.first.as<std::string>();
    if (name == "bandwidth") {
      ASSIGN_OR_RETURN(link.bandwidth, parse_bandwidth(scalar(kv.second)));
      if (link.bandwidth <= 0) return invalid_argument("'" + key + ".bandwidth' must be positive");
    } else if (name == "latency") {
      ASSIGN_OR_RETURN(link.latency, parse_seconds(scalar(kv.second)));
    } else {
      return invalid_argument("unknown key '" + key + "." + name + "' (expected bandwidth, latency)");
    }
  }
  return Status::ok();
}

Result<double> parse_number(std::string const& text, std::string const& key) {
  double value = 0;
  std::string unit;
  if (!split_number(text, value, unit) || !unit.empty())
    return invalid_argument("'" + key + "' must be a non-negative number, got '" + text + "'");
  return value;
}

// Reads the per-device keys of `node` into `device` (used for the defaults and for each group).
Status read_device_keys(YAML::Node const& node, Device& device, std::string const& where, int* count) {
  for (auto const& kv : node) {
    std::string const key = kv.first.as<std::string>();
    bool const device_key = key == "memory" || key == "speed" || key == "peak_flops" || key == "memory_bandwidth" ||
                            (key == "count" && count != nullptr);
    if (!device_key && count == nullptr) continue;  // the top level's other keys are read elsewhere
    if (device_key && !kv.second.IsScalar()) return invalid_argument("'" + where + key + "' must be a single value");
    std::string const value = device_key ? scalar(kv.second) : std::string();
    if (key == "memory") {
      ASSIGN_OR_RETURN(device.memory_bytes, parse_bytes(value));
    } else if (key == "speed") {
      ASSIGN_OR_RETURN(device.speed, parse_number(value, where + "speed"));
      if (device.speed <= 0) return invalid_argument("'" + where + "speed' must be positive");
    } else if (key == "peak_flops") {
      ASSIGN_OR_RETURN(device.peak_flops, parse_number(value, where + "peak_flops"));
    } else if (key == "memory_bandwidth") {
      ASSIGN_OR_RETURN(device.memory_bandwidth, parse_bandwidth(value));
    } else if (key == "count" && count != nullptr) {
      ASSIGN_OR_RETURN(double c, parse_number(value, where + "count"));
      if (c < 1 || c != std::floor(c) || c > kMaxDevices)
        return invalid_argument("'" + where + "count' must be a positive integer up to " + std::to_string(kMaxDevices));
      *count = static_cast<int>(c);
    } else if (count != nullptr) {
      return invalid_argument("unknown key '" + where + key +
                              "' (expected count, memory, speed, peak_flops, memory_bandwidth)");
    }
  }
  return Status::ok();
}

Result<Cluster> cluster_from_yaml(YAML::Node const& root) {
  if (!root.IsMap()) return invalid_argument("the cluster must be a YAML map with at least 'devices'");
  static char const* const kKeys[] = {"devices",          "memory",           "speed",      "peak_flops",
                                      "memory_bandwidth", "devices_per_node", "intra_node", "inter_node"};
  for (auto const& kv : root) {
    std::string const key = kv.first.as<std::string>();
    bool known = false;
    for (char const* k : kKeys) known = known || key == k;
    if (!known)
      return invalid_argument("unknown key '" + key +
                              "' (expected devices, memory, speed, peak_flops, memory_bandwidth, devices_per_node, "
                              "intra_node, inter_node)");
  }
  Cluster c;
  Device defaults;
  RETURN_IF_ERROR(read_device_keys(root, defaults, "", nullptr));
  if (root["devices_per_node"]) {
    ASSIGN_OR_RETURN(double d, parse_number(scalar(root["devices_per_node"]), "devices_per_node"));
    if (d < 1 || d != std::floor(d) || d > kMaxDevices)
      return invalid_argument("'devices_per_node' must be a positive integer up to " + std::to_string(kMaxDevices));
    c.devices_per_node = static_cast<int>(d);
  }
  RETURN_IF_ERROR(read_link(root["intra_node"], "intra_node", c.intra_node));
  RETURN_IF_ERROR(read_link(root["inter_node"], "inter_node", c.inter_node));
  YAML::Node const devices = root["devices"];
  if (!devices) return invalid_argument("missing key 'devices' (a count, e.g. 'devices: 8', or a list of groups)");
  if (devices.IsScalar()) {
    ASSIGN_OR_RETURN(double n, parse_number(scalar(devices), "devices"));
    if (n < 1 || n != std::floor(n) || n > kMaxDevices)
      return invalid_argument("'devices' must be a positive integer up to " + std::to_string(kMaxDevices));
    c.devices.assign(static_cast<int>(n), defaults);
  } else if (devices.IsSequence()) {
    for (std::size_t g = 0; g < devices.size(); ++g) {
      std::string const where = "devices[" + std::to_string(g) + "].";
      if (!devices[g].IsMap()) return invalid_argument("'" + where.substr(0, where.size() - 1) + "' must be a map");
      Device device = defaults;
      int count = 1;
      RETURN_IF_ERROR(read_device_keys(devices[g], device, where, &count));
      if (count > kMaxDevices - c.size())
        return invalid_argument("'devices' lists more than " + std::to_string(kMaxDevices) + " devices");
      c.devices.insert(c.devices.end(), count, device);
    }
    if (c.devices.empty()) return invalid_argument("'devices' lists no devices");
  } else {
    return invalid_argument("'devices' must be a count or a list of device groups");
  }
  for (int i = 0; i < c.size(); ++i) c.devices[i].node = i / c.devices_per_node;
  return c;
}

}  // namespace

Result<Cluster> Cluster::from_yaml_string(std::string const& text) {
  try {
    return cluster_from_yaml(YAML::Load(text));
  } catch (YAML::Exception const& e) {
    return parse_error("cluster YAML: " + std::string(e.what()));
  }
}

Result<Cluster> Cluster::from_yaml_file(std::string const& path) {
  std::ifstream in(path);
  if (!in) return not_found("cannot open cluster file '" + path + "'");
  std::stringstream buffer;
  buffer << in.rdbuf();
  auto cluster = from_yaml_string(buffer.str());
  if (!cluster) return cluster.status().with_context(path);
  return cluster;
}

Result<int64_t> parse_bytes(std::string const& text) {
  double value = 0;
  std::string unit;
  double mult = 1;
  if (!split_number(text, value, unit) || !byte_multiplier(unit, mult))
    return invalid_argument("cannot read a size from '" + text + "' (e.g. 16GiB, 512MiB, 16GB, 1.5e9)");
  return static_cast<int64_t>(std::llround(value * mult));
}

Result<double> parse_bandwidth(std::string const& text) {
  double value = 0;
  std::string unit;
  double mult = 1;
  bool ok = split_number(text, value, unit);
  if (ok) {
    if (unit.size() >= 2 && unit.substr(unit.size() - 2) == "/s") unit = unit.substr(0, unit.size() - 2);
    double bits = 1;
    if (unit.size() >= 3 && unit.substr(unit.size() - 3) == "bit") {
      unit = unit.substr(0, unit.size() - 3);
      bits = 1.0 / 8.0;
    }
    ok = byte_multiplier(unit, mult);
    mult *= bits;
  }
  if (!ok) return invalid_argument("cannot read a bandwidth from '" + text + "' (e.g. 100GB/s, 12.5GB/s, 100Gbit/s)");
  return value * mult;
}

}  // namespace gp::partition
