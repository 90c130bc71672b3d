#include "exec/cuda/plan_disk_cache.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "core/file_io.h"
#include "core/hash.h"

namespace gp::exec::cuda {
namespace {

constexpr char kMagic[] = "graphpipe cudnn plan v1\n";
constexpr int64_t kMaxPlanBytes = int64_t{64} << 20;

std::string env_or_empty(char const* name) {
  char const* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// One line: newlines would let a key end early in the header.
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

}  // namespace

std::string PlanDiskCache::folder_from_environment() {
  std::string const v = env_or_empty("GP_CUDNN_PLAN_CACHE");
  if (v == "off") return {};
  if (!v.empty() && v != "on") return v;
  std::string const cache = env_or_empty("GP_CACHE_DIR");  // graphpipe's cache, as the profiles'
  if (!cache.empty()) return cache + "/cudnn-plans";
  std::string const home = env_or_empty("HOME");
  if (!home.empty()) return home + "/.cache/graphpipe/cudnn-plans";
  return {};
}

PlanDiskCache::PlanDiskCache(std::string folder, std::string environment)
    : folder_(std::move(folder)), environment_(one_line(std::move(environment))) {}

std::string PlanDiskCache::header(std::string const& key) const {
  return std::string(kMagic) + environment_ + "\n" + one_line(key) + "\n";
}

std::string PlanDiskCache::path_for(std::string const& key) const {
  char name[32];
  std::snprintf(name, sizeof name, "%016llx.plan",
                static_cast<unsigned long long>(fnv1a(one_line(key), fnv1a(environment_ + "\n"))));
  return folder_ + "/" + name;
}

std::optional<std::vector<uint8_t>> PlanDiskCache::load(std::string const& key) const {
  if (!enabled()) return std::nullopt;
  std::string const path = path_for(key);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  auto text = read_whole_file(path, "cuDNN plan", kMaxPlanBytes);
  if (!text.is_ok()) return std::nullopt;
  std::string const h = header(key);
  if (text->size() <= h.size() || text->compare(0, h.size(), h) != 0) return std::nullopt;
  return std::vector<uint8_t>(text->begin() + static_cast<std::ptrdiff_t>(h.size()), text->end());
}

Status PlanDiskCache::store(std::string const& key, std::vector<uint8_t> const& blob) const {
  if (!enabled() || blob.empty()) return Status::ok();
  std::error_code ec;
  std::filesystem::create_directories(folder_, ec);
  if (ec)
    return invalid_argument("cannot create the cuDNN plan cache folder " + folder_ + ": " + ec.message() +
                            " (set GP_CUDNN_PLAN_CACHE to a writable folder, or to off)");
  std::string contents = header(key);
  contents.append(reinterpret_cast<char const*>(blob.data()), blob.size());
  return write_file_atomic(path_for(key), contents, "cuDNN plan");
}

}  // namespace gp::exec::cuda
