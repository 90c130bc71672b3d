// Devices and links. Uniform by default; a two-level (intra-node / inter-node) link model;
// heterogeneous device speeds and memories allowed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace gp::partition {

struct Device {
  int64_t memory_bytes = 16LL << 30;
  double speed = 1.0;               // relative compute speed (1.0 = the reference device)
  double peak_flops = 15.7e12;      // for the analytic cost model (V100 fp32 by default)
  double memory_bandwidth = 900e9;  // bytes/s, for the roofline
  int node = 0;                     // which machine it sits in
};

struct Link {
  double bandwidth = 100e9;  // bytes/s
  double latency = 5e-6;     // seconds
  double transfer_time(double bytes) const { return bytes <= 0 ? 0.0 : latency + bytes / bandwidth; }
};

struct Cluster {
  std::vector<Device> devices;
  int devices_per_node = 8;
  Link intra_node;
  Link inter_node{12.5e9, 10e-6};

  int size() const { return static_cast<int>(devices.size()); }
  // The link between two devices (same node: intra_node).
  Link const& link(int a, int b) const;
  // The slowest link any group of `n` devices placed contiguously would use.
  Link const& link_for_group(int n) const { return n <= devices_per_node ? intra_node : inter_node; }

  static Cluster uniform(int n, int64_t memory_bytes);
  // Devices differ in speed, peak FLOP/s, memory bandwidth or memory.
  bool heterogeneous() const;
  // YAML: see docs in partition/cluster.cc; errors name the key and the file.
  static Result<Cluster> from_yaml_file(std::string const& path);
  static Result<Cluster> from_yaml_string(std::string const& text);
};

// "16GiB", "16GB", "512MiB", "1.5e9" -> bytes. "100GB/s" -> bytes/s for bandwidths.
Result<int64_t> parse_bytes(std::string const& text);
Result<double> parse_bandwidth(std::string const& text);

}  // namespace gp::partition
