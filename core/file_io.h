// Whole-file reads and atomic writes (a unique temporary file in the same folder, fsync, rename),
// shared by every file graphpipe writes (plans, profiles, schedules, traces, DOT, checkpoints,
// ONNX, .npy), so a full disk, a read-only folder or a crash leaves either the old file or the new
// one, never a half-written one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace gp {

// A file being written: bytes go to a temporary file next to `path`; commit() makes them appear at
// `path` in one rename. Destroyed before commit() (an error, an early return), it removes the
// temporary and leaves `path` as it was.
class AtomicFile {
 public:
  // `what` names the file in errors ("plan file", "checkpoint", ...).
  static Result<AtomicFile> open(std::string path, std::string what);
  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile& operator=(AtomicFile&&) = delete;
  AtomicFile(AtomicFile const&) = delete;
  ~AtomicFile();

  Status write(void const* data, std::size_t bytes);
  Status write(std::string_view text) { return write(text.data(), text.size()); }
  // Sets the file's size (a sparse tail when it grows).
  Status resize(int64_t bytes);
  // fsync, close and rename onto the target; afterwards the object is spent.
  Status commit();
  int64_t bytes_written() const { return written_; }
  std::string const& temp_path() const { return tmp_; }

 private:
  AtomicFile(std::string path, std::string tmp, std::string what, int fd);
  void discard();
  std::string path_, tmp_, what_;
  int fd_ = -1;
  int64_t written_ = 0;
};

// Writes `contents` to `path` atomically; on failure nothing is left behind.
Status write_file_atomic(std::string const& path, std::string const& contents, std::string const& what = "file");
// The whole file; kNotFound naming `what` ("plan file", "profile", ...) and the path when it can't be opened.
// Files larger than `max_bytes` are refused before they are read.
Result<std::string> read_whole_file(std::string const& path, std::string const& what,
                                    int64_t max_bytes = int64_t{1} << 32);

// Bytes of memory the machine can still give (MemAvailable), or 0 when unknown.
int64_t available_memory_bytes();

}  // namespace gp
