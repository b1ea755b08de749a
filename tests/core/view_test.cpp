// Views are index maps: chains of reshape/permute/expand/slice/pad copy nothing until a
// kernel needs unmasked elements, and a reshape copies only when strides cannot express it.
#include <catch2/catch.hpp>

#include "backends/reference/interpreter.hpp"
#include "core_test_util.hpp"

using namespace luminal;
using namespace luminal::detail;

namespace {
reference::Stats run_stats(const Graph& g, const std::map<std::string, HostTensor>& in,
                           std::map<std::string, HostTensor>* out = nullptr, const DimBindings& dims = {}) {
  std::map<std::string, const HostTensor*> t;
  for (const auto& [k, v] : in) t[k] = &v;
  reference::Stats st;
  auto o = reference::run(*g.impl(), dims, t, &st);
  if (out) *out = std::move(o);
  return st;
}

std::vector<float> iota_f(int n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i);
  return v;
}
}  // namespace

TEST_CASE("movement chains feeding an elementwise op copy nothing", "[view]") {
  const auto L = Loc::current();
  Graph g;
  Tensor x = g.input("x", {4, 6});
  Tensor v = prim_permute(x, {1, 0}, "t", L);  // [6, 4]
  v = prim_slice(v, 0, 1, 6, 2, "t", L);       // [3, 4] rows 1,3,5
  v = prim_reshape(v, {3, 1, 4}, "t", L);      // adds an axis: still strided
  v = prim_expand(v, {3, 2, 4}, "t", L);       // stride 0
  Tensor y = prim_binary(PrimOp::Add, v, v, "t", L);
  g.output("y", y);
  std::map<std::string, HostTensor> out;
  const auto st = run_stats(g, {{"x", HostTensor::from(iota_f(24), {4, 6})}}, &out);
  CHECK(st.copies == 0);
  const auto y0 = out.at("y").to_f32();
  // y[i, j, k] = 2 * x[k, 2i+1]
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 4; ++k)
        CHECK(y0[static_cast<size_t>((i * 2 + j) * 4 + k)] == 2.0f * (k * 6 + 2 * i + 1));
}

TEST_CASE("pad is a mask: padding and slicing a padded view copy only once, at the kernel", "[view]") {
  const auto L = Loc::current();
  Graph g;
  Tensor x = g.input("x", {2, 3});
  Tensor p = prim_pad(x, 1, 2, 1, 9.0, "t", L);  // [2, 6]: 9 9 x x x 9
  p = prim_pad(p, 0, 1, 0, 9.0, "t", L);         // [3, 6], same value: still one mask
  p = prim_slice(p, 1, 1, 6, 2, "t", L);         // [3, 3] cols 1, 3, 5
  p = prim_permute(p, {1, 0}, "t", L);           // [3, 3]
  g.output("p", prim_binary(PrimOp::Mul, p, p, "t", L));
  std::map<std::string, HostTensor> out;
  const auto st = run_stats(g, {{"x", HostTensor::from(iota_f(6), {2, 3})}}, &out);
  CHECK(st.copies == 1);  // the masked view is materialized once for the mul
  // p before permute: row0 all pad; row1 = [9, x01, 9]; row2 = [9, x11, 9]
  CHECK(out.at("p").to_f32() == std::vector<float>{81, 81, 81, 81, 1, 16, 81, 81, 81});
}

TEST_CASE("a reshape that strides cannot express copies; one that can does not", "[view]") {
  const auto L = Loc::current();
  Graph g;
  Tensor x = g.input("x", {2, 3});
  Tensor t = prim_permute(x, {1, 0}, "t", L);  // [3, 2], non-contiguous
  g.output("flat", prim_reshape(t, {6}, "t", L));
  std::map<std::string, HostTensor> out;
  auto st = run_stats(g, {{"x", HostTensor::from(iota_f(6), {2, 3})}}, &out);
  CHECK(st.copies == 1);
  CHECK(out.at("flat").to_f32() == std::vector<float>{0, 3, 1, 4, 2, 5});

  Graph h;
  Tensor y = h.input("y", {2, 3, 4});
  Tensor s = prim_slice(y, 2, 0, 4, 2, "t", L);    // [2, 3, 2] strides (12, 4, 2)
  h.output("m", prim_reshape(s, {6, 2}, "t", L));  // merges contiguous outer axes
  st = run_stats(h, {{"y", HostTensor::from(iota_f(24), {2, 3, 4})}}, &out);
  CHECK(st.copies == 0);
  CHECK(out.at("m").to_f32() == std::vector<float>{0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22});
}

TEST_CASE("expand of a padded size-1 axis and negative-offset pads stay correct", "[view]") {
  const auto L = Loc::current();
  Graph g;
  Tensor x = g.input("x", {1, 2});
  Tensor p = prim_pad(x, 0, 1, 0, -1.0, "t", L);  // [2, 2]: pad row, x row
  Tensor s = prim_slice(p, 0, 0, 1, 1, "t", L);   // [1, 2]: the pad row
  Tensor e = prim_expand(s, {3, 2}, "t", L);
  g.output("e", e);
  Tensor s2 = prim_slice(p, 0, 1, 2, 1, "t", L);  // the x row
  g.output("e2", prim_expand(s2, {2, 2}, "t", L));
  std::map<std::string, HostTensor> out;
  run_stats(g, {{"x", HostTensor::from(std::vector<float>{5, 6}, {1, 2})}}, &out);
  CHECK(out.at("e").to_f32() == std::vector<float>{-1, -1, -1, -1, -1, -1});
  CHECK(out.at("e2").to_f32() == std::vector<float>{5, 6, 5, 6});
}

TEST_CASE("inputs are read in place", "[view]") {
  const auto L = Loc::current();
  Graph g;
  Tensor x = g.input("x", {4});
  g.output("y", prim_reduce(PrimOp::SumReduce, x, 0, "t", L));
  const std::vector<float> data{1, 2, 3, 4};
  std::map<std::string, HostTensor> out;
  const auto st = run_stats(g, {{"x", HostTensor::view(f32, {4}, data.data())}}, &out);
  CHECK(st.copies == 0);
  CHECK(out.at("y").to_f32() == std::vector<float>{10});
}
