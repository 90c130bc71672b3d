// Whole-file reads and atomic writes (temp file in the same folder, then rename), shared by every
// format graphpipe writes (plans, profiles, schedules, traces), so a failed write leaves nothing
// half-written.
#pragma once

#include <string>

#include "core/status.h"

namespace gp {

// Writes `contents` to `path` atomically; on failure the temporary file is removed.
Status write_file_atomic(std::string const& path, std::string const& contents);
// The whole file; kNotFound naming `what` ("plan file", "profile", ...) and the path when it can't be opened.
Result<std::string> read_whole_file(std::string const& path, std::string const& what);

}  // namespace gp
