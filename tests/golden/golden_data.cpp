#include "golden/golden_data.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "golden/tolerance.hpp"

namespace golden {

namespace lm = luminal;
using nlohmann::json;

lm::DType parse_dtype(const std::string& name) {
  if (name == "f32") return lm::f32;
  if (name == "f16") return lm::f16;
  if (name == "bf16") return lm::bf16;
  if (name == "i32") return lm::i32;
  if (name == "bool") return lm::boolean;
  throw std::runtime_error("golden data: unknown dtype '" + name + "'");
}

namespace {

std::vector<float> float_bits(const json& data) {
  std::vector<float> out;
  out.reserve(data.size());
  for (const json& v : data) out.push_back(std::bit_cast<float>(v.get<uint32_t>()));
  return out;
}

lm::HostTensor decode_tensor(const json& j) {
  const lm::DType dt = parse_dtype(j.at("dtype").get<std::string>());
  auto shape = j.at("shape").get<std::vector<int64_t>>();
  const json& data = j.at("data");
  switch (dt) {
    case lm::DType::f32:
      return lm::HostTensor::from(float_bits(data), shape);
    // f16/bf16 values are exact in f32, so rounding them back is exact.
    case lm::DType::f16:
    case lm::DType::bf16:
      return lm::HostTensor::from_f32(float_bits(data), shape, dt);
    case lm::DType::i32:
      return lm::HostTensor::from(data.get<std::vector<int32_t>>(), shape);
    case lm::DType::boolean: {
      std::vector<bool> b;
      for (const json& v : data) b.push_back(v.get<int>() != 0);
      return lm::HostTensor::from(b, shape);
    }
  }
  throw std::runtime_error("golden data: bad dtype");
}

Expected decode_expected(const json& j) {
  Expected e;
  e.dtype = parse_dtype(j.at("dtype").get<std::string>());
  e.shape = j.at("shape").get<std::vector<int64_t>>();
  if (lm::is_float(e.dtype)) {
    e.floats = float_bits(j.at("data"));
  } else {
    e.ints = j.at("data").get<std::vector<int32_t>>();
  }
  return e;
}

Case decode_case(const std::string& op, const json& j) {
  Case c;
  c.op = op;
  c.name = j.at("name").get<std::string>();
  c.attrs = j.at("attrs");
  c.reference = j.value("reference", "torch");
  for (const json& in : j.at("inputs")) {
    Operand o;
    if (in.contains("scalar")) {
      o.is_scalar = true;
      o.scalar = in.at("scalar").get<float>();
      o.int_scalar = in.value("kind", "float") == "int";
    } else {
      o.name = in.at("name").get<std::string>();
      o.value = decode_tensor(in);
      if (in.contains("view")) o.view = in.at("view");
      o.param = in.value("param", false);
    }
    c.inputs.push_back(std::move(o));
  }
  c.expected = decode_expected(j.at("expected"));
  return c;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

/// Row-major multi-index of flat element `flat`.
std::string index_str(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t k = shape.size(); k-- > 0;) {
    idx[k] = shape[k] ? flat % shape[k] : 0;
    flat = shape[k] ? flat / shape[k] : 0;
  }
  return shape_str(idx);
}

std::string num(double v) {
  std::ostringstream os;
  os.precision(9);
  os << v;
  return os.str();
}

}  // namespace

std::vector<Case> load_cases(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<Case> cases;
  for (const auto& file : files) {
    std::ifstream in(file);
    if (!in) throw std::runtime_error("golden data: cannot read " + file.string());
    json doc;
    try {
      doc = json::parse(in);
      const std::string op = doc.at("op").get<std::string>();
      for (const json& c : doc.at("cases")) cases.push_back(decode_case(op, c));
    } catch (const json::exception& e) {
      throw std::runtime_error("golden data: " + file.string() + ": " + e.what());
    }
  }
  return cases;
}

std::optional<std::string> compare(const Expected& expected, const lm::HostTensor& got) {
  if (got.dtype() != expected.dtype) {
    return "dtype: expected " + std::string(lm::dtype_name(expected.dtype)) + ", got " +
           std::string(lm::dtype_name(got.dtype()));
  }
  if (got.shape() != expected.shape) {
    return "shape: expected " + shape_str(expected.shape) + ", got " + shape_str(got.shape());
  }
  const Tolerance tol = tolerance_for(expected.dtype);
  std::vector<std::string> bad;
  int64_t nbad = 0;
  auto report = [&](int64_t i, const std::string& e, const std::string& g) {
    if (++nbad <= 4) bad.push_back("at " + index_str(i, expected.shape) + " expected " + e + " got " + g);
  };
  if (lm::is_float(expected.dtype)) {
    const std::vector<float> g = got.to_f32();
    for (size_t i = 0; i < g.size(); ++i) {
      const double e = expected.floats[i], v = g[i];
      bool ok;
      if (std::isnan(e) || std::isnan(v))
        ok = std::isnan(e) && std::isnan(v);
      else if (std::isinf(e) || std::isinf(v))
        ok = e == v;
      else
        ok = std::fabs(v - e) <= tol.atol + tol.rtol * std::fabs(e);
      if (!ok) report(static_cast<int64_t>(i), num(e), num(v));
    }
  } else if (expected.dtype == lm::i32) {
    const auto g = got.values<int32_t>();
    for (size_t i = 0; i < g.size(); ++i) {
      if (g[i] != expected.ints[i])
        report(static_cast<int64_t>(i), std::to_string(expected.ints[i]), std::to_string(g[i]));
    }
  } else {
    const auto g = got.values<bool>();
    for (size_t i = 0; i < g.size(); ++i) {
      if (static_cast<int32_t>(g[i]) != expected.ints[i]) {
        report(static_cast<int64_t>(i), expected.ints[i] ? "true" : "false", g[i] ? "true" : "false");
      }
    }
  }
  if (nbad == 0) return std::nullopt;
  std::string msg = std::to_string(nbad) + " of " + std::to_string(got.numel()) + " elements differ (" +
                    std::string(lm::dtype_name(expected.dtype)) + " rtol " + num(tol.rtol) + " atol " +
                    num(tol.atol) + "):";
  for (const auto& b : bad) msg += "\n      " + b;
  return msg;
}

}  // namespace golden
