// The cost model's inputs and its roofline: target descriptions and kernel_seconds on
// hand-computed work; KernelCost's memo against fresh models.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <vector>

#include "compiler/search.hpp"
#include "cost/cost_model.hpp"
#include "cost/target_desc.hpp"
#include "luminal/error.hpp"
#include "translation_models.hpp"

using namespace luminal;
using detail::KernelWork;

TEST_CASE("GPU descriptions carry their published figures; an unknown arch is an error", "[compiler][cost]") {
  const detail::TargetDesc h = detail::describe_gpu("sm_90");
  CHECK(h.name == "cuda:sm_90");
  CHECK(h.compute_units == 132);
  CHECK(h.model == "H100 SXM5");
  CHECK(h.mem_bandwidth == Approx(3.35e12));
  CHECK(h.warp == 32);
  CHECK(detail::describe_gpu_model("H200").mem_bandwidth == Approx(4.8e12));
  CHECK(detail::describe_gpu_model("H200").compute_units == 132);
  CHECK(detail::describe_gpu("sm_80").peak_flops_f32 == Approx(19.5e12));
  CHECK(detail::describe_gpu("sm_86").peak_flops_f32 == Approx(19.5e12));  // nearest older row
  CHECK(detail::describe_gpu("sm_86").name == "cuda:sm_86");
  CHECK(detail::describe_gpu("gfx90a").name == "hip:gfx90a");
  CHECK(detail::describe_gpu("gfx90a").warp == 64);
  CHECK(detail::describe_gpu("gfx1030").warp == 32);
  CHECK(detail::describe_gpu("gfx942").model == "MI300X");
  try {
    detail::describe_gpu("sm_70");
    FAIL("sm_70 was accepted");
  } catch (const CompileError& e) {
    CHECK_THAT(e.what(), Catch::Contains("sm_70") && Catch::Contains("sm_80, sm_90") &&
                              Catch::Contains("gfx90a"));
  }
}

TEST_CASE("a rank of several on one host is priced with its share of the host", "[compiler][cost]") {
  // Ranks over the shared-memory link are processes of one host: each has 1/ranks of its
  // cores, FLOP/s and bandwidths. One device (or host) per rank shares nothing.
  const detail::TargetDesc host = detail::describe_host_cpu();
  REQUIRE(host.link.name == "shm");
  for (int ranks : {2, 3, 4}) {
    INFO("ranks " << ranks);
    const detail::TargetDesc r = detail::per_rank_share(host, ranks);
    CHECK(r.compute_units == std::max(1, host.compute_units / ranks));
    CHECK(r.peak_flops_f32 == Approx(host.peak_flops_f32 / ranks));
    CHECK(r.peak_flops_f16 == Approx(host.peak_flops_f16 / ranks));
    CHECK(r.mem_bandwidth == Approx(host.mem_bandwidth / ranks));
    CHECK(r.cache_bandwidth == Approx(host.cache_bandwidth / ranks));
    CHECK(r.link.bandwidth == Approx(host.link.bandwidth));  // the link is priced per rank already
    // A memory-bound kernel takes `ranks` times as long, less its launch.
    KernelWork w;
    w.bytes_read = 64e6;
    w.bytes_written = 64e6;
    w.parallelism = 1 << 20;
    CHECK(detail::kernel_seconds(r, w) - r.launch_overhead_s ==
          Approx(ranks * (detail::kernel_seconds(host, w) - host.launch_overhead_s)).epsilon(0.01));
  }
  CHECK(detail::per_rank_share(host, 1).mem_bandwidth == host.mem_bandwidth);
  detail::TargetDesc apart = host;
  apart.link = detail::describe_link("ethernet");
  CHECK(detail::per_rank_share(apart, 2).mem_bandwidth == host.mem_bandwidth);
  const detail::TargetDesc gpu = detail::describe_gpu("sm_90");
  CHECK(detail::per_rank_share(gpu, 8).mem_bandwidth == gpu.mem_bandwidth);
  CHECK(detail::per_rank_share(gpu, 8).compute_units == 132);
}

TEST_CASE("kernel_seconds is the slower of compute and memory, plus a launch", "[compiler][cost]") {
  detail::TargetDesc t;
  t.compute_units = 1;
  t.simd_lanes_f32 = 1;
  t.peak_flops_f32 = 1e9;
  t.mem_bandwidth = 1e9;
  t.cache_bandwidth = 4e9;
  t.llc_bytes = 1e6;
  t.launch_overhead_s = 1e-6;
  t.loop_efficiency = 0.5;
  t.gemm_efficiency = 0.8;
  t.library_gemm_efficiency = 0.4;
  t.gemm_tiles = {{{64, 128, 32}, {16, 16, 16}}};
  KernelWork w;
  w.flops = 1e6;  // 1e6 / (1e9 * 0.5) = 2 ms of compute
  w.bytes_read = 1e7;  // past the LLC: 1e7 / 1e9 = 10 ms of memory
  CHECK(detail::kernel_seconds(t, w) == Approx(10e-3 + 1e-6));
  w.bytes_read = 1e5;  // in cache: 25 us, so compute bound
  CHECK(detail::kernel_seconds(t, w) == Approx(2e-3 + 1e-6));
  // Engines: the generated GEMM at 0.8, the library at 0.4, a 16x16 tile loses
  // 0.1 * log2(8192 / 256) = 0.5 of its reuse against the 64x128 one.
  w.engine = KernelWork::Engine::GeneratedGemm;
  w.tile_area = 64 * 128;
  CHECK(detail::kernel_seconds(t, w) == Approx(1e6 / 0.8e9 + 1e-6));
  w.tile_area = 16 * 16;
  CHECK(detail::kernel_seconds(t, w) == Approx(1e6 / 0.4e9 + 1e-6));
  w.engine = KernelWork::Engine::LibraryGemm;
  w.tile_area = 0;
  CHECK(detail::kernel_seconds(t, w) == Approx(1e6 / 0.4e9 + 1e-6));
}

TEST_CASE("the CPU model reads a program's leaves from memory when they cannot stay cached",
          "[compiler][cost]") {
  detail::TargetDesc t;
  t.compute_units = 1;
  t.simd_lanes_f32 = 1;
  t.peak_flops_f32 = 1e12;  // memory-bound throughout
  t.mem_bandwidth = 1e9;
  t.cache_bandwidth = 4e9;
  t.llc_bytes = 1e6;
  t.launch_overhead_s = 0;
  KernelWork w;
  w.bytes_read = 6e5;  // a weight that fits the cache by itself ...
  w.bytes_leaf = 5e5;  // ... of which 5e5 bytes come from the program's params
  w.read_buffers = {5e5, 1e5};
  CHECK(detail::kernel_seconds(t, w) == Approx(6e5 / 4e9));
  // The program's leaves are more than the cache holds: they cannot wait in it from one
  // call to the next, so this kernel's share streams from memory; the activation still
  // comes from the cache.
  w.leaves_from_memory = true;
  CHECK(detail::kernel_seconds(t, w) == Approx(5e5 / 1e9 + 1e5 / 4e9));
  // Past the cache as a whole: the leaves at memory speed, the activation that fits by
  // itself at cache speed, as without the flag.
  w.bytes_read = 2.1e6;
  w.bytes_leaf = 2e6;
  w.read_buffers = {2e6, 1e5};
  CHECK(detail::kernel_seconds(t, w) == Approx(2e6 / 1e9 + 1e5 / 4e9));
  w.leaves_from_memory = false;
  CHECK(detail::kernel_seconds(t, w) == Approx(2e6 / 1e9 + 1e5 / 4e9));
}

TEST_CASE("the cost model's memo of a body's work prices every launch twin as a fresh model does",
          "[compiler][cost]") {
  // KernelCost analyses a kernel body once for all its launch twins (ir::body_work, keyed
  // by ir::body_launch_key): a key missing a part of the launch that the analysis reads
  // would price a twin as the first one priced. Every kernel node of the saturated
  // block, priced by one model in node order, against a model that has priced nothing
  // (a sample) and against one pricing in reverse order (all).
  for (const char* target : {"cuda:sm_90", "hip:gfx90a", "cpu"}) {
    Graph graph;
    test::BlockConfig c;
    test::build_model(graph, c, 1);
    const auto& gi = *graph.impl();
    CompileOptions o = test::unhurried();
    o.compile_only = true;
    const Target t = Target::parse(target);
    auto settings = compiler::make_search_settings(t, o, std::chrono::steady_clock::now());
    auto sat = compiler::saturate_graph(gi, settings);
    std::vector<ir::Id> kernels;
    for (ir::Id cls : sat->g.index().classes_with(ir::Op::Kernel))
      for (ir::Id nd : sat->g.index().nodes(cls, ir::Op::Kernel)) kernels.push_back(nd);
    std::sort(kernels.begin(), kernels.end());
    INFO(target << ": " << kernels.size() << " kernel nodes");
    REQUIRE(kernels.size() > 100);
    compiler::KernelCost forward(sat->g, gi, settings.ctx.target), backward(sat->g, gi, settings.ctx.target);
    std::vector<double> price;
    for (ir::Id nd : kernels) price.push_back(forward(sat->g.node(nd)));
    int mismatches = 0;
    for (std::size_t i = kernels.size(); i-- > 0;)
      mismatches += backward(sat->g.node(kernels[i])) != price[i] ? 1 : 0;
    CHECK(mismatches == 0);
    const std::size_t stride = std::max<std::size_t>(1, kernels.size() / 150);
    for (std::size_t i = 0; i < kernels.size(); i += stride) {
      compiler::KernelCost fresh(sat->g, gi, settings.ctx.target);
      mismatches += fresh(sat->g.node(kernels[i])) != price[i] ? 1 : 0;
    }
    CHECK(mismatches == 0);
  }
}
