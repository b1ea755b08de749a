// Row-dot reductions (c_renderer + dot_codegen): sum_k x[k] * w[row, k] per output row
// with f32, f16 and bf16 weights, x read in place or computed once per run of rows, a
// batch loop outside the rows, lengths with and without a vector tail, on every ISA the
// renderer can target here; each checked against the IR evaluator on random inputs.
#include "harness.hpp"
#include "kernel/kernel_math.hpp"

using namespace luminal::kernel;
using cpu_test::buf;
using cpu_test::check_program;
using luminal::DType;
using luminal::cpu::CpuIsa;

namespace {

// Every ISA this host runs (the generated code is compiled with -march=native).
std::vector<CpuIsa> host_isas() {
  std::vector<CpuIsa> v{CpuIsa::Generic};
  if (luminal::cpu::host_isa() != CpuIsa::Generic) v.push_back(CpuIsa::Avx2);
  if (luminal::cpu::host_isa() == CpuIsa::Avx512) v.push_back(CpuIsa::Avx512);
  return v;
}

Expr weight(int buffer, DType dt, Index at) {
  Expr w = load(buffer, dt, std::move(at));
  return dt == DType::f32 ? w : cast(w, DType::f32);
}
}  // namespace

TEST_CASE("render: one-row products as row dot products", "[cpu][render]") {
  for (DType wdt : {DType::f32, DType::f16, DType::bf16})
    for (int64_t K : {int64_t{77}, int64_t{208}, int64_t{16}}) {
      // norm[r] = silu(sum_k (x[k] * g[k]) * W[r, k]) * u[r]   (an RMSNorm-scaled x, a SwiGLU tail)
      // proj[r] = sum_k x[k] * W[r, k] + x[r % K]                 (x in place, a residual)
      const int64_t N = 45;
      Program p;
      p.buffers = {
          buf("x", DType::f32, K, BufferRole::Input),     buf("g", DType::f32, K, BufferRole::Param),
          buf("W", wdt, N * K, BufferRole::Param),        buf("u", DType::f32, N, BufferRole::Input),
          buf("norm", DType::f32, N, BufferRole::Output), buf("proj", DType::f32, N, BufferRole::Output)};
      Index r = Index::var(0), k = Index::var(1);
      Expr xg = binary(BinaryOp::Mul, load(0, DType::f32, k), load(1, DType::f32, k));
      Kernel norm{
          "norm_k",
          KernelKind::Reduction,
          {{0, N, true, false}},
          {4, r,
           binary(BinaryOp::Mul, binary(BinaryOp::Mul, acc(), math::sigmoid(acc())), load(3, DType::f32, r))},
          Reduction{ReduceOp::Sum,
                    {{1, K, false, true}},
                    binary(BinaryOp::Mul, xg, weight(2, wdt, r * K + k)),
                    DType::f32},
          {}};
      Kernel proj{"proj_k",
                  KernelKind::Reduction,
                  {{0, N, true, false}},
                  {5, r, binary(BinaryOp::Add, acc(), load(0, DType::f32, mod(r, K)))},
                  Reduction{ReduceOp::Sum,
                            {{1, K, false, true}},
                            binary(BinaryOp::Mul, weight(2, wdt, r * K + k), load(0, DType::f32, k)),
                            DType::f32},
                  {}};
      p.kernels = {norm, proj};
      for (CpuIsa isa : host_isas()) {
        INFO("weights " << luminal::dtype_name(wdt) << ", K " << K << ", isa "
                        << luminal::cpu::isa_name(isa));
        luminal::cpu::RenderOptions opt;
        opt.isa = isa;
        // 208 products of magnitude up to 4 summed in another order than the evaluator's
        const std::string src = check_program(p, {}, 2e-5, 3e-5, 7, opt);
        const std::string fn = std::string("lm_dot_") + luminal::cpu::isa_name(isa) + "_" +
                               std::string(luminal::dtype_name(wdt));
        CHECK(src.find("const float acc = " + fn + "(lm_xp, lm_wp, " + std::to_string(K) + ")") !=
              std::string::npos);
        CHECK(src.find("lm_xp = lm_x;") != std::string::npos);   // norm_k: x * g computed once
        CHECK(src.find("lm_xp = b0 + (") != std::string::npos);  // proj_k: x read in place
        if (isa == CpuIsa::Avx512 && wdt == DType::f16)
          CHECK(src.find("_mm512_cvtph_ps") != std::string::npos);
      }
    }
}

TEST_CASE("render: row dot products under a batch loop and a symbolic length", "[cpu][render]") {
  // Attention scores of one query per head against P cached keys (GQA, 2 heads per KV
  // head): s[h, j] = 0.125 * sum_d q[h, d] * k[j, h / 2, d]; the query is the same for
  // every key j (the row), the keys' rows are unit-stride along d.
  Program p;
  p.symbols = {"P"};
  const Index P = Index::sym("P");
  const int64_t H = 4, D = 64;
  p.buffers = {
      buf("q", DType::f32, H * D, BufferRole::Input), buf("k", DType::f32, P * 2 * D, BufferRole::Input),
      buf("s", DType::f32, H * P, BufferRole::Output), buf("qs", DType::f32, H * P, BufferRole::Output)};
  Index h = Index::var(0), j = Index::var(1), d = Index::var(2);
  Expr q = load(0, DType::f32, h * D + d), kk = load(1, DType::f32, (j * 2 + floordiv(h, 2)) * D + d);
  Kernel scores{"scores_k",
                KernelKind::Reduction,
                {{0, H, true, false}, {1, P, true, false}},
                {2, h * P + j, binary(BinaryOp::Mul, acc(), constant(0.125))},
                Reduction{ReduceOp::Sum, {{2, D, false, true}}, binary(BinaryOp::Mul, q, kk), DType::f32},
                {}};
  // The same with the query scaled first (computed once per head and run of keys).
  Kernel scaled{"scaled_k",
                KernelKind::Reduction,
                {{0, H, true, false}, {1, P, true, false}},
                {3, h * P + j, acc()},
                Reduction{ReduceOp::Sum,
                          {{2, D, false, true}},
                          binary(BinaryOp::Mul, binary(BinaryOp::Mul, q, constant(0.125)), kk),
                          DType::f32},
                {}};
  p.kernels = {scores, scaled};
  std::string src;
  for (int64_t len : {1, 7, 300}) src = check_program(p, {{"P", len}}, 2e-5, 3e-5);
  CHECK(src.find("(lm_xp, lm_wp, 64)") != std::string::npos);
  CHECK(src.find("lm_xp = lm_x;") != std::string::npos);
}

TEST_CASE("render: reductions that are not row dot products keep the generic loop", "[cpu][render]") {
  // a weight strided along k (x @ W with W [K, N]: vectorized along the rows instead), a
  // sum of squares (x is the row's own data), a product whose store overwrites what x
  // reads, and a computed x longer than the stack stage: none is a row dot product, the
  // last three stay `omp simd` reductions; the same results either way.
  const int64_t N = 24, K = 40, L = 4100;
  Program p;
  p.buffers = {
      buf("x", DType::f32, K, BufferRole::Input),      buf("W", DType::f32, N * K, BufferRole::Param),
      buf("o1", DType::f32, N, BufferRole::Output),    buf("o2", DType::f32, N, BufferRole::Output),
      buf("io", DType::f32, K, BufferRole::Output),    buf("xl", DType::f32, L, BufferRole::Input),
      buf("Wl", DType::f32, 2 * L, BufferRole::Param), buf("o4", DType::f32, 2, BufferRole::Output)};
  Index r = Index::var(0), k = Index::var(1);
  Kernel strided{"strided_k",
                 KernelKind::Reduction,
                 {{0, N, true, false}},
                 {2, r, acc()},
                 Reduction{ReduceOp::Sum,
                           {{1, K, false, true}},
                           binary(BinaryOp::Mul, load(0, DType::f32, k), load(1, DType::f32, k * N + r)),
                           DType::f32},
                 {}};
  Expr wr = load(1, DType::f32, r * K + k);
  Kernel squares{"squares_k",
                 KernelKind::Reduction,
                 {{0, N, true, false}},
                 {3, r, acc()},
                 Reduction{ReduceOp::Sum, {{1, K, false, true}}, binary(BinaryOp::Mul, wr, wr), DType::f32},
                 {}};
  // io starts as a copy of x, then io[r] = sum_k io[k] * W[r, k] row after row
  Kernel copy{"copy_k", KernelKind::Elementwise, {{1, K, false, true}}, {4, k, load(0, DType::f32, k)}, {},
              {}};
  Kernel inplace{"inplace_k",
                 KernelKind::Reduction,
                 {{0, K < N ? K : N, false, false}},
                 {4, r, acc()},
                 Reduction{ReduceOp::Sum,
                           {{1, K, false, true}},
                           binary(BinaryOp::Mul, load(4, DType::f32, k), wr),
                           DType::f32},
                 {}};
  Kernel longx{
      "long_k",
      KernelKind::Reduction,
      {{0, 2, false, false}},
      {7, r, acc()},
      Reduction{ReduceOp::Sum,
                {{1, L, false, true}},
                binary(BinaryOp::Mul, math::mul(load(5, DType::f32, k), 0.5), load(6, DType::f32, r * L + k)),
                DType::f32},
      {}};
  p.kernels = {strided, squares, copy, inplace, longx};
  const std::string src = check_program(p, {}, 1e-4, 1e-5);
  CHECK(src.find("lm_dot_") == std::string::npos);
  CHECK(src.find("reduction(+:acc)") != std::string::npos);
  CHECK(src.find("lm_acc[lm_j]") != std::string::npos);  // strided_k
}

TEST_CASE("render: reductions whose data runs along the rows vectorize the rows", "[cpu][render]") {
  // Attention's P.V for one query per head: o[h, d] = sum_j p[h, j] * V[j, h / 2, d] over
  // P cached rows and one new row (a padded concat, as a decode step reads its cache);
  // then the same product read through a strided x @ W (W [K, N], x along k).
  Program p;
  p.symbols = {"P"};
  const Index P = Index::sym("P");
  const int64_t H = 4, D = 40, N = 24, K = 33;
  p.buffers = {buf("p", DType::f32, H * (P + 1), BufferRole::Input),
               buf("V", DType::f32, P * 2 * D, BufferRole::Input),
               buf("vnew", DType::f32, 2 * D, BufferRole::Input),
               buf("o", DType::f32, H * D, BufferRole::Output),
               buf("x", DType::f32, K, BufferRole::Input),
               buf("W", DType::f32, K * N, BufferRole::Param),
               buf("y", DType::f32, N, BufferRole::Output)};
  Index h = Index::var(0), d = Index::var(1), j = Index::var(2);
  Index in_cache = lt(j, P);
  Expr cached =
      load_padded(1, DType::f32, select(in_cache, (j * 2 + floordiv(h, 2)) * D + d, 0), in_cache, 0.0);
  Expr fresh = load_padded(2, DType::f32, select(le(P, j), floordiv(h, 2) * D + d, 0), le(P, j), 0.0);
  Kernel pv{"pv_k",
            KernelKind::Reduction,
            {{0, H, true, false}, {1, D, true, false}},
            {3, h * D + d, acc()},
            Reduction{ReduceOp::Sum,
                      {{2, P + 1, false, true}},
                      binary(BinaryOp::Mul, load(0, DType::f32, h * (P + 1) + j),
                             binary(BinaryOp::Add, cached, fresh)),
                      DType::f32},
            {}};
  Index n = Index::var(0), k = Index::var(1);
  Kernel xw{"xw_k",
            KernelKind::Reduction,
            {{0, N, true, false}},
            {6, n, binary(BinaryOp::Add, acc(), constant(1.0))},
            Reduction{ReduceOp::Sum,
                      {{1, K, false, true}},
                      binary(BinaryOp::Mul, load(4, DType::f32, k), load(5, DType::f32, k * N + n)),
                      DType::f32},
            {}};
  p.kernels = {pv, xw};
  std::string src;
  for (int64_t len : {1, 9, 130}) src = check_program(p, {{"P", len}}, 2e-5, 3e-5);
  CHECK(src.find("lm_acc[lm_j] = lm_acc[lm_j] + ") != std::string::npos);
  CHECK(src.find("reduction(+:acc)") == std::string::npos);
}
