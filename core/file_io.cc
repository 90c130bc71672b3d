#include "core/file_io.h"

#include "core/units.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

namespace gp {

namespace {

namespace fs = std::filesystem;

std::string errno_text(int err) {
  if (err == ENOSPC || err == EFBIG || err == EDQUOT) return std::string(std::strerror(err)) + " (is the disk full?)";
  if (err == EROFS || err == EACCES || err == EPERM)
    return std::string(std::strerror(err)) + " (is the folder read-only? write elsewhere)";
  return std::strerror(err);
}

// A write past RLIMIT_FSIZE raises SIGXFSZ, whose default action kills the process; with it ignored
// the write fails with EFBIG, which we report like a full disk.
void ignore_sigxfsz() {
  static bool const once = [] {
    struct sigaction current {};
    if (::sigaction(SIGXFSZ, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) ::signal(SIGXFSZ, SIG_IGN);
    return true;
  }();
  (void)once;
}

}  // namespace

AtomicFile::AtomicFile(std::string path, std::string tmp, std::string what, int fd)
    : path_(std::move(path)), tmp_(std::move(tmp)), what_(std::move(what)), fd_(fd) {}

AtomicFile::AtomicFile(AtomicFile&& other) noexcept
    : path_(std::move(other.path_)),
      tmp_(std::move(other.tmp_)),
      what_(std::move(other.what_)),
      fd_(std::exchange(other.fd_, -1)),
      written_(other.written_) {}

AtomicFile::~AtomicFile() { discard(); }

void AtomicFile::discard() {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_.c_str());
}

Result<AtomicFile> AtomicFile::open(std::string path, std::string what) {
  ignore_sigxfsz();
  fs::path const target(path);
  std::error_code ec;
  if (fs::is_directory(target, ec)) return io_error("cannot write the " + what + " '" + path + "': it is a folder");
  fs::path const dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  if (!fs::is_directory(dir, ec))
    return io_error("cannot write the " + what + " '" + path + "': the folder '" + dir.string() +
                    "' does not exist (create it first)");
  std::string tmp = (dir / ("." + target.filename().string() + ".tmp.XXXXXX")).string();
  int const fd = ::mkstemp(tmp.data());
  if (fd < 0) return io_error("cannot write the " + what + " '" + path + "': " + errno_text(errno));
  ::fchmod(fd, 0644);
  return AtomicFile(std::move(path), std::move(tmp), std::move(what), fd);
}

Status AtomicFile::write(void const* data, std::size_t bytes) {
  if (fd_ < 0) return internal_error("AtomicFile::write after commit or failure ('" + path_ + "')");
  auto const* p = static_cast<char const*>(data);
  while (bytes > 0) {
    ssize_t const w = ::write(fd_, p, bytes);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int const err = w < 0 ? errno : ENOSPC;
      discard();
      return io_error("writing the " + what_ + " '" + path_ + "' failed: " + errno_text(err) + "; nothing was written");
    }
    p += w;
    bytes -= static_cast<std::size_t>(w);
    written_ += w;
  }
  return Status::ok();
}

Status AtomicFile::resize(int64_t bytes) {
  if (fd_ < 0) return internal_error("AtomicFile::resize after commit or failure ('" + path_ + "')");
  if (::ftruncate(fd_, bytes) != 0) {
    int const err = errno;
    discard();
    return io_error("writing the " + what_ + " '" + path_ + "' failed: " + errno_text(err) + "; nothing was written");
  }
  return Status::ok();
}

Status AtomicFile::commit() {
  if (fd_ < 0) return internal_error("AtomicFile::commit twice or after a failure ('" + path_ + "')");
  if (::fsync(fd_) != 0) {
    int const err = errno;
    discard();
    return io_error("writing the " + what_ + " '" + path_ + "' failed: " + errno_text(err) + "; nothing was written");
  }
  if (::close(std::exchange(fd_, -1)) != 0) {
    int const err = errno;
    ::unlink(tmp_.c_str());
    return io_error("writing the " + what_ + " '" + path_ + "' failed: " + errno_text(err) + "; nothing was written");
  }
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    int const err = errno;
    ::unlink(tmp_.c_str());
    return io_error("cannot write the " + what_ + " '" + path_ + "': " + errno_text(err) + "; nothing was written");
  }
  fs::path const dir = fs::path(path_).parent_path();
  int const dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {  // make the rename itself durable; failure here cannot un-write the file
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::ok();
}

Status write_file_atomic(std::string const& path, std::string const& contents, std::string const& what) {
  ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::open(path, what));
  RETURN_IF_ERROR(file.write(contents));
  return file.commit();
}

Result<std::string> read_whole_file(std::string const& path, std::string const& what, int64_t max_bytes) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return invalid_argument("the " + what + " '" + path + "' is a folder, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot open " + what + " '" + path + "'");
  in.seekg(0, std::ios::end);
  std::streamoff const size = in.tellg();
  if (size < 0) return io_error("cannot read " + what + " '" + path + "' (not a regular file?)");
  if (size > max_bytes)
    return invalid_argument("the " + what + " '" + path + "' is " + format_bytes(size) + ", more than the " +
                            format_bytes(max_bytes) + " graphpipe reads for it: is it the right file?");
  in.seekg(0, std::ios::beg);
  std::string out(static_cast<std::size_t>(size), '\0');
  if (!in.read(out.data(), size)) return io_error("reading " + what + " '" + path + "' failed");
  return out;
}

int64_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t value = 0;
  std::string unit;
  while (in >> key >> value >> unit)
    if (key == "MemAvailable:") return value * 1024;
  return 0;
}

}  // namespace gp
