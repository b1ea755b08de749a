// The SPMD semantics of the collectives (graph/primitives.hpp) in the reference
// interpreter, and the in-process communicator the other dist tests run ranks with.
#include <catch2/catch.hpp>
#include <cstring>
#include <thread>

#include "backends/reference/interpreter.hpp"
#include "graph/graph_impl.hpp"
#include "graph/primitives.hpp"
#include "luminal/luminal.hpp"

using namespace luminal;
using namespace luminal::detail;

namespace {

Loc here() { return luminal::Loc::current(); }

// x [2, 3] sliced by rank along `axis` (this rank's block), then one collective.
std::vector<std::map<std::string, HostTensor>> run_collective(PrimOp op, int axis, int64_t world, Tensor (*pre)(Graph&, const Tensor&, int64_t)) {
  Graph g;
  Tensor x = g.input("x", {4, 6});
  Tensor y = prim_collective(op, pre(g, x, world), axis, world, "test", here());
  g.output("y", y);
  std::vector<float> xs(24);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i);
  HostTensor xt = HostTensor::from(xs, {4, 6});
  return reference::run_spmd(*g.impl(), world, {}, {{{"x", &xt}}});
}

Tensor rows_of_rank(Graph&, const Tensor& x, int64_t world) {
  const Dim r = rank_dim(world), n = Dim(4 / world);
  return prim_slice(x, 0, r * n, (r + Dim(1)) * n, 1, "test", here());
}
Tensor times_rank_plus_one(Graph& g, const Tensor& x, int64_t world) {
  // x * (rank + 1): a value that differs per rank, from an iota sliced by rank.
  Tensor ids = prim_slice(prim_iota(g, Dim(world), "t", here()), 0, rank_dim(world), rank_dim(world) + Dim(1), 1,
                          "t", here());
  Tensor f = prim_cast(ids, f32, "t", here());
  f = prim_binary(PrimOp::Add, f, prim_reshape(prim_constant(g, 1, f32, "t", here()), {1}, "t", here()), "t", here());
  f = prim_expand(prim_reshape(f, {1, 1}, "t", here()), x.shape(), "t", here());
  return prim_binary(PrimOp::Mul, x, f, "t", here());
}

}  // namespace

TEST_CASE("all_gather of each rank's rows rebuilds the tensor on every rank", "[dist]") {
  for (int64_t world : {1, 2, 4}) {
    auto out = run_collective(PrimOp::AllGather, 0, world, rows_of_rank);
    REQUIRE(out.size() == static_cast<size_t>(world));
    for (const auto& o : out) {
      REQUIRE(o.at("y").shape() == std::vector<int64_t>{4, 6});
      auto v = o.at("y").values<float>();
      for (size_t i = 0; i < v.size(); ++i) CHECK(v[i] == static_cast<float>(i));
    }
  }
}

TEST_CASE("all_gather along an inner axis interleaves the ranks' blocks", "[dist]") {
  auto out = run_collective(PrimOp::AllGather, 1, 2, rows_of_rank);  // [2, 6] per rank -> [2, 12]
  REQUIRE(out[0].at("y").shape() == std::vector<int64_t>{2, 12});
  auto v = out[1].at("y").values<float>();
  // row 0: rank 0's row 0 (0..5), then rank 1's row 0 (12..17)
  CHECK(v[0] == 0);
  CHECK(v[6] == 12);
  CHECK(v[12] == 6);   // row 1: rank 0's row 1
  CHECK(v[18] == 18);  // then rank 1's row 1
}

TEST_CASE("all_reduce sums the ranks' values in rank order, equal on every rank", "[dist]") {
  auto out = run_collective(PrimOp::AllReduce, 0, 3, times_rank_plus_one);  // x * (1 + 2 + 3)
  for (const auto& o : out) {
    auto v = o.at("y").values<float>();
    for (size_t i = 0; i < v.size(); ++i) CHECK(v[i] == 6.f * static_cast<float>(i));
  }
}

TEST_CASE("reduce_scatter gives rank r block r of the sum", "[dist]") {
  auto out = run_collective(PrimOp::ReduceScatter, 1, 2, times_rank_plus_one);  // sum = 3x, [4, 3] each
  for (int r = 0; r < 2; ++r) {
    const HostTensor& y = out[static_cast<size_t>(r)].at("y");
    REQUIRE(y.shape() == std::vector<int64_t>{4, 3});
    auto v = y.values<float>();
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 3; ++j) CHECK(v[static_cast<size_t>(i * 3 + j)] == 3.f * static_cast<float>(i * 6 + r * 3 + j));
  }
}

TEST_CASE("collectives check their operands", "[dist]") {
  Graph g;
  Tensor x = g.input("x", {4, 6});
  CHECK_THROWS_AS(prim_collective(PrimOp::ReduceScatter, x, 1, 4, "reduce_scatter", here()), ShapeError);
  CHECK_THROWS_AS(prim_collective(PrimOp::AllGather, x, 2, 2, "all_gather", here()), ShapeError);
  CHECK_THROWS_AS(prim_collective(PrimOp::AllReduce, cast(x, boolean), 0, 2, "all_reduce", here()), DTypeError);
  // Without a communicator of the right size a program with collectives does not run.
  g.output("y", prim_collective(PrimOp::AllReduce, x, 0, 2, "all_reduce", here()));
  HostTensor xt(f32, {4, 6});
  CHECK_THROWS_AS(reference::run(*g.impl(), {}, {{"x", &xt}}), RuntimeError);
}

TEST_CASE("local_group: all_gather, all_to_all and barrier across threads", "[dist]") {
  const int P = 3;
  auto comms = Communicator::local_group(P);
  std::vector<std::vector<int>> gathered(P, std::vector<int>(P)), swapped(P, std::vector<int>(P));
  std::vector<std::thread> ts;
  for (int r = 0; r < P; ++r)
    ts.emplace_back([&, r] {
      for (int rep = 0; rep < 50; ++rep) {  // back-to-back collectives must not mix
        int mine = 10 * r + rep;
        comms[static_cast<size_t>(r)]->all_gather(&mine, gathered[static_cast<size_t>(r)].data(), sizeof mine);
        std::vector<int> send(P);
        for (int q = 0; q < P; ++q) send[static_cast<size_t>(q)] = 100 * r + q + rep;
        comms[static_cast<size_t>(r)]->all_to_all(send.data(), swapped[static_cast<size_t>(r)].data(), sizeof(int));
        comms[static_cast<size_t>(r)]->barrier();
      }
    });
  for (auto& t : ts) t.join();
  for (int r = 0; r < P; ++r)
    for (int q = 0; q < P; ++q) {
      CHECK(gathered[static_cast<size_t>(r)][static_cast<size_t>(q)] == 10 * q + 49);
      CHECK(swapped[static_cast<size_t>(r)][static_cast<size_t>(q)] == 100 * q + r + 49);
    }
}

TEST_CASE("a rank that never arrives makes the others fail within the timeout", "[dist]") {
  auto comms = Communicator::local_group(2);
  comms[0]->set_timeout_seconds(0.3);
  int x = 1, y[2];
  CHECK_THROWS_WITH(comms[0]->all_gather(&x, y, sizeof x),
                    Catch::Contains("did not complete the collective within"));
}
