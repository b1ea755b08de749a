// compile_only for GPU targets without a GPU: every kernel of the translation-validation
// graphs and of the decoder block (test size and Llama-3-8B size) generated and compiled
// by NVRTC to CUBIN for sm_80 and sm_90, none interpreted, none spilling; the module
// cache; the report. (The golden groups: tests/golden, "[nvrtc]".)
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "backends/cpu/cpu_program.hpp"
#include "backends/cuda/cuda_module.hpp"
#include "backends/cuda/nvrtc.hpp"
#include "backends/gpu/gpu_program.hpp"
#include "backends/gpu/gpu_renderer.hpp"
#include "backends/hip/hip_module.hpp"
#include "backends/hip/hiprtc.hpp"
#include "compiler/compile_graph.hpp"
#include "compiler/translation_models.hpp"
#include "runtime/plan_cache.hpp"
#include "gpu/gpu_test_util.hpp"
#include "cost/gpu_cost.hpp"
#include "cost/target_desc.hpp"
#include "support/scoped_env.hpp"
#include "ir/kernel_body.hpp"
#include "ir/tensor_lang.hpp"

using namespace luminal;

namespace {

using gpu_test::have_nvrtc;

void check_compiled(const Graph& g, const char* target, const std::string& name) {
  // A budget the sanitizers' slowness does not reach (the Llama-sized block's search took
  // 10.6 s under ASan, past the default 10 s): a search cut by the clock depends on the
  // machine, and the plan checked below must be the one compiled.
  CompileOptions o = test::unhurried();
  o.compile_only = true;
  Callable f = compile(g, Target::parse(target), o);
  const CompileReport& r = f.report();
  INFO(name << " for " << target << ": " << r.to_string());
  CHECK(r.generated_kernels == r.kernels);
  CHECK(r.interpreted_kernels == 0);
  CHECK(r.codegen.rfind("nvrtc ", 0) == 0);
  CHECK(r.codegen.find(std::string("cubin ") + (std::string(target).substr(5))) != std::string::npos);
  // Every plan step NVRTC compiled has its launches' resources (named k<step>_<launch>);
  // a library GEMM (a cuBLASLt call) has none. (Counting entries against kernels held only
  // while staged launches outnumbered the library calls.)
  // The plan compile() ran: from the plan cache it filled (searched again when
  // LUMINAL_PLAN_CACHE=0; within the budget above the search is deterministic).
  std::shared_ptr<const compiler::KernelPlan> plan;
  if (auto hit =
          detail::PlanCache::find(detail::PlanCache::key(*g.impl(), Target::parse(target), o), o.cache_dir))
    plan = hit->plan;
  else
    plan = compiler::compile_graph(*g.impl(), Target::parse(target), o).plan;
  REQUIRE(static_cast<int64_t>(plan->steps.size()) == r.kernels);
  std::set<size_t> compiled_steps;
  for (const KernelResources& k : r.kernel_resources) {
    REQUIRE(k.name.size() > 1);
    compiled_steps.insert(std::stoul(k.name.substr(1)));
  }
  // A step whose kernel runs inside another step's launch (side or tail work,
  // cpu::LoweredPlan::runs_at) has none of its own: that step's launch has them.
  const cpu::LoweredPlan lp = cpu::lower_plan(*plan, gpu::gpu_lower_options());
  for (size_t i = 0; i < plan->steps.size(); ++i) {
    const auto at = static_cast<size_t>(lp.runs_at.at(i));
    INFO("step " << i << ": " << ir::kind_name(plan->steps[i].spec->kind) << ", runs in step " << at);
    if (plan->steps[i].spec->kind != ir::KernelKind::LibraryGemm) {
      CHECK(compiled_steps.count(at) == 1);
      if (at != i) CHECK(compiled_steps.count(i) == 0);
    }
  }
  CHECK((compiled_steps.empty() || *compiled_steps.rbegin() < plan->steps.size()));
  for (const KernelResources& k : r.kernel_resources) {
    INFO(k.name << ": " << k.registers << " registers, " << k.shared_bytes << " B shared");
    CHECK(k.registers > 0);
    CHECK(k.registers <= 255);
    CHECK(k.spill_bytes == 0);  // a spill is a cost-model error
  }
  // A compile_only Callable has a report but cannot run.
  std::map<std::string, HostTensor> none;
  CHECK_THROWS_AS(f(none), RuntimeError);
}

}  // namespace

TEST_CASE("NVRTC compiles every kernel of the translation graphs for sm_80 and sm_90", "[gpu][nvrtc]") {
  if (!have_nvrtc()) return;
  for (const char* t : {"cuda:sm_80", "cuda:sm_90"}) {
    for (const auto& c : test::translation_cases()) {
      Graph g;
      c.build(g);
      check_compiled(g, t, c.name);
    }
    Graph mlp;
    test::build_mlp(mlp, 4, 16, 32);
    check_compiled(mlp, t, "mlp");
    Graph block;
    test::build_model(block, test::BlockConfig{}, 1);
    check_compiled(block, t, "decoder block");
  }
}

TEST_CASE("NVRTC compiles the Llama-3-8B-sized decoder block for sm_80 and sm_90", "[gpu][nvrtc]") {
  if (!have_nvrtc()) return;
  Graph g;
  test::build_model(g, test::BlockConfig::llama_4096(), 1);
  for (const char* t : {"cuda:sm_80", "cuda:sm_90"}) check_compiled(g, t, "llama-4096 block");
  // A decode step's attention at Llama-3-8B's heads: flash-decoding's range kernel, its
  // last range blocks merging.
  Graph d;
  test::build_decode_attention(d, 32, 8, 128);
  for (const char* t : {"cuda:sm_80", "cuda:sm_90"}) check_compiled(d, t, "decode attention");
  // An f16 prefill: its merged products on tensor cores reading packed weights.
  Graph p;
  test::build_prefill_block_f16(p, 128);
  check_compiled(p, "cuda:sm_90", "f16 prefill block");
}

TEST_CASE("NVRTC modules are cached in memory and on disk", "[gpu][nvrtc][cache]") {
  if (!have_nvrtc()) return;
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "luminal-gpu-cache-test";
  std::filesystem::remove_all(dir);
  const std::string src = "extern \"C\" __global__ void k(float* x) { x[threadIdx.x] = 2.0f * x[threadIdx.x]; }\n";
  cuda::CudaModule a = cuda::compile_module(src + "// cache test " + dir.string() + "\n", "sm_90", true, dir.string());
  CHECK(a.from == cuda::CudaModule::From::Compiler);
  CHECK(a.image.size() > 0);
  REQUIRE(a.resources.size() == 1);
  CHECK(a.resources[0].name == "k");
  cuda::CudaModule b = cuda::compile_module(src + "// cache test " + dir.string() + "\n", "sm_90", true, dir.string());
  CHECK(b.from == cuda::CudaModule::From::Memory);
  CHECK(b.image == a.image);
  size_t entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) entries += e.path().extension() == ".cubin";
  CHECK(entries == 1);
  // A corrupt entry is rebuilt, not loaded.
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::FILE* f = std::fopen(e.path().c_str(), "r+b");
    std::fseek(f, 100, SEEK_SET);
    std::fputc('X', f);
    std::fclose(f);
  }
  CHECK_THROWS_AS(cuda::compile_module("this is not CUDA", "sm_90", true, dir.string()), CompileError);
  std::filesystem::remove_all(dir);
}

TEST_CASE("ptxas -v logs parse into kernel resources", "[gpu][nvrtc]") {
  const std::string log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'k1_0' for 'sm_90'\n"
      "ptxas info    : Function properties for k1_0\n"
      "ptxas         .     8 bytes stack frame, 12 bytes spill stores, 16 bytes spill loads\n"
      "ptxas info    : Used 255 registers, used 1 barriers, 24576 bytes smem, 368 bytes cmem[0]\n"
      "ptxas info    : Compiling entry function 'k0_0' for 'sm_90'\n"
      "ptxas info    : Function properties for k0_0\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 10 registers, used 0 barriers, 368 bytes cmem[0]\n";
  auto r = cuda::parse_ptxas_log(log);
  REQUIRE(r.size() == 2);
  CHECK(r[0].name == "k1_0");
  CHECK(r[0].registers == 255);
  CHECK(r[0].shared_bytes == 24576);
  CHECK(r[0].spill_bytes == 28);
  CHECK(r[0].stack_bytes == 8);
  CHECK(r[1].name == "k0_0");
  CHECK(r[1].registers == 10);
  CHECK(r[1].shared_bytes == 0);
  CHECK(r[1].spill_bytes == 0);
}

// ---------------------------------------------------------------- HIP (hipRTC)

namespace {

bool have_hiprtc() {
  std::string why;
  if (hip::hiprtc_available(&why)) return true;
  WARN("hipRTC is not available here (" << why << "); skipped");
  return false;
}

void check_hip_compiled(const Graph& g, const char* target, const std::string& name) {
  CompileOptions o;
  o.compile_only = true;
  Callable f = compile(g, Target::parse(target), o);
  const CompileReport& r = f.report();
  INFO(name << " for " << target << ": " << r.to_string());
  CHECK(r.generated_kernels == r.kernels);
  CHECK(r.interpreted_kernels == 0);
  CHECK(r.codegen.rfind("hiprtc ", 0) == 0);
  CHECK(r.codegen.find(std::string(target).substr(4)) != std::string::npos);
  // Resources come from the code object's metadata (hipRTC 5.2 prints no remarks).
  if (r.kernels > 0) CHECK(!r.kernel_resources.empty());
  for (const KernelResources& k : r.kernel_resources) {
    INFO(k.name);
    CHECK(k.registers > 0);
    CHECK(k.spill_bytes == 0);
  }
}

}  // namespace

TEST_CASE("hipRTC compiles every kernel of the translation graphs and the decoder block", "[gpu][hiprtc]") {
  if (!have_hiprtc()) return;
  Graph block;
  test::build_model(block, test::BlockConfig{}, 1);
  Graph big;
  test::build_model(big, test::BlockConfig::llama_4096(), 1);
  Graph decode;
  test::build_decode_attention(decode, 32, 8, 128);
  for (const char* t : {"hip:gfx90a", "hip:gfx908", "hip:gfx1030"}) {
    for (const auto& c : test::translation_cases()) {
      Graph g;
      c.build(g);
      check_hip_compiled(g, t, c.name);
    }
    check_hip_compiled(block, t, "decoder block");
    check_hip_compiled(big, t, "llama-4096 block");
    check_hip_compiled(decode, t, "decode attention");
  }
}

TEST_CASE("an architecture this ROCm does not know is a CompileError, not an abort", "[gpu][hiprtc]") {
  if (!have_hiprtc()) return;
  Graph g;
  g.output("y", exp(g.input("x", {8})) * 2.f);
  CompileOptions o;
  o.compile_only = true;
  for (const char* t : {"hip:gfx942", "hip:gfx1100"}) {
    INFO(t);
    CHECK_THROWS_AS(compile(g, Target::parse(t), o), CompileError);
  }
  CHECK_THROWS_WITH(compile(g, Target::parse("hip:gfx942"), o),
                    Catch::Contains("gfx942") && Catch::Contains("ROCm 5.7") && Catch::Contains("gfx90a"));
  // The emulated target needs no ROCm at all.
  CHECK(compile(g, Target::parse("hip:gfx942+emu")).report().codegen.rfind("emulator hip gfx942", 0) == 0);
}

TEST_CASE("AMDGPU resource remarks parse into kernel resources", "[gpu][hiprtc]") {
  const std::string log =
      "remark: luminal.hip:3:0: Function Name: k0_0 [-Rpass-analysis=kernel-resource-usage]\n"
      "remark: luminal.hip:3:0:     SGPRs: 18 [-Rpass-analysis=kernel-resource-usage]\n"
      "remark: luminal.hip:3:0:     VGPRs: 24 [-Rpass-analysis=kernel-resource-usage]\n"
      "remark: luminal.hip:3:0:     AGPRs: 0 [-Rpass-analysis=kernel-resource-usage]\n"
      "remark: luminal.hip:3:0:     ScratchSize [bytes/lane]: 16 [-Rpass-analysis=kernel-resource-usage]\n"
      "remark: luminal.hip:3:0:     LDS Size [bytes/block]: 2048 [-Rpass-analysis=kernel-resource-usage]\n";
  auto r = hip::parse_amdgpu_remarks(log);
  REQUIRE(r.size() == 1);
  CHECK(r[0].name == "k0_0");
  CHECK(r[0].registers == 24);
  CHECK(r[0].shared_bytes == 2048);
  CHECK(r[0].spill_bytes == 16);
}

// ---------------------------------------------------------------- one rule set, two GPUs

namespace {

// The Llama-3-8B decode step (4096 past tokens, f16) built into `g` and planned for sm_90
// on the H200's figures (compile only).
std::shared_ptr<const compiler::KernelPlan> decode_step_plan_h200(Graph& g) {
  const testsupport::ScopedEnv model("LUMINAL_GPU_MODEL", "H200");
  test::build_decode_block_f16(g, 4096);
  CompileOptions o;
  o.compile_only = true;
  return compiler::compile_graph(*g.impl(), Target::parse("cuda:sm_90"), o).plan;
}

// The launch tile the search chose for the GEMM of x[m, k] @ w[k, n].
std::vector<int64_t> chosen_gemm_tile(const char* target, int64_t m, int64_t k, int64_t n) {
  Graph g;
  g.output("y", matmul(g.input("x", {m, k}), g.param("w", {k, n})));
  CompileOptions o;
  o.skip_rules = {"gpu-library-gemm"};  // the generated tiles (cuBLASLt's are its own)
  compiler::CompiledProgram p = compiler::compile_graph(*g.impl(), Target::parse(target), o);
  for (const auto& st : p.plan->steps)  // no launch alternative: the renderer's default tile
    if (st.spec->kind == ir::KernelKind::Gemm)
      return st.spec->launch.empty() ? std::vector<int64_t>{64, 64, 16} : st.spec->launch;
  return {};
}

std::string tile_string(const std::vector<int64_t>& t) {
  std::string s;
  for (int64_t x : t) {
    if (!s.empty()) s.push_back('x');
    s.append(std::to_string(x));
  }
  return s.empty() ? "(none)" : s;
}

}  // namespace

TEST_CASE("an f16 prefill's sibling products are one product each, its weights read packed as halves",
          "[gpu][schedule]") {
  // Q|K|V and gate|up of an f16 block (Llama-3-8B sizes, 128 tokens): a concat of widened
  // half weights is a half operand (ir::half_concat), so the merged products run on
  // tensor cores (or cuBLASLt's half path) and read their weights stored packed as halves
  // (kernel::Program::packs). As f32 products over an f32 copy of the concat they lost to
  // five separate half products: 11 kernels on each target.
  Graph g;
  test::build_prefill_block_f16(g, 128);
  for (const char* target : {"cuda:sm_80", "cuda:sm_90", "hip:gfx90a"}) {
    INFO(target);
    CompileOptions o;
    o.compile_only = true;
    const auto r = compiler::compile_graph(*g.impl(), Target::parse(target), o);
    // Four products over weights -- Q|K|V, the output projection, gate|up, down --
    // whatever runs them (on CUDA cuBLASLt calls, which take no epilogue: RoPE, SwiGLU and
    // the residual adds are then kernels of their own, 12 in all on sm_90 against 7
    // generated). (The attention may be two products of its own: on sm_80 its fused
    // kernel, on the FP32 lanes, costs more than QK^T and P V on the tensor cores.)
    CHECK(std::count_if(r.plan->steps.begin(), r.plan->steps.end(), [&](const auto& st) {
            if (st.spec->kind != ir::KernelKind::Gemm && st.spec->kind != ir::KernelKind::LibraryGemm)
              return false;
            return std::any_of(st.args.begin(), st.args.end(),
                               [&](uint32_t v) { return r.plan->leaf_is_param[v] != 0; });
          }) == 4);
    const cpu::LoweredPlan lp = cpu::lower_plan(*r.plan, gpu::gpu_lower_options());
    std::set<std::vector<std::string>> packs;
    for (const kernel::ParamPack& pk : lp.prog.packs) {
      std::vector<std::string> names;
      for (int m : pk.members) names.push_back(r.plan->leaf_name[static_cast<size_t>(m)]);
      std::sort(names.begin(), names.end());  // (in the order the concat has them)
      packs.insert(names);
      CHECK(lp.prog.buffers[static_cast<size_t>(pk.buffer)].dtype == f16);
      for (const kernel::Kernel& k : lp.prog.kernels)
        if (k.gemm && k.gemm->b.buffer == pk.buffer)
          CHECK(lp.prog.buffers[static_cast<size_t>(k.gemm->a.buffer)].dtype == f16);  // a half product
    }
    CHECK(packs == std::set<std::vector<std::string>>{{"wk", "wq", "wv"}, {"w_gate", "w_up"}});
    CHECK_NOTHROW(kernel::validate(lp.prog));
  }
}

TEST_CASE("the same schedule rules pick different GEMM tiles for sm_90 and gfx90a", "[gpu][schedule]") {
  // Both targets see the same candidates (rules/schedule_gpu.cpp); the GPU cost model
  // ranks them with each target's SM count, register file, shared memory / LDS and
  // warp width (32 vs 64 lanes hide latency differently).
  int differ = 0;
  for (auto [m, k, n] : {std::array<int64_t, 3>{512, 512, 512}, {1024, 1024, 1024}, {2048, 2048, 2048},
                         {4096, 4096, 4096}, {128, 4096, 4096}, {256, 4096, 14336}}) {
    const auto a = chosen_gemm_tile("cuda:sm_90", m, k, n), b = chosen_gemm_tile("hip:gfx90a", m, k, n);
    std::printf("gemm %lldx%lldx%lld: sm_90 tile %s, gfx90a tile %s\n", static_cast<long long>(m),
                static_cast<long long>(k), static_cast<long long>(n), tile_string(a).c_str(), tile_string(b).c_str());
    CHECK(a.size() >= 3);
    CHECK(b.size() >= 3);
    differ += a != b;
  }
  CHECK(differ > 0);
}

TEST_CASE("tensor-core GEMM kernels compile with NVRTC for sm_80 and sm_90 without spills", "[gpu][nvrtc][mma]") {
  if (!have_nvrtc()) return;
  namespace k = luminal::kernel;
  k::Program p;
  const int64_t M = 4096, N = 4096, K = 4096;
  p.buffers = {{"a", DType::f16, M * K, k::BufferRole::Input},
               {"b", DType::f16, K * N, k::BufferRole::Input},
               {"c", DType::f32, M * N, k::BufferRole::Output}};
  k::Kernel kk;
  kk.name = "mm";
  kk.kind = k::KernelKind::Gemm;
  k::Gemm g;
  g.m = M;
  g.n = N;
  g.k = K;
  g.a = {0, 0, K, 1};
  g.b = {1, 0, N, 1};
  g.c = {2, 0, N, 1};
  g.row_var = 0;
  g.col_var = 1;
  kk.gemm = g;
  p.kernels.push_back(kk);
  for (auto [target, arch] : {std::pair<const char*, const char*>{"cuda:sm_80", "sm_80"}, {"cuda:sm_90", "sm_90"}})
    for (const auto& tile : std::vector<std::vector<int64_t>>{{128, 128, 32, 1}, {128, 64, 32, 1}, {64, 64, 32, 1}}) {
      const gpu::GpuSource src =
          gpu::render_gpu(p, gpu::arch_for(Target::parse(target)), [&](const k::Kernel&) { return tile; });
      REQUIRE(src.kernels.find("tensor cores") != std::string::npos);
      cuda::CudaModule m = cuda::compile_module(src.device_source(), arch, true);
      REQUIRE(m.resources.size() == 1);
      INFO(arch << " tile " << tile[0] << "x" << tile[1] << ": " << m.resources[0].registers << " registers");
      CHECK(m.resources[0].spill_bytes == 0);
      CHECK(m.resources[0].shared_bytes == (tile[0] + tile[1]) * 64);
    }
}

TEST_CASE("a decode step's weights and cache are priced at memory bandwidth, though each fits the L2",
          "[gpu][cost]") {
  // The Llama-3-8B decode step on the H200 figures (50 MB of L2): 453 MB of weights and
  // KV cache, read once per call, so from HBM -- however small one kernel's share (wo,
  // 33.6 MB, was priced at L2 speed: 6.4 us, under the 7 us its bytes take at 4.8 TB/s).
  // No step may be estimated below its program-leaf bytes at the memory bandwidth.
  const detail::TargetDesc t = detail::describe_gpu_model("H200");
  Graph g;
  const auto plan = decode_step_plan_h200(g);
  std::map<std::string, double> leaf_bytes;
  for (const auto* ids : {&g.impl()->inputs, &g.impl()->params})
    for (uint32_t id : *ids) {
      const detail::Node& n = g.impl()->nodes[id];
      double b = static_cast<double>(dtype_size(n.dtype));
      for (const Dim& d : n.shape) b *= static_cast<double>(d.evaluate({}));
      leaf_bytes[n.name] = b;
    }
  int big = 0;
  for (const auto& st : plan->steps) {
    double leaves = 0;
    std::set<uint32_t> seen;
    for (uint32_t a : st.args)
      if (seen.insert(a).second && !plan->leaf_name[a].empty()) leaves += leaf_bytes.at(plan->leaf_name[a]);
    INFO("step reading " << leaves / 1e6 << " MB of leaves, estimated " << st.est_seconds * 1e6 << " us");
    CHECK(st.est_seconds >= leaves / t.mem_bandwidth);
    big += leaves > 30e6 && leaves < t.llc_bytes;
  }
  CHECK(big > 0);  // (some step's leaves fit the L2 on their own: wo's 33.6 MB)
}

TEST_CASE(
    "device sources convert halves with the hardware's instructions; the emulator keeps the C prelude's",
    "[gpu][nvrtc][hiprtc]") {
  // The C prelude's branch-free f32 -> f16 rounding is 15 integer instructions (its
  // constant 0xc8000fff rebiases the exponent): an elementwise chain over 256M halves, each
  // op rounded as PyTorch rounds it, was 557 PTX instructions an element with them and 204
  // with cvt (docs/cuda.md). HIP converts f16 through _Float16 (v_cvt_f16_f32 and back;
  // bf16 rounding stays the C prelude's: CDNA2 has no instruction for it). The emulator
  // keeps the C versions: the same bits but for NaN payloads.
  const kernel::Program none;
  const gpu::GpuArch cuda = gpu::arch_for(Target::parse("cuda:sm_80"));
  const gpu::GpuSource src = gpu::render_gpu(none, cuda);
  const std::string device = src.device_source();
  CHECK(device.find("cvt.rn.f16.f32") != std::string::npos);
  CHECK(device.find("cvt.f32.f16") != std::string::npos);
  CHECK(device.find("cvt.rn.bf16.f32") != std::string::npos);
  CHECK(device.find("0xc8000fffu") == std::string::npos);
  const std::string emulated =
      gpu::emulation_source(src, none, gpu::arch_for(Target::parse("cuda:sm_80+emu")));
  CHECK(emulated.find("0xc8000fffu") != std::string::npos);
  CHECK(emulated.find("cvt.rn.f16.f32") == std::string::npos);
  const std::string hip = gpu::render_gpu(none, gpu::arch_for(Target::parse("hip:gfx90a"))).device_source();
  CHECK(hip.find("0xc8000fffu") == std::string::npos);
  CHECK(hip.find("(_Float16)f") != std::string::npos);
  CHECK(hip.find("LM_INLINE uint16_t lm_f32_to_bf16(") != std::string::npos);  // the C prelude's
  // A kernel that uses all three compiles (their PTX needs sm_80).
  const std::string probe = device +
                            "extern \"C\" __global__ void probe(const float* a, uint16_t* b) {\n"
                            "  b[threadIdx.x] = lm_f32_to_bf16(a[threadIdx.x]) ^ "
                            "lm_f32_to_f16(lm_f16_to_f32(b[threadIdx.x]));\n}\n";
  if (have_nvrtc()) CHECK_NOTHROW(cuda::compile_module(probe, "sm_80", true));
  const std::string hip_probe = hip +
                                "extern \"C\" __global__ void probe(const float* a, uint16_t* b) {\n"
                                "  b[threadIdx.x] = lm_f32_to_bf16(a[threadIdx.x]) ^ "
                                "lm_f32_to_f16(lm_f16_to_f32(b[threadIdx.x]));\n}\n";
  if (have_hiprtc()) CHECK_NOTHROW(hip::compile_module(hip_probe, "gfx90a"));
}

TEST_CASE("a decode step launches no kernel without arithmetic but for its outputs", "[gpu][cost]") {
  // A kernel of views and casts costs a launch (3 us of a 140 us step) and saves no work
  // unless it writes a program output: its readers absorb it (absorb-views, a guided
  // pass). The decode step had two: V copied out of the merged Q|K|V product before its
  // rounding to the cache's f16, and the attention's output copied into wo's layout.
  Graph g;
  const auto plan = decode_step_plan_h200(g);
  std::set<uint32_t> outputs;
  for (const auto& out : plan->outputs) outputs.insert(out.second);
  int cheap = 0;
  for (const auto& st : plan->steps)
    if (ir::is_cheap(*st.spec)) {
      ++cheap;
      CHECK(outputs.count(st.result) == 1);
    }
  CHECK(cheap >= 1);  // the new V row, rounded to f16: an output, computed by one kernel
}

TEST_CASE("a decode step's down product computes SwiGLU itself", "[gpu][cost][prologue]") {
  // silu(gate) * up was a kernel of its own (3 us of the step, nearly all launch): the
  // fusion policies build the down product as a row kernel, whose SwiGLU would cost a silu
  // per weight element (58.7 M, 95 us), and nothing offered it as a GEMM. gpu-rows-as-gemm
  // gives that row kernel its GEMM twin; the few-rows GEMM computes SwiGLU once per block
  // as its row prologue (ir::row_prologue, elementwise), K = 14336 in two chunks.
  Graph g;
  const auto plan = decode_step_plan_h200(g);
  int swiglu = 0;
  for (const auto& st : plan->steps) {
    if (st.spec->kind != ir::KernelKind::Gemm) continue;
    const auto rp = ir::row_prologue(*st.spec->body, st.spec->launch);
    if (!rp || rp->stat != ir::RowPrologue::kNone) continue;
    int transcendental = 0;
    for (const detail::Node& n : st.spec->body->nodes) transcendental += detail::is_transcendental(n.op);
    swiglu += transcendental > 0;
  }
  CHECK(swiglu == 1);
  CHECK(plan->steps.size() <= 7);
}

TEST_CASE("an attention's rows are its query rows however its body is spelled", "[gpu][cost]") {
  // The GPU model splits an attention's keys into ranges (flash-decoding) when it has few
  // rows, as the renderer does (emit_attention.cpp: the query rows times the batch
  // loops). The rows once were the product's elements over its last axis: the decode
  // step's attention as the search finds it without the fusion policies has a unit axis
  // there, so every element counted as a row -- 4096 instead of 32 -- and the same
  // kernel was priced 2.2x dearer than its twin (25.1 against 11.2 us).
  const testsupport::ScopedEnv model("LUMINAL_GPU_MODEL", "H200");
  Graph decode;
  test::build_decode_block_f16(decode, 4096);
  for (const bool policies : {true, false}) {
    CompileOptions o = test::unhurried();  // (the plan checked is the saturated search's)
    o.compile_only = true;
    if (!policies) o.skip_rules = {"fuse-producers"};
    const auto plan = compiler::compile_graph(*decode.impl(), Target::parse("cuda:sm_90"), o).plan;
    int attentions = 0;
    for (const auto& step : plan->steps) {
      if (step.spec->kind != ir::KernelKind::Attention) continue;
      ++attentions;
      ir::EGraph none;
      const detail::KernelWork w = ir::kernel_work(none, *step.spec, {}, {}, ir::LoweringTraits::gpu());
      INFO("fusion policies: " << policies);
      CHECK(w.attention_rows == 32);  // 32 heads, one query each
      CHECK(w.attention_keys == 4097);
      CHECK(w.attention_depth == 128);
      CHECK(w.attention_width == 128);
      CHECK(w.attention_sharing == 4);   // a KV head's 4 query heads read each K row
      CHECK(w.attention_kv_bytes == 2);  // the f16 cache
      if (!policies) continue;
      // Priced as the renderer runs it (gpu_cost.cpp): above the bytes at the full
      // bandwidth and the dot products' and P V's FMAs alone at the f32 peak (a warp
      // instruction of 32 FMAs 64 flops); 4 rows a block are cheaper than 1 (each K and V
      // element loaded for 4 rows: a quarter of the blocks' loads and shuffles).
      const detail::TargetDesc h200 = compiler::target_desc(Target::parse("cuda:sm_90"));
      const double s = detail::gpu_kernel_seconds(h200, w) - h200.launch_overhead_s;
      const double kv_bytes = 2.0 * 8 * 4096 * 128 * 2;
      CHECK(s > kv_bytes / h200.mem_bandwidth);
      CHECK(s > 32.0 * 4097 * (128 + 128) * 2 / h200.peak_flops_f32);
      detail::KernelWork alone = w;
      alone.attention_sharing = 1;
      CHECK(detail::gpu_kernel_seconds(h200, alone) > 1.5 * detail::gpu_kernel_seconds(h200, w));
    }
    // Without the policies the search's attention reads its scores as the vector
    // product spells them, a trailing unit column dropped by a reshape before the scale:
    // the streaming kernel indexes the scores by the product's axes all the same
    // (AttentionMatch::r1_axis_of), so it is one attention either way.
    CHECK(attentions == 1);
  }
}

TEST_CASE("every launch a GPU step lowers to is one the cost model charges", "[gpu][cost]") {
  // A step lowers to its kernel and the kernels staged before it (a materialized
  // reduction, an operand computed into scratch, a hoisted broadcast value) -- each a
  // launch of its own, which the model must charge (KernelWork::staged_kernels): the
  // decode step's projections each ran three launches priced as one.
  const testsupport::ScopedEnv model("LUMINAL_GPU_MODEL", "H200");
  // Returns the kernels' accumulator counts (a reduction's 1 + more), the others' 0.
  auto check = [](const Graph& g, const std::string& what, const char* target = "cuda:sm_90",
                  std::vector<std::string> skip_rules = {}) {
    CompileOptions o;
    o.compile_only = true;
    o.skip_rules = std::move(skip_rules);
    const Target t = Target::parse(target);
    const auto plan = compiler::compile_graph(*g.impl(), t, o).plan;
    const detail::TargetDesc desc = compiler::target_desc(t);
    const cpu::LoweredPlan lp = cpu::lower_plan(*plan, gpu::gpu_lower_options());
    std::vector<size_t> accumulators;
    for (const kernel::Kernel& k : lp.prog.kernels)
      accumulators.push_back(k.reduce ? 1 + k.reduce->more.size() : 0);
    // (A kernel run inside another's launch, side or tail work, counts as its step's: the
    // plan priced it a launch, which folded_launch_seconds takes back.)
    std::map<size_t, int> launches;
    for (const kernel::Kernel& k : lp.prog.kernels) {
      ++launches[std::strtoul(k.name.c_str() + 1, nullptr, 10)];
      for (const auto* list : {&k.side, &k.tail})
        for (const kernel::Kernel& w : *list) ++launches[std::strtoul(w.name.c_str() + 1, nullptr, 10)];
    }
    ir::EGraph none;
    for (size_t s = 0; s < plan->steps.size(); ++s) {
      const ir::KernelSpec& spec = *plan->steps[s].spec;
      // (which slots are params: a concat of them is read packed, not copied)
      std::vector<uint8_t> params;
      for (uint32_t v : plan->steps[s].args) params.push_back(plan->leaf_is_param[v]);
      const detail::KernelWork w = ir::kernel_work(none, spec, {}, {}, ir::LoweringTraits::gpu(), params);
      INFO(what << " on " << target << " step " << s << " (" << ir::kind_name(spec.kind) << ")");
      CHECK(launches[s] == detail::priced_launches(desc, w));
    }
    return accumulators;
  };
  Graph decode;
  test::build_decode_block_f16(decode, 4096);
  check(decode, "decode step");
  {
    // SwiGLU's gate and up products over the normalized x: one launch -- two accumulators
    // in one row kernel, or one product over both weights packed (SwiGLU then reads its
    // slices).
    CompileOptions o;
    o.compile_only = true;
    const auto plan = compiler::compile_graph(*decode.impl(), Target::parse("cuda:sm_90"), o).plan;
    auto reads = [&](const compiler::KernelPlan::Step& st, const std::string& leaf) {
      return std::any_of(st.args.begin(), st.args.end(),
                         [&](uint32_t v) { return plan->leaf_name[v] == leaf; });
    };
    int gate = 0, both = 0;
    for (const auto& st : plan->steps) {
      gate += reads(st, "w_gate");
      both += reads(st, "w_gate") && reads(st, "w_up");
    }
    CHECK(gate == 1);
    CHECK(both == 1);
  }
  // Without the policies: an attention priced as the streaming kernel that the lowering
  // could not build (four kernels), a score GEMM whose half Q was priced as read in place
  // and was copied to f32 (a unit last axis taken for the columns).
  check(decode, "decode step without fuse-producers", "cuda:sm_90", {"fuse-producers"});
  Graph prefill;
  test::BlockConfig c = test::BlockConfig::llama_4096();
  c.weights = f16;
  test::build_model(prefill, c, 1);
  check(prefill, "prefill block");
  Graph prefill16;
  test::build_prefill_block_f16(prefill16, 128);
  check(prefill16, "f16 prefill block", "cuda:sm_80");
  // The f32 block (Llama-3-8B sizes) where the model and the lowering disagreed: at one
  // token a vector times a matrix that the few-rows engine takes (generic loops ran it as
  // a statistic kernel and a block per output), a GEMM whose product the root reads
  // through a reshape (priced a staged kernel it never had), a statistic that is not one
  // value per row (priced as a row prologue, staged by the lowering), SwiGLU computed
  // into a buffer and copied again as the down projection's operand; at 128 tokens the
  // concatenated Q|K|V weights a tiled GEMM (HIP) or cuBLASLt (CUDA) reads, stored packed
  // (a copy per call where the slots are not all params).
  for (const auto& [seq, target, skip] :
       std::vector<std::tuple<int64_t, const char*, bool>>{{1, "cuda:sm_90", false},
                                                           {1, "cuda:sm_90", true},
                                                           {16, "cuda:sm_80", false},
                                                           {1, "cuda:sm_80", true},
                                                           {128, "hip:gfx90a", false},
                                                           {128, "cuda:sm_80", false}}) {
    Graph block;
    test::BlockConfig f32 = test::BlockConfig::llama_4096();
    f32.seq = seq;
    test::build_model(block, f32, 1);
    check(block, "f32 block at " + std::to_string(seq) + (skip ? " without fuse-producers" : ""), target,
          skip ? std::vector<std::string>{"fuse-producers"} : std::vector<std::string>{});
  }
  for (const auto& c : test::translation_cases()) {
    Graph g;
    c.build(g);
    check(g, c.name);
  }
  for (int64_t n : {64, 4096}) {  // half operands: a generated GEMM, then cuBLASLt's
    Graph g;
    Tensor a = g.input("a", {n, n}, f16);
    g.output("c", matmul(a, g.param("b", {n, n}, f16)));
    g.output("d", matmul(transpose(a, 0, 1), g.param("w", {n, 8}, f16)));
    check(g, "f16 products " + std::to_string(n));
  }
  // The traits the model prices with are the GPU lowering's options.
  const kernel::lower::Options o = gpu::gpu_lower_options();
  CHECK(ir::LoweringTraits::gpu().attention_q_inline == o.attention_q_inline);
  CHECK(ir::LoweringTraits::gpu().half_operands == o.half_operands);
  CHECK(ir::LoweringTraits::gpu().gemm_row_prologue == o.gemm_row_prologue);
  CHECK(ir::LoweringTraits::gpu().row_accumulators == o.row_accumulators);
  CHECK(ir::LoweringTraits::gpu().packed_params == o.pack_params);
}
