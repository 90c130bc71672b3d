// Human-readable numbers for messages and tables (defined in core/units.h).
#pragma once

#include "core/units.h"

namespace gp::schedule {

using gp::format_bytes;
using gp::format_seconds;

}  // namespace gp::schedule
