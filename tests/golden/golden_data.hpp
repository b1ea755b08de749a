// Golden cases written by tools/golden/gen_golden.py (PyTorch) into tests/data/golden:
// one JSON file per op, each with several cases. This header decodes them and compares
// an output with its expected value. See tools/golden/README.md for the format.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "luminal/host_tensor.hpp"

namespace golden {

/// One operand of an op: a tensor (with an optional view applied in the graph) or a scalar.
struct Operand {
  bool is_scalar = false;
  bool int_scalar = false;  // an integer literal (promotes like one: i32 + 2 -> i32)
  float scalar = 0.0f;
  std::string name;                               // graph input name stem ("in0")
  std::optional<luminal::HostTensor> value;       // the base tensor fed to the graph
  nlohmann::json view = nlohmann::json::array();  // [{"op": "permute", "axes": [...]}, ...]
  bool param = false;                             // a Graph::param bound once, not an input
};

/// The expected output, kept bit-exact: floats as f32 values, i32 as integers, bool 0/1.
struct Expected {
  luminal::DType dtype = luminal::f32;
  std::vector<int64_t> shape;
  std::vector<float> floats;  // f32/f16/bf16
  std::vector<int32_t> ints;  // i32, bool (0/1)
};

struct Case {
  std::string op;    // API op name ("add", "operator+", ...)
  std::string name;  // "op/label", unique
  std::vector<Operand> inputs;
  nlohmann::json attrs;
  std::string reference;  // "torch" or "torch-f32-rounded"
  Expected expected;
};

/// Every case of every *.json under `dir`, in file-name order. Throws std::runtime_error
/// on a malformed file (a broken data set must fail loudly, not shrink silently).
std::vector<Case> load_cases(const std::filesystem::path& dir);

luminal::DType parse_dtype(const std::string& name);

/// Empty when `got` matches; otherwise what differs (dtype, shape, or the first bad
/// elements with their index, expected and actual values, and the tolerance).
std::optional<std::string> compare(const Expected& expected, const luminal::HostTensor& got);

}  // namespace golden
