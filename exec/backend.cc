#include "exec/backend.h"

#include <set>

namespace gp::exec {

// Tensors that share storage (a view and its base) are counted once.
int64_t Saved::bytes() const {
  std::set<void const*> seen;
  int64_t total = 0;
  for (Tensor const& t : tensors) {
    if (!t.defined()) continue;
    if (!seen.insert(t.raw()).second) continue;
    total += static_cast<int64_t>(t.nbytes());
  }
  return total;
}

}  // namespace gp::exec
