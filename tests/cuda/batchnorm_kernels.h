// Tests only: BatchNormalization trains on the chosen kernels (exec/cuda/cudnn_graphs.h), with
// cuDNN refusing every shape if asked, for the guard's lifetime; then the default again (cuDNN's
// graphs, nothing refused), also when an assertion leaves the test early.
#pragma once

#include "exec/cuda/cudnn_graphs.h"

namespace gp::exec::testing {

class BatchNormKernelsFor {
 public:
  BatchNormKernelsFor(cuda::BatchNormKernels kernels, bool refuse_cudnn) {
    cuda::set_batchnorm_kernels(kernels);
    cuda::refuse_cudnn_batchnorm_for_testing(refuse_cudnn);
  }
  ~BatchNormKernelsFor() {
    cuda::set_batchnorm_kernels(cuda::BatchNormKernels::kCudnn);
    cuda::refuse_cudnn_batchnorm_for_testing(false);
  }
  BatchNormKernelsFor(BatchNormKernelsFor const&) = delete;
  BatchNormKernelsFor& operator=(BatchNormKernelsFor const&) = delete;
};

}  // namespace gp::exec::testing
