#include "exec/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

namespace gp::exec {

namespace {

constexpr char kMagic[8] = {'G', 'P', 'C', 'K', 'P', 'T', '\x01', '\n'};

uint64_t fnv1a(uint64_t h, void const* data, std::size_t n) {
  auto const* p = static_cast<unsigned char const*>(data);
  for (std::size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}
constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;

Status write_all(int fd, void const* data, std::size_t n, std::string const& path) {
  auto const* p = static_cast<char const*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) return io_error("writing checkpoint '" + path + "': " + std::strerror(errno));
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return Status::ok();
}

std::optional<graph::DType> dtype_from_name(std::string const& name) {
  for (auto d : {graph::DType::kFloat32, graph::DType::kFloat64, graph::DType::kInt64, graph::DType::kInt32})
    if (name == graph::dtype_name(d)) return d;
  return std::nullopt;
}

}  // namespace

Status save_checkpoint(std::string const& path, CheckpointState const& state) {
  nlohmann::json header;
  header["format_version"] = 1;
  header["step"] = state.step;
  header["seed"] = state.seed;
  header["optimizer"] = state.optimizer;
  header["optimizer_steps"] = state.optimizer_steps;
  std::vector<Tensor const*> order;
  uint64_t offset = 0;
  auto table = nlohmann::json::array();
  for (auto const* section : {&state.weights, &state.optimizer_state}) {
    for (auto const& [name, t] : *section) {
      table.push_back({{"section", section == &state.weights ? "weights" : "optimizer"},
                       {"name", name},
                       {"dtype", graph::dtype_name(t.dtype())},
                       {"shape", t.shape()},
                       {"offset", offset},
                       {"bytes", t.nbytes()}});
      offset += t.nbytes();
      order.push_back(&t);
    }
  }
  header["tensors"] = table;
  std::string const text = header.dump();
  uint64_t const len = text.size();

  auto const dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return io_error("cannot create checkpoint folder '" + dir.string() + "': " + ec.message());
  }
  std::string const tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return io_error("cannot write checkpoint '" + tmp + "': " + std::strerror(errno));
  uint64_t h = kFnvOffset;
  auto put = [&](void const* data, std::size_t n) {
    h = fnv1a(h, data, n);
    return write_all(fd, data, n, tmp);
  };
  Status s = put(kMagic, 8);
  if (s.is_ok()) s = put(&len, 8);
  if (s.is_ok()) s = put(text.data(), text.size());
  for (Tensor const* t : order)
    if (s.is_ok()) s = put(t->raw(), t->nbytes());
  if (s.is_ok()) s = write_all(fd, &h, 8, tmp);
  if (s.is_ok() && ::fsync(fd) != 0) s = io_error("fsync of '" + tmp + "' failed: " + std::strerror(errno));
  ::close(fd);
  if (s.is_ok() && std::rename(tmp.c_str(), path.c_str()) != 0)
    s = io_error("cannot rename '" + tmp + "' to '" + path + "': " + std::strerror(errno));
  if (!s.is_ok()) {
    std::remove(tmp.c_str());
    return s;
  }
  int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::ok();
}

Result<CheckpointState> load_checkpoint(std::string const& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot open checkpoint '" + path + "'");
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto corrupt = [&](std::string const& why) {
    return parse_error("checkpoint '" + path + "' is corrupt or truncated (" + why +
                       "): delete it or point checkpoint.path elsewhere");
  };
  if (bytes.size() < 24 || std::memcmp(bytes.data(), kMagic, 6) != 0)
    return parse_error("'" + path + "' is not a graphpipe checkpoint (bad magic)");
  if (bytes[6] != kMagic[6]) return unsupported("checkpoint '" + path + "' has format version " +
                                                std::to_string(static_cast<int>(bytes[6])) + ", this build reads 1");
  uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + bytes.size() - 8, 8);
  if (fnv1a(kFnvOffset, bytes.data(), bytes.size() - 8) != stored) return corrupt("checksum mismatch");
  uint64_t len = 0;
  std::memcpy(&len, bytes.data() + 8, 8);
  if (16 + len > bytes.size() - 8) return corrupt("header length past the end");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.begin() + 16, bytes.begin() + 16 + static_cast<std::ptrdiff_t>(len));
  } catch (nlohmann::json::exception const& e) {
    return corrupt(std::string("bad header: ") + e.what());
  }
  std::size_t const data_start = 16 + len, data_end = bytes.size() - 8;
  CheckpointState st;
  try {
    st.step = header.at("step").get<int64_t>();
    st.seed = header.at("seed").get<uint64_t>();
    st.optimizer = header.at("optimizer").get<std::string>();
    st.optimizer_steps = header.at("optimizer_steps").get<int64_t>();
    for (auto const& e : header.at("tensors")) {
      auto dtype = dtype_from_name(e.at("dtype").get<std::string>());
      if (!dtype) return corrupt("unknown dtype " + e.at("dtype").get<std::string>());
      Tensor t(e.at("shape").get<std::vector<int64_t>>(), *dtype);
      uint64_t const off = e.at("offset").get<uint64_t>(), n = e.at("bytes").get<uint64_t>();
      if (n != t.nbytes() || data_start + off + n > data_end) return corrupt("tensor table out of range");
      std::memcpy(t.raw(), bytes.data() + data_start + off, n);
      auto& section = e.at("section").get<std::string>() == "weights" ? st.weights : st.optimizer_state;
      section.emplace(e.at("name").get<std::string>(), std::move(t));
    }
  } catch (nlohmann::json::exception const& e) {
    return corrupt(std::string("bad header: ") + e.what());
  }
  return st;
}

Status check_checkpoint_matches(CheckpointState const& state, std::map<std::string, Tensor> const& params,
                                std::string const& path) {
  for (auto const& [name, w] : params) {
    auto it = state.weights.find(name);
    if (it == state.weights.end())
      return invalid_argument("checkpoint '" + path + "' does not match the model: it has no parameter '" + name +
                              "' (was it written for another model?)");
    if (it->second.shape() != w.shape() || it->second.dtype() != w.dtype())
      return invalid_argument("checkpoint '" + path + "' does not match the model: parameter '" + name + "' is " +
                              it->second.shape_string() + " in the checkpoint, " + w.shape_string() + " in the model");
  }
  for (auto const& [name, t] : state.weights)
    if (!params.count(name))
      return invalid_argument("checkpoint '" + path + "' does not match the model: the model has no parameter '" +
                              name + "'");
  return Status::ok();
}

}  // namespace gp::exec
