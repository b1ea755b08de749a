// Callable: every validation error is a RuntimeError naming the culprit, the Callable
// stays usable afterwards, dims are solved from shapes, and concurrent calls agree.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "core_test_util.hpp"

using namespace luminal;
using namespace luminal::detail;

namespace {
// y = x * w (w broadcast over rows) + bias-free, built from primitives: x [B, 4], w [4].
Graph scaled_graph() {
  Graph g;
  Dim B = g.dim("B", 1, 8);
  Tensor x = g.input("x", {B, 4});
  Tensor w = g.param("w", {4});
  const auto L = Loc::current();
  Tensor we = prim_expand(prim_reshape(w, {1, 4}, "mul", L), {B, 4}, "mul", L);
  g.output("y", prim_binary(PrimOp::Mul, x, we, "mul", L));
  return g;
}

HostTensor rows(int64_t b, float base = 0) {
  std::vector<float> v(static_cast<size_t>(b * 4));
  for (size_t i = 0; i < v.size(); ++i) v[i] = base + static_cast<float>(i);
  return HostTensor::from(v, {b, 4});
}
}  // namespace

TEST_CASE("a call binds dims from shapes and uses bound params", "[callable]") {
  Callable fn = compile(scaled_graph(), Target::reference());
  fn.bind("w", HostTensor::from(std::vector<float>{1, 2, 3, 4}, {4}));
  auto out = fn({{"x", rows(2)}});
  CHECK(out.at("y").shape() == std::vector<int64_t>{2, 4});
  CHECK(out.at("y").to_f32() == std::vector<float>{0, 2, 6, 12, 4, 10, 18, 28});
  CHECK(fn({{"x", rows(5)}}).at("y").shape() == std::vector<int64_t>{5, 4});
  CHECK_FALSE(fn.report().stop_reason.empty());
  CHECK(fn.report().primitive_ops == 5);
  CHECK(fn.report().kernels >= 1);
  CHECK(fn.report().to_string().find("reference") != std::string::npos);
  CHECK(fn.input_names() == std::vector<std::string>{"x"});
  CHECK(fn.param_names() == std::vector<std::string>{"w"});
  CHECK(fn.output_names() == std::vector<std::string>{"y"});
}

TEST_CASE("bad calls throw RuntimeError and leave the Callable usable", "[callable]") {
  Callable fn = compile(scaled_graph(), Target::reference());
  CHECK_THROWS_WITH(fn({{"x", rows(2)}}), Catch::Contains("param 'w'") && Catch::Contains("not bound"));
  fn.bind("w", HostTensor::from(std::vector<float>{1, 1, 1, 1}, {4}));
  struct Case {
    const char* what;
    std::map<std::string, HostTensor> in;
    const char* needle;
  };
  const std::vector<Case> cases{
      {"unknown input", {{"x", rows(2)}, {"z", rows(2)}}, "unknown input 'z'"},
      {"missing input", {}, "missing input 'x'"},
      {"param passed per call", {{"x", rows(2)}, {"w", rows(1)}}, "'w' is a param"},
      {"wrong rank", {{"x", HostTensor(f32, {8})}}, "rank 1"},
      {"wrong dim", {{"x", HostTensor(f32, {2, 5})}}, "axis 1 is 5, expected 4"},
      {"declaration site", {{"x", HostTensor(f32, {2, 5})}}, "declared (B, 4) at callable_test.cpp:"},
      {"dim above its range", {{"x", rows(9)}}, "B = 9, outside its range [1, 8]"},
      {"dim below its range", {{"x", HostTensor(f32, {0, 4})}}, "B = 0, outside its range [1, 8]"},
      {"wrong dtype", {{"x", HostTensor(i32, {2, 4})}}, "'x' is i32"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    CHECK_THROWS_AS(fn(c.in), RuntimeError);
    CHECK_THROWS_WITH(fn(c.in), Catch::Contains(c.needle));
    // Still usable.
    CHECK(fn({{"x", rows(1)}}).at("y").to_f32() == std::vector<float>{0, 1, 2, 3});
  }
}

TEST_CASE("bind validates name, dtype and shape", "[callable]") {
  Callable fn = compile(scaled_graph(), Target::reference());
  CHECK_THROWS_WITH(fn.bind("v", HostTensor(f32, {4})), Catch::Contains("unknown param 'v'"));
  CHECK_THROWS_WITH(fn.bind("x", HostTensor(f32, {4})), Catch::Contains("is an input"));
  CHECK_THROWS_AS(fn.bind("w", HostTensor(f32, {5})), RuntimeError);
  CHECK_THROWS_AS(fn.bind("w", HostTensor(f16, {4})), RuntimeError);
  CHECK_THROWS_AS(Callable()({}), RuntimeError);
}

TEST_CASE("a bound param is owned: binding a view copies it", "[callable]") {
  Callable fn = compile(scaled_graph(), Target::reference());
  {
    std::vector<float> w{2, 2, 2, 2};
    fn.bind("w", HostTensor::view(f32, {4}, w.data()));
    w.assign(4, 100.0f);
  }
  CHECK(fn({{"x", rows(1)}}).at("y").to_f32() == std::vector<float>{0, 2, 4, 6});
}

TEST_CASE("dims of the form a*B + c are solved; others are checked", "[callable]") {
  Graph g;
  Dim B = g.dim("B", 1, 10);
  Tensor x = g.input("x", {B * 2 + 1});
  Tensor y = g.input("y", {B, B * 3});
  g.output("x", x);
  g.output("y", y);
  Callable fn = compile(g, Target::reference());
  auto out = fn({{"x", HostTensor(f32, {7})}, {"y", HostTensor(f32, {3, 9})}});
  CHECK(out.at("x").shape() == std::vector<int64_t>{7});
  CHECK_THROWS_WITH(fn({{"x", HostTensor(f32, {8})}, {"y", HostTensor(f32, {3, 9})}}),
                    Catch::Contains("not of the form B*2 + 1"));
  CHECK_THROWS_WITH(fn({{"x", HostTensor(f32, {7})}, {"y", HostTensor(f32, {3, 8})}}),
                    Catch::Contains("axis 1 is 8, expected 9"));
  CHECK_THROWS_WITH(fn({{"x", HostTensor(f32, {7})}, {"y", HostTensor(f32, {4, 12})}}),
                    Catch::Contains("axis 0 is 4, expected 3"));
}

TEST_CASE("a dim no input determines is a clear error", "[callable]") {
  Graph g;
  Dim N = g.dim("N", 1, 10);
  Tensor x = g.input("x", {2});
  g.output("i", prim_iota(g, N, "arange", Loc::current()));
  g.output("x", x);
  Callable fn = compile(g, Target::reference());
  CHECK_THROWS_WITH(fn({{"x", HostTensor(f32, {2})}}), Catch::Contains("dim 'N' cannot be inferred"));
}

TEST_CASE("compile: no outputs, unavailable devices, compile_only", "[callable]") {
  Graph empty;
  empty.input("x", {2});
  CHECK_THROWS_AS(compile(empty, Target::reference()), CompileError);
  Graph g = scaled_graph();
  if (!Target::cuda(1000).is_available()) {
    CHECK_THROWS_AS(compile(g, Target::cuda(1000)), RuntimeError);
    CompileOptions o;
    o.compile_only = true;
    Callable fn = compile(g, Target::parse("cuda:1000:sm_90"), o);
    CHECK(fn.report().target == "cuda:1000:sm_90");
    CHECK_THROWS_WITH(fn({{"x", rows(1)}}), Catch::Contains("compile_only"));
  }
  CHECK_NOTHROW(compile(g, Target::cpu()));
}

TEST_CASE("the program is a snapshot: later graph edits do not change it", "[callable]") {
  Graph g;
  Tensor x = g.input("x", {2});
  g.output("y", x);
  Callable fn = compile(g, Target::reference());
  g.output("z", x);
  g.input("late", {3});
  auto out = fn({{"x", HostTensor(f32, {2})}});
  CHECK(out.size() == 1);
}

TEST_CASE("concurrent calls from several threads agree with serial ones", "[callable]") {
  Callable fn = compile(scaled_graph(), Target::reference());
  fn.bind("w", HostTensor::from(std::vector<float>{1, -1, 2, 0.5f}, {4}));
  std::atomic<int> wrong{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      Callable mine = fn;  // copies share the program and params
      for (int i = 0; i < 200; ++i) {
        const int64_t b = 1 + (i + t) % 8;
        const auto y = mine({{"x", rows(b, static_cast<float>(t))}}).at("y").to_f32();
        const float w[4] = {1, -1, 2, 0.5f};
        for (size_t k = 0; k < y.size(); ++k)
          if (y[k] != (static_cast<float>(t) + static_cast<float>(k)) * w[k % 4]) ++wrong;
        try {
          mine({{"x", rows(9)}});
        } catch (const RuntimeError&) {
          ++errors;
        }
      }
    });
  for (auto& th : threads) th.join();
  CHECK(wrong == 0);
  CHECK(errors == 800);
}

TEST_CASE("run() reports errors as a Status and writes outputs into caller memory", "[callable]") {
  Callable fn = compile(scaled_graph(), Target::reference());
  fn.bind("w", HostTensor::from(std::vector<float>{1, 2, 3, 4}, {4}));
  const std::vector<float> xs{1, 1, 1, 1, 2, 2, 2, 2};
  std::vector<float> ys(8, -1.0f);
  std::map<std::string, HostTensor> out{{"y", HostTensor::view(f32, {2, 4}, ys.data())}};
  const Status st = fn.run({{"x", HostTensor::view(f32, {2, 4}, xs.data())}}, out);
  REQUIRE(st.ok);
  CHECK(ys == std::vector<float>{1, 2, 3, 4, 2, 4, 6, 8});
  CHECK(out.at("y").values<float>().data() == ys.data());
  std::map<std::string, HostTensor> fresh;
  CHECK(fn.run({{"x", rows(1)}}, fresh));
  CHECK(fresh.at("y").shape() == std::vector<int64_t>{1, 4});
  const Status bad = fn.run({{"x", rows(9)}}, fresh);
  CHECK_FALSE(bad.ok);
  CHECK(bad.message.find("outside its range") != std::string::npos);
  CHECK_THROWS_AS(HostTensor::view(f32, {2}, static_cast<const float*>(xs.data())).mutable_data(), Error);
}

TEST_CASE("a dim declared as a multiple is checked at call time", "[callable]") {
  Graph g;
  Dim T = g.dim("T", 1, 64, 8);
  CHECK_THROWS_AS(g.dim("U", 1, 7, 8), ShapeError);
  Tensor x = g.input("x", {T});
  g.output("y", x);
  const auto in = [](int64_t n) { return std::map<std::string, HostTensor>{{"x", HostTensor(f32, {n})}}; };
  CHECK(luminal::test::run(g, in(16)).at("y").shape() == std::vector<int64_t>{16});
  CHECK_THROWS_WITH(luminal::test::run(g, in(12)), Catch::Contains("T = 12, not a multiple of 8"));
}
