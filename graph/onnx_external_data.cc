#include "graph/onnx_external_data.h"

#include <algorithm>
#include <charconv>
#include <fstream>

namespace gp::graph {

namespace fs = std::filesystem;

Result<ExternalData> resolve_external_data(onnx::TensorProto const& t, std::string const& model_dir,
                                           std::string const& what) {
  if (model_dir.empty())
    return unsupported(what +
                       " stores its data in an external file, which a model read from memory cannot use: "
                       "load the model from its file");
  ExternalData ext;
  std::string location;
  for (auto const& e : t.external_data()) {
    if (e.key() == "location") {
      location = e.value();
    } else if (e.key() == "offset" || e.key() == "length") {
      int64_t v = -1;
      auto const& text = e.value();
      auto const [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec != std::errc{} || end != text.data() + text.size() || v < 0)
        return parse_error(what + " has external data " + e.key() + " '" + text + "', not a byte count");
      (e.key() == "offset" ? ext.offset : ext.length) = v;
    }
  }
  fs::path const loc(location);
  bool escapes = location.empty() || loc.is_absolute() || location.find('\0') != std::string::npos;
  for (auto const& part : loc)
    if (part == "..") escapes = true;
  if (escapes)
    return invalid_argument(what + " stores its data at '" + location +
                            "', outside the model's folder: external data must be a relative path inside the "
                            "folder (refused for safety)");
  std::error_code ec;
  fs::path const dir = fs::canonical(model_dir, ec);
  fs::path const file = ec ? fs::path() : fs::canonical(fs::path(model_dir) / loc, ec);
  if (ec)
    return not_found(what + " stores its data in '" + (fs::path(model_dir) / loc).string() +
                     "', which cannot be opened: keep the external data file next to the model");
  auto const [d, f] = std::mismatch(dir.begin(), dir.end(), file.begin(), file.end());
  if (d != dir.end())
    return invalid_argument(what + " stores its data at '" + location +
                            "', a link that leads outside the model's folder to '" + file.string() +
                            "' (refused for safety)");
  if (!fs::is_regular_file(file, ec))
    return invalid_argument(what + " stores its data at '" + location + "', which is not a regular file");
  ext.file = file;
  ext.file_size = static_cast<int64_t>(fs::file_size(file, ec));
  if (ec) return io_error(what + ": cannot read the size of '" + file.string() + "': " + ec.message());
  return ext;
}

Status read_external_data(ExternalData const& ext, void* dst, std::string const& what) {
  if (ext.length < 0 || ext.offset > ext.file_size || ext.length > ext.file_size - ext.offset)
    return io_error(what + ": external data file '" + ext.file.string() + "' holds " + std::to_string(ext.file_size) +
                    " bytes, fewer than offset+length (" + std::to_string(ext.offset) + "+" +
                    std::to_string(ext.length) + "): is it the right file?");
  std::ifstream in(ext.file, std::ios::binary);
  if (!in) return not_found(what + " stores its data in '" + ext.file.string() + "', which cannot be opened");
  in.seekg(ext.offset);
  in.read(static_cast<char*>(dst), ext.length);
  if (in.gcount() != ext.length)
    return io_error(what + ": reading external data file '" + ext.file.string() + "' failed");
  return Status::ok();
}

}  // namespace gp::graph
