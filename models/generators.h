// One generator per model (internal to gp_models; use models/zoo.h).
#pragma once

#include "models/zoo.h"

namespace gp::models {

ZooModel build_mlp(Size size, BuildOptions const& options);
ZooModel build_mmt(Size size, BuildOptions const& options);
ZooModel build_transformer(Size size, BuildOptions const& options);
ZooModel build_dlrm(Size size, BuildOptions const& options);
ZooModel build_candle_uno(Size size, BuildOptions const& options);
ZooModel build_inception(Size size, BuildOptions const& options);

// Declares a float32 input [N, dims...] and records it in the model's input list.
std::string add_model_input(ZooModel& model, std::string const& name, std::vector<int64_t> dims,
                            graph::DType dtype = graph::DType::kFloat32, int64_t index_limit = 0);
// Declares the single output [N, width].
void set_model_output(ZooModel& model, std::string const& name, int64_t width);
ZooModel new_model(std::string const& name, Size size, Task task, BuildOptions const& options);

}  // namespace gp::models
