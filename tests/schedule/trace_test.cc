#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "schedule/build.h"
#include "schedule/simulator.h"
#include "schedule/trace.h"
#include "tests/schedule/test_plans.h"

namespace gp::schedule {
namespace {

Simulation simulated() {
  auto const plan = testing::replicated_with_skip(4);
  auto s = build_schedule(plan, Policy::kZeroBubble);
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  auto sim = simulate(plan, *s);
  EXPECT_TRUE(sim.is_ok()) << sim.status().message();
  return *sim;
}

TEST(Trace, ChromeTraceParsesWithOneProcessPerDevice) {
  auto const sim = simulated();
  auto doc = nlohmann::json::parse(timeline_to_chrome_trace(sim.timeline, "test"));
  ASSERT_TRUE(doc.contains("traceEvents"));
  std::set<int> pids;
  std::set<std::string> threads;
  int slices = 0;
  for (auto const& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") threads.insert(e["args"]["name"].get<std::string>());
    if (e["ph"] != "X") continue;
    ++slices;
    pids.insert(e["pid"].get<int>());
    std::string const name = e["name"];
    EXPECT_GE(e["dur"].get<double>(), 0);
    if (e["args"].contains("micro_batch")) {
      EXPECT_NE(name.find(" m" + std::to_string(e["args"]["micro_batch"].get<int>())), std::string::npos) << name;
    }
    if (e["cat"] == "forward" || e["cat"] == "backward" || e["cat"] == "weight-grad") {
      EXPECT_NE(name.find(" s" + std::to_string(e["args"]["stage"].get<int>())), std::string::npos) << name;
    }
  }
  EXPECT_EQ(static_cast<int>(pids.size()), 4);
  EXPECT_EQ(threads, (std::set<std::string>{"compute", "send", "recv"}));
  EXPECT_EQ(slices, static_cast<int>(sim.timeline.intervals.size()));
}

// A small well-formedness check: tags nest and close, attributes are quoted.
bool well_formed(std::string const& xml, std::string& why) {
  std::vector<std::string> stack;
  size_t i = 0;
  while ((i = xml.find('<', i)) != std::string::npos) {
    size_t const end = xml.find('>', i);
    if (end == std::string::npos) return why = "unterminated tag", false;
    std::string tag = xml.substr(i + 1, end - i - 1);
    i = end + 1;
    if (tag.empty()) return why = "empty tag", false;
    if (tag[0] == '?' || tag[0] == '!') continue;
    if (std::count(tag.begin(), tag.end(), '"') % 2) return why = "unbalanced quotes in <" + tag + ">", false;
    if (tag[0] == '/') {
      std::string const name = tag.substr(1);
      if (stack.empty() || stack.back() != name) return why = "unexpected </" + name + ">", false;
      stack.pop_back();
      continue;
    }
    bool const self_closing = tag.back() == '/';
    std::string const name = tag.substr(0, tag.find_first_of(" /"));
    if (!self_closing) stack.push_back(name);
  }
  if (!stack.empty()) return why = "unclosed <" + stack.back() + ">", false;
  return true;
}

TEST(Trace, SvgIsWellFormedAndLabelled) {
  auto const sim = simulated();
  std::string const svg = timeline_to_svg(sim.timeline, "replicated & skip <test>");
  std::string why;
  EXPECT_TRUE(well_formed(svg, why)) << why;
  EXPECT_EQ(svg.rfind("<svg", 200) != std::string::npos, true);
  EXPECT_NE(svg.find("&lt;test&gt;"), std::string::npos) << "the title is escaped";
  EXPECT_NE(svg.find(">W0"), std::string::npos) << "W slices are labelled";
  EXPECT_NE(svg.find("device 3"), std::string::npos);
  std::string broken = svg;
  broken.erase(broken.rfind("</svg>"));
  EXPECT_FALSE(well_formed(broken, why)) << "the check can fail";
}

}  // namespace
}  // namespace gp::schedule
