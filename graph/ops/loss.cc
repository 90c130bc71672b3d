// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: import-time inference (graph/ops/infer.h).
#include <algorithm>
#include <limits>
#include <numeric>

#include "graph/ops/registry.h"

namespace gp::graph::ops {
void register_loss_ops(OpTable& t) { (void)t; }

}  // namespace gp::graph::ops
