#include "schedule/timeline.h"

#include <algorithm>

namespace gp::schedule {

double Timeline::end_s() const {
  double end = 0;
  for (auto const& iv : intervals) end = std::max(end, iv.end_s);
  return end;
}

}  // namespace gp::schedule
