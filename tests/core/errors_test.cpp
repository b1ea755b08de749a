// Table-driven misuse test: every row makes one mistake and checks the exact Error
// subclass, that the message names the op and the offending shapes/values, and -- for
// graph-building mistakes -- that it points at this file (the user's call site). Call-time
// mistakes must leave the Callable usable: a good call after each bad one is checked.
#include <functional>
#include <string>
#include <typeinfo>
#include <vector>

#include "core/ops_test_util.hpp"

using namespace ops_test;
namespace lm = luminal;

namespace {

enum class Kind { shape, dtype, runtime, compile };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::shape:
      return "ShapeError";
    case Kind::dtype:
      return "DTypeError";
    case Kind::runtime:
      return "RuntimeError";
    case Kind::compile:
      return "CompileError";
  }
  return "?";
}

bool is_kind(const lm::Error& e, Kind k) {
  switch (k) {
    case Kind::shape:
      return typeid(e) == typeid(lm::ShapeError);
    case Kind::dtype:
      return typeid(e) == typeid(lm::DTypeError);
    case Kind::runtime:
      return typeid(e) == typeid(lm::RuntimeError);
    case Kind::compile:
      return typeid(e) == typeid(lm::CompileError);
  }
  return false;
}

struct Row {
  const char* what;
  Kind kind;
  std::function<void()> misuse;
  std::vector<std::string> needles;  // substrings the message must contain
  bool call_site = true;             // the message must name errors_test.cpp
};

// A small Callable shared by the call-time rows: y = x * 2 + w, x [B, 3] with B in [1, 4].
struct Fixture {
  lm::Callable fn;
  Fixture() {
    lm::Graph g;
    lm::Dim B = g.dim("B", 1, 4);
    auto x = g.input("x", {B, 3});
    auto z = g.input("z", {B, 3});
    auto w = g.param("w", {3});
    g.output("y", x * 2.0f + w + z);
    fn = lm::compile(g, lm::Target::reference());
  }
  void bind() { fn.bind("w", f32({1, 2, 3}, {3})); }
  static lm::HostTensor x(int64_t b) {
    return f32(std::vector<float>(static_cast<size_t>(b * 3), 1.0f), {b, 3});
  }
  void good_call_works() {
    auto out = fn({{"x", x(2)}, {"z", x(2)}}).at("y");
    check_exact(out, {4, 5, 6, 4, 5, 6});
  }
};

std::vector<Row> build_rows(Fixture& fx) {
  std::vector<Row> rows;
  auto add = [&](const char* what, Kind k, std::function<void()> f, std::vector<std::string> needles,
                 bool site = true) {
    rows.push_back(Row{what, k, std::move(f), std::move(needles), site});
  };

  // ---- broadcasting and shapes
  add("incompatible broadcast", Kind::shape,
      [] {
        lm::Graph g;
        (void)lm::add(g.input("a", {2, 3}), g.input("b", {4, 3}));
      },
      {"[add]", "(2, 3)", "(4, 3)"});
  add("incompatible broadcast through an operator", Kind::shape,
      [] {
        lm::Graph g;
        (void)(g.input("a", {2, 3}) * g.input("b", {2}));
      },
      {"[mul]", "(2, 3)", "(2)"});
  add("matmul inner mismatch", Kind::shape,
      [] {
        lm::Graph g;
        lm::Dim B = g.dim("B", 1, 8);
        (void)lm::matmul(g.input("a", {B, 512}), g.input("b", {256, 1024}));
      },
      {"[matmul]", "(B, 512)", "(256, 1024)", "inner dims differ"});
  add("matmul batch mismatch", Kind::shape,
      [] {
        lm::Graph g;
        (void)lm::matmul(g.input("a", {2, 4, 3}), g.input("b", {5, 3, 4}));
      },
      {"[matmul]", "(2)", "(5)"});
  add("matmul of a scalar", Kind::shape,
      [] {
        lm::Graph g;
        (void)lm::matmul(g.input("a", {}), g.input("b", {3}));
      },
      {"[matmul]", "()", "(3)"});
  add("sum axis out of range", Kind::shape,
      [] {
        lm::Graph g;
        (void)lm::sum(g.input("x", {2, 3}), 2);
      },
      {"[sum]", "axis 2", "(2, 3)"});
  add("softmax negative axis out of range", Kind::shape,
      [] {
        lm::Graph g;
        (void)lm::softmax(g.input("x", {2, 3}), -3);
      },
      {"[softmax]", "axis -3", "(2, 3)"});
  add("repeated reduction axis", Kind::shape,
      [] {
        lm::Graph g;
        (void)lm::mean(g.input("x", {2, 3}), {1, -1});
      },
      {"[mean]", "[1, -1]", "(2, 3)"});
  add("reshape count mismatch", Kind::shape,
      [] {
        lm::Graph g;
        (void)lm::reshape(g.input("x", {2, 3}), {4, 2});
      },
      {"[reshape]", "(2, 3)", "(4, 2)"});
  add("reshape with two -1", Kind::shape,
      [] {
        lm::Graph g;
        (void)lm::reshape(g.input("x", {2, 3}), {-1, -1});
      },
      {"[reshape]", "more than one -1", "(2, 3)"});
  add("reshape -1 that cannot be inferred", Kind::shape,
      [] {
        lm::Graph g;
        (void)lm::reshape(g.input("x", {2, 3}), {-1, 4});
      },
      {"[reshape]", "-1", "(2, 3)", "(-1, 4)"});
  add("bad permutation", Kind::shape,
      [] {
        lm::Graph g;
        (void)lm::permute(g.input("x", {2, 3}), {0, 0});
      },
      {"[permute]", "[0, 0]", "(2, 3)"});
  add("permutation of the wrong length", Kind::shape,
      [] {
        lm::Graph g;
        (void)lm::permute(g.input("x", {2, 3}), {1, 0, 2});
      },
      {"[permute]", "[1, 0, 2]"});
  add("expand of a non-1 dim", Kind::shape,
      [] {
        lm::Graph g;
        (void)lm::expand(g.input("x", {3, 2}), {3, 4});
      },
      {"[expand]", "(3, 2)", "(3, 4)"});
  add("unsqueeze axis out of range", Kind::shape,
      [] {
        lm::Graph g;
        (void)lm::unsqueeze(g.input("x", {2, 3}), 4);
      },
      {"[unsqueeze]", "axis 4"});
  add("slice step 0", Kind::shape,
      [] {
        lm::Graph g;
        (void)lm::slice(g.input("x", {6}), 0, 0, 6, 0);
      },
      {"[slice]", "step", "got 0", "(6)"});
  add("pad with more pairs than axes", Kind::shape,
      [] {
        lm::Graph g;
        (void)lm::pad(g.input("x", {6}), {{1, 1}, {1, 1}});
      },
      {"[pad]", "2 (before, after) pairs", "(6)"});
  add("concat shapes differ off the axis", Kind::shape,
      [] {
        lm::Graph g;
        (void)lm::concat({g.input("a", {2, 3}), g.input("b", {3, 3})}, 1);
      },
      {"[concat]", "(3, 3)", "(2, 3)"});
  add("repeat with too few counts", Kind::shape,
      [] {
        lm::Graph g;
        (void)lm::repeat(g.input("x", {2, 3}), {2});
      },
      {"[repeat]", "[2]", "(2, 3)"});
  add("linear in-features mismatch", Kind::shape,
      [] {
        lm::Graph g;
        (void)lm::linear(g.input("x", {2, 3}), g.param("w", {4, 5}));
      },
      {"[linear]", "(2, 3)", "(4, 5)"});
  add("layer_norm weight of the wrong size", Kind::shape,
      [] {
        lm::Graph g;
        (void)lm::layer_norm(g.input("x", {2, 4}), g.param("w", {3}), lm::Tensor());
      },
      {"[layer_norm]", "(3)", "(2, 4)"});
  add("attention head dims differ", Kind::shape,
      [] {
        lm::Graph g;
        (void)lm::scaled_dot_product_attention(g.input("q", {2, 8}), g.input("k", {3, 4}),
                                               g.input("v", {3, 4}));
      },
      {"[scaled_dot_product_attention]", "(2, 8)", "(3, 4)"});
  add("conv2d channel mismatch", Kind::shape,
      [] {
        lm::Graph g;
        (void)lm::conv2d(g.input("x", {1, 3, 8, 8}), g.param("w", {4, 2, 3, 3}));
      },
      {"[conv2d]", "(1, 3, 8, 8)", "(4, 2, 3, 3)"});
  add("conv2d groups not dividing the channels", Kind::shape,
      [] {
        lm::Graph g;
        (void)lm::conv2d(g.input("x", {1, 4, 8, 8}), g.param("w", {6, 2, 3, 3}), {}, {1, 1}, {0, 0}, {1, 1},
                         3);
      },
      {"[conv2d]", "groups 3", "4"});
  add("conv1d kernel larger than the input", Kind::shape,
      [] {
        lm::Graph g;
        (void)lm::conv1d(g.input("x", {1, 2, 3}), g.param("w", {2, 2, 5}));
      },
      {"[conv1d]", "5", "(1, 2, 1, 3)"});
  add("pool kernel larger than the input", Kind::shape,
      [] {
        lm::Graph g;
        (void)lm::max_pool2d(g.input("x", {1, 1, 2, 2}), {3, 3});
      },
      {"[max_pool2d]", "{3, 3}", "(1, 1, 2, 2)"});
  add("rope with an odd head dim", Kind::shape,
      [] {
        lm::Graph g;
        (void)lm::rope(g.input("x", {1, 2, 5}), lm::arange(2));
      },
      {"[rope]", "D = 5", "(1, 2, 5)"});
  add("rope positions of the wrong length", Kind::shape,
      [] {
        lm::Graph g;
        (void)lm::rope(g.input("x", {1, 2, 4}), g.input("p", {3}, lm::i32));
      },
      {"[rope]", "(3)", "(1, 2, 4)"});
  add("a tensor from another graph", Kind::shape,
      [] {
        lm::Graph g1, g2;
        (void)lm::add(g1.input("a", {2}), g2.input("b", {2}));
      },
      {"[add]", "another graph", "(2)"});
  add("a null tensor", Kind::shape, [] { (void)lm::relu(lm::Tensor()); }, {"[relu]", "null"});
  add("duplicate input names", Kind::shape,
      [] {
        lm::Graph g;
        (void)g.input("x", {2});
        (void)g.input("x", {3});
      },
      {"[input]", "duplicate name 'x'"});
  add("duplicate output names", Kind::shape,
      [] {
        lm::Graph g;
        auto x = g.input("x", {2});
        g.output("y", x);
        g.output("y", x + 1.0f);
      },
      {"[output]", "duplicate output name 'y'"});

  // ---- dtypes
  add("arithmetic on bools", Kind::dtype,
      [] {
        lm::Graph g;
        auto b = g.input("b", {2}, lm::boolean);
        (void)(b + b);
      },
      {"[add]", "bool tensor (2)"});
  add("logical op on floats", Kind::dtype,
      [] {
        lm::Graph g;
        (void)lm::logical_and(g.input("a", {2}), g.input("b", {2}, lm::boolean));
      },
      {"[logical_and]", "f32 tensor (2)"});
  add("logical_not on i32", Kind::dtype,
      [] {
        lm::Graph g;
        (void)lm::logical_not(g.input("n", {3}, lm::i32));
      },
      {"[logical_not]", "i32 tensor (3)"});
  add("where with a non-bool condition", Kind::dtype,
      [] {
        lm::Graph g;
        auto x = g.input("x", {2});
        (void)lm::where(x, x, 0.0f);
      },
      {"[where]", "cond", "f32 tensor (2)"});
  add("mean of integers", Kind::dtype,
      [] {
        lm::Graph g;
        (void)lm::mean(g.input("n", {4}, lm::i32), 0);
      },
      {"[mean]", "i32 tensor (4)"});
  add("softmax of bools", Kind::dtype,
      [] {
        lm::Graph g;
        (void)lm::softmax(g.input("b", {4}, lm::boolean));
      },
      {"[softmax]", "bool tensor (4)"});
  add("matmul of bools", Kind::dtype,
      [] {
        lm::Graph g;
        (void)lm::matmul(g.input("a", {2, 2}, lm::boolean), g.input("b", {2, 2}, lm::boolean));
      },
      {"[matmul]", "bool tensor (2, 2)"});
  add("embedding with float ids", Kind::dtype,
      [] {
        lm::Graph g;
        (void)lm::embedding(g.param("t", {10, 4}), g.input("ids", {3}));
      },
      {"[embedding]", "ids", "f32 tensor (3)"});
  add("rope with float positions", Kind::dtype,
      [] {
        lm::Graph g;
        (void)lm::rope(g.input("x", {2, 4}), g.input("p", {2}));
      },
      {"[rope]", "positions", "f32 tensor (2)"});

  // ---- call time: RuntimeError, the Callable stays usable
  add(
      "unknown input name", Kind::runtime,
      [&] {
        (void)fx.fn({{"x", fx.x(2)}, {"z", fx.x(2)}, {"q", fx.x(2)}});
      },
      {"[call]", "unknown input 'q'"}, false);
  add(
      "missing input", Kind::runtime,
      [&] {
        (void)fx.fn({{"x", fx.x(2)}});
      },
      {"[call]", "missing input 'z'"}, false);
  add(
      "wrong rank", Kind::runtime,
      [&] {
        (void)fx.fn({{"x", f32({1, 2, 3}, {3})}, {"z", fx.x(1)}});
      },
      {"[call]", "'x'", "rank 1"}, false);
  add(
      "wrong static dim", Kind::runtime,
      [&] {
        (void)fx.fn({{"x", f32(std::vector<float>(8), {2, 4})}, {"z", fx.x(2)}});
      },
      {"[call]", "'x'", "(2, 4)", "(B, 3)"}, false);
  add(
      "wrong dtype", Kind::runtime,
      [&] {
        (void)fx.fn({{"x", i32({1, 2, 3}, {1, 3})}, {"z", fx.x(1)}});
      },
      {"[call]", "'x'", "i32"}, false);
  add(
      "dim outside its range", Kind::runtime,
      [&] {
        (void)fx.fn({{"x", fx.x(5)}, {"z", fx.x(5)}});
      },
      {"[call]", "B", "5"}, false);
  add(
      "inconsistent dim binding", Kind::runtime,
      [&] {
        (void)fx.fn({{"x", fx.x(2)}, {"z", fx.x(3)}});
      },
      {"[call]", "B"}, false);
  add(
      "wrong byte size", Kind::runtime,
      [] {
        std::vector<std::byte> bytes(6);
        (void)lm::HostTensor::from_bytes(lm::f32, {2}, bytes);
      },
      {"[HostTensor]", "6 bytes"}, false);
  add(
      "bind of an unknown param", Kind::runtime, [&] { fx.fn.bind("nope", f32({1}, {1})); },
      {"[bind]", "unknown param 'nope'"}, false);
  add(
      "bind with the wrong shape", Kind::runtime,
      [&] {
        fx.fn.bind("w", f32({1, 2}, {2}));
      },
      {"[bind]", "'w'", "(2)", "(3)"}, false);
  add(
      "unbound param", Kind::runtime,
      [] {
        lm::Graph g;
        auto x = g.input("x", {2});
        g.output("y", x + g.param("scale", {2}));
        lm::Callable fn = lm::compile(g, lm::Target::reference());
        (void)fn({{"x", f32({1, 2}, {2})}});
      },
      {"[call]", "param 'scale'", "not bound"}, false);
  add("a reshape guard that fails at call time", Kind::runtime,
      [] {
        lm::Graph g;
        lm::Dim B = g.dim("B", 1, 8), C = g.dim("C", 1, 8);
        auto x = g.input("x", {B, 4});
        auto y = g.input("y", {C, 2});
        g.output("s", lm::reshape(x, {C, 8}) + 1.0f);
        g.output("t", y);
        lm::Callable fn = lm::compile(g, lm::Target::reference());
        (void)fn({{"x", f32(std::vector<float>(12), {3, 4})}, {"y", f32(std::vector<float>(4), {2, 2})}});
      },
      {"[reshape]", "(B, 4)", "(C, 8)"});
  return rows;
}

}  // namespace

TEST_CASE("misuses throw the right Error with op, shapes and call site", "[ops][errors]") {
  Fixture fx;
  // An unbound param is the first call-time mistake, before w is bound.
  try {
    (void)fx.fn({{"x", Fixture::x(2)}, {"z", Fixture::x(2)}});
    FAIL("calling with an unbound param did not throw");
  } catch (const lm::RuntimeError& e) {
    CHECK_THAT(e.what(), Catch::Contains("param 'w'") && Catch::Contains("not bound"));
  }
  fx.bind();
  fx.good_call_works();

  auto rows = build_rows(fx);
  REQUIRE(rows.size() >= 30);
  for (const Row& row : rows) {
    INFO("row: " << row.what << " (expects " << kind_name(row.kind) << ")");
    bool threw = false;
    try {
      row.misuse();
    } catch (const lm::Error& e) {
      threw = true;
      const std::string msg = e.what();
      INFO("message: " << msg);
      CHECK(is_kind(e, row.kind));
      for (const auto& n : row.needles) CHECK_THAT(msg, Catch::Contains(n));
      if (row.call_site) CHECK_THAT(msg, Catch::Contains("errors_test.cpp:"));
    }
    CHECK(threw);
    if (row.kind == Kind::runtime) fx.good_call_works();  // still usable after a bad call
  }
}

TEST_CASE("an error names the line of the user's call", "[ops][errors]") {
  lm::Graph g;
  auto a = g.input("a", {2});
  auto b = g.input("b", {3});
  const int line = __LINE__ + 2;
  try {
    (void)lm::maximum(a, b);
    FAIL("no throw");
  } catch (const lm::ShapeError& e) {
    CHECK_THAT(e.what(), Catch::EndsWith("(at errors_test.cpp:" + std::to_string(line) + ")"));
  }
}
