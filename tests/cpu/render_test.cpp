// Kernel IR -> C renderer -> JIT, checked against the IR evaluator on random inputs:
// elementwise chains with broadcast views and symbolic dims, pad/slice/reshape index
// arithmetic (floor div, mod, validity), reductions with epilogues, dtype casts.
#include "harness.hpp"
#include "kernel/kernel_math.hpp"

#include "luminal/error.hpp"

using namespace luminal::kernel;
using cpu_test::buf;
using cpu_test::check_program;
using luminal::DType;

TEST_CASE("render: elementwise chain with broadcast and a symbolic dim", "[cpu][render]") {
  // out[b, j] = relu(tanh(x[b, j]) * w[j] + exp(-x[b, j])) * sigmoid(x[b, j]), B symbolic
  Program p;
  p.symbols = {"B"};
  Index B = Index::sym("B");
  p.buffers = {buf("x", DType::f32, B * 37, BufferRole::Input), buf("w", DType::f32, 37, BufferRole::Param),
               buf("out", DType::f32, B * 37, BufferRole::Output)};
  Index i = Index::var(0), j = Index::var(1);
  Expr x = load(0, DType::f32, i * 37 + j);
  Expr w = load(1, DType::f32, j);
  Expr v = binary(BinaryOp::Add, binary(BinaryOp::Mul, math::tanh(x), w), math::exp(unary(UnaryOp::Neg, x)));
  v = binary(BinaryOp::Mul, math::relu(v), math::sigmoid(x));
  Kernel k{
      "chain", KernelKind::Elementwise, {{0, B, true, false}, {1, 37, false, true}}, {2, i * 37 + j, v}, {},
      {}};
  p.kernels = {k};
  std::string src;
  for (int64_t b : {1, 5, 64}) src = check_program(p, {{"B", b}});
  // The B loop is the kernel's parallel range, handed to the call's threads in chunks.
  CHECK(src.find("lm_rt->parallel_for(lm_cx, lm_total, lm_chunk(lm_rt, lm_cx, lm_total, 1), chain_task") !=
        std::string::npos);
  CHECK(src.find("for (int64_t v0 = lm_lo; v0 < lm_hi; ++v0)") != std::string::npos);
  CHECK(src.find("#pragma omp simd") != std::string::npos);
  CHECK(src.find("restrict") != std::string::npos);
  // The shared load x is read once per point (SSA temporaries).
  CHECK(src.find("b0[") == src.rfind("b0["));
}

TEST_CASE("render: flat parallel simd loop", "[cpu][render]") {
  Program p;
  p.buffers = {buf("x", DType::f32, 1000, BufferRole::Input), buf("y", DType::f32, 1000, BufferRole::Output)};
  Index i = Index::var(0);
  Expr x = load(0, DType::f32, i);
  Expr v = binary(BinaryOp::Add, unary(UnaryOp::Sin, x), math::cos(x));
  v = binary(BinaryOp::Add, v, math::tanh(x));
  v = binary(BinaryOp::Add, v, math::log(math::abs(x)));
  v = binary(BinaryOp::Add, v, unary(UnaryOp::Exp2, x));
  v = binary(BinaryOp::Add, v, unary(UnaryOp::Log2, unary(UnaryOp::Sqrt, math::abs(x))));
  v = binary(BinaryOp::Mul, v, unary(UnaryOp::Recip, binary(BinaryOp::Max, x, constant(0.5))));
  v = binary(BinaryOp::Mod, v, constant(1.5));
  p.kernels = {Kernel{"flat", KernelKind::Elementwise, {{0, 1000, true, true}}, {1, i, v}, {}, {}}};
  std::string src = check_program(p, {}, 3e-5, 3e-6);
  // one loop both parallel and vectorized: chunks of whole vectors, a simd loop over each
  CHECK(src.find("lm_chunk(lm_rt, lm_cx, lm_total, 64)") != std::string::npos);
  CHECK(src.find("#pragma omp simd\n  for (int64_t v0 = lm_lo; v0 < lm_hi; ++v0)") != std::string::npos);
}

TEST_CASE("render: pad, slice and reshape index arithmetic", "[cpu][render]") {
  // x: [6, 10]. y = pad(x, rows (2, 1), cols (3, 0), value -1) -> [9, 13]; then
  // z[r, c] = y[r, c] + x viewed as [60] reshaped to [4, 15] at (r % 4, (r*13 + c) % 15), sliced.
  Program p;
  p.buffers = {buf("x", DType::f32, 60, BufferRole::Input), buf("z", DType::f32, 9 * 13, BufferRole::Output)};
  Index r = Index::var(0), c = Index::var(1);
  Index rr = r - 2, cc = c - 3;  // may be negative: only read where valid
  Index valid = land(land(le(Index(0), rr), lt(rr, 6)), land(le(Index(0), cc), lt(cc, 10)));
  Expr y = load_padded(0, DType::f32, rr * 10 + cc, valid, -1.0);
  Index flat = mod(r, 4) * 15 + mod(r * 13 + c, 15);
  Expr x2 = load(0, DType::f32, floordiv(flat, 10) * 10 + mod(flat, 10));
  // a floor division of a possibly negative value: (c - 7) // 3 in {-3..2} -> iota value
  Expr neg = cast(index_value(floordiv(c - 7, 3) + mod(c - 7, 3)), DType::f32);
  p.kernels = {Kernel{"padk",
                      KernelKind::Elementwise,
                      {{0, 9, true, false}, {1, 13, false, true}},
                      {1, r * 13 + c, binary(BinaryOp::Add, binary(BinaryOp::Add, y, x2), neg)},
                      {},
                      {}}};
  std::string src = check_program(p, {});
  CHECK(src.find("lm_fdiv(") != std::string::npos);
}

TEST_CASE("render: reductions (sum, max) with epilogues", "[cpu][render]") {
  // mean over the last axis and max over the middle axis of x[R, S, T]
  const int R = 7, S = 33, T = 19;
  Program p;
  p.buffers = {
      buf("x", DType::f32, R * S * T, BufferRole::Input), buf("mean", DType::f32, R * S, BufferRole::Output),
      buf("mx", DType::f32, R * T, BufferRole::Output), buf("sm", DType::f32, R * S * T, BufferRole::Output)};
  Index i = Index::var(0), j = Index::var(1), q = Index::var(2);
  Expr x = load(0, DType::f32, (i * S + j) * T + q);
  Kernel mean{"mean_k",
              KernelKind::Reduction,
              {{0, R, true, false}, {1, S, false, false}},
              {1, i * S + j, binary(BinaryOp::Mul, acc(), constant(1.0 / T))},
              Reduction{ReduceOp::Sum, {{2, T, false, true}}, binary(BinaryOp::Mul, x, x), DType::f32},
              {}};
  Kernel mx{"max_k",
            KernelKind::Reduction,
            {{0, R, true, false}, {2, T, false, false}},
            {2, i * T + q, math::exp(acc())},
            Reduction{ReduceOp::Max, {{1, S, false, true}}, x, DType::f32},
            {}};
  // softmax over T reading the max kernel's output: exp(x - max) / sum(exp(x - max)) done
  // as a reduction whose value and epilogue both read other buffers.
  Index q2 = Index::var(3);
  Expr xm =
      binary(BinaryOp::Sub, load(0, DType::f32, (i * S + j) * T + q2), load(0, DType::f32, (i * S + j) * T));
  Kernel sm{"soft_k",
            KernelKind::Reduction,
            {{0, R, true, false}, {1, S, true, false}, {2, T, false, false}},
            {3, (i * S + j) * T + q,
             math::div(math::exp(binary(BinaryOp::Sub, x, load(0, DType::f32, (i * S + j) * T))), acc())},
            Reduction{ReduceOp::Sum, {{3, T, false, true}}, math::exp(xm), DType::f32},
            {}};
  p.kernels = {mean, mx, sm};
  std::string src = check_program(p, {}, 1e-4, 1e-6);
  CHECK(src.find("reduction(+:acc)") != std::string::npos);
  CHECK(src.find("reduction(max:acc)") != std::string::npos);
  // soft_k's two parallel loops are one range, decomposed once per row
  CHECK(src.find("for (int64_t lm_i = lm_lo; lm_i < lm_hi;)") != std::string::npos);
  CHECK(src.find("const int64_t lm_s = lm_r % (33); lm_r /= (33);") != std::string::npos);
}

TEST_CASE("render: dtype casts, comparisons, where, integer ops", "[cpu][render]") {
  const int N = 257;
  Program p;
  p.buffers = {
      buf("h", DType::f16, N, BufferRole::Input),    buf("bh", DType::bf16, N, BufferRole::Input),
      buf("n", DType::i32, N, BufferRole::Input),    buf("m", DType::boolean, N, BufferRole::Input),
      buf("o16", DType::f16, N, BufferRole::Output), buf("obf", DType::bf16, N, BufferRole::Output),
      buf("oi", DType::i32, N, BufferRole::Output),  buf("ob", DType::boolean, N, BufferRole::Output)};
  Index i = Index::var(0);
  Expr h = cast(load(0, DType::f16, i), DType::f32);
  Expr bh = cast(load(1, DType::bf16, i), DType::f32);
  Expr n = load(2, DType::i32, i);
  Expr m = load(3, DType::boolean, i);
  Expr sum = binary(BinaryOp::Add, h, bh);
  std::vector<Loop> L = {{0, N, true, true}};
  p.kernels = {
      Kernel{"k16",
             KernelKind::Elementwise,
             L,
             {4, i, cast(binary(BinaryOp::Mul, sum, constant(3.3)), DType::f16)},
             {},
             {}},
      Kernel{"kbf",
             KernelKind::Elementwise,
             L,
             {5, i, cast(where(m, sum, unary(UnaryOp::Neg, h)), DType::bf16)},
             {},
             {}},
      Kernel{"ki",
             KernelKind::Elementwise,
             L,
             {6, i,
              binary(BinaryOp::Add, binary(BinaryOp::Mod, n, constant(3, DType::i32)),
                     binary(BinaryOp::Max, cast(binary(BinaryOp::Mul, h, constant(4.0)), DType::i32),
                            index_value(i)))},
             {},
             {}},
      Kernel{"kb",
             KernelKind::Elementwise,
             L,
             {7, i,
              binary(BinaryOp::Or, binary(BinaryOp::LessThan, h, bh),
                     binary(BinaryOp::And, unary(UnaryOp::Not, m),
                            binary(BinaryOp::Equal, n, constant(0, DType::i32))))},
             {},
             {}},
  };
  check_program(p, {});
}

TEST_CASE("render: validation rejects malformed programs", "[cpu][render]") {
  Program p;
  p.buffers = {buf("x", DType::f32, 4, BufferRole::Input), buf("y", DType::i32, 4, BufferRole::Output)};
  Index i = Index::var(0);
  // f32 value stored into an i32 buffer
  p.kernels = {Kernel{"bad", KernelKind::Elementwise, {{0, 4}}, {1, i, load(0, DType::f32, i)}, {}, {}}};
  CHECK_THROWS_AS(luminal::cpu::render_c(p), luminal::InternalError);
  // a loop variable used outside its loop
  p.kernels = {Kernel{"bad2",
                      KernelKind::Elementwise,
                      {{0, 4}},
                      {1, Index::var(5), cast(load(0, DType::f32, i), DType::i32)},
                      {},
                      {}}};
  CHECK_THROWS_AS(luminal::cpu::render_c(p), luminal::InternalError);
  // the evaluator bounds-checks
  p.kernels = {Kernel{
      "oob", KernelKind::Elementwise, {{0, 5}}, {1, i, cast(load(0, DType::f32, i), DType::i32)}, {}, {}}};
  std::vector<float> x(4);
  std::vector<int32_t> y(4);
  CHECK_THROWS_AS(evaluate(p, {x.data(), y.data()}, {}), luminal::InternalError);
}

TEST_CASE("render: chains of heavy calls run in stages over blocks, any length", "[cpu][render]") {
  Program p;
  p.symbols = {"N"};
  Index N = Index::sym("N");
  p.buffers = {buf("x", DType::f32, N, BufferRole::Input), buf("y", DType::f32, N, BufferRole::Output)};
  Index i = Index::var(0);
  Expr x = load(0, DType::f32, i);
  Expr v = binary(BinaryOp::Mul, math::sigmoid(math::exp(unary(UnaryOp::Sin, x))), x);
  p.kernels = {Kernel{"inter", KernelKind::Elementwise, {{0, N, true, true}}, {1, i, v}, {}, {}}};
  std::string src;
  for (int64_t n : {1, 3, 4, 5, 511, 512, 513, 1001, 4096}) src = check_program(p, {{"N", n}});
  // one stage per heavy call (sin, exp, sigmoid), then one for the multiply
  CHECK(src.find("lm_b += 512") != std::string::npos);
  CHECK(src.find("lm_st2[lm_j]") != std::string::npos);
  CHECK(src.find("lm_st3[") == std::string::npos);
}

TEST_CASE("render: a unit loop left innermost does not take the vectorized slot", "[cpu][render]") {
  // [N, 1] elementwise with the unit loop marked vectorize (what the lowering emits for a
  // trailing dim of size 1): the N loop is vectorized instead, the unit variable is 0.
  Program p;
  p.symbols = {"N"};
  Index N = Index::sym("N");
  p.buffers = {buf("x", DType::f32, N, BufferRole::Input), buf("y", DType::f32, N, BufferRole::Output)};
  Index i = Index::var(0), u = Index::var(1);
  Expr v = math::sigmoid(load(0, DType::f32, i + u));
  p.kernels = {Kernel{
      "unit", KernelKind::Elementwise, {{0, N, true, false}, {1, 1, true, true}}, {1, i + u, v}, {}, {}}};
  std::string src;
  for (int64_t n : {1, 7, 100000}) src = check_program(p, {{"N", n}});
  CHECK(src.find("const int64_t v1 = 0;") != std::string::npos);
  CHECK(src.find("const int64_t lm_total = 1 * (s0);") != std::string::npos);
  CHECK(src.find("lm_chunk(lm_rt, lm_cx, lm_total, 64)") != std::string::npos);
}

TEST_CASE("render: batched small GEMMs run one product per thread", "[cpu][render]") {
  // C[b] = A[b] @ B[b] for 16 products of 32x32x32: the batch loop is the parallel one
  Program p;
  const int64_t Bn = 16, n = 32;
  p.buffers = {buf("a", DType::f32, Bn * n * n, BufferRole::Input),
               buf("b", DType::f32, Bn * n * n, BufferRole::Input),
               buf("c", DType::f32, Bn * n * n, BufferRole::Output)};
  Index bv = Index::var(0);
  Gemm g;
  g.m = n;
  g.n = n;
  g.k = n;
  g.a = MatrixView{0, bv * (n * n), n, 1};
  g.b = MatrixView{1, bv * (n * n), n, 1};
  g.c = MatrixView{2, bv * (n * n), n, 1};
  g.row_var = 1;
  g.col_var = 2;
  const auto d = luminal::cpu::default_gemm_tile(luminal::cpu::host_isa());
  g.tile = GemmTile{d.mr, d.nr, d.mc, d.kc, d.nc};
  Kernel k;
  k.name = "bgemm";
  k.kind = KernelKind::Gemm;
  k.loops = {{0, Bn, true, false}};
  k.gemm = g;
  p.kernels = {k};
  luminal::cpu::RenderOptions opt;
  opt.isa = luminal::cpu::host_isa();
  std::string src = check_program(p, {}, 1e-4, 5e-4, 7, opt);
  CHECK(src.find("if (lm_batch >= 2 && lm_work * (double)lm_batch >= 262144.0") != std::string::npos);
  CHECK(src.find("lm_rt->parallel_for(lm_cx, lm_batch, 1, bgemm_task") != std::string::npos);
}

TEST_CASE("render: the same program renders the same source wherever its nodes live", "[cpu][render]") {
  // The JIT caches by source hash: C that depended on node addresses (declaration order
  // of stage arrays) made a second compile of the same graph in one process miss the
  // disk and memory caches and run the C compiler again.
  // The same expression DAG, its nodes allocated in a different order each time.
  auto make = [](bool late_stage_first) {
    Program p;
    p.buffers = {buf("x", DType::f32, 4096, BufferRole::Input),
                 buf("y", DType::f32, 4096, BufferRole::Output)};
    Index i = Index::var(0);
    Expr x = load(0, DType::f32, i);
    Expr s1, e1, t, g, rhs;
    if (late_stage_first) {
      rhs = binary(BinaryOp::Mul, math::exp(x), unary(UnaryOp::Sin, x));
      s1 = unary(UnaryOp::Sin, x);
      e1 = math::exp(s1);
      t = math::tanh(e1);
      g = math::sigmoid(t);
    } else {
      s1 = unary(UnaryOp::Sin, x);
      e1 = math::exp(s1);
      t = math::tanh(e1);
      g = math::sigmoid(t);
      rhs = binary(BinaryOp::Mul, math::exp(x), unary(UnaryOp::Sin, x));
    }
    Expr v = binary(BinaryOp::Add, binary(BinaryOp::Mul, binary(BinaryOp::Add, g, e1), t), rhs);
    p.kernels = {Kernel{"det", KernelKind::Elementwise, {{0, 4096, true, true}}, {1, i, v}, {}, {}}};
    return p;
  };
  std::vector<Program> keep;  // alive together, so their nodes have distinct addresses
  for (int k = 0; k < 8; ++k) keep.push_back(make(k % 2 == 1));
  const std::string first = luminal::cpu::render_c(keep[0]).source;
  CHECK(first.find("lm_st1[") != std::string::npos);  // staged, with several spilled values
  for (const Program& p : keep) CHECK(luminal::cpu::render_c(p).source == first);
}
