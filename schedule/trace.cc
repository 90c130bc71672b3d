#include "schedule/trace.h"
#include "core/file_io.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "schedule/units.h"

namespace gp::schedule {
namespace {

char const* stream_name(Stream s) {
  switch (s) {
    case Stream::kCompute:
      return "compute";
    case Stream::kSend:
      return "send";
    case Stream::kRecv:
      return "recv";
  }
  return "?";
}

char const* category(Op op) {
  switch (op) {
    case Op::kForward:
      return "forward";
    case Op::kBackward:
      return "backward";
    case Op::kWeight:
      return "weight-grad";
    case Op::kSend:
      return "send";
    case Op::kRecv:
      return "recv";
    case Op::kAllReduce:
      return "allreduce";
    case Op::kStep:
      return "step";
  }
  return "?";
}

std::string escape_xml(std::string const& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// Micro-batch hue, spread by the golden angle so neighbours differ; F light, B mid, W dark.
std::string fill_colour(Op op, int micro_batch) {
  if (op == Op::kSend || op == Op::kRecv) return "#9e9e9e";
  if (op == Op::kAllReduce) return "#546e7a";
  int const hue = micro_batch < 0 ? 0 : static_cast<int>(std::fmod(micro_batch * 137.508, 360.0));
  int const light = op == Op::kForward ? 72 : op == Op::kBackward ? 50 : 32;
  char buf[48];
  std::snprintf(buf, sizeof buf, "hsl(%d,70%%,%d%%)", hue, light);
  return buf;
}

std::string num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", x);
  return buf;
}

}  // namespace

std::string timeline_to_chrome_trace(Timeline const& timeline, std::string const& title) {
  using nlohmann::json;
  json events = json::array();
  for (int d = 0; d < timeline.num_devices; ++d) {
    events.push_back(
        {{"name", "process_name"}, {"ph", "M"}, {"pid", d}, {"args", {{"name", "device " + std::to_string(d)}}}});
    events.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", d}, {"args", {{"sort_index", d}}}});
    for (int s = 0; s < kNumStreams; ++s)
      events.push_back({{"name", "thread_name"},
                        {"ph", "M"},
                        {"pid", d},
                        {"tid", s},
                        {"args", {{"name", stream_name(static_cast<Stream>(s))}}}});
  }
  for (auto const& iv : timeline.intervals) {
    json args = json::object();
    if (iv.stage >= 0) args["stage"] = iv.stage;
    if (iv.micro_batch >= 0) args["micro_batch"] = iv.micro_batch;
    events.push_back({{"name", iv.label},
                      {"cat", category(iv.op)},
                      {"ph", "X"},
                      {"pid", iv.device},
                      {"tid", static_cast<int>(iv.stream)},
                      {"ts", iv.start_s * 1e6},
                      {"dur", (iv.end_s - iv.start_s) * 1e6},
                      {"args", args}});
  }
  json doc = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  if (!title.empty()) doc["otherData"] = {{"title", title}};
  return doc.dump(1) + "\n";
}

std::string timeline_to_svg(Timeline const& timeline, std::string const& title) {
  double const end = std::max(timeline.end_s(), 1e-12);
  int const left = 80, right = 20, top = title.empty() ? 20 : 44, row_h = 26, comm_h = 9, gap = 8;
  int const plot_w = 1100;
  int const device_h = row_h + 2 * comm_h + gap;
  int const D = timeline.num_devices;
  int const axis_y = top + D * device_h + 4;
  int const legend_y = axis_y + 34;
  int const width = left + plot_w + right, height = legend_y + 40;
  auto x_of = [&](double t) { return left + t / end * plot_w; };
  auto row_y = [&](int d, Stream s) {
    int const y = top + d * device_h;
    return s == Stream::kCompute ? y : s == Stream::kSend ? y + row_h : y + row_h + comm_h;
  };

  std::string svg = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) + "\" height=\"" +
         std::to_string(height) + "\" viewBox=\"0 0 " + std::to_string(width) + " " + std::to_string(height) +
         "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  svg += "<rect x=\"0\" y=\"0\" width=\"" + std::to_string(width) + "\" height=\"" + std::to_string(height) +
         "\" fill=\"white\"/>\n";
  if (!title.empty())
    svg += "<text x=\"" + std::to_string(left) + "\" y=\"24\" font-size=\"15\">" + escape_xml(title) + "</text>\n";
  for (int d = 0; d < D; ++d) {
    int const y = top + d * device_h;
    svg += "<rect x=\"" + std::to_string(left) + "\" y=\"" + std::to_string(y) + "\" width=\"" +
           std::to_string(plot_w) + "\" height=\"" + std::to_string(row_h + 2 * comm_h) + "\" fill=\"#f4f4f4\"/>\n";
    svg += "<text x=\"6\" y=\"" + std::to_string(y + 17) + "\">device " + std::to_string(d) + "</text>\n";
    svg += "<text x=\"6\" y=\"" + std::to_string(y + row_h + 2 * comm_h - 2) +
           "\" font-size=\"8\" fill=\"#666\">send/recv</text>\n";
  }
  for (auto const& iv : timeline.intervals) {
    if (iv.end_s <= iv.start_s) continue;
    double const x = x_of(iv.start_s), w = std::max(0.5, x_of(iv.end_s) - x);
    int const y = row_y(iv.device, iv.stream);
    int const h = iv.stream == Stream::kCompute ? row_h : comm_h;
    svg += "<rect x=\"" + num(x) + "\" y=\"" + std::to_string(y) + "\" width=\"" + num(w) + "\" height=\"" +
           std::to_string(h) + "\" fill=\"" + fill_colour(iv.op, iv.micro_batch) +
           "\" stroke=\"white\" stroke-width=\"0.5\"><title>" + escape_xml(iv.label) + " [" +
           format_seconds(iv.start_s) + " .. " + format_seconds(iv.end_s) + "]</title></rect>\n";
    if (iv.stream == Stream::kCompute && iv.micro_batch >= 0) {
      std::string const label = std::string(op_name(iv.op)) + std::to_string(iv.micro_batch);
      std::string const full = label + " s" + std::to_string(iv.stage);
      std::string const& text = w >= 7.0 * full.size() ? full : label;
      if (w >= 6.5 * text.size())
        svg += "<text x=\"" + num(x + w / 2) + "\" y=\"" + std::to_string(y + 17) +
               "\" text-anchor=\"middle\" fill=\"" + (iv.op == Op::kForward ? "black" : "white") + "\">" +
               escape_xml(text) + "</text>\n";
    }
  }
  // Time axis with about ten round ticks.
  double const raw = end / 10;
  double const mag = std::pow(10.0, std::floor(std::log10(raw)));
  double const step = raw / mag < 2 ? 2 * mag : raw / mag < 5 ? 5 * mag : 10 * mag;
  svg += "<line x1=\"" + std::to_string(left) + "\" y1=\"" + std::to_string(axis_y) + "\" x2=\"" +
         std::to_string(left + plot_w) + "\" y2=\"" + std::to_string(axis_y) + "\" stroke=\"black\"/>\n";
  for (double t = 0; t <= end * 1.0001; t += step) {
    std::string const x = num(x_of(t));
    svg += "<line x1=\"" + x + "\" y1=\"" + std::to_string(axis_y) + "\" x2=\"" + x + "\" y2=\"" +
           std::to_string(axis_y + 5) + "\" stroke=\"black\"/>\n";
    svg += "<text x=\"" + x + "\" y=\"" + std::to_string(axis_y + 17) + "\" text-anchor=\"middle\">" +
           (t == 0 ? std::string("0") : escape_xml(format_seconds(t))) + "</text>\n";
  }
  // Legend: shades of one micro-batch colour for F/B/W, grey for transfers.
  struct Item {
    char const* name;
    std::string colour;
  };
  Item const items[] = {{"F forward", fill_colour(Op::kForward, 0)},
                        {"B backward (input grad)", fill_colour(Op::kBackward, 0)},
                        {"W weight grad", fill_colour(Op::kWeight, 0)},
                        {"send / recv", fill_colour(Op::kSend, 0)},
                        {"all-reduce", fill_colour(Op::kAllReduce, 0)}};
  int lx = left;
  for (auto const& it : items) {
    svg += "<rect x=\"" + std::to_string(lx) + "\" y=\"" + std::to_string(legend_y) +
           "\" width=\"14\" height=\"14\" fill=\"" + it.colour + "\"/>\n";
    svg += "<text x=\"" + std::to_string(lx + 18) + "\" y=\"" + std::to_string(legend_y + 11) + "\">" +
           escape_xml(it.name) + "</text>\n";
    lx += 40 + 7 * static_cast<int>(std::string(it.name).size());
  }
  svg += "<text x=\"" + std::to_string(lx) + "\" y=\"" + std::to_string(legend_y + 11) +
         "\" fill=\"#666\">colour hue = micro-batch; label = op, micro-batch, stage</text>\n";
  svg += "</svg>\n";
  return svg;
}

Status write_text_file(std::string const& text, std::string const& path) { return write_file_atomic(path, text); }

}  // namespace gp::schedule
