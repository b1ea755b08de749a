// Kernels run inside another kernel's launch (kernel::Kernel::side and ::tail,
// cpu::fold_side_work): the GPU source of a host with side and tail work on the emulator
// against the evaluator, twice in a row (the tail's count must be left at zero); which
// kernels the lowering folds and which it must not; and a decode step whose new K and V
// rows are its QKV projection's tail, against the reference interpreter.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>

#include "backends/cpu/cpu_program.hpp"
#include "backends/gpu/gpu_backend.hpp"
#include "backends/gpu/gpu_program.hpp"
#include "backends/gpu/gpu_renderer.hpp"
#include "backends/reference/interpreter.hpp"
#include "kernel/buffer_access.hpp"
#include "compiler/compile_graph.hpp"
#include "compiler/translation_models.hpp"
#include "cost/gpu_cost.hpp"
#include "cpu/harness.hpp"
#include "gpu/gpu_test_util.hpp"

namespace k = luminal::kernel;
using namespace luminal;
using cpu_test::buf;
using gpu_test::arch_of;

namespace {

k::Loop folded_loop(int var, k::Index extent) {
  k::Loop l;
  l.var = var;
  l.extent = extent;
  return l;
}

// out[i] = op(in[(i * stride) % in_n]) * 2 + 1 over n elements (f32 arithmetic; loads
// and stores of other types through casts).
k::Kernel folded_elementwise(const std::string& name, k::Index n, int in, DType in_dt, k::Index in_n, int out,
                             DType out_dt, k::UnaryOp op, int64_t stride = 1) {
  k::Kernel e;
  e.name = name;
  e.loops = {folded_loop(0, n)};
  k::Expr x = k::load(in, in_dt, k::mod(k::Index::var(0) * stride, in_n));
  if (in_dt != DType::f32) x = k::cast(x, DType::f32);
  k::Expr v = k::binary(k::BinaryOp::Add, k::binary(k::BinaryOp::Mul, k::unary(op, x), k::constant(2.0)),
                        k::constant(1.0));
  if (out_dt != DType::f32) v = k::cast(v, out_dt);
  e.store.buffer = out;
  e.store.index = k::Index::var(0);
  e.store.value = v;
  return e;
}

// y[r] = 0.5 * sum_j sin(x[r * len + j]).
k::Kernel folded_row_sum(const std::string& name, k::Index rows, k::Index len, int x, int y) {
  k::Kernel kk;
  kk.name = name;
  kk.kind = k::KernelKind::Reduction;
  kk.loops.push_back(folded_loop(0, rows));
  k::Reduction r;
  r.loops.push_back(folded_loop(1, len));
  r.value = k::unary(k::UnaryOp::Sin, k::load(x, DType::f32, k::Index::var(0) * len + k::Index::var(1)));
  kk.reduce = r;
  kk.store.buffer = y;
  kk.store.index = k::Index::var(0);
  kk.store.value = k::binary(k::BinaryOp::Mul, k::acc(), k::constant(0.5));
  return kk;
}

// Runs `p` on the emulator `runs` times from the same inputs and compares every buffer the
// program computes with the evaluator after each run, and the State buffers with zero.
// Returns the device source.
std::string folded_check_runs(const k::Program& p, const std::map<std::string, int64_t>& syms,
                              const char* target, int runs = 2) {
  const gpu::GpuArch arch = arch_of(target);
  cpu_test::HostBuffers ref = cpu_test::allocate(p, syms, 7), got = cpu_test::allocate(p, syms, 7);
  k::evaluate(p, ref.ptrs(), syms);
  const gpu::GpuSource src = gpu::render_gpu(p, arch);
  auto lib = gpu::emulator_jit().compile(gpu::emulation_source(src, p, arch));
  std::vector<int64_t> sv;
  for (const auto& s : p.symbols) sv.push_back(syms.at(s));
  for (int run = 0; run < runs; ++run) {
    INFO(target << ", run " << run + 1);
    // Every result a kernel writes poisoned (NaN bits) first: a kernel that did not run shows.
    for (const k::Kernel& kk : p.kernels)
      for (int w : k::buffer_access(kk).writes)
        if (p.buffers[static_cast<size_t>(w)].role != k::BufferRole::State)
          std::memset(got.bytes[static_cast<size_t>(w)].data(), 0xff,
                      got.bytes[static_cast<size_t>(w)].size());
    auto ptrs = got.ptrs();
    for (const auto& l : src.launches)
      lib->function<cpu::KernelFn>(l.name + "_emu")(ptrs.data(), sv.data(), nullptr, nullptr);
    for (size_t bi = 0; bi < p.buffers.size(); ++bi) {
      const k::Buffer& b = p.buffers[bi];
      if (b.role == k::BufferRole::Input || b.role == k::BufferRole::Param) continue;
      const int64_t n = b.elements.evaluate({}, syms);
      for (int64_t i = 0; i < n; ++i) {
        const double r = cpu_test::element(b, ref.bytes[bi], i), g = cpu_test::element(b, got.bytes[bi], i);
        if (r == g || (std::isnan(r) && std::isnan(g))) continue;
        INFO("buffer " << b.name << " element " << i << ": evaluator " << r << ", emulated " << g);
        INFO(src.kernels);
        // (lm_sin and lm_exp2, the prelude's polynomials, against libm; row sums of up to
        // 3000 terms in another order; and an ulp of a half type where that rounds)
        const double ulp = b.dtype == DType::bf16 ? 1.0 / 128 : b.dtype == DType::f16 ? 1.0 / 1024 : 0;
        REQUIRE(std::abs(r - g) <= 5e-5 + (5e-4 + ulp) * std::abs(r));
      }
    }
    // (State is compared too: the evaluator leaves it zero, as the kernels must.)
  }
  return src.device_source();
}

size_t folded_count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("side and tail work run in their host's launch, equal to the evaluator", "[gpu][emu][folded]") {
  // A row sum (R rows of L) hosting two side kernels (f16 and f32 results of z) and two
  // tail kernels: the first reads the row sum's result, the second the first's at other
  // threads' positions -- run after every block of the host, in order. Tail sizes: one
  // trip of the block's threads (rolled: 100 is not a power of two), four (unrolled: the
  // first tail; the second's 2051 elements take nine, rolled), twelve (rolled), and past
  // the trips' limit (a loop).
  for (const int64_t tail_n : {100, 1024, 3000, 5000}) {
    k::Program p;
    p.symbols = {"L"};
    const int64_t R = 37;
    const k::Index L = k::Index::sym("L");
    p.buffers.push_back(buf("x", DType::f32, L * R, k::BufferRole::Input));              // 0
    p.buffers.push_back(buf("y", DType::f32, R, k::BufferRole::Output));                 // 1
    p.buffers.push_back(buf("z", DType::f32, 64, k::BufferRole::Input));                 // 2
    p.buffers.push_back(buf("s1", DType::f16, 1000, k::BufferRole::Output));             // 3
    p.buffers.push_back(buf("s2", DType::f32, 300, k::BufferRole::Output));              // 4
    p.buffers.push_back(buf("t1", DType::f32, tail_n, k::BufferRole::Output));           // 5
    p.buffers.push_back(buf("t2", DType::bf16, 2 * tail_n + 3, k::BufferRole::Output));  // 6
    p.buffers.push_back(buf("count", DType::i32, 1, k::BufferRole::State));              // 7
    k::Kernel host = folded_row_sum("host", R, L, 0, 1);
    host.side.push_back(
        folded_elementwise("side1", 1000, 2, DType::f32, 64, 3, DType::f16, k::UnaryOp::Exp2));
    host.side.push_back(folded_elementwise("side2", 300, 2, DType::f32, 64, 4, DType::f32, k::UnaryOp::Sin));
    host.tail.push_back(
        folded_elementwise("tail1", tail_n, 1, DType::f32, R, 5, DType::f32, k::UnaryOp::Sin));
    host.tail.push_back(folded_elementwise("tail2", 2 * tail_n + 3, 5, DType::f32, tail_n, 6, DType::bf16,
                                           k::UnaryOp::Neg, 7));
    host.tail_counter = 7;
    p.kernels.push_back(host);
    k::validate(p);
    for (const char* t : {"cuda:sm_90+emu", "hip:gfx90a+emu"})
      for (const int64_t len : {1, 200, 3000}) {  // a row per thread, warp, block
        INFO(t << ", tail " << tail_n << ", rows of " << len);
        const std::string src = folded_check_runs(p, {{"L", len}}, t);
        CHECK(folded_count(src, "__global__") == 1);  // one launch
        CHECK(src.find("side work: 2 kernel(s)") != std::string::npos);
        CHECK(src.find("tail work: 2 kernel(s)") != std::string::npos);
        CHECK((src.find("for (int lm_t = 0;") != std::string::npos) == (tail_n <= 16 * 256));
        CHECK((src.find("        #pragma unroll\n        for (int lm_t") != std::string::npos) ==
              (tail_n == 1024));
      }
  }
}

TEST_CASE("a GEMM's tail work runs after all its tiles; an empty host still runs its tail",
          "[gpu][emu][folded]") {
  // C = A B over a two-dimensional grid of tiles; the tail reads C across tiles.
  const int64_t M = 70, N = 90, K = 33;
  k::Program p;
  p.buffers.push_back(buf("a", DType::f32, M * K, k::BufferRole::Input));   // 0
  p.buffers.push_back(buf("b", DType::f32, K * N, k::BufferRole::Input));   // 1
  p.buffers.push_back(buf("c", DType::f32, M * N, k::BufferRole::Output));  // 2
  p.buffers.push_back(buf("t", DType::f32, 1500, k::BufferRole::Output));   // 3
  p.buffers.push_back(buf("count", DType::i32, 1, k::BufferRole::State));   // 4
  k::Kernel mm;
  mm.name = "mm";
  mm.kind = k::KernelKind::Gemm;
  k::Gemm g;
  g.m = M;
  g.n = N;
  g.k = K;
  g.a = {0, 0, K, 1};
  g.b = {1, 0, N, 1};
  g.c = {2, 0, N, 1};
  mm.gemm = g;
  mm.tail.push_back(
      folded_elementwise("tail", 1500, 2, DType::f32, M * N, 3, DType::f32, k::UnaryOp::Sin, 4099));
  mm.tail_counter = 4;
  p.kernels.push_back(mm);
  k::validate(p);
  for (const char* t : {"cuda:sm_90+emu", "hip:gfx90a+emu"}) folded_check_runs(p, {}, t, 3);

  // An elementwise host over N elements, N = 0 included: its launch keeps one block, which
  // runs the tail.
  k::Program e;
  e.symbols = {"N"};
  const k::Index n = k::Index::sym("N");
  e.buffers.push_back(buf("x", DType::f32, n, k::BufferRole::Input));      // 0
  e.buffers.push_back(buf("y", DType::f32, n, k::BufferRole::Output));     // 1
  e.buffers.push_back(buf("z", DType::f32, 64, k::BufferRole::Input));     // 2
  e.buffers.push_back(buf("t", DType::f16, 700, k::BufferRole::Output));   // 3
  e.buffers.push_back(buf("count", DType::i32, 1, k::BufferRole::State));  // 4
  k::Kernel host = folded_elementwise("host", n, 0, DType::f32, n, 1, DType::f32, k::UnaryOp::Sin);
  host.tail.push_back(folded_elementwise("tail", 700, 2, DType::f32, 64, 3, DType::f16, k::UnaryOp::Exp2));
  host.tail_counter = 4;
  e.kernels.push_back(host);
  k::validate(e);
  for (const int64_t size : {0, 1, 100000}) {
    INFO("N = " << size);
    folded_check_runs(e, {{"N", size}}, "cuda:sm_90+emu");
  }
}

TEST_CASE("the kernel IR checks side and tail work", "[gpu][folded]") {
  k::Program p;
  p.buffers.push_back(buf("x", DType::f32, 8, k::BufferRole::Input));
  p.buffers.push_back(buf("y", DType::f32, 8, k::BufferRole::Output));
  p.buffers.push_back(buf("t", DType::f32, 8, k::BufferRole::Output));
  p.buffers.push_back(buf("count", DType::f32, 1, k::BufferRole::State));
  k::Kernel host = folded_elementwise("host", 8, 0, DType::f32, 8, 1, DType::f32, k::UnaryOp::Sin);
  host.tail.push_back(folded_elementwise("tail", 8, 0, DType::f32, 8, 2, DType::f32, k::UnaryOp::Sin));
  p.kernels = {host};
  CHECK_THROWS_WITH(k::validate(p), Catch::Contains("tail work and a tail counter go together"));
  p.kernels[0].tail_counter = 3;  // f32, not i32
  CHECK_THROWS_WITH(k::validate(p), Catch::Contains("State buffer of one i32"));
  p.buffers[3].dtype = DType::i32;
  k::validate(p);
  p.kernels[0].tail[0].name = "host";
  CHECK_THROWS_WITH(k::validate(p), Catch::Contains("unique"));
  p.kernels[0].tail[0].name = "tail";
  p.kernels[0].tail[0].kind = k::KernelKind::Reduction;
  CHECK_THROWS_WITH(k::validate(p), Catch::Contains("must be elementwise"));
}

TEST_CASE("the GPU lowering folds small kernels into other launches only where no result changes",
          "[gpu][folded]") {
  // Steps (each one kernel unless said):
  //  0 H0   row sums of x                       -> y0
  //  1 E1   512 elements of y0                  tail of H0 (after it, reads it)
  //  2 E2   3000 elements of x                  too big for a tail; step 3 reads it: stays
  //  3 R3   row sums of E2's result
  //  4 E4   3000 elements of x                  side work of R5 (nothing between reads it)
  //  5 R5   row sums of x
  //  6 E6   N elements of x (symbolic)          stays
  //  7 E7   3000 elements of x                  step 8 is host work: stays
  //  8      the interpreter's
  //  9 E9   100 elements of x                   host work before it: no tail; side of R10
  // 10 R10  row sums of x
  // 11 E11  100 elements of R10's result        tail of R10
  k::Program p;
  p.symbols = {"N"};
  auto add = [&](const char* name, DType dt, k::Index n, k::BufferRole role) {
    p.buffers.push_back(buf(name, dt, std::move(n), role));
    return static_cast<int>(p.buffers.size() - 1);
  };
  const int x = add("x", DType::f32, 256, k::BufferRole::Input);
  const int y0 = add("y0", DType::f32, 16, k::BufferRole::Output);
  const int e1 = add("e1", DType::f32, 512, k::BufferRole::Output);
  const int e2 = add("e2", DType::f32, 3000, k::BufferRole::Intermediate);
  const int r3 = add("r3", DType::f32, 10, k::BufferRole::Output);
  const int e4 = add("e4", DType::f16, 3000, k::BufferRole::Output);
  const int r5 = add("r5", DType::f32, 8, k::BufferRole::Output);
  const int e6 = add("e6", DType::f32, k::Index::sym("N"), k::BufferRole::Output);
  const int e7 = add("e7", DType::f32, 3000, k::BufferRole::Output);
  const int interp = add("interp", DType::f32, 4, k::BufferRole::Output);
  const int e9 = add("e9", DType::f32, 100, k::BufferRole::Output);
  const int r10 = add("r10", DType::f32, 4, k::BufferRole::Output);
  const int e11 = add("e11", DType::f32, 100, k::BufferRole::Output);
  const size_t plan_buffers = p.buffers.size();
  (void)interp;
  cpu::LoweredPlan lp;
  auto step = [&](std::optional<k::Kernel> kk) {
    cpu::PlanStep ps;
    ps.k0 = static_cast<int>(p.kernels.size());
    if (kk) p.kernels.push_back(*kk);
    ps.k1 = static_cast<int>(p.kernels.size());
    ps.interpreted = !kk;
    lp.steps.push_back(ps);
  };
  step(folded_row_sum("k0", 16, 16, x, y0));
  step(folded_elementwise("k1", 512, y0, DType::f32, 16, e1, DType::f32, k::UnaryOp::Sin, 3));
  step(folded_elementwise("k2", 3000, x, DType::f32, 256, e2, DType::f32, k::UnaryOp::Exp2));
  step(folded_row_sum("k3", 10, 300, e2, r3));
  step(folded_elementwise("k4", 3000, x, DType::f32, 256, e4, DType::f16, k::UnaryOp::Sin));
  step(folded_row_sum("k5", 8, 32, x, r5));
  step(folded_elementwise("k6", k::Index::sym("N"), x, DType::f32, 256, e6, DType::f32, k::UnaryOp::Sin));
  step(folded_elementwise("k7", 3000, x, DType::f32, 256, e7, DType::f32, k::UnaryOp::Sin));
  step(std::nullopt);
  step(folded_elementwise("k9", 100, x, DType::f32, 256, e9, DType::f32, k::UnaryOp::Exp2));
  step(folded_row_sum("k10", 4, 64, x, r10));
  step(folded_elementwise("k11", 100, r10, DType::f32, 4, e11, DType::f32, k::UnaryOp::Neg, 5));
  for (size_t s = 0; s < lp.steps.size(); ++s) lp.runs_at.push_back(static_cast<int>(s));
  lp.prog = p;
  const k::Program before = p;
  cpu::fold_side_work(lp);
  k::validate(lp.prog);
  CHECK(lp.tail_kernels == 2);
  CHECK(lp.side_kernels == 2);
  CHECK(lp.runs_at == std::vector<int>{0, 0, 2, 3, 5, 5, 6, 7, 8, 10, 10, 10});
  std::vector<std::string> names;
  for (const k::Kernel& kk : lp.prog.kernels) names.push_back(kk.name);
  CHECK(names == std::vector<std::string>{"k0", "k2", "k3", "k5", "k6", "k7", "k10"});
  auto find = [&](const char* name) -> const k::Kernel& {
    return *std::find_if(lp.prog.kernels.begin(), lp.prog.kernels.end(),
                         [&](const k::Kernel& kk) { return kk.name == name; });
  };
  REQUIRE(find("k0").tail.size() == 1);
  CHECK(find("k0").tail[0].name == "k1");
  CHECK(lp.prog.buffers[static_cast<size_t>(find("k0").tail_counter)].role == k::BufferRole::State);
  REQUIRE(find("k5").side.size() == 1);
  CHECK(find("k5").side[0].name == "k4");
  REQUIRE(find("k10").side.size() == 1);
  CHECK(find("k10").side[0].name == "k9");
  REQUIRE(find("k10").tail.size() == 1);
  CHECK(find("k10").tail[0].name == "k11");
  // Every step's kernels where the renumbering says; folded steps have none.
  for (size_t s = 0; s < lp.steps.size(); ++s) {
    INFO("step " << s);
    const bool own = lp.runs_at[s] == static_cast<int>(s) && !lp.steps[s].interpreted;
    CHECK((lp.steps[s].k1 - lp.steps[s].k0) == (own ? 1 : 0));
    if (own) CHECK(lp.prog.kernels[static_cast<size_t>(lp.steps[s].k0)].name == "k" + std::to_string(s));
  }
  // The folded program computes what the unfolded one does: in the evaluator, and on the
  // emulator.
  const std::map<std::string, int64_t> syms{{"N", 77}};
  cpu_test::HostBuffers a = cpu_test::allocate(before, syms, 3), b = cpu_test::allocate(lp.prog, syms, 3);
  k::evaluate(before, a.ptrs(), syms);
  k::evaluate(lp.prog, b.ptrs(), syms);
  for (size_t i = 0; i < plan_buffers; ++i) CHECK(a.bytes[i] == b.bytes[i]);
  folded_check_runs(lp.prog, syms, "cuda:sm_90+emu");
}

TEST_CASE("a decode step's new K and V rows run in its QKV projection's launch",
          "[gpu][emu][folded][graph]") {
  Graph g;
  test::build_decode_block_f16(g, 37, test::DecodeSizes{256, 4, 2, 64, 384});
  const auto plan = compiler::compile_graph(*g.impl(), Target::parse("cuda:sm_90"), {}).plan;
  const cpu::LoweredPlan lp = cpu::lower_plan(*plan, gpu::gpu_lower_options());
  k::validate(lp.prog);
  // The rows (outputs k and v, each 2 x 64 elements) are the tail of the kernel before them.
  std::vector<std::string> tails;
  for (const k::Kernel& kk : lp.prog.kernels)
    for (const k::Kernel& t : kk.tail) tails.push_back(t.name);
  CHECK(tails.size() == 2);
  CHECK(lp.tail_kernels == 2);
  CHECK(static_cast<int64_t>(lp.prog.kernels.size()) == static_cast<int64_t>(plan->steps.size()) - 2);
  for (const auto& [name, v] : plan->outputs) {
    if (name == "y") continue;
    size_t s = 0;
    while (plan->steps[s].result != v) ++s;
    INFO("output " << name << ", step " << s);
    CHECK(lp.runs_at[s] < static_cast<int>(s));
  }
  // The estimate: the plan's, less the launches, plus the tail's latency.
  CompileOptions o;
  o.compile_only = true;
  const CompileReport with = compile(g, Target::parse("cuda:sm_90"), o).report();
  const detail::TargetDesc t = compiler::target_desc(Target::parse("cuda:sm_90"));
  double plan_seconds = 0;
  for (const auto& st : plan->steps) plan_seconds += st.est_seconds;
  CHECK(with.estimated_seconds < plan_seconds - t.launch_overhead_s);
  CHECK(with.estimated_seconds > plan_seconds - 2 * t.launch_overhead_s);
  // And the step computes what the interpreter does, twice in a row.
  Callable f = compile(g, Target::parse("cuda:sm_90+emu"));
  for (uint64_t seed : {1, 2}) {
    const auto inputs = test::random_inputs(*g.impl(), seed);
    std::map<std::string, const HostTensor*> ptrs;
    std::map<std::string, HostTensor> feed;
    for (const auto& [name, x] : inputs) ptrs.emplace(name, &x);
    for (uint32_t id : g.impl()->params)
      f.bind(g.impl()->nodes[id].name, inputs.at(g.impl()->nodes[id].name));
    for (uint32_t id : g.impl()->inputs)
      feed.emplace(g.impl()->nodes[id].name, inputs.at(g.impl()->nodes[id].name));
    // (f16 activations: 4 ulps of f16 at the largest, as translation validation allows)
    CHECK(test::compare_to_scale(f(feed), detail::reference::run(*g.impl(), {}, ptrs), 1.0 / 256) <= 1.0);
  }
}

TEST_CASE("folded launches' price: a launch fewer each, a tail's latency more", "[gpu][cost][folded]") {
  const detail::TargetDesc t = detail::describe_gpu("sm_90");
  detail::FoldedLaunches none;
  CHECK(detail::folded_launch_seconds(t, none) == 0);
  detail::FoldedLaunches side;
  side.side_kernels = 2;
  CHECK(detail::folded_launch_seconds(t, side) == Approx(-2 * t.launch_overhead_s));
  // One tail of 4 trips of 8 warps, 10 operations an element, conditional loads: 4 trips
  // of an L2 round trip and a 40-cycle chain, against 8 x 4 x 10 / 4 = 80 cycles of issue;
  // and the count's round trip. Straight-line trips: one round trip and one chain for the
  // 4 trips (they overlap), or their issue where that is longer.
  detail::FoldedLaunches tail;
  tail.tail_hosts = 1;
  tail.tails.push_back({4, 8, 10, 0, true});
  const double clock = t.peak_flops_f32 / (2.0 * t.compute_units * t.simd_lanes_f32),
               l2 = 0.4 * t.mem_latency_s;
  CHECK(detail::folded_launch_seconds(t, tail) == Approx(l2 + 4 * (l2 + 40 / clock) - t.launch_overhead_s));
  tail.tails[0].serial = false;
  CHECK(detail::folded_launch_seconds(t, tail) == Approx(l2 + l2 + 40 / clock - t.launch_overhead_s));
  tail.tails[0] = {4, 8, 1000, 0, false};  // 8 x 4 x 1000 / 4 cycles of issue over one chain
  CHECK(detail::folded_launch_seconds(t, tail) == Approx(l2 + 8000 / clock - t.launch_overhead_s));
  CHECK(8000 / clock > l2 + 4000 / clock);
  // A transcendental counts as its polynomial's instructions; a wide block is bound by issue.
  tail.tails[0] = {1, 64, 10, 1, false};
  const double ops = 10 + t.transcendental_flops - 1;
  CHECK(detail::folded_launch_seconds(t, tail) == Approx(l2 + 64 * ops / 4.0 / clock - t.launch_overhead_s));
  CHECK(64 * ops / 4.0 / clock > l2 + 4 * ops / clock);
}
