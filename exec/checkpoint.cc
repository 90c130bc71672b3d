#include "exec/checkpoint.h"

#include <cmath>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/file_io.h"
#include "core/hash.h"
#include "core/json_checked.h"

namespace gp::exec {

namespace {

constexpr char kMagic[8] = {'G', 'P', 'C', 'K', 'P', 'T', '\x01', '\n'};

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
  if (state.loss_scale.scale > 0)
    header["loss_scale"] = {{"scale", state.loss_scale.scale},
                            {"good_steps", state.loss_scale.good_steps},
                            {"skipped_steps", state.loss_scale.skipped_steps}};
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
  ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::open(path, "checkpoint"));
  uint64_t h = kFnvOffset;
  auto put = [&](void const* data, std::size_t n) {
    h = fnv1a(std::string_view(static_cast<char const*>(data), n), h);
    return file.write(data, n);
  };
  RETURN_IF_ERROR(put(kMagic, 8));
  RETURN_IF_ERROR(put(&len, 8));
  RETURN_IF_ERROR(put(text.data(), text.size()));
  for (Tensor const* t : order) RETURN_IF_ERROR(put(t->raw(), t->nbytes()));
  RETURN_IF_ERROR(file.write(&h, 8));
  return file.commit();
}

Result<CheckpointState> load_checkpoint(std::string const& path) {
  ASSIGN_OR_RETURN(std::string bytes, read_whole_file(path, "checkpoint", int64_t{1} << 40));
  return parse_checkpoint(bytes, path);
}

Result<CheckpointState> parse_checkpoint(std::string_view bytes, std::string const& path) {
  auto corrupt = [&](std::string const& why) {
    return parse_error("checkpoint '" + path + "' is corrupt or truncated (" + why +
                       "): delete it or point checkpoint.path elsewhere");
  };
  if (bytes.size() < 24 || std::memcmp(bytes.data(), kMagic, 6) != 0)
    return parse_error("'" + path + "' is not a graphpipe checkpoint (bad magic)");
  if (bytes[6] != kMagic[6])
    return unsupported("checkpoint '" + path + "' has format version " + std::to_string(static_cast<int>(bytes[6])) +
                       ", this build reads 1");
  uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + bytes.size() - 8, 8);
  if (fnv1a(bytes.substr(0, bytes.size() - 8)) != stored)
    return corrupt("checksum mismatch: the file was cut short or changed after it was written");
  uint64_t len = 0;
  std::memcpy(&len, bytes.data() + 8, 8);
  if (len > bytes.size() - 24) return corrupt("header length past the end");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.begin() + 16, bytes.begin() + 16 + static_cast<std::ptrdiff_t>(len));
  } catch (nlohmann::json::exception const& e) {
    return corrupt(std::string("bad header: ") + e.what());
  }
  uint64_t const data_size = bytes.size() - 24 - len;
  char const* const data = bytes.data() + 16 + len;
  CheckpointState st;
  try {
    st.step = json_get<int64_t>(header.at("step"));
    st.seed = json_get<uint64_t>(header.at("seed"));
    st.optimizer = header.at("optimizer").get<std::string>();
    st.optimizer_steps = json_get<int64_t>(header.at("optimizer_steps"));
    if (header.contains("loss_scale")) {
      auto const& ls = header.at("loss_scale");
      st.loss_scale.scale = json_get<double>(ls.at("scale"));
      st.loss_scale.good_steps = json_get<int64_t>(ls.at("good_steps"));
      st.loss_scale.skipped_steps = json_get<int64_t>(ls.at("skipped_steps"));
      if (!(st.loss_scale.scale > 0) || !std::isfinite(st.loss_scale.scale))
        return parse_error(path + ": the loss scale in the checkpoint is not a positive number");
    }
    for (auto const& e : header.at("tensors")) {
      auto dtype = dtype_from_name(e.at("dtype").get<std::string>());
      if (!dtype) return corrupt("unknown dtype " + e.at("dtype").get<std::string>());
      auto const shape = json_get<std::vector<int64_t>>(e.at("shape"));
      uint64_t const off = json_get<uint64_t>(e.at("offset")), n = json_get<uint64_t>(e.at("bytes"));
      // The declared size must fit the file before the tensor is allocated.
      uint64_t expected = graph::dtype_size(*dtype);
      for (int64_t d : shape) {
        if (d < 0 || (d > 0 && expected > data_size / static_cast<uint64_t>(d)))
          return corrupt("tensor table out of range");
        expected *= static_cast<uint64_t>(d);
      }
      if (n != expected || off > data_size || n > data_size - off) return corrupt("tensor table out of range");
      Tensor t(shape, *dtype);
      std::memcpy(t.raw(), data + off, n);
      auto& section = e.at("section").get<std::string>() == "weights" ? st.weights : st.optimizer_state;
      section.emplace(e.at("name").get<std::string>(), std::move(t));
    }
  } catch (nlohmann::json::exception const& e) {
    return corrupt(std::string("bad header: ") + e.what());
  } catch (std::range_error const& e) {
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
