// Inside exec/: the data sources behind make_data_source (exec/data.h), one file each: the
// synthetic teacher task (data_synthetic.cc) and .npy files (data_npy.cc).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "exec/data.h"

namespace gp::exec {

// One model input as the data sources see it.
struct InputSpec {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> dims;  // per sample
  int64_t vocab = 0;          // integer inputs: values in [0, vocab)
};

// Inputs from (seed, sample), labels from a fixed random teacher; `samples` > 0 cycles that many.
std::unique_ptr<DataSource> make_synthetic_source(std::vector<InputSpec> inputs, LabelSpec labels, uint64_t seed,
                                                  int64_t samples);
// The configured .npy files, checked against the model's inputs and the loss's labels.
Result<std::unique_ptr<DataSource>> make_npy_source(DataConfig const& config, std::vector<InputSpec> const& specs,
                                                    LabelSpec const& labels);
// The configured in-memory arrays (DataConfig::Kind::kArrays), with the same checks.
Result<std::unique_ptr<DataSource>> make_memory_source(DataConfig const& config, std::vector<InputSpec> const& specs,
                                                       LabelSpec const& labels);

}  // namespace gp::exec
