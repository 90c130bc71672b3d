// One function per reader of untrusted input. Each takes arbitrary bytes, must return (never crash,
// hang or allocate without bound) and checks what it can of the result (round trips). libFuzzer
// drives them through fuzz_main.cc; the normal suite replays tests/fuzz/regressions/ through them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace gp::fuzz {

using Target = void (*)(uint8_t const* data, std::size_t size);

void onnx_import(uint8_t const* data, std::size_t size);      // bytes -> ModelProto -> OpGraph
void plan_json(uint8_t const* data, std::size_t size);        // plan JSON -> Plan -> JSON -> Plan
void schedule_text(uint8_t const* data, std::size_t size);    // schedule text, checked against a fixed plan
void cluster_yaml(uint8_t const* data, std::size_t size);     // cluster YAML
void train_config(uint8_t const* data, std::size_t size);     // training config YAML
void pipedream_graph(uint8_t const* data, std::size_t size);  // PipeDream graph.txt -> Problem
void checkpoint(uint8_t const* data, std::size_t size);       // checkpoint bytes (+ a valid checksum)
void npy(uint8_t const* data, std::size_t size);              // .npy bytes

// The target called `name` ("onnx_import", ...), or nullptr.
Target find_target(std::string_view name);

}  // namespace gp::fuzz
