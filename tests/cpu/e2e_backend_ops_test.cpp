// ggml-style backend test: every op of the API at small shapes, as one graph with one
// output per op, compiled for every available target and compared output by output with
// the reference target (the interpreter). A single graph keeps it to one JIT compile per
// target; a failure names the op.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "compiler/translation_models.hpp"
#include "luminal/luminal.hpp"

namespace lm = luminal;
using lm::Tensor;

namespace {

struct OpCase {
  std::string name;
  std::function<Tensor(lm::Graph&, const Tensor& a, const Tensor& b, const Tensor& ids, const Tensor& img)>
      build;
};

std::vector<OpCase> op_cases() {
  using G = lm::Graph;
  using T = const Tensor&;
  std::vector<OpCase> c;
  auto un = [&](std::string n, std::function<Tensor(const Tensor&)> f) {
    c.push_back({n, [f](G&, T a, T, T, T) { return f(a); }});
  };
  auto bin = [&](std::string n, std::function<Tensor(const Tensor&, const Tensor&)> f) {
    c.push_back({n, [f](G&, T a, T b, T, T) { return f(a, b); }});
  };
  un("abs", [](T x) { return lm::abs(x); });
  un("neg", [](T x) { return lm::neg(x); });
  un("exp", [](T x) { return lm::exp(x); });
  un("exp2", [](T x) { return lm::exp2(x); });
  un("log", [](T x) { return lm::log(lm::abs(x) + 0.5f); });
  un("log2", [](T x) { return lm::log2(lm::abs(x) + 0.5f); });
  un("sqrt", [](T x) { return lm::sqrt(lm::abs(x)); });
  un("rsqrt", [](T x) { return lm::rsqrt(lm::abs(x) + 0.1f); });
  un("recip", [](T x) { return lm::recip(x + 3.f); });
  un("sin", [](T x) { return lm::sin(x); });
  un("cos", [](T x) { return lm::cos(x); });
  un("tanh", [](T x) { return lm::tanh(x); });
  un("sigmoid", [](T x) { return lm::sigmoid(x); });
  un("relu", [](T x) { return lm::relu(x); });
  un("gelu", [](T x) { return lm::gelu(x); });
  un("gelu_erf", [](T x) { return lm::gelu_erf(x); });
  un("erf", [](T x) { return lm::erf(x); });
  un("silu", [](T x) { return lm::silu(x); });
  un("square", [](T x) { return lm::square(x); });
  un("sign", [](T x) { return lm::sign(x); });
  un("clamp", [](T x) { return lm::clamp(x, -0.3f, 0.4f); });
  un("logical_not", [](T x) { return lm::cast(lm::logical_not(lm::greater(x, 0.f)), lm::f32); });
  bin("add", [](T x, T y) { return lm::add(x, y); });
  bin("sub", [](T x, T y) { return lm::sub(x, y); });
  bin("mul", [](T x, T y) { return lm::mul(x, y); });
  bin("div", [](T x, T y) { return lm::div(x, y + 3.f); });
  bin("mod", [](T x, T y) { return lm::mod(x * 5.f, y + 3.f); });
  bin("pow", [](T x, T y) { return lm::pow(lm::abs(x) + 0.1f, y); });
  bin("maximum", [](T x, T y) { return lm::maximum(x, y); });
  bin("minimum", [](T x, T y) { return lm::minimum(x, y); });
  bin("compare", [](T x, T y) {
    return lm::cast(lm::logical_or(lm::less(x, y),
                                   lm::logical_and(lm::greater_equal(x, 0.f), lm::not_equal(x, y))),
                    lm::f32) +
           lm::cast(lm::equal(x, x), lm::f32) + lm::cast(lm::less_equal(x, y), lm::f32) +
           lm::cast(lm::greater(x, y), lm::f32);
  });
  bin("where", [](T x, T y) { return lm::where(lm::greater(x, y), x, y * 2.f); });
  un("sum", [](T x) { return lm::sum(x, {1}); });
  un("sum_all", [](T x) { return lm::sum(x); });
  un("mean", [](T x) { return lm::mean(x, {0}, true); });
  un("max", [](T x) { return lm::max(x, {1}); });
  un("min", [](T x) { return lm::min(x, {0}); });
  un("prod", [](T x) { return lm::prod(x * 0.5f + 1.f, {1}); });
  un("var", [](T x) { return lm::var(x, {1}); });
  un("argmax", [](T x) { return lm::cast(lm::argmax(x, 1), lm::f32); });
  un("argmin", [](T x) { return lm::cast(lm::argmin(x, 0), lm::f32); });
  un("cumsum", [](T x) { return lm::cumsum(x, 1); });
  un("softmax", [](T x) { return lm::softmax(x, -1); });
  un("log_softmax", [](T x) { return lm::log_softmax(x, 0); });
  bin("matmul", [](T x, T y) { return lm::matmul(x, lm::transpose(y, 0, 1)); });
  bin("linear", [](T x, T y) { return lm::linear(x, y); });
  bin("layer_norm", [](T x, T y) { return lm::layer_norm(x, lm::sum(y, {0}), Tensor()); });
  bin("rms_norm", [](T x, T y) { return lm::rms_norm(x, lm::sum(y, {0})); });
  un("transpose", [](T x) { return lm::transpose(x, 0, 1) * 2.f; });
  un("permute", [](T x) { return lm::permute(lm::reshape(x, {2, 3, 8}), {2, 0, 1}) + 1.f; });
  un("reshape", [](T x) { return lm::reshape(x, {4, 12}) - 1.f; });
  un("flatten_squeeze", [](T x) { return lm::squeeze(lm::unsqueeze(lm::flatten(x), 0), 0) * 3.f; });
  un("expand", [](T x) { return lm::expand(lm::unsqueeze(lm::sum(x, {1}), 1), {6, 5}) + 0.f; });
  un("slice", [](T x) { return lm::slice(x, 1, 1, 7, 2) * 1.5f; });
  un("pad", [](T x) { return lm::pad(x, {{1, 2}, {0, 3}}, -2.f) + 1.f; });
  un("concat", [](T x) { return lm::concat({x, x * 2.f}, 1); });
  un("repeat", [](T x) { return lm::repeat(x, {2, 1}) + 0.5f; });
  c.push_back({"arange_tril", [](G&, T a, T, T, T) {
                 return lm::cast(lm::tril_mask(6, 8), lm::f32) * a + lm::cast(lm::arange(8), lm::f32);
               }});
  c.push_back({"cast_roundtrip", [](G&, T a, T, T, T) {
                 return lm::cast(lm::cast(a * 100.f, lm::i32), lm::f32) +
                        lm::cast(lm::cast(a, lm::f16), lm::f32) + lm::cast(lm::cast(a, lm::bf16), lm::f32);
               }});
  c.push_back({"embedding", [](G&, T a, T, T ids, T) { return lm::embedding(a, ids); }});
  c.push_back({"rope", [](G&, T a, T, T ids, T) {
                 return lm::rope(lm::reshape(a, {1, 6, 8}), lm::slice(ids, 0, 0, 6));
               }});
  c.push_back({"attention", [](G&, T a, T b, T, T) {
                 Tensor q = lm::reshape(a, {2, 6, 4});
                 Tensor k = lm::reshape(b, {2, 6, 4});
                 return lm::scaled_dot_product_attention(q, k, k * 0.5f, true);
               }});
  c.push_back({"conv1d", [](G&, T a, T b, T, T) {
                 return lm::conv1d(lm::reshape(a, {1, 6, 8}), lm::reshape(lm::slice(b, 1, 0, 6), {2, 6, 3}),
                                   Tensor(), 1, 1);
               }});
  c.push_back({"conv2d", [](G&, T, T b, T, T img) {
                 return lm::conv2d(img, lm::reshape(lm::slice(b, 1, 0, 6), {4, 1, 3, 3}), Tensor(), {1, 1},
                                   {1, 1}, {1, 1}, 4);
               }});
  c.push_back({"pools", [](G&, T, T, T, T img) {
                 return lm::max_pool2d(img, {2, 2}) +
                        lm::reshape(lm::sum(lm::avg_pool2d(img, {2, 2}, {1, 1}, {1, 1}), {2, 3}),
                                    {1, 4, 1, 1});
               }});
  return c;
}

}  // namespace

TEST_CASE("every op on every available target matches the reference target", "[cpu][e2e][backend_ops]") {
  lm::Graph g;
  Tensor a = g.input("a", {6, 8});
  Tensor b = g.input("b", {6, 8});
  Tensor ids = g.input("ids", {8}, lm::i32);
  Tensor img = g.input("img", {1, 4, 6, 6});
  const auto cases = op_cases();
  for (const auto& c : cases) g.output(c.name, c.build(g, a, b, ids, img));

  auto inputs = lm::test::random_inputs(*g.impl(), 7);
  {
    std::vector<int32_t> id{0, 5, 2, 3, 1, 4, 5, 0};
    inputs.insert_or_assign("ids", lm::HostTensor::from(id, {8}));
  }
  auto want = lm::compile(g, lm::Target::reference())(inputs);

  for (const lm::Target& t : {lm::Target::cpu(), lm::Target::best(), lm::Target::parse("cuda:sm_90+emu"),
                              lm::Target::parse("hip:gfx90a+emu")}) {
    if (!t.is_available()) {
      WARN("target " << t.to_string() << " not available; skipped");
      continue;
    }
    lm::Callable f = lm::compile(g, t);
    INFO("target " << t.to_string() << ": " << f.report().to_string());
    auto got = f(inputs);
    int failed = 0;
    for (const auto& c : cases) {
      std::map<std::string, lm::HostTensor> w{{c.name, want.at(c.name)}};
      const double err = lm::test::compare_outputs(got, w, 1e-4, 1e-4);
      if (err > 1) {
        ++failed;
        UNSCOPED_INFO("op " << c.name << " on " << t.to_string() << ": error ratio " << err);
      }
    }
    CHECK(failed == 0);
    std::printf("backend ops: %s: %zu ops, %d failed; %lld generated kernels, %lld interpreted\n",
                t.to_string().c_str(), cases.size(), failed,
                static_cast<long long>(f.report().generated_kernels),
                static_cast<long long>(f.report().interpreted_kernels));
  }
}

TEST_CASE("f16 -> f32 is bit-exact on every target, NaN payloads quieted", "[cpu][e2e][backend_ops]") {
  // Every f16 bit pattern, widened by the reference, the generated C and the GPU kernels
  // on the emulator: the same bits everywhere (-0, subnormals, inf; a signaling NaN comes
  // back quiet with its payload, as IEEE 754's convertFormat and vcvtph2ps give), and
  // also widened and doubled (x + x), so the conversion is fused into a computing kernel.
  lm::Graph g;
  Tensor x = g.input("x", {65536}, lm::f16);
  g.output("y", lm::cast(x, lm::f32));
  g.output("y2", lm::cast(x, lm::f32) + lm::cast(x, lm::f32));
  std::vector<uint16_t> bits(65536);
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<uint16_t>(i);
  std::map<std::string, lm::HostTensor> in{
      {"x", lm::HostTensor::from_bytes(lm::f16, {65536}, std::as_bytes(std::span<const uint16_t>(bits)))}};
  auto want = lm::compile(g, lm::Target::reference())(in);
  const auto wy = want.at("y").values<float>();
  for (size_t i = 0; i < bits.size(); ++i) {
    uint32_t w;
    std::memcpy(&w, &wy[i], 4);
    if ((i & 0x7fff) > 0x7c00) {
      INFO("f16 0x" << std::hex << i);
      REQUIRE(w == ((static_cast<uint32_t>(i & 0x8000) << 16) | 0x7fc00000u |
                    (static_cast<uint32_t>(i & 0x3ff) << 13)));
    }
  }
  for (const lm::Target& t :
       {lm::Target::cpu(), lm::Target::parse("cuda:sm_90+emu"), lm::Target::parse("hip:gfx90a+emu")}) {
    if (!t.is_available()) {
      WARN("target " << t.to_string() << " not available; skipped");
      continue;
    }
    auto got = lm::compile(g, t)(in);
    for (const char* name : {"y", "y2"}) {
      const auto gv = got.at(name).values<float>(), wv = want.at(name).values<float>();
      REQUIRE(gv.size() == wv.size());
      int64_t differ = 0, first = -1;
      for (size_t i = 0; i < gv.size(); ++i) {
        uint32_t a, b;
        std::memcpy(&a, &gv[i], 4);
        std::memcpy(&b, &wv[i], 4);
        // x + x of a NaN is some NaN (which operand's payload is not specified).
        if (a != b && !(std::string(name) == "y2" && std::isnan(gv[i]) && std::isnan(wv[i]))) {
          if (first < 0) first = static_cast<int64_t>(i);
          ++differ;
        }
      }
      INFO("target " << t.to_string() << ", output " << name << ": first differing f16 0x" << std::hex
                     << first);
      CHECK(differ == 0);
    }
  }
}

TEST_CASE("concat copies its pieces bit for bit on every target with -0 too", "[cpu][e2e][backend_ops]") {
  // torch.cat copies; ours is a sum of padded pieces, exact only with -0 padding (a piece's
  // -0 plus a +0 padding is +0: concat turned -0 into +0 until 2026-12-07). f32 along
  // either axis, and f16 pieces (their bits through a widening cast).
  lm::Graph g;
  Tensor a = g.input("a", {2, 3}), b = g.input("b", {2, 2}), h = g.input("h", {2, 3}, lm::f16);
  g.output("cols", lm::concat({a, b, a}, 1));
  g.output("rows", lm::concat({lm::permute(a, {1, 0}), lm::permute(b, {1, 0})}, 0));
  g.output("half", lm::cast(lm::concat({h, lm::cast(b, lm::f16)}, 1), lm::f32));
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> av{-0.0f, 1.5f, nan, -inf, 0.0f, -2.0f}, bv{-0.0f, -0.0f, 3.0f, 1e-40f};
  std::map<std::string, lm::HostTensor> in{{"a", lm::HostTensor::from(av, {2, 3})},
                                           {"b", lm::HostTensor::from(bv, {2, 2})},
                                           {"h", lm::HostTensor::from_f32(av, {2, 3}, lm::f16)}};
  // What torch.cat gives: the pieces' elements, in place.
  auto A = [&](int r, int c) { return av[static_cast<size_t>(r * 3 + c)]; };
  auto B = [&](int r, int c) { return bv[static_cast<size_t>(r * 2 + c)]; };
  std::vector<float> cols, rows, half;
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 3; ++c) cols.push_back(A(r, c));
    for (int c = 0; c < 2; ++c) cols.push_back(B(r, c));
    for (int c = 0; c < 3; ++c) cols.push_back(A(r, c));
    for (int c = 0; c < 3; ++c) half.push_back(A(r, c));
    // (1e-40 is subnormal in f32 and 0 in f16; -0 stays -0)
    for (int c = 0; c < 2; ++c) half.push_back(B(r, c) == 1e-40f ? 0.0f : B(r, c));
  }
  for (int c = 0; c < 3; ++c)
    for (int r = 0; r < 2; ++r) rows.push_back(A(r, c));
  for (int c = 0; c < 2; ++c)
    for (int r = 0; r < 2; ++r) rows.push_back(B(r, c));
  const std::map<std::string, std::vector<float>> expect{{"cols", cols}, {"rows", rows}, {"half", half}};
  for (const lm::Target& t : {lm::Target::reference(), lm::Target::cpu(), lm::Target::parse("cuda:sm_90+emu"),
                              lm::Target::parse("hip:gfx90a+emu")}) {
    if (!t.is_available()) {
      WARN("target " << t.to_string() << " not available; skipped");
      continue;
    }
    auto got = lm::compile(g, t)(in);
    for (const auto& [name, want] : expect) {
      const auto v = got.at(name).values<float>();
      REQUIRE(v.size() == want.size());
      for (size_t i = 0; i < v.size(); ++i) {
        INFO(t.to_string() << " " << name << " element " << i << ": " << v[i] << " vs " << want[i]);
        // (NaN: any NaN -- the f16 round trip quiets it)
        CHECK((std::isnan(want[i]) ? std::isnan(v[i])
                                   : std::bit_cast<uint32_t>(v[i]) == std::bit_cast<uint32_t>(want[i])));
      }
    }
  }
}
