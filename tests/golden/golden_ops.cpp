#include "golden/golden_ops.hpp"

#include <functional>
#include <map>
#include <stdexcept>

namespace golden {

namespace lm = luminal;
using nlohmann::json;
using Args = std::vector<lm::Operand>;
using Builder = std::function<lm::Tensor(const Args&, const json&)>;

const std::vector<std::string>& api_ops() {
  static const std::vector<std::string> ops = {
      // elementwise
      "neg", "abs", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "recip", "sin", "cos", "tanh", "sigmoid",
      "relu", "square", "sign", "silu", "gelu", "gelu_erf", "clamp", "logical_not", "add", "sub", "mul",
      "div", "pow", "maximum", "minimum", "mod", "less", "greater", "less_equal", "greater_equal", "equal",
      "not_equal", "logical_and", "logical_or", "where",
      // Tensor operators
      "operator+", "operator-", "operator*", "operator/", "operator-unary",
      // reductions
      "sum", "mean", "max", "min", "prod", "var", "argmax", "argmin", "cumsum",
      // linear algebra
      "matmul", "linear",
      // network
      "softmax", "log_softmax", "layer_norm", "rms_norm", "embedding", "rope", "scaled_dot_product_attention",
      "conv1d", "conv2d", "max_pool2d", "avg_pool2d",
      // movement
      "reshape", "permute", "transpose", "expand", "squeeze", "unsqueeze", "flatten", "slice", "pad",
      "concat", "repeat",
      // creation and types
      "constant", "full", "zeros_like", "ones_like", "arange", "tril_mask", "cast"};
  return ops;
}

namespace {

const lm::Tensor& T(const Args& a, size_t i) {
  if (i >= a.size() || !a[i].is_tensor())
    throw std::runtime_error("golden: operand " + std::to_string(i) + " is not a tensor");
  return a[i].tensor();
}

std::vector<lm::Dim> dims(const json& j) {
  std::vector<lm::Dim> out;
  for (const json& v : j) out.emplace_back(v.get<int64_t>());
  return out;
}

lm::Axes axes(const json& j) {
  if (j.is_number_integer()) return lm::Axes(j.get<int>());
  return lm::Axes(j.get<std::vector<int>>());
}

std::array<int, 2> pair2(const json& attrs, const char* key, std::array<int, 2> dflt) {
  if (!attrs.contains(key)) return dflt;
  auto v = attrs.at(key).get<std::vector<int>>();
  return {v.at(0), v.at(1)};
}

lm::DType dtype_attr(const json& attrs, lm::DType dflt) {
  return attrs.contains("dtype") ? parse_dtype(attrs.at("dtype").get<std::string>()) : dflt;
}

// Reductions: call the shortest form the case's attributes allow, so defaults are tested.
template <class F>
Builder reduction(F f) {
  return [f](const Args& a, const json& at) -> lm::Tensor {
    return f(T(a, 0), axes(at.at("axes")), at.value("keepdim", false));
  };
}

std::map<std::string, Builder> make_builders() {
  std::map<std::string, Builder> b;
#define GOLDEN_UNARY(name) b[#name] = [](const Args& a, const json&) { return lm::name(T(a, 0)); };
  GOLDEN_UNARY(neg)
  GOLDEN_UNARY(abs) GOLDEN_UNARY(exp) GOLDEN_UNARY(exp2) GOLDEN_UNARY(log) GOLDEN_UNARY(log2) GOLDEN_UNARY(
      sqrt) GOLDEN_UNARY(rsqrt) GOLDEN_UNARY(recip) GOLDEN_UNARY(sin) GOLDEN_UNARY(cos) GOLDEN_UNARY(tanh)
      GOLDEN_UNARY(sigmoid) GOLDEN_UNARY(relu) GOLDEN_UNARY(square) GOLDEN_UNARY(sign) GOLDEN_UNARY(
          silu) GOLDEN_UNARY(gelu) GOLDEN_UNARY(gelu_erf) GOLDEN_UNARY(logical_not)
#undef GOLDEN_UNARY
#define GOLDEN_BINARY(name) b[#name] = [](const Args& a, const json&) { return lm::name(a.at(0), a.at(1)); };
          GOLDEN_BINARY(add) GOLDEN_BINARY(sub) GOLDEN_BINARY(mul) GOLDEN_BINARY(div) GOLDEN_BINARY(pow)
              GOLDEN_BINARY(maximum) GOLDEN_BINARY(minimum) GOLDEN_BINARY(mod) GOLDEN_BINARY(less)
                  GOLDEN_BINARY(greater) GOLDEN_BINARY(less_equal) GOLDEN_BINARY(greater_equal)
                      GOLDEN_BINARY(equal) GOLDEN_BINARY(not_equal) GOLDEN_BINARY(logical_and)
                          GOLDEN_BINARY(logical_or)
#undef GOLDEN_BINARY
                              b["clamp"] = [](const Args& a, const json& at) {
                                if (at.value("int_bounds", false))
                                  return lm::clamp(T(a, 0), at.at("lo").get<int>(), at.at("hi").get<int>());
                                return lm::clamp(T(a, 0), at.at("lo").get<float>(), at.at("hi").get<float>());
                              };
  b["where"] = [](const Args& a, const json&) { return lm::where(T(a, 0), a.at(1), a.at(2)); };
  b["operator+"] = [](const Args& a, const json&) { return a.at(0) + a.at(1); };
  b["operator-"] = [](const Args& a, const json&) { return a.at(0) - a.at(1); };
  b["operator*"] = [](const Args& a, const json&) { return a.at(0) * a.at(1); };
  b["operator/"] = [](const Args& a, const json&) { return a.at(0) / a.at(1); };
  b["operator-unary"] = [](const Args& a, const json&) { return -T(a, 0); };

  b["sum"] = reduction([](const lm::Tensor& x, const lm::Axes& ax, bool k) { return lm::sum(x, ax, k); });
  b["mean"] = reduction([](const lm::Tensor& x, const lm::Axes& ax, bool k) { return lm::mean(x, ax, k); });
  b["max"] = reduction([](const lm::Tensor& x, const lm::Axes& ax, bool k) { return lm::max(x, ax, k); });
  b["min"] = reduction([](const lm::Tensor& x, const lm::Axes& ax, bool k) { return lm::min(x, ax, k); });
  b["prod"] = reduction([](const lm::Tensor& x, const lm::Axes& ax, bool k) { return lm::prod(x, ax, k); });
  b["var"] = [](const Args& a, const json& at) {
    const lm::Tensor& x = T(a, 0);
    if (!at.contains("keepdim")) return lm::var(x, axes(at.at("axes")));
    if (!at.contains("unbiased")) return lm::var(x, axes(at.at("axes")), at.at("keepdim").get<bool>());
    return lm::var(x, axes(at.at("axes")), at.at("keepdim").get<bool>(), at.at("unbiased").get<bool>());
  };
  b["argmax"] = [](const Args& a, const json& at) {
    if (!at.contains("keepdim")) return lm::argmax(T(a, 0), at.at("axis").get<int>());
    return lm::argmax(T(a, 0), at.at("axis").get<int>(), at.at("keepdim").get<bool>());
  };
  b["argmin"] = [](const Args& a, const json& at) {
    if (!at.contains("keepdim")) return lm::argmin(T(a, 0), at.at("axis").get<int>());
    return lm::argmin(T(a, 0), at.at("axis").get<int>(), at.at("keepdim").get<bool>());
  };
  b["cumsum"] = [](const Args& a, const json& at) { return lm::cumsum(T(a, 0), at.at("axis").get<int>()); };

  b["matmul"] = [](const Args& a, const json&) { return lm::matmul(T(a, 0), T(a, 1)); };
  b["linear"] = [](const Args& a, const json&) {
    return a.size() == 2 ? lm::linear(T(a, 0), T(a, 1)) : lm::linear(T(a, 0), T(a, 1), T(a, 2));
  };

  b["softmax"] = [](const Args& a, const json& at) {
    return at.contains("axis") ? lm::softmax(T(a, 0), at.at("axis").get<int>()) : lm::softmax(T(a, 0));
  };
  b["log_softmax"] = [](const Args& a, const json& at) {
    return at.contains("axis") ? lm::log_softmax(T(a, 0), at.at("axis").get<int>())
                               : lm::log_softmax(T(a, 0));
  };
  b["layer_norm"] = [](const Args& a, const json& at) {
    if (!at.contains("eps")) return lm::layer_norm(T(a, 0), T(a, 1), T(a, 2));
    return lm::layer_norm(T(a, 0), T(a, 1), T(a, 2), at.at("eps").get<float>());
  };
  b["rms_norm"] = [](const Args& a, const json& at) {
    if (!at.contains("eps")) return lm::rms_norm(T(a, 0), T(a, 1));
    return lm::rms_norm(T(a, 0), T(a, 1), at.at("eps").get<float>());
  };
  b["embedding"] = [](const Args& a, const json&) { return lm::embedding(T(a, 0), T(a, 1)); };
  b["rope"] = [](const Args& a, const json& at) {
    if (!at.contains("theta")) return lm::rope(T(a, 0), T(a, 1));
    return lm::rope(T(a, 0), T(a, 1), at.at("theta").get<float>());
  };
  b["scaled_dot_product_attention"] = [](const Args& a, const json& at) {
    if (!at.contains("causal")) return lm::scaled_dot_product_attention(T(a, 0), T(a, 1), T(a, 2));
    return lm::scaled_dot_product_attention(T(a, 0), T(a, 1), T(a, 2), at.at("causal").get<bool>());
  };
  b["conv1d"] = [](const Args& a, const json& at) {
    const lm::Tensor bias = a.size() > 2 ? T(a, 2) : lm::Tensor();
    if (at.empty()) return a.size() > 2 ? lm::conv1d(T(a, 0), T(a, 1), bias) : lm::conv1d(T(a, 0), T(a, 1));
    return lm::conv1d(T(a, 0), T(a, 1), bias, at.value("stride", 1), at.value("padding", 0),
                      at.value("dilation", 1), at.value("groups", 1));
  };
  b["conv2d"] = [](const Args& a, const json& at) {
    const lm::Tensor bias = a.size() > 2 ? T(a, 2) : lm::Tensor();
    if (at.empty()) return a.size() > 2 ? lm::conv2d(T(a, 0), T(a, 1), bias) : lm::conv2d(T(a, 0), T(a, 1));
    return lm::conv2d(T(a, 0), T(a, 1), bias, pair2(at, "stride", {1, 1}), pair2(at, "padding", {0, 0}),
                      pair2(at, "dilation", {1, 1}), at.value("groups", 1));
  };
  b["max_pool2d"] = [](const Args& a, const json& at) {
    const auto k = pair2(at, "kernel", {0, 0});
    if (!at.contains("stride") && !at.contains("padding")) return lm::max_pool2d(T(a, 0), k);
    return lm::max_pool2d(T(a, 0), k, pair2(at, "stride", {0, 0}), pair2(at, "padding", {0, 0}));
  };
  b["avg_pool2d"] = [](const Args& a, const json& at) {
    const auto k = pair2(at, "kernel", {0, 0});
    if (!at.contains("stride") && !at.contains("padding")) return lm::avg_pool2d(T(a, 0), k);
    return lm::avg_pool2d(T(a, 0), k, pair2(at, "stride", {0, 0}), pair2(at, "padding", {0, 0}));
  };

  b["reshape"] = [](const Args& a, const json& at) { return lm::reshape(T(a, 0), dims(at.at("shape"))); };
  b["permute"] = [](const Args& a, const json& at) {
    return lm::permute(T(a, 0), at.at("axes").get<std::vector<int>>());
  };
  b["transpose"] = [](const Args& a, const json& at) {
    return lm::transpose(T(a, 0), at.at("a").get<int>(), at.at("b").get<int>());
  };
  b["expand"] = [](const Args& a, const json& at) { return lm::expand(T(a, 0), dims(at.at("shape"))); };
  b["squeeze"] = [](const Args& a, const json& at) { return lm::squeeze(T(a, 0), at.at("axis").get<int>()); };
  b["unsqueeze"] = [](const Args& a, const json& at) {
    return lm::unsqueeze(T(a, 0), at.at("axis").get<int>());
  };
  b["flatten"] = [](const Args& a, const json& at) {
    if (!at.contains("start")) return lm::flatten(T(a, 0));
    if (!at.contains("end")) return lm::flatten(T(a, 0), at.at("start").get<int>());
    return lm::flatten(T(a, 0), at.at("start").get<int>(), at.at("end").get<int>());
  };
  b["slice"] = [](const Args& a, const json& at) {
    const int axis = at.at("axis").get<int>();
    const lm::Dim start(at.at("start").get<int64_t>()), end(at.at("end").get<int64_t>());
    if (!at.contains("step")) return lm::slice(T(a, 0), axis, start, end);
    return lm::slice(T(a, 0), axis, start, end, at.at("step").get<int64_t>());
  };
  b["pad"] = [](const Args& a, const json& at) {
    std::vector<std::pair<lm::Dim, lm::Dim>> pads;
    for (const json& p : at.at("pads"))
      pads.emplace_back(lm::Dim(p.at(0).get<int64_t>()), lm::Dim(p.at(1).get<int64_t>()));
    if (!at.contains("value")) return lm::pad(T(a, 0), pads);
    return lm::pad(T(a, 0), pads, at.at("value").get<float>());
  };
  b["concat"] = [](const Args& a, const json& at) {
    std::vector<lm::Tensor> xs;
    if (at.contains("operands")) {
      for (const json& i : at.at("operands")) xs.push_back(T(a, i.get<size_t>()));
    } else {
      for (size_t i = 0; i < a.size(); ++i) xs.push_back(T(a, i));
    }
    return lm::concat(xs, at.at("axis").get<int>());
  };
  b["repeat"] = [](const Args& a, const json& at) {
    return lm::repeat(T(a, 0), at.at("times").get<std::vector<int64_t>>());
  };

  b["constant"] = [](const Args&, const json& at) {
    const float v = at.at("value").get<float>();
    if (!at.contains("dtype")) return lm::constant(v, dims(at.at("shape")));
    return lm::constant(v, dims(at.at("shape")), dtype_attr(at, lm::f32));
  };
  b["full"] = [](const Args&, const json& at) {
    const float v = at.at("value").get<float>();
    if (!at.contains("dtype")) return lm::full(dims(at.at("shape")), v);
    return lm::full(dims(at.at("shape")), v, dtype_attr(at, lm::f32));
  };
  b["zeros_like"] = [](const Args& a, const json&) { return lm::zeros_like(T(a, 0)); };
  b["ones_like"] = [](const Args& a, const json&) { return lm::ones_like(T(a, 0)); };
  b["arange"] = [](const Args&, const json& at) { return lm::arange(lm::Dim(at.at("n").get<int64_t>())); };
  b["tril_mask"] = [](const Args&, const json& at) {
    return lm::tril_mask(lm::Dim(at.at("n").get<int64_t>()), lm::Dim(at.at("m").get<int64_t>()));
  };
  b["cast"] = [](const Args& a, const json& at) { return lm::cast(T(a, 0), dtype_attr(at, lm::f32)); };
  return b;
}

const std::map<std::string, Builder>& builders() {
  static const std::map<std::string, Builder> b = make_builders();
  return b;
}

std::map<std::string, Builder> make_member_builders() {
  std::map<std::string, Builder> b;
  b["reshape"] = [](const Args& a, const json& at) { return T(a, 0).reshape(dims(at.at("shape"))); };
  b["permute"] = [](const Args& a, const json& at) {
    return T(a, 0).permute(at.at("axes").get<std::vector<int>>());
  };
  b["transpose"] = [](const Args& a, const json& at) {
    return T(a, 0).transpose(at.at("a").get<int>(), at.at("b").get<int>());
  };
  b["expand"] = [](const Args& a, const json& at) { return T(a, 0).expand(dims(at.at("shape"))); };
  b["squeeze"] = [](const Args& a, const json& at) { return T(a, 0).squeeze(at.at("axis").get<int>()); };
  b["unsqueeze"] = [](const Args& a, const json& at) { return T(a, 0).unsqueeze(at.at("axis").get<int>()); };
  b["flatten"] = [](const Args& a, const json& at) {
    if (!at.contains("start")) return T(a, 0).flatten();
    if (!at.contains("end")) return T(a, 0).flatten(at.at("start").get<int>());
    return T(a, 0).flatten(at.at("start").get<int>(), at.at("end").get<int>());
  };
  b["slice"] = [](const Args& a, const json& at) {
    const lm::Dim start(at.at("start").get<int64_t>()), end(at.at("end").get<int64_t>());
    return T(a, 0).slice(at.at("axis").get<int>(), start, end, at.value("step", int64_t{1}));
  };
  b["sum"] = [](const Args& a, const json& at) {
    return T(a, 0).sum(axes(at.at("axes")), at.value("keepdim", false));
  };
  b["mean"] = [](const Args& a, const json& at) {
    return T(a, 0).mean(axes(at.at("axes")), at.value("keepdim", false));
  };
  b["max"] = [](const Args& a, const json& at) {
    return T(a, 0).max(axes(at.at("axes")), at.value("keepdim", false));
  };
  b["min"] = [](const Args& a, const json& at) {
    return T(a, 0).min(axes(at.at("axes")), at.value("keepdim", false));
  };
  b["matmul"] = [](const Args& a, const json&) { return T(a, 0).matmul(T(a, 1)); };
  b["cast"] = [](const Args& a, const json& at) { return T(a, 0).cast(dtype_attr(at, lm::f32)); };
#define GOLDEN_MEMBER(name) b[#name] = [](const Args& a, const json&) { return T(a, 0).name(); };
  GOLDEN_MEMBER(exp)
  GOLDEN_MEMBER(log) GOLDEN_MEMBER(sqrt) GOLDEN_MEMBER(abs) GOLDEN_MEMBER(relu) GOLDEN_MEMBER(sigmoid)
      GOLDEN_MEMBER(tanh)
#undef GOLDEN_MEMBER
          b["softmax"] = [](const Args& a, const json& at) {
            return at.contains("axis") ? T(a, 0).softmax(at.at("axis").get<int>()) : T(a, 0).softmax();
          };
  return b;
}

const std::map<std::string, Builder>& member_builders() {
  static const std::map<std::string, Builder> b = make_member_builders();
  return b;
}

}  // namespace

bool has_builder(const std::string& op) { return builders().count(op) != 0; }

bool has_member_builder(const std::string& op) { return member_builders().count(op) != 0; }

lm::Tensor build_op_member(const Case& c, const Args& args) {
  auto it = member_builders().find(c.op);
  if (it == member_builders().end()) throw std::runtime_error("golden: no member form for op '" + c.op + "'");
  return it->second(args, c.attrs);
}

lm::Tensor build_op(const Case& c, const Args& args) {
  auto it = builders().find(c.op);
  if (it == builders().end()) throw std::runtime_error("golden: no builder for op '" + c.op + "'");
  return it->second(args, c.attrs);
}

lm::Tensor apply_view(lm::Tensor t, const json& view) {
  for (const json& v : view) {
    const std::string op = v.at("op").get<std::string>();
    if (op == "permute") {
      t = lm::permute(t, v.at("axes").get<std::vector<int>>());
    } else if (op == "transpose") {
      t = lm::transpose(t, v.at("a").get<int>(), v.at("b").get<int>());
    } else if (op == "slice") {
      t = lm::slice(t, v.at("axis").get<int>(), lm::Dim(v.at("start").get<int64_t>()),
                    lm::Dim(v.at("end").get<int64_t>()), v.at("step").get<int64_t>());
    } else if (op == "expand") {
      t = lm::expand(t, dims(v.at("shape")));
    } else {
      throw std::runtime_error("golden: unknown view op '" + op + "'");
    }
  }
  return t;
}

}  // namespace golden
