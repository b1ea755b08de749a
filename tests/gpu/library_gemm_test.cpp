// Library GEMMs on CUDA targets (gpu/blas_gemm.hpp, cuda/cublaslt.hpp): the search's
// cuBLASLt candidate, its translation to the BLAS convention (transposes, leading
// dimensions, strided batches, host-walked batches, empty dims), run two ways on the host
// -- the emulator's BLAS from the generated entry, and the device runtime's calls through
// HostDeviceApi -- and checked against the reference interpreter; and cuBLASLt's own
// descriptors, built from those calls by the loaded library where it is installed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/cublaslt.hpp"
#include "backends/cuda/cuda_executable.hpp"
#include "backends/gpu/blas_gemm.hpp"
#include "backends/gpu/device_executable.hpp"
#include "backends/gpu/gpu_backend.hpp"
#include "backends/gpu/gpu_program.hpp"
#include "backends/reference/interpreter.hpp"
#include "compiler/compile_graph.hpp"
#include "compiler/translation_models.hpp"
#include "backends/cpu/cpu_program.hpp"
#include "gpu/host_device_api.hpp"
#include "luminal/luminal.hpp"

using namespace luminal;

namespace {

using gpu_test::host_build;
using gpu_test::pointers;

// `plan` with every bare GEMM step a library call (what gpu-library-gemm offers; which
// the search keeps is the cost model's business, tested below on its own).
std::shared_ptr<const compiler::KernelPlan> all_library(const compiler::KernelPlan& plan) {
  auto out = std::make_shared<compiler::KernelPlan>(plan);
  for (auto& st : out->steps) {
    if (st.spec->kind != ir::KernelKind::Gemm) continue;
    auto spec = std::make_shared<ir::KernelSpec>(*st.spec);
    spec->kind = ir::KernelKind::LibraryGemm;
    spec->launch.clear();
    spec->finalize();
    st.spec = std::move(spec);
  }
  return out;
}

// The library launches of `plan` as the GPU backends render it.
std::vector<gpu::LaunchShape> library_launches(const compiler::KernelPlan& plan, const Target& target) {
  const cpu::LoweredPlan lp = cpu::lower_plan(plan, gpu::gpu_lower_options());
  std::vector<gpu::LaunchShape> out;
  for (auto& l : gpu::render_gpu(lp.prog, gpu::arch_for(target), gpu::plan_schedules(plan)).launches)
    if (l.blas) out.push_back(l);
  return out;
}

struct Case {
  std::string name;
  std::function<void(Graph&)> build;
  DimBindings dims;
  size_t library = 1;  // library launches expected
};

std::vector<Case> cases() {
  std::vector<Case> c;
  for (DType dt : {f16, bf16, f32}) {
    c.push_back({std::string(dtype_name(dt)) + " 5x7 @ 7x3",
                 [dt](Graph& g) {
                   g.output("y", matmul(g.input("a", {5, 7}, dt), g.input("b", {7, 3}, dt)));
                 },
                 {}});
  }
  c.push_back({"A @ B^T (B transposed)",
               [](Graph& g) {
                 g.output("y", matmul(g.input("a", {6, 9}, f16), permute(g.input("b", {4, 9}, f16), {1, 0})));
               },
               {}});
  c.push_back({"A^T @ B (A transposed)",
               [](Graph& g) {
                 g.output("y", matmul(permute(g.input("a", {9, 6}, f16), {1, 0}), g.input("b", {9, 4}, f16)));
               },
               {}});
  c.push_back({"batched 4 x (5x6 @ 6x3)",
               [](Graph& g) {
                 g.output("y", matmul(g.input("a", {4, 5, 6}, f16), g.input("b", {4, 6, 3}, f16)));
               },
               {}});
  // (The lowering finds no GEMM here: the batch axis is read by A alone, a second M axis.
  // Loops, then, and no library call: the results must still be right.)
  c.push_back({"batched, B shared: 4 x (5x6) @ 6x3",
               [](Graph& g) {
                 g.output("y", matmul(g.input("a", {4, 5, 6}, bf16), g.param("w", {6, 3}, bf16)));
               },
               {},
               0});
  c.push_back({"two batch dims: 2x3 x (4x5 @ 5x6)",
               [](Graph& g) {
                 g.output("y", matmul(permute(g.input("a", {3, 2, 4, 5}, f16), {1, 0, 2, 3}),
                                      g.input("b", {2, 3, 5, 6}, f16)));
               },
               {}});
  // (A product of one row is a row reduction per column, not a GEMM kernel.)
  c.push_back({"M = 1 (a GEMV)",
               [](Graph& g) {
                 g.output("y", matmul(g.input("x", {1, 64}, f16), g.param("w", {64, 32}, f16)));
               },
               {},
               0});
  c.push_back({"N = 1",
               [](Graph& g) {
                 g.output("y", matmul(g.input("a", {8, 16}, f32), g.input("b", {16, 1}, f32)));
               },
               {},
               0});
  c.push_back({"linear without bias: x @ W^T, rows symbolic",
               [](Graph& g) {
                 const Dim s = Dim::variable("s", 0, 64);
                 g.output("y", linear(g.input("x", {s, Dim(24)}, f16), g.param("w", {40, 24}, f16)));
               },
               {{"s", 5}}});
  c.push_back({"linear without bias, no rows (s = 0)",
               [](Graph& g) {
                 const Dim s = Dim::variable("s", 0, 64);
                 g.output("y", linear(g.input("x", {s, Dim(24)}, f16), g.param("w", {40, 24}, f16)));
               },
               {{"s", 0}}});
  return c;
}

}  // namespace

TEST_CASE("library GEMMs: the emulator's BLAS and the runtime's calls match the reference", "[gpu][blas]") {
  const Target target = Target::parse("cuda:sm_90");
  for (const Case& cs : cases()) {
    INFO(cs.name);
    Graph g;
    cs.build(g);
    const auto graph = std::make_shared<const detail::GraphImpl>(*g.impl());
    const auto plan = all_library(*compiler::compile_graph(*g.impl(), target.emulated(), {}).plan);
    REQUIRE(library_launches(*plan, target).size() == cs.library);
    const auto data = test::random_inputs(*g.impl(), 7, cs.dims);
    const auto want = detail::reference::run(*g.impl(), cs.dims, pointers(data));
    // The emulator: the generated host entry walks the calls and runs its BLAS.
    const gpu::GpuBuild emu = gpu::build_gpu(plan, graph, target.emulated(), {}, {});
    const auto got = emu.exe->run(cs.dims, pointers(data));
    INFO("emulator error ratio " << test::compare_outputs(got, want, 1e-3, 1e-2));
    CHECK(test::compare_outputs(got, want, 1e-3, 1e-2) <= 1.0);
    // The device runtime: blas_calls' strided batches through the API's BLAS, captured
    // and replayed. The same products in the same order: the same bits.
    gpu_test::HostDeviceApi api("sm_90", /*capture=*/true);
    const gpu::DeviceExecutable exe(api, plan, graph, target, host_build(target));
    CHECK((exe.codegen().find("host BLAS") != std::string::npos) == (cs.library > 0));
    const auto dev = exe.run(cs.dims, pointers(data));
    for (const auto& [name, t] : got) {
      REQUIRE(dev.at(name).nbytes() == t.nbytes());
      if (t.nbytes() > 0)
        CHECK(std::memcmp(dev.at(name).data(), t.data(), t.nbytes()) == 0);  // (none: no data)
    }
    const bool empty = cs.dims.count("s") && cs.dims.at("s") == 0;
    CHECK((api.blas_calls > 0) == (cs.library > 0 && !empty));
    CHECK(api.blas_workspaces.size() <= 1);
    CHECK(api.blas_workspaces.count(0) == 0);
    // Without a BLAS the runtime generates the same GEMMs: the reference's results again.
    gpu_test::HostDeviceApi bare("sm_90", /*capture=*/false, /*blas=*/false);
    const gpu::DeviceExecutable generated(bare, plan, graph, target, host_build(target));
    const bool library_steps = std::any_of(plan->steps.begin(), plan->steps.end(), [](const auto& st) {
      return st.spec->kind == ir::KernelKind::LibraryGemm;
    });
    CHECK((generated.codegen().find("library GEMMs generated") != std::string::npos) == library_steps);
    CHECK(test::compare_outputs(generated.run(cs.dims, pointers(data)), want, 1e-3, 1e-2) <= 1.0);
    CHECK(bare.blas_calls == 0);
  }
}

TEST_CASE("library GEMMs: what the BLAS convention cannot express stays generated", "[gpu][blas]") {
  const Target target = Target::parse("cuda:sm_90");
  // An epilogue (the bias, the activation) and a fused prologue are not a library call.
  Graph g;
  Tensor x = g.input("x", {8, 16}, f16);
  g.output("y", gelu(linear(x, g.param("w", {12, 16}, f16), g.param("b", {12}, f16))));
  const auto plan = all_library(*compiler::compile_graph(*g.impl(), target.emulated(), {}).plan);
  CHECK(library_launches(*plan, target).empty());
  const auto data = test::random_inputs(*g.impl(), 3);
  const auto want = detail::reference::run(*g.impl(), {}, pointers(data));
  const gpu::GpuBuild emu =
      gpu::build_gpu(plan, std::make_shared<const detail::GraphImpl>(*g.impl()), target.emulated(), {}, {});
  CHECK(test::compare_outputs(emu.exe->run({}, pointers(data)), want, 1e-3, 1e-2) <= 1.0);
}

TEST_CASE("sibling products read their weights stored packed: one GEMM, no copy, any bind", "[gpu][blas]") {
  // Q, K and V of one input as one product (matmul-siblings): its B is the concat of the
  // three weights. Params stay resident on the device, so the runtime stores them one
  // after another (kernel::Program::packs) and the concat is that buffer -- read by
  // cuBLASLt, or by a generated GEMM, with no copy kernel before it.
  // Half weights of a half input make a product of two halves: packed as halves, read by
  // tensor cores or cuBLASLt's half path.
  const Target target = Target::parse("cuda:sm_80");
  for (const DType dt : {f32, f16}) {
    INFO(dtype_name(dt));
    Graph g;
    Tensor x = g.input("x", {512, 512}, dt);
    const char* names[] = {"wq", "wk", "wv"};
    Tensor p[3];
    for (int i = 0; i < 3; ++i) p[i] = linear(x, g.param(names[i], {128, 512}, dt));
    g.output("y", relu(p[0]) * p[1] + p[2]);
    CompileOptions o;
    o.compile_only = true;
    const auto plan = compiler::compile_graph(*g.impl(), target, o).plan;
    const cpu::LoweredPlan lp = cpu::lower_plan(*plan, gpu::gpu_lower_options());
    // One GEMM for the three products (the elementwise step reads slices of its C):
    // cuBLASLt's call for f32, for f16 whichever of it and the tensor-core tiles the model
    // prices lower.
    if (dt == f32) CHECK(library_launches(*plan, target).size() == 1);
    REQUIRE(lp.prog.packs.size() == 1);
    const kernel::ParamPack& pack = lp.prog.packs[0];
    CHECK(lp.prog.buffers[static_cast<size_t>(pack.buffer)].dtype == dt);
    int readers = 0;
    for (const kernel::Kernel& k : lp.prog.kernels)
      if (k.gemm && k.gemm->b.buffer == pack.buffer) {
        ++readers;
        CHECK(lp.prog.buffers[static_cast<size_t>(k.gemm->a.buffer)].dtype == dt);  // both halves
      }
    CHECK(readers == 1);
    std::vector<std::string> members;
    for (int m : pack.members) members.push_back(plan->leaf_name[static_cast<size_t>(m)]);
    CHECK(members == std::vector<std::string>{"wq", "wk", "wv"});
    CHECK(*lp.prog.buffers[static_cast<size_t>(pack.buffer)].elements.as_constant() == 384 * 512);
    CHECK_NOTHROW(kernel::validate(lp.prog));
    {  // a param in a pack twice, a pack of the wrong size: refused
      kernel::Program twice = lp.prog;
      twice.packs[0].members.push_back(twice.packs[0].members[0]);
      CHECK_THROWS_AS(kernel::validate(twice), InternalError);
      kernel::Program shorter = lp.prog;
      shorter.packs[0].members.pop_back();
      CHECK_THROWS_AS(kernel::validate(shorter), InternalError);
    }
    // No copy of the weights: a kernel per step (the product, the elementwise step).
    CHECK(lp.prog.kernels.size() == plan->steps.size());
    // The GPU's lowering without packing copies the concat first.
    kernel::lower::Options unpacked = gpu::gpu_lower_options();
    unpacked.pack_params = false;
    CHECK(cpu::lower_plan(*plan, unpacked).prog.kernels.size() == plan->steps.size() + 1);

    const auto graph = std::make_shared<const detail::GraphImpl>(*g.impl());
    auto data = test::random_inputs(*g.impl(), 11);
    const auto want = detail::reference::run(*g.impl(), {}, pointers(data));
    // The emulator copies the members into the pack each call.
    const gpu::GpuBuild emu = gpu::build_gpu(plan, graph, target.emulated(), {}, {});
    const auto got = emu.exe->run({}, pointers(data));
    CHECK(test::compare_outputs(got, want, 1e-3, 1e-2) <= 1.0);
    // The device runtime keeps the members resident inside the pack's allocation; a new
    // value of one member (uploaded again: no handles here) reaches the captured program.
    gpu_test::HostDeviceApi api("sm_80", /*capture=*/true);
    const gpu::DeviceExecutable exe(api, plan, graph, target, host_build(target));
    const auto dev = exe.run({}, pointers(data));
    for (const auto& [name, t] : got) {
      REQUIRE(dev.at(name).nbytes() == t.nbytes());
      CHECK(std::memcmp(dev.at(name).data(), t.data(), t.nbytes()) == 0);
    }
    CHECK(api.blas_calls == library_launches(*plan, target).size());
    data.at("wk") = test::random_inputs(*g.impl(), 12).at("wk");
    const auto want2 = detail::reference::run(*g.impl(), {}, pointers(data));
    CHECK(test::compare_outputs(exe.run({}, pointers(data)), want2, 1e-3, 1e-2) <= 1.0);
    CHECK(test::compare_outputs(emu.exe->run({}, pointers(data)), want2, 1e-3, 1e-2) <= 1.0);
    // Without a BLAS the runtime generates the GEMM, which reads the pack the same way.
    gpu_test::HostDeviceApi bare("sm_80", /*capture=*/false, /*blas=*/false);
    const gpu::DeviceExecutable generated(bare, plan, graph, target, host_build(target));
    CHECK(test::compare_outputs(generated.run({}, pointers(data)), want2, 1e-3, 1e-2) <= 1.0);
    CHECK(bare.blas_calls == 0);
    // Through the API: bind, call, bind one weight anew, call.
    Callable ref = compile(g, Target::reference()), fn = compile(g, target.emulated());
    auto weights = test::random_inputs(*g.impl(), 13);
    for (const char* n : names) {
      ref.bind(n, weights.at(n));
      fn.bind(n, weights.at(n));
    }
    const std::map<std::string, HostTensor> in{{"x", weights.at("x")}};
    CHECK(test::compare_outputs(fn(in), ref(in), 1e-3, 1e-2) <= 1.0);
    ref.bind("wv", test::random_inputs(*g.impl(), 14).at("wv"));
    fn.bind("wv", test::random_inputs(*g.impl(), 14).at("wv"));
    CHECK(test::compare_outputs(fn(in), ref(in), 1e-3, 1e-2) <= 1.0);
  }
}

TEST_CASE("library GEMMs: blas_calls walks batches and rejects a leading dimension below its rows",
          "[gpu][blas]") {
  // C (m x n) = A (m x k) B (k x n), row-major, batch loop v0 over 3, A shared: the call
  // is D = C^T (n x m) = B^T A^T, one strided batch.
  using kernel::Index;
  kernel::Program p;
  p.buffers = {{"a", f16, Index(20), kernel::BufferRole::Input},
               {"b", f16, Index(3 * 4 * 6), kernel::BufferRole::Input},
               {"c", f32, Index(3 * 5 * 6), kernel::BufferRole::Output}};
  p.symbols = {"m"};
  kernel::Kernel k;
  k.name = "k0_0";
  k.kind = kernel::KernelKind::Gemm;
  k.loops = {{0, Index(3)}};
  kernel::Gemm gm;
  gm.m = Index::sym("m");
  gm.n = Index(6);
  gm.k = Index(4);
  gm.a = {0, Index(0), Index(4), Index(1)};                   // m x 4, row-major, shared
  gm.b = {1, Index::var(0) * Index(24), Index(1), Index(4)};  // 4 x 6 stored transposed (6 x 4 rows)
  gm.c = {2, Index::var(0) * Index(30), Index(6), Index(1)};
  gm.row_var = 1;
  gm.col_var = 2;
  gm.impl = kernel::GemmImpl::Library;
  k.gemm = gm;
  p.kernels.push_back(k);
  const auto bk = gpu::blas_kernel(p, p.kernels[0]);
  REQUIRE(bk);
  CHECK(bk->strided == 0);
  CHECK(bk->trans_a);  // the IR's B has unit rows: the BLAS A (its transpose) is stored transposed
  CHECK_FALSE(bk->trans_b);
  const auto calls = gpu::blas_calls(*bk, {{"m", 5}});
  REQUIRE(calls.size() == 1);
  const gpu::BlasCall& c = calls[0];
  CHECK(c.m == 6);
  CHECK(c.n == 5);
  CHECK(c.k == 4);
  CHECK(c.lda == 4);
  CHECK(c.ldb == 4);
  CHECK(c.ldd == 6);
  CHECK(c.batch == 3);
  CHECK(c.stride_a == 24);
  CHECK(c.stride_b == 0);
  CHECK(c.stride_d == 30);
  CHECK(gpu::blas_calls(*bk, {{"m", 0}}).empty());
  // A leading dimension below the rows it strides over is an error, not a wrong read.
  p.kernels[0].gemm->a.row_stride = Index(3);
  const auto narrow = gpu::blas_kernel(p, p.kernels[0]);
  REQUIRE(narrow);
  CHECK_THROWS_WITH(gpu::blas_calls(*narrow, {{"m", 5}}), Catch::Contains("leading dimension 3"));
  // No unit stride: no BLAS matrix.
  p.kernels[0].gemm->a.col_stride = Index(2);
  std::string why;
  CHECK_FALSE(gpu::blas_kernel(p, p.kernels[0], &why));
  CHECK(why.find("no unit stride") != std::string::npos);
}

TEST_CASE("library GEMMs: the search picks cuBLASLt for a large f16 GEMM", "[gpu][blas]") {
  // The cost model prices cuBLASLt's tiles against the generated tensor-core tiles: a
  // 2048^3 f16 product goes to the library. Skipping the rule keeps it generated.
  Graph g;
  g.output("c", matmul(g.input("a", {2048, 2048}, f16), g.param("b", {2048, 2048}, f16)));
  CompileOptions o;
  o.compile_only = true;
  const Target target = Target::parse("cuda:sm_90");
  auto kinds = [](const Graph& graph, const Target& t, const CompileOptions& opt) {
    const auto plan = compiler::compile_graph(*graph.impl(), t, opt).plan;
    std::vector<ir::KernelKind> k;
    for (const auto& st : plan->steps) k.push_back(st.spec->kind);
    return k;
  };
  const auto library = [](const std::vector<ir::KernelKind>& k) {
    return std::count(k.begin(), k.end(), ir::KernelKind::LibraryGemm);
  };
  CHECK(kinds(g, target, o) == std::vector<ir::KernelKind>{ir::KernelKind::LibraryGemm});
  o.skip_rules = {"gpu-library-gemm"};
  CHECK(kinds(g, target, o) == std::vector<ir::KernelKind>{ir::KernelKind::Gemm});
  // HIP has no BLAS candidate.
  CHECK(library(kinds(g, Target::parse("hip:gfx90a"), {})) == 0);
  // With a bias and an activation: the library's product and a kernel for the rest (two
  // kernels), or the generated GEMM with them fused (one) -- whichever the model prices
  // lower. Since the ldmatrix + cp.async ring the fused GEMM wins at 2048^2 (sm_90: 30.8
  // against 39.8 us); without tensor cores the library's pair is what remains.
  Graph f;
  f.output("y", gelu(linear(f.input("x", {2048, 2048}, f16), f.param("w", {2048, 2048}, f16),
                            f.param("b", {2048}, f16))));
  const auto fk = kinds(f, target, {});
  CHECK(fk == std::vector<ir::KernelKind>{ir::KernelKind::Gemm});
  CompileOptions no_tc;
  no_tc.skip_rules = {"gpu-gemm-tensor-cores"};
  const auto lk = kinds(f, target, no_tc);
  CHECK(lk.size() == 2);
  CHECK(library(lk) == 1);
  const auto est = [&](const CompileOptions& opt) {
    return compiler::compile_graph(*f.impl(), target, opt).report.estimated_seconds;
  };
  CHECK(est({}) < est(no_tc));
}

TEST_CASE("library GEMMs: a product of halves another kernel computed reads them as halves", "[gpu][blas]") {
  // An f16 model's down projection: SwiGLU's output rounded to f16 by a kernel of its own
  // and widened for the product. The product's kernels read the widened f32 class; the
  // library call reads the halves, the widening absorbed (gpu-library-gemm). Before, the
  // only call read an f32 copy of the operand and of the weight (a 128-token prefill's
  // down projection: a generated GEMM, 116 us, against this call's 40 us).
  Graph g;
  Tensor a = silu(g.input("x", {128, 14336}, f16));
  g.output("y", linear(a, g.param("w", {4096, 14336}, f16)));
  CompileOptions o;
  o.compile_only = true;
  const auto plan = compiler::compile_graph(*g.impl(), Target::parse("cuda:sm_90"), o).plan;
  INFO(plan->to_dot());
  REQUIRE(plan->steps.size() == 2);
  const auto& silu_step = plan->steps[0];
  const auto& call = plan->steps[1];
  CHECK(call.spec->kind == ir::KernelKind::LibraryGemm);
  CHECK(std::count(call.args.begin(), call.args.end(), silu_step.result) == 1);  // the halves
  const auto& out = silu_step.spec->body->nodes[silu_step.spec->body->outputs.at(0).second];
  CHECK(out.dtype == f16);
}

TEST_CASE("cuBLASLt: the loaded library accepts the descriptors of every call shape",
          "[gpu][blas][cublaslt]") {
  std::string why;
  const cuda::CublasLt* lt = cuda::CublasLt::get(&why);
  if (!lt) {
    WARN("cuBLASLt not installed: " << why);
    return;
  }
  CHECK(lt->version().rfind("cuBLASLt ", 0) == 0);
  // Descriptors need no device: every call the cases above make is accepted (a wrong
  // attribute id or size would be refused here).
  const Target target = Target::parse("cuda:sm_90");
  size_t described = 0;
  for (const Case& cs : cases()) {
    INFO(cs.name);
    Graph g;
    cs.build(g);
    const auto plan = all_library(*compiler::compile_graph(*g.impl(), target.emulated(), {}).plan);
    std::map<std::string, int64_t> syms(cs.dims.begin(), cs.dims.end());
    for (const auto& l : library_launches(*plan, target))
      for (const gpu::BlasCall& c : gpu::blas_calls(*l.blas, syms)) {
        CHECK_NOTHROW(lt->describe(c));
        ++described;
      }
  }
  CHECK(described >= 8);
}

TEST_CASE("library GEMMs through cuBLASLt on the CUDA device, where there is one", "[gpu][blas][device]") {
  // tests/gpu/run.sh's: every case above with its GEMMs as cuBLASLt calls on the device
  // (the driver's memory, a captured graph), against the reference interpreter.
  const Target t = Target::cuda();
  if (!t.is_available()) {
    WARN("no CUDA device here (" << t.unavailable_reason() << "); skipped");
    return;
  }
  std::string why;
  if (!cuda::CublasLt::get(&why)) {
    WARN(why << "; skipped");
    return;
  }
  for (const Case& cs : cases()) {
    INFO(cs.name);
    Graph g;
    cs.build(g);
    const auto graph = std::make_shared<const detail::GraphImpl>(*g.impl());
    const auto plan = all_library(*compiler::compile_graph(*g.impl(), t, {}).plan);
    const auto exe = cuda::make_executable(plan, graph, t, {}, {});
    CHECK((exe->codegen().find("cuBLASLt") != std::string::npos) == (cs.library > 0));
    const auto data = test::random_inputs(*g.impl(), 7, cs.dims);
    const auto want = detail::reference::run(*g.impl(), cs.dims, pointers(data));
    for (int call = 0; call < 2; ++call)  // captured by the first call, replayed by the second
      CHECK(test::compare_outputs(exe->run(cs.dims, pointers(data)), want, 1e-3, 1e-2) <= 1.0);
  }
  // A product the search gives cuBLASLt by itself, large enough to matter.
  Graph g;
  g.output("c", matmul(g.input("a", {1024, 768}, f16), g.param("b", {768, 512}, f16)));
  Callable fn = compile(g, t);
  INFO(fn.report().to_string());
  CHECK(fn.report().codegen.find("cuBLASLt") != std::string::npos);
  const auto data = test::random_inputs(*g.impl(), 9);
  fn.bind("b", data.at("b"));
  const auto want = detail::reference::run(*g.impl(), {}, pointers(data));
  CHECK(test::compare_outputs(fn({{"a", data.at("a")}}), want, 1e-3, 1e-2) <= 1.0);
}
