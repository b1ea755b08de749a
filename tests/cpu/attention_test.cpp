// The Attention kernel kind (kernel_ir.hpp): the C renderer's streaming loop (online
// softmax, causal key skipping) against the IR evaluator's two-pass definition, on
// shapes that cut the renderer's query and key blocks unevenly, with fully masked rows
// and inf/NaN in V at masked keys; then end to end, scaled_dot_product_attention and the
// decoder block compiled for the CPU against the interpreter.
#include <catch2/catch.hpp>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <limits>

#include "backends/cpu/cpu_program.hpp"
#include "backends/cpu/kernel_call.hpp"
#include "backends/gpu/gpu_program.hpp"
#include "compiler/translation_models.hpp"
#include "harness.hpp"
#include "luminal/luminal.hpp"

namespace k = luminal::kernel;
namespace lm = luminal;
using k::Index;

namespace {

struct Case {
  int64_t heads, m, n, dk, dv, offset;
  bool causal, with_key_end, poison_masked_v;
  bool huge_v = false;  // values near FLT_MAX: the output is a convex combination of them
  lm::DType dt = lm::DType::f32;  // of q, k, v and out (halves: widened on load, f32 math, rounded on store)
  // A segmented V (Attention::v_more): the keys where segments 1.. start, each segment in
  // a buffer of its own (4, 5, ...) with rows padded to another stride; keys before the
  // first split are rows of buffer 2. A decode step's concat(v_cache, v_new) read in place.
  // K is split at the same keys (Attention::k_more), each segment a buffer of its own
  // after V's, read through a prologue of its own (concat(k_cache, rope(k_new))).
  std::vector<int64_t> v_splits = {};
};

constexpr int64_t kSegPad = 3;  // extra elements per row of a V segment buffer

// Buffer and element of V's row `j`, element `e` of the row ([heads * dv] per key).
std::pair<int, int64_t> v_element(const Case& c, int64_t j, int64_t e) {
  for (size_t s = c.v_splits.size(); s-- > 0;)
    if (j >= c.v_splits[s])
      return {4 + static_cast<int>(s), (j - c.v_splits[s]) * (c.heads * c.dv + kSegPad) + e};
  return {2, j * c.heads * c.dv + e};
}

// Element `e` of buffer `b` set to `x` in the buffer's dtype.
void put(cpu_test::HostBuffers& hb, const k::Program& p, int b, int64_t e, float x) {
  auto& bytes = hb.bytes[static_cast<size_t>(b)];
  switch (p.buffers[static_cast<size_t>(b)].dtype) {
    case lm::DType::f16: {
      const uint16_t h = k::f32_to_f16_bits(x);
      std::memcpy(bytes.data() + 2 * e, &h, 2);
      break;
    }
    case lm::DType::bf16: {
      const uint16_t h = k::f32_to_bf16_bits(x);
      std::memcpy(bytes.data() + 2 * e, &h, 2);
      break;
    }
    default:
      std::memcpy(bytes.data() + 4 * e, &x, 4);
  }
}

// Q [H, m, dk], K [H/2 (grouped), n, dk] read as head h / 2 through a prologue, V
// [n, H, dv] (a permuted view), out [m, H, dv].
k::Program attention_program(const Case& c) {
  k::Program p;
  const int64_t kvh = (c.heads + 1) / 2;
  p.buffers = {{"q", c.dt, Index(c.heads * c.m * c.dk), k::BufferRole::Input},
               {"k", c.dt, Index(kvh * c.n * c.dk), k::BufferRole::Input},
               {"v", c.dt, Index(c.n * c.heads * c.dv), k::BufferRole::Input},
               {"out", c.dt, Index(c.m * c.heads * c.dv), k::BufferRole::Output}};
  auto seg_rows = [&](size_t s) {
    return (s + 1 < c.v_splits.size() ? c.v_splits[s + 1] : c.n) - c.v_splits[s];
  };
  for (size_t s = 0; s < c.v_splits.size(); ++s)
    p.buffers.push_back({"v_seg" + std::to_string(s), c.dt, Index(seg_rows(s) * (c.heads * c.dv + kSegPad)),
                         k::BufferRole::Input});
  const int k_seg0 = static_cast<int>(p.buffers.size());
  for (size_t s = 0; s < c.v_splits.size(); ++s)
    p.buffers.push_back({"k_seg" + std::to_string(s), c.dt, Index(kvh * seg_rows(s) * c.dk), k::BufferRole::Input});
  auto widen = [&](k::Expr e) { return c.dt == lm::DType::f32 ? e : k::cast(e, lm::DType::f32); };
  k::Kernel kern;
  kern.name = "attn";
  kern.kind = k::KernelKind::Attention;
  const Index h = Index::var(0), i = Index::var(1), j = Index::var(2);
  kern.loops.push_back(k::Loop{0, Index(c.heads), true, false});
  k::Attention a;
  a.m = c.m;
  a.n = c.n;
  a.dk = c.dk;
  a.dv = c.dv;
  const Index p4 = Index::var(4);
  a.q = widen(k::load(0, c.dt, h * Index(c.m * c.dk) + i * Index(c.dk) + p4));
  // K through a prologue (x * 0.5 + 1), as RoPE is staged with the tile.
  a.k = k::binary(k::BinaryOp::Add,
                  k::binary(k::BinaryOp::Mul,
                            widen(k::load(1, c.dt,
                                          k::floordiv(h, Index(2)) * Index(c.n * c.dk) + j * Index(c.dk) + p4)),
                            k::constant(0.5)),
                  k::constant(1.0));
  // K segment s: [KV, rows, dk] in a buffer of its own, key j counted from its start,
  // through another prologue (x * -0.25 + s), so reading the wrong segment shows.
  for (size_t s = 0; s < c.v_splits.size(); ++s)
    a.k_more.push_back(
        {k::binary(k::BinaryOp::Add,
                   k::binary(k::BinaryOp::Mul,
                             widen(k::load(k_seg0 + static_cast<int>(s), c.dt,
                                           k::floordiv(h, Index(2)) * Index(seg_rows(s) * c.dk) + j * Index(c.dk) + p4)),
                             k::constant(-0.25)),
                   k::constant(static_cast<double>(s))),
         Index(c.v_splits[s])});
  a.v = {2, h * Index(c.dv), Index(c.heads * c.dv), Index(1)};
  for (size_t s = 0; s < c.v_splits.size(); ++s)
    a.v_more.push_back({{4 + static_cast<int>(s), h * Index(c.dv), Index(c.heads * c.dv + kSegPad), Index(1)},
                        Index(c.v_splits[s])});
  a.out = {3, h * Index(c.dv), Index(c.heads * c.dv), Index(1)};
  a.row_var = 1;
  a.key_var = 2;
  a.col_var = 3;
  a.depth_var = 4;
  k::Expr scaled = k::binary(k::BinaryOp::Mul, k::acc(), k::constant(1.0 / std::sqrt(double(c.dk))));
  if (c.causal) {
    k::Expr allowed = k::binary(
        k::BinaryOp::LessThan, k::index_value(j),
        k::binary(k::BinaryOp::Add, k::index_value(i), k::constant(double(c.offset + 1), lm::DType::i32)));
    a.score = k::where(allowed, scaled, k::constant(-std::numeric_limits<double>::infinity()));
    if (c.with_key_end) a.key_end = i + Index(c.offset + 1);
  } else {
    a.score = scaled;
  }
  a.epilogue = k::binary(k::BinaryOp::Add, k::acc(), k::constant(0.5));
  if (c.dt != lm::DType::f32) a.epilogue = k::cast(a.epilogue, c.dt);
  kern.attention = a;
  p.kernels.push_back(kern);
  return p;
}

void check(const Case& c, luminal::cpu::RenderOptions opt = {}) {
  const k::Program p = attention_program(c);
  cpu_test::HostBuffers ref = cpu_test::allocate(p, {}, 7), got = cpu_test::allocate(p, {}, 7);
  if (c.poison_masked_v) {
    // inf and NaN in V rows only the last queries may see: every earlier row must turn
    // NaN in those columns (0 * inf), whether or not the renderer skipped the key.
    for (auto* hb : {&ref, &got}) {
      const float vals[2] = {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
      for (int t = 0; t < 2; ++t) {
        const int64_t row = c.n - 1 - t, col = 3 * t + 1;  // head 0, value column 1 or 4
        const auto [b, e] = v_element(c, row, col);
        put(*hb, p, b, e, vals[t]);
      }
    }
  }
  if (c.huge_v)
    for (auto* hb : {&ref, &got})
      for (int64_t j = 0; j < c.n; ++j)
        for (int64_t r = 0; r < c.heads * c.dv; ++r) {
          const auto [b, e] = v_element(c, j, r);
          const double x = cpu_test::element(p.buffers[static_cast<size_t>(b)], hb->bytes[static_cast<size_t>(b)], e);
          // Near the format's largest value, one sign: no cancellation.
          const float big = c.dt == lm::DType::f16 ? 6.0e4f : 3.0e38f;
          put(*hb, p, b, e, big * (0.5f + 0.5f * std::min(static_cast<float>(std::fabs(x)), 1.0f)));
        }
  k::evaluate(p, ref.ptrs(), {});
  luminal::cpu::CProgram cp = luminal::cpu::render_c(p, opt);
  const int64_t few_rows = opt.isa == luminal::cpu::CpuIsa::Avx512 ? 4 : 2;
  if (c.m <= few_rows && c.dv % 16 == 0 && opt.isa != luminal::cpu::CpuIsa::Generic) {
    // A few query rows take the few-rows form: no transposed K tile.
    INFO(cp.source);
    CHECK(cp.source.find("lm_kt[") == std::string::npos);
  }
  auto lib = luminal::cpu::Jit::global().compile(cp.source);
  auto ptrs = got.ptrs();
  luminal::cpu::run_generated(lib->function<luminal::cpu::KernelFn>(cp.entry), ptrs.data(), nullptr);
  const auto& ob = p.buffers[3];
  int nans = 0;
  for (int64_t e = 0; e < ob.elements.evaluate({}, {}); ++e) {
    const double r = cpu_test::element(ob, ref.bytes[3], e), g = cpu_test::element(ob, got.bytes[3], e);
    if (std::isnan(r) || std::isnan(g)) {
      INFO("element " << e << ": evaluator " << r << ", generated C " << g << "\n" << k::to_string(p));
      REQUIRE((std::isnan(r) && std::isnan(g)));
      ++nans;
      continue;
    }
    INFO("element " << e << ": evaluator " << r << ", generated C " << g << "\n" << k::to_string(p));
    if (std::isinf(r) || std::isinf(g)) {
      REQUIRE(r == g);
      continue;
    }
    // Halves: both round the same f32 result, which may differ in its last bits.
    const double rtol = c.dt == lm::DType::f16 ? 1.5e-3 : c.dt == lm::DType::bf16 ? 1e-2 : 2e-5;
    REQUIRE(std::abs(r - g) <= 2e-6 + rtol * std::abs(r));
  }
  // Fully masked rows and poisoned columns must really have produced NaN.
  if (c.causal && c.offset < 0) CHECK(nans > 0);
  if (c.poison_masked_v) CHECK(nans > 0);
  // A kernel that divides by the sum only at the end overflows here; the definition does not.
  if (c.huge_v)
    for (int64_t e = 0; e < ob.elements.evaluate({}, {}); ++e) CHECK(std::isfinite(cpu_test::element(ob, got.bytes[3], e)));
}

}  // namespace

TEST_CASE("attention kernel: generated C matches the evaluator", "[cpu][attention]") {
  const Case cases[] = {
      {3, 5, 7, 8, 8, 2, true, true, false},        // smaller than one block
      {2, 37, 70, 16, 24, 33, true, true, false},   // uneven blocks, bottom-right causal
      {2, 40, 40, 8, 8, 0, true, true, true},       // square causal, poisoned masked V
      {2, 40, 40, 8, 8, 0, true, false, true},      // the same without skipping
      {2, 21, 19, 12, 4, -5, true, true, false},    // the first rows see no key: NaN
      {4, 33, 65, 32, 16, 0, false, false, false},  // no mask
      {1, 1, 1, 4, 4, 0, true, true, false},        // one query, one key
      {2, 37, 70, 16, 16, 33, true, true, false, true},  // values near FLT_MAX
      {2, 33, 65, 8, 16, 0, false, false, false, true},  // the same, no mask
      // f16/bf16 q, k, v and output: widened as read, f32 math, rounded on store.
      {2, 37, 70, 16, 24, 33, true, true, false, false, lm::DType::f16},
      {2, 40, 40, 8, 8, 0, true, true, true, false, lm::DType::bf16},
      {2, 21, 19, 12, 4, -5, true, true, false, false, lm::DType::f16},
      {4, 33, 65, 32, 16, 0, false, false, false, false, lm::DType::bf16},
      {2, 37, 70, 16, 16, 33, true, true, false, true, lm::DType::f16},
      {2, 33, 65, 8, 16, 0, false, false, false, true, lm::DType::bf16},
      // V in segments (a KV cache and new rows read in place): splits inside a key block,
      // on a block edge, at the last key; with skipped (poisoned) and NaN rows.
      {2, 37, 70, 16, 24, 33, true, true, false, false, lm::DType::f32, {69}},
      {2, 40, 40, 8, 8, 0, true, true, true, false, lm::DType::f32, {13, 32}},
      {2, 21, 19, 12, 4, -5, true, true, false, false, lm::DType::f32, {1, 7, 18}},
      {2, 37, 70, 16, 16, 33, true, true, false, true, lm::DType::f32, {50}},
      {2, 40, 40, 8, 8, 0, true, true, true, false, lm::DType::bf16, {39}},
  };
  for (const Case& c : cases) {
    INFO("heads " << c.heads << " m " << c.m << " n " << c.n << " dk " << c.dk << " dv " << c.dv << " offset "
                  << c.offset << " causal " << c.causal << " key_end " << c.with_key_end << " "
                  << lm::dtype_name(c.dt) << " K and V segments " << c.v_splits.size() + 1);
    check(c);
  }
}

TEST_CASE("attention kernel: a few query rows (a decode step) on every ISA", "[cpu][attention][few_rows]") {
  const Case cases[] = {
      {3, 1, 70, 16, 24, 0, false, false, false},  // keys over uneven blocks, no mask
      {6, 1, 129, 64, 64, 0, false, false, true},  // the 110m decode shape; inf/NaN in V
      {2, 1, 1, 8, 8, 0, false, false, false},     // one key
      {2, 1, 40, 8, 8, 20, true, true, true},      // causal, keys past key_end poisoned
      {2, 1, 40, 8, 8, 20, true, false, true},     // the same without skipping
      {2, 1, 5, 8, 8, -1, true, true, false},      // the row sees no key: NaN
      {2, 1, 33, 12, 20, 0, false, false, false},  // widths that are no multiple of a vector
      {4, 3, 129, 64, 64, 0, false, false, true},  // a KV head's 3 query heads as rows
      {2, 2, 70, 16, 32, 0, false, false, false},  // two rows
      {2, 4, 40, 8, 16, 30, true, true, true},     // four causal rows, poisoned V past key_end
      {2, 3, 9, 8, 16, -2, true, true, false},     // the first rows see no key: NaN
      {2, 2, 70, 16, 16, 30, true, true, false, true},  // values near FLT_MAX
      {6, 1, 129, 64, 64, 0, false, false, true, false, lm::DType::f16},  // f16, bf16 values
      {4, 3, 129, 64, 64, 0, false, false, true, false, lm::DType::bf16},
      {2, 3, 9, 8, 16, -2, true, true, false, false, lm::DType::f16},
      {2, 2, 70, 16, 16, 30, true, true, false, true, lm::DType::bf16},
      // A decode step over a KV cache of n - 1 keys and the new one, read in place.
      {6, 1, 129, 64, 64, 0, false, false, true, false, lm::DType::f32, {128}},
      {4, 3, 129, 64, 64, 0, false, false, true, false, lm::DType::f32, {128}},
      {2, 1, 40, 8, 8, 20, true, true, true, false, lm::DType::f32, {17, 39}},
      {2, 2, 70, 16, 32, 0, false, false, false, false, lm::DType::f16, {31}},
      {6, 1, 129, 64, 64, 0, false, false, true, false, lm::DType::bf16, {128}},
  };
  std::vector<luminal::cpu::CpuIsa> isas = {luminal::cpu::CpuIsa::Generic};
  if (luminal::cpu::host_isa() != luminal::cpu::CpuIsa::Generic) isas.push_back(luminal::cpu::CpuIsa::Avx2);
  if (luminal::cpu::host_isa() == luminal::cpu::CpuIsa::Avx512) isas.push_back(luminal::cpu::CpuIsa::Avx512);
  for (const Case& c : cases)
    for (luminal::cpu::CpuIsa isa : isas) {
      INFO("heads " << c.heads << " n " << c.n << " dk " << c.dk << " dv " << c.dv << " offset " << c.offset
                    << " causal " << c.causal << " key_end " << c.with_key_end << " isa "
                    << static_cast<int>(isa) << " K and V segments " << c.v_splits.size() + 1);
      luminal::cpu::RenderOptions opt;
      opt.isa = isa;
      check(c, opt);
    }
}

TEST_CASE("attention kernel: the evaluator rejects a key_end that cuts unmasked keys", "[cpu][attention]") {
  Case c{2, 8, 8, 4, 4, 0, true, true, false};
  k::Program p = attention_program(c);
  p.kernels[0].attention->key_end = Index::var(1);  // one key short of the mask
  cpu_test::HostBuffers hb = cpu_test::allocate(p, {}, 3);
  CHECK_THROWS_AS(k::evaluate(p, hb.ptrs(), {}), lm::InternalError);
}

TEST_CASE("attention kernel: a wrong V segment table is refused by the validator", "[cpu][attention]") {
  const Case c{2, 40, 40, 8, 8, 0, true, true, false, false, lm::DType::f32, {13, 32}};
  k::validate(attention_program(c));
  auto broken = [&](auto&& edit) {
    k::Program p = attention_program(c);
    edit(p, *p.kernels[0].attention);
    return p;
  };
  // A second segment at key 0, segments out of order, another dtype, another column stride.
  CHECK_THROWS_AS(k::validate(broken([](k::Program&, k::Attention& a) { a.v_more[0].j0 = 0; })), lm::InternalError);
  CHECK_THROWS_AS(k::validate(broken([](k::Program&, k::Attention& a) { a.v_more[1].j0 = 5; })), lm::InternalError);
  CHECK_THROWS_AS(k::validate(broken([](k::Program& p, k::Attention& a) {
                    p.buffers[static_cast<size_t>(a.v_more[1].v.buffer)].dtype = lm::DType::f16;
                  })),
                  lm::InternalError);
  CHECK_THROWS_AS(k::validate(broken([](k::Program&, k::Attention& a) { a.v_more[0].v.col_stride = Index(2); })),
                  lm::InternalError);
}

TEST_CASE("cpu: scaled_dot_product_attention runs as one generated attention kernel",
          "[cpu][attention][e2e]") {
  for (bool causal : {true, false}) {
    lm::Graph g;
    lm::Tensor q = g.input("q", {4, 24, 16}), kk = g.input("k", {4, 40, 16}), v = g.input("v", {4, 40, 8});
    g.output("y", lm::scaled_dot_product_attention(q, kk, v, causal));
    auto plan = lm::compiler::compile_graph(*g.impl(), lm::Target::cpu(), {});
    int att = 0;
    for (const auto& st : plan.plan->steps) att += st.spec->kind == lm::ir::KernelKind::Attention ? 1 : 0;
    CHECK(att == 1);
    CHECK(plan.report.kernels == 1);
    lm::Callable f = lm::compile(g, lm::Target::cpu());
    INFO(f.report().to_string());
    CHECK(f.report().interpreted_kernels == 0);
    auto in = lm::test::random_inputs(*g.impl(), 11);
    std::map<std::string, const lm::HostTensor*> ptrs;
    for (const auto& [name, t] : in) ptrs.emplace(name, &t);
    auto want = lm::detail::reference::run(*g.impl(), {}, ptrs);
    CHECK(lm::test::compare_outputs(f(in), want) <= 1.0);
  }
}

// A decode step: one query row over the KV cache (an input of P keys) and the step's new
// key and value (computed by projections; the key through RoPE), concatenated and
// repeated over the query heads of each KV head. The attention kernel reads V where it
// lies, as two segments (Attention::v_more); before, it copied P rows of V (per query
// head) into scratch every step. An f32 cache, and an f16 one as the Llama example's
// `kv_dtype` keeps it: the new rows rounded to f16 are outputs (the caller appends them
// to its cache) and the attention attends over them as stored, K and V both in place.
TEST_CASE("cpu: a decode step's attention reads the KV cache and the new row in place",
          "[cpu][attention][e2e]") {
  for (lm::DType cache : {lm::f32, lm::f16}) {
    INFO("cache " << lm::dtype_name(cache));
    lm::Graph g;
    const int64_t H = 4, KV = 2, G = H / KV, hd = 16, D = 32;
    lm::Dim P = g.dim("P", 1, 64);
    lm::Tensor x = g.input("x", {1, D}), pos = g.input("pos", {1}, lm::i32);
    auto heads = [&](const lm::Tensor& t, int64_t n) {
      return lm::permute(lm::reshape(t, {1, n, hd}), {1, 0, 2});
    };
    lm::Tensor q = lm::rope(heads(lm::linear(x, g.param("wq", {H * hd, D})), H), pos);
    lm::Tensor kn = lm::rope(heads(lm::linear(x, g.param("wk", {KV * hd, D})), KV), pos);
    lm::Tensor vn = heads(lm::linear(x, g.param("wv", {KV * hd, D})), KV);
    auto cached = [&](const char* name, const lm::Tensor& t) {
      if (cache == lm::f32) return lm::concat({g.input(name, {KV, P, hd}), t}, 1);  // [KV, P + 1, hd]
      const lm::Tensor row = lm::cast(t, cache);
      g.output(std::string(name) + ".new", row);
      return lm::concat({lm::cast(g.input(name, {KV, P, hd}, cache), lm::f32), lm::cast(row, lm::f32)}, 1);
    };
    auto rep = [&](const lm::Tensor& t) {
      return lm::reshape(lm::expand(lm::reshape(t, {KV, 1, P + 1, hd}), {KV, G, P + 1, hd}), {H, P + 1, hd});
    };
    g.output("y", lm::scaled_dot_product_attention(q, rep(cached("k_cache", kn)), rep(cached("v_cache", vn)),
                                                   true));
    auto compiled = lm::compiler::compile_graph(*g.impl(), lm::Target::cpu(), {});
    INFO(compiled.report.to_string() << "\n" << compiled.dot);
    int att = 0;
    for (const auto& st : compiled.plan->steps) att += st.spec->kind == lm::ir::KernelKind::Attention ? 1 : 0;
    REQUIRE(att == 1);
    // V in two segments for the CPU and for the GPU renderers (which take the same plan;
    // the GPU lowering splits this decode attention's keys into ranges, the last range
    // block of each row merging them: flash-decoding).
    for (const auto& opt : {lm::cpu::cpu_lower_options(), lm::gpu::gpu_lower_options()}) {
      auto lowered = lm::cpu::lower_plan(*compiled.plan, opt);
      int segmented = 0, k_segmented = 0, merges = 0;
      for (const auto& kern : lowered.prog.kernels)
        if (kern.attention) {
          merges += kern.attention->split ? 1 : 0;
          segmented += kern.attention->v_more.size() == 1 ? 1 : 0;
          k_segmented += kern.attention->k_more.size() == 1 ? 1 : 0;
        }
      CHECK(k_segmented == 1);
      CHECK(merges == (opt.split_attention ? 1 : 0));
      CHECK(segmented == 1);
      INFO(lm::kernel::to_string(lowered.prog));
      // Nothing copies the cache: no intermediate buffer grows with it (the RoPE tables,
      // the projections and the output are all of constant size).
      for (const auto& buf : lowered.prog.buffers)
        if (buf.role == lm::kernel::BufferRole::Intermediate) CHECK(buf.elements.as_constant().has_value());
    }
    // The same graph on the emulated GPUs: the GPU renderer's segmented loads, both
    // dialects; and fused by the guided rules alone (without fuse-producers' policies the
    // plan for hip:gfx90a holds an attention whose score product reads Q as a slot with no
    // broadcast above it, which the cost model's body_work read past, a crash until
    // 2026-12-06).
    for (const char* target : {"cpu", "cuda:sm_90+emu", "hip:gfx90a+emu", "cpu-guided",
                               "cuda:sm_90+emu-guided", "hip:gfx90a+emu-guided"}) {
      INFO(target);
      const std::string name = target;
      const bool guided = name.ends_with("-guided");
      lm::CompileOptions o;
      if (guided) o.skip_rules = {"fuse-producers"};
      lm::Callable f = lm::compile(g, lm::Target::parse(guided ? name.substr(0, name.size() - 7) : name), o);
      CHECK(f.report().interpreted_kernels == 0);
      for (int64_t past : {1, 17, 64}) {
        INFO("P " << past);
        auto all = lm::test::random_inputs(*g.impl(), 5 + static_cast<uint64_t>(past), {{"P", past}});
        all.at("pos") = lm::HostTensor::from(std::vector<int32_t>{static_cast<int32_t>(past)}, {1});
        std::map<std::string, const lm::HostTensor*> ptrs;
        for (const auto& [name, t] : all) ptrs.emplace(name, &t);
        auto want = lm::detail::reference::run(*g.impl(), {{"P", past}}, ptrs);
        for (const auto& name : f.param_names()) f.bind(name, all.at(name));
        std::map<std::string, lm::HostTensor> in;
        for (const auto& name : f.input_names()) in.emplace(name, all.at(name));
        CHECK(lm::test::compare_outputs(f(in), want) <= 1.0);
      }
    }
  }
}

// A concat is an add of pieces padded with -0, and the add is commutative: the algebra
// (add-comm) and a user alike may list the new row before the cache. The pieces are
// segments by where they start along the keys, whatever the add's order
// (ir::stored_concat): V is read in place, both orders, on the CPU and the emulated GPUs.
// (Before 2026-12-07 the order had to be the keys' own: a d_model 512 decode step on
// gfx90a without the fusion policies copied its V concat in a kernel of its own.) Padded
// with +0 it is no concat -- a piece's -0 sums to +0, which reading the piece in place
// would not give -- and V is computed, as written.
TEST_CASE("cpu: a V concat listing the new row first is read in place", "[cpu][attention][e2e]") {
  for (const auto& [new_first, fill] :
       {std::pair{true, -0.0f}, std::pair{false, -0.0f}, std::pair{true, 0.0f}}) {
    INFO("new row first " << new_first << ", padded with " << (std::signbit(fill) ? "-0" : "+0"));
    lm::Graph g;
    const int64_t H = 2, hd = 8;
    lm::Dim P = g.dim("P", 1, 32);
    lm::Tensor q = g.input("q", {H, 1, hd}), k = g.input("k", {H, P + 1, hd});
    lm::Tensor cache = lm::pad(g.input("v_cache", {H, P, hd}), {{0, 0}, {0, 1}, {0, 0}}, fill);
    lm::Tensor row = lm::pad(g.input("v_new", {H, 1, hd}), {{0, 0}, {P, 0}, {0, 0}}, fill);
    g.output("y", lm::scaled_dot_product_attention(q, k, new_first ? row + cache : cache + row));
    for (const char* target : {"cpu", "cuda:sm_90+emu", "hip:gfx90a+emu"}) {
      INFO(target);
      auto compiled = lm::compiler::compile_graph(*g.impl(), lm::Target::parse(target), {});
      INFO(compiled.report.to_string() << "\n" << compiled.dot);
      const bool gpu = std::string(target) != "cpu";
      auto lowered = lm::cpu::lower_plan(*compiled.plan,
                                         gpu ? lm::gpu::gpu_lower_options() : lm::cpu::cpu_lower_options());
      INFO(lm::kernel::to_string(lowered.prog));
      int segmented = 0;
      for (const auto& kern : lowered.prog.kernels)
        if (kern.attention) segmented += kern.attention->v_more.size() == 1 ? 1 : 0;
      const bool in_place = std::signbit(fill);
      CHECK(segmented == (in_place ? 1 : 0));
      // (no buffer grows with the cache: nothing copied it)
      if (in_place)
        for (const auto& buf : lowered.prog.buffers)
          if (buf.role == lm::kernel::BufferRole::Intermediate) CHECK(buf.elements.as_constant().has_value());
      lm::Callable f = lm::compile(g, lm::Target::parse(target));
      for (int64_t past : {1, 9, 32}) {
        INFO("P " << past);
        auto all = lm::test::random_inputs(*g.impl(), 3 + static_cast<uint64_t>(past), {{"P", past}});
        std::map<std::string, const lm::HostTensor*> ptrs;
        for (const auto& [name, t] : all) ptrs.emplace(name, &t);
        auto want = lm::detail::reference::run(*g.impl(), {{"P", past}}, ptrs);
        std::map<std::string, lm::HostTensor> in;
        for (const auto& name : f.input_names()) in.emplace(name, all.at(name));
        CHECK(lm::test::compare_outputs(f(in), want) <= 1.0);
      }
    }
  }
}

// Grouped-query attention (kernel/lower/group_heads.hpp): K and V repeated over each KV
// head's G query heads as views lower to one task per KV head whose query rows are its
// heads' rows, so K and V are streamed once per KV head. Decode and short prefills,
// causal or not, a batch axis, one KV head for all (MQA); a head count that is not
// grouped (every head its own K) keeps its loop. On the CPU with 1, 2 and 7 threads (more
// threads than KV heads: rows split over tasks again) and on the emulated GPUs.
TEST_CASE("cpu: grouped-query attention runs one task per KV head", "[cpu][attention][e2e]") {
  struct Shape {
    int64_t batch, heads, kv_heads, s, sk;
    bool causal;
  };
  const Shape shapes[] = {{0, 8, 2, 1, 37, false},
                          {0, 4, 2, 5, 21, true},
                          {2, 4, 2, 1, 19, true},
                          {0, 6, 1, 2, 9, true},
                          {0, 4, 4, 1, 13, false}};
  const int64_t hd = 16;
  for (const Shape& c : shapes) {
    const int64_t G = c.heads / c.kv_heads;
    INFO("batch " << c.batch << " heads " << c.heads << "/" << c.kv_heads << " S " << c.s << " keys " << c.sk
                  << " causal " << c.causal);
    lm::Graph g;
    auto dims = [&](std::vector<int64_t> d) {
      if (c.batch) d.insert(d.begin(), c.batch);
      return std::vector<lm::Dim>(d.begin(), d.end());
    };
    lm::Tensor q = g.input("q", dims({c.heads, c.s, hd})), kk = g.input("k", dims({c.kv_heads, c.sk, hd})),
               v = g.input("v", dims({c.kv_heads, c.sk, hd}));
    auto rep = [&](const lm::Tensor& t) {
      return lm::reshape(lm::expand(lm::reshape(t, dims({c.kv_heads, 1, c.sk, hd})), dims({c.kv_heads, G, c.sk, hd})),
                         dims({c.heads, c.sk, hd}));
    };
    g.output("y", lm::scaled_dot_product_attention(q, rep(kk), rep(v), c.causal));
    auto compiled = lm::compiler::compile_graph(*g.impl(), lm::Target::cpu(), {});
    for (const auto& opt : {lm::cpu::cpu_lower_options(), lm::gpu::gpu_lower_options()}) {
      auto lowered = lm::cpu::lower_plan(*compiled.plan, opt);
      int attention = 0;
      for (const auto& kern : lowered.prog.kernels) {
        if (!kern.attention) continue;
        ++attention;
        int64_t tasks = 1;
        for (const auto& l : kern.loops) tasks *= l.extent.as_constant().value_or(-1);
        CHECK(tasks == std::max<int64_t>(c.batch, 1) * c.kv_heads);
        CHECK(kern.attention->m.as_constant() == G * c.s);
      }
      CHECK(attention == 1);
    }
    auto in = lm::test::random_inputs(*g.impl(), 3);
    std::map<std::string, const lm::HostTensor*> ptrs;
    for (const auto& [name, t] : in) ptrs.emplace(name, &t);
    auto want = lm::detail::reference::run(*g.impl(), {}, ptrs);
    lm::CompileOptions o;
    o.thread_pool = std::make_shared<lm::ThreadPool>(lm::ThreadPoolOptions{6, 50});
    lm::Callable f = lm::compile(g, lm::Target::cpu(), o);
    CHECK(f.report().interpreted_kernels == 0);
    for (int threads : {1, 2, 7}) {
      INFO("threads " << threads);
      lm::CallOptions call;
      call.threads = threads;
      CHECK(lm::test::compare_outputs(f(in, call), want) <= 1.0);
    }
    for (const char* target : {"cuda:sm_90+emu", "hip:gfx90a+emu"}) {
      INFO(target);
      lm::Callable fg = lm::compile(g, lm::Target::parse(target));
      CHECK(fg.report().interpreted_kernels == 0);
      CHECK(lm::test::compare_outputs(fg(in), want) <= 1.0);
    }
  }
}

// f16/bf16 attention end to end: the op widens q, k, v and rounds the result; the search
// finds the one Attention kernel (as for f32) and the CPU renders it reading and writing
// halves: one generated kernel, against the interpreter. Grouped heads, causal or not, a
// decode step, rows that see no key (NaN).
TEST_CASE("cpu: f16 and bf16 scaled_dot_product_attention runs as one generated attention kernel",
          "[cpu][attention][e2e][half]") {
  struct Shape {
    int64_t heads, kv_heads, s, sk, d, dv;
    bool causal;
  };
  const Shape shapes[] = {{4, 2, 24, 40, 16, 8, true}, {4, 2, 24, 40, 16, 16, false}, {8, 2, 1, 37, 64, 64, false},
                          {4, 1, 9, 5, 8, 8, true}};
  for (lm::DType dt : {lm::f16, lm::bf16})
    for (const Shape& c : shapes) {
      lm::Graph g;
      const int64_t G = c.heads / c.kv_heads;
      lm::Tensor q = g.input("q", {c.heads, c.s, c.d}, dt), kk = g.input("k", {c.kv_heads, c.sk, c.d}, dt),
                 v = g.input("v", {c.kv_heads, c.sk, c.dv}, dt);
      auto rep = [&](const lm::Tensor& t, int64_t w) {
        return lm::reshape(lm::expand(lm::reshape(t, {c.kv_heads, 1, c.sk, w}), {c.kv_heads, G, c.sk, w}),
                           {c.heads, c.sk, w});
      };
      g.output("y", lm::scaled_dot_product_attention(q, rep(kk, c.d), rep(v, c.dv), c.causal));
      lm::Callable f = lm::compile(g, lm::Target::cpu());
      INFO(lm::dtype_name(dt) << " heads " << c.heads << "/" << c.kv_heads << " S " << c.s << " keys " << c.sk
                              << " causal " << c.causal << ": " << f.report().to_string());
      CHECK(f.report().kernels == 1);
      // One C kernel: the streaming one (a body lowered as loops materializes the scores
      // and row statistics in kernels of their own).
      CHECK(f.report().generated_kernels == 1);
      CHECK(f.report().interpreted_kernels == 0);
      auto in = lm::test::random_inputs(*g.impl(), 5);
      std::map<std::string, const lm::HostTensor*> ptrs;
      for (const auto& [name, t] : in) ptrs.emplace(name, &t);
      auto want = lm::detail::reference::run(*g.impl(), {}, ptrs);
      const double tol = dt == lm::f16 ? 2e-3 : 1.6e-2;  // one rounding of the f32 result
      CHECK(lm::test::compare_outputs(f(in), want, tol, tol) <= 1.0);
    }
}

// Attention written by hand on f16/bf16 tensors rounds its weights to the half before
// the second product; only the fast-math rule streams it (the kernel keeps the weights
// in f32). On the CPU: one generated kernel, within the weights' rounding of the interpreter.
TEST_CASE("cpu: hand-written f16/bf16 attention streams under fast_math", "[cpu][attention][e2e][half]") {
  for (lm::DType dt : {lm::f16, lm::bf16}) {
    lm::Graph g;
    lm::Tensor q = g.input("q", {4, 24, 16}, dt), kk = g.input("k", {4, 40, 16}, dt), v = g.input("v", {4, 40, 8}, dt);
    lm::Tensor sc = lm::matmul(q, lm::transpose(kk, 1, 2)) * 0.25f;
    sc = lm::where(lm::tril_mask(lm::Dim(24), lm::Dim(40)), sc, -INFINITY);
    g.output("y", lm::matmul(lm::softmax(sc, -1), v));
    lm::CompileOptions o;
    o.fast_math = true;
    lm::Callable f = lm::compile(g, lm::Target::cpu(), o);
    INFO(lm::dtype_name(dt) << ": " << f.report().to_string());
    CHECK(f.report().kernels == 1);
    CHECK(f.report().generated_kernels == 1);
    CHECK(f.report().interpreted_kernels == 0);
    auto in = lm::test::random_inputs(*g.impl(), 9);
    std::map<std::string, const lm::HostTensor*> ptrs;
    for (const auto& [name, t] : in) ptrs.emplace(name, &t);
    auto want = lm::detail::reference::run(*g.impl(), {}, ptrs);
    const double tol = dt == lm::f16 ? 4e-3 : 3e-2;
    CHECK(lm::test::compare_outputs(f(in), want, tol, tol) <= 1.0);
  }
}

// Without the fusion policies the search finds a decode step's attention along the
// extracted program's edges (absorb-producers: the product of the softmax and V takes
// the softmax and the scores at once, ir::nest), its scores read as the vector product
// spells them, [.., keys, 1] reshaped to [.., keys] (AttentionMatch::r1_axis_of). The CPU
// lowering builds the streaming kernel from that body too, and it computes the step.
TEST_CASE("cpu: a decode step's attention found without the fusion policies is one streaming kernel",
          "[cpu][attention][e2e]") {
  lm::Graph g;
  lm::test::build_decode_block_f16(g, 37, lm::test::DecodeSizes{256, 4, 2, 64, 384});
  lm::CompileOptions o;
  o.skip_rules = {"fuse-producers"};
  auto compiled = lm::compiler::compile_graph(*g.impl(), lm::Target::cpu(), o);
  INFO(compiled.report.to_string() << "\n" << compiled.dot);
  int att = 0;
  for (const auto& st : compiled.plan->steps) att += st.spec->kind == lm::ir::KernelKind::Attention ? 1 : 0;
  CHECK(att == 1);
  const auto lowered = lm::cpu::lower_plan(*compiled.plan, lm::cpu::cpu_lower_options());
  CHECK(std::count_if(lowered.prog.kernels.begin(), lowered.prog.kernels.end(),
                      [](const lm::kernel::Kernel& k) { return k.attention.has_value(); }) == 1);
  lm::Callable f = lm::compile(g, lm::Target::cpu(), o);
  CHECK(f.report().interpreted_kernels == 0);
  auto all = lm::test::random_inputs(*g.impl(), 3);
  std::map<std::string, const lm::HostTensor*> ptrs;
  for (const auto& [name, t] : all) ptrs.emplace(name, &t);
  const auto want = lm::detail::reference::run(*g.impl(), {}, ptrs);
  for (const auto& name : f.param_names()) f.bind(name, all.at(name));
  std::map<std::string, lm::HostTensor> in;
  for (const auto& name : f.input_names()) in.emplace(name, all.at(name));
  // f16 outputs: within 4 ulps of f16 at each output's largest value.
  CHECK(lm::test::compare_to_scale(f(in), want, 1.0 / 256) <= 1.0);
}
