// The reference interpreter as an oracle must stay fast enough: a 256^3 f32 matmul
// written as sum(mul(expand a, expand b)) -- the form the high-level matmul lowers to.
#include <benchmark/benchmark.h>

#include <vector>

#include "graph/primitives.hpp"
#include "luminal/luminal.hpp"

namespace {

using namespace luminal;
using namespace luminal::detail;

Callable matmul_callable(int64_t n, bool reduce_inner) {
  Graph g;
  Tensor a = g.input("a", {n, n});
  Tensor b = g.input("b", {n, n});
  const auto loc = Loc::current();
  Tensor prod;
  int axis;
  if (reduce_inner) {
    // [M, N, K]: reduce the innermost axis.
    Tensor ae = prim_expand(prim_reshape(a, {n, 1, n}, "matmul", loc), {n, n, n}, "matmul", loc);
    Tensor bt = prim_permute(b, {1, 0}, "matmul", loc);
    Tensor be = prim_expand(prim_reshape(bt, {1, n, n}, "matmul", loc), {n, n, n}, "matmul", loc);
    prod = prim_binary(PrimOp::Mul, ae, be, "matmul", loc);
    axis = 2;
  } else {
    // [M, K, N]: reduce the middle axis.
    Tensor ae = prim_expand(prim_reshape(a, {n, n, 1}, "matmul", loc), {n, n, n}, "matmul", loc);
    Tensor be = prim_expand(prim_reshape(b, {1, n, n}, "matmul", loc), {n, n, n}, "matmul", loc);
    prod = prim_binary(PrimOp::Mul, ae, be, "matmul", loc);
    axis = 1;
  }
  g.output("c", prim_reduce(PrimOp::SumReduce, prod, axis, "matmul", loc));
  return compile(g, Target::reference());
}

void run_matmul(benchmark::State& state, bool reduce_inner) {
  const int64_t n = state.range(0);
  Callable fn = matmul_callable(n, reduce_inner);
  std::vector<float> av(static_cast<size_t>(n * n)), bv(av.size());
  for (size_t i = 0; i < av.size(); ++i) {
    av[i] = static_cast<float>(i % 13) * 0.25f;
    bv[i] = static_cast<float>(i % 7) * 0.5f;
  }
  std::map<std::string, HostTensor> in{{"a", HostTensor::from(av, {n, n})},
                                       {"b", HostTensor::from(bv, {n, n})}};
  for (auto _ : state) {
    auto out = fn(in);
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(state.iterations() * n * n * n);
}

void BM_MatmulReduceInner(benchmark::State& s) { run_matmul(s, true); }
void BM_MatmulReduceMiddle(benchmark::State& s) { run_matmul(s, false); }

// Per-call overhead: validation, dim binding and interpretation of a small graph with a
// dynamic dim (a chain of 32 elementwise ops on [B, 8]).
void BM_SmallCall(benchmark::State& state) {
  Graph g;
  Dim B = g.dim("B", 1, 64);
  Tensor x = g.input("x", {B, 8});
  Tensor y = x;
  for (int i = 0; i < 32; ++i) y = prim_binary(PrimOp::Add, y, x, "add", Loc::current());
  g.output("y", y);
  Callable fn = compile(g, Target::reference());
  std::map<std::string, HostTensor> in{{"x", HostTensor(f32, {4, 8})}};
  for (auto _ : state) {
    auto out = fn(in);
    benchmark::DoNotOptimize(out);
  }
}

}  // namespace

BENCHMARK(BM_SmallCall)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MatmulReduceInner)->Arg(256)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MatmulReduceMiddle)->Arg(256)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
