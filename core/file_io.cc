#include "core/file_io.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

namespace gp {

Status write_file_atomic(std::string const& path, std::string const& contents) {
  std::string const tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return io_error("cannot write '" + tmp + "' (does the directory exist?)");
    out << contents;
    if (!out.flush()) {
      std::remove(tmp.c_str());
      return io_error("writing '" + tmp + "' failed");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    return io_error("cannot rename '" + tmp + "' to '" + path + "': " + ec.message());
  }
  return Status::ok();
}

Result<std::string> read_whole_file(std::string const& path, std::string const& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot open " + what + " '" + path + "'");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace gp
