// Pictures of a timeline: Chrome trace JSON (opens in Perfetto or chrome://tracing: one process per
// device, threads "compute", "send" and "recv") and a self-contained SVG Gantt chart (one row per
// device and stream, coloured by micro-batch, F/B/W told apart by shade and label, time axis and
// legend).
#pragma once

#include <string>

#include "core/status.h"
#include "schedule/timeline.h"

namespace gp::schedule {

std::string timeline_to_chrome_trace(Timeline const& timeline, std::string const& title = {});
std::string timeline_to_svg(Timeline const& timeline, std::string const& title = {});
// Atomic write (temp + rename).
Status write_text_file(std::string const& text, std::string const& path);

}  // namespace gp::schedule
