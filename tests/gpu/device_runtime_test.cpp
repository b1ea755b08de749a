// The device runtime (gpu::DeviceExecutable: memory plan, arena per binding of the dims,
// pinned staging, launch order, collectives between kernels) run on the host through
// HostDeviceApi: device memory is host memory and each launch calls the kernel's entry
// with the driver's launch ABI. What only a GPU can show -- the driver, NVRTC/hipRTC
// images, graph capture -- is tests/gpu/run.sh's; everything the runtime itself decides
// is checked here, against the reference interpreter.
#include <catch2/catch.hpp>

#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/cpu/cpu_executable.hpp"
#include "backends/gpu/device_executable.hpp"
#include "backends/gpu/gpu_arch.hpp"
#include "backends/gpu/gpu_program.hpp"
#include "backends/gpu/gpu_renderer.hpp"
#include "backends/reference/interpreter.hpp"
#include "compiler/compile_graph.hpp"
#include "compiler/translation_models.hpp"
#include "dist/param_block.hpp"
#include "dist/on_ranks.hpp"
#include "gpu/host_device_api.hpp"
#include "luminal/luminal.hpp"
#include "support/scoped_env.hpp"

using namespace luminal;

namespace {

// What cuda::make_executable hands the runtime, with the emulation source as the "image"
// (HostDeviceApi::load_module compiles it).
gpu::DeviceBuildFn host_build(const Target& target) {
  return [target](const kernel::Program& prog, const compiler::KernelPlan& plan, const std::string&) {
    const gpu::GpuArch arch = gpu::arch_for(target);
    gpu::DeviceBuild b;
    b.src = gpu::render_gpu(prog, arch, gpu::plan_schedules(plan));
    b.image = gpu::emulation_source(b.src, prog, arch);
    b.codegen = "host emulator";
    return b;
  };
}

std::map<std::string, const HostTensor*> pointers(const std::map<std::string, HostTensor>& data) {
  std::map<std::string, const HostTensor*> p;
  for (const auto& [name, t] : data) p.emplace(name, &t);
  return p;
}

}  // namespace

TEST_CASE("the device runtime on the host: a decoder block, every kernel launched, reference results",
          "[gpu][runtime]") {
  Graph g;
  test::build_model(g, test::BlockConfig{}, 2);
  const auto data = test::random_inputs(*g.impl(), 11);
  const auto want = detail::reference::run(*g.impl(), {}, pointers(data));
  for (const char* t : {"cuda:sm_90", "hip:gfx90a"}) {
    INFO(t);
    const Target target = Target::parse(t);
    const auto plan = compiler::compile_graph(*g.impl(), target, {}).plan;
    gpu_test::HostDeviceApi api(gpu::arch_for(target).arch);
    const gpu::DeviceExecutable exe(api, plan, std::make_shared<const detail::GraphImpl>(*g.impl()), target,
                                    host_build(target));
    const auto got = exe.run({}, pointers(data));
    // The same kernels as the emulated target runs through the CPU executable's machinery
    // (the same plan: the search is deterministic within its budget): the same bits.
    Callable emulated = compile(g, target.emulated());
    std::map<std::string, HostTensor> feed;
    for (const auto& name : emulated.param_names()) emulated.bind(name, data.at(name));
    for (const auto& name : emulated.input_names()) feed.emplace(name, data.at(name));
    const auto emu = emulated(feed);
    CHECK(std::memcmp(emu.at("y").data(), got.at("y").data(), got.at("y").nbytes()) == 0);
    // Two layers of f32 sums in another order than the interpreter's: within rounding of
    // the output's scale.
    double scale = 0;
    for (float v : want.at("y").to_f32()) scale = std::max(scale, static_cast<double>(std::abs(v)));
    INFO("error ratio " << test::compare_outputs(got, want));
    CHECK(test::compare_outputs(got, want, 1e-5 * scale, 1e-4) <= 1.0);
    CHECK(api.launches == static_cast<size_t>(exe.kernels()));
    CHECK(api.allocations == 1);  // one arena for the binding
    // A second call reuses the binding's memory and queues the same work.
    const auto again = exe.run({}, pointers(data));
    CHECK(api.launches == 2 * static_cast<size_t>(exe.kernels()));
    CHECK(api.allocations == 1);
    CHECK(std::memcmp(again.at("y").data(), got.at("y").data(), got.at("y").nbytes()) == 0);
    // Captured as a graph once (what the CUDA runtime does), replayed by every call: the
    // same bits, with inputs changed between the calls (the staging is read at replay).
    gpu_test::HostDeviceApi graphs(gpu::arch_for(target).arch, /*capture=*/true);
    const gpu::DeviceExecutable captured(graphs, plan, std::make_shared<const detail::GraphImpl>(*g.impl()),
                                         target, host_build(target));
    CHECK(std::memcmp(captured.run({}, pointers(data)).at("y").data(), got.at("y").data(),
                      got.at("y").nbytes()) == 0);
    const auto other = test::random_inputs(*g.impl(), 12);
    const auto replayed = captured.run({}, pointers(other)), queued = exe.run({}, pointers(other));
    CHECK(std::memcmp(replayed.at("y").data(), queued.at("y").data(), queued.at("y").nbytes()) == 0);
    CHECK(std::memcmp(replayed.at("y").data(), got.at("y").data(), got.at("y").nbytes()) != 0);
    CHECK(graphs.captures == 1);
    CHECK(graphs.graph_launches == 2);
    CHECK(graphs.launches == 2 * static_cast<size_t>(captured.kernels()));
  }
}

TEST_CASE("the device runtime on the host: one arena per binding of a dynamic dim", "[gpu][runtime]") {
  Graph g;
  const Dim n = Dim::variable("n", 0, 64);
  Tensor x = g.input("x", {n, Dim(48)});
  g.output("y", sum(gelu(linear(x, g.param("w", {40, 48}), g.param("b", {40}))), {1}));
  const Target target = Target::parse("cuda:sm_90");
  const auto plan = compiler::compile_graph(*g.impl(), target, {}).plan;
  gpu_test::HostDeviceApi api("sm_90");
  const gpu::DeviceExecutable exe(api, plan, std::make_shared<const detail::GraphImpl>(*g.impl()), target,
                                  host_build(target));
  for (int64_t rows : {3, 17, 3, 0}) {
    INFO("n = " << rows);
    const DimBindings dims{{"n", rows}};
    const auto data = test::random_inputs(*g.impl(), static_cast<uint64_t>(rows) + 1, dims);
    const auto want = detail::reference::run(*g.impl(), dims, pointers(data));
    CHECK(test::compare_outputs(exe.run(dims, pointers(data)), want) <= 1.0);
  }
  CHECK(api.allocations == 3);  // n = 3, 17 and 0; the second n = 3 reuses the first
}

TEST_CASE("the device runtime runs a rank's collectives on the host between kernels",
          "[gpu][runtime][dist]") {
  // Each rank's plan comes from compile() with the communicator (one search, rank 0's
  // plan, specialized to the rank); the device runtime then runs it through HostDeviceApi,
  // its all_reduce staged through host memory, holding only its block of each split
  // weight. The link is stated fast so the small GPU block shards (tests/dist "[gpu]"
  // explains the figure).
  const testsupport::ScopedEnv fast_link("LUMINAL_LINK_LATENCY_US", "0.5");
  Graph g;
  test::build_model(g, test::BlockConfig{4, 1024, 16, 8, 5632}, 1);
  const auto data = test::random_inputs(*g.impl(), 13);
  const auto want = detail::reference::run(*g.impl(), {}, pointers(data));
  const Target target = Target::parse("cuda:sm_90");
  std::vector<std::map<std::string, HostTensor>> outs(2);
  std::vector<int64_t> collectives(2);
  const auto errors = test::on_ranks(2, [&](int r, const std::shared_ptr<Communicator>& comm, std::string&) {
    CompileOptions o;
    o.communicator = comm;
    o.time_budget_seconds = 600;
    const Callable fn = compile(g, target.emulated(), o);
    collectives[static_cast<size_t>(r)] = fn.report().collectives;
    const auto* cpu_exe = dynamic_cast<const cpu::CpuExecutable*>(fn.state()->exe.get());
    if (!cpu_exe) throw std::runtime_error("the emulated target's program is not a CpuExecutable");
    // The rank holds only its block of each split weight, as the emulated target does.
    const auto& blocks = fn.state()->param_blocks;
    gpu_test::HostDeviceApi api("sm_90");
    const gpu::DeviceExecutable exe(api, cpu_exe->plan(),
                                    std::make_shared<const detail::GraphImpl>(*g.impl()), target,
                                    host_build(target), comm, blocks);
    if (exe.param_blocks().size() != blocks.size() || blocks.empty())
      throw std::runtime_error("the device runtime holds " + std::to_string(exe.param_blocks().size()) +
                               " of " + std::to_string(blocks.size()) + " weight blocks");
    std::map<std::string, HostTensor> fed;  // the blocks, and the rest whole
    size_t whole_bytes = 0, fed_bytes = 0;
    for (const auto& [name, t] : data) {
      const auto blk = blocks.find(name);
      fed.emplace(name, blk == blocks.end() ? t : dist::copy_block(t, blk->second));
      whole_bytes += t.nbytes();
      fed_bytes += fed.at(name).nbytes();
    }
    outs[static_cast<size_t>(r)] = exe.run({}, pointers(fed));
    // What went to the device: the blocks (and each collective's result), not the whole
    // weights.
    if (!(api.bytes_in < whole_bytes && fed_bytes < whole_bytes))
      throw std::runtime_error("copied " + std::to_string(api.bytes_in) + " bytes in; the blocks are " +
                               std::to_string(fed_bytes) + ", the whole weights " +
                               std::to_string(whole_bytes));
  });
  for (const auto& e : errors) {
    INFO(e);
    REQUIRE(e.empty());
  }
  CHECK(collectives[0] >= 1);
  double scale = 0;
  for (float v : want.at("y").to_f32()) scale = std::max(scale, static_cast<double>(std::abs(v)));
  for (const auto& out : outs) {
    CHECK(test::compare_outputs(out, want, 1e-5 * scale, 1e-4) <= 1.0);
    CHECK(std::memcmp(out.at("y").data(), outs[0].at("y").data(), out.at("y").nbytes()) == 0);
  }
}

TEST_CASE("the device runtime refuses collectives without a communicator", "[gpu][runtime][dist]") {
  const testsupport::ScopedEnv fast_link("LUMINAL_LINK_LATENCY_US", "0.5");
  Graph g;
  test::build_model(g, test::BlockConfig{4, 1024, 16, 8, 5632}, 1);
  const Target target = Target::parse("cuda:sm_90");
  std::string error;
  const auto errors = test::on_ranks(2, [&](int r, const std::shared_ptr<Communicator>& comm, std::string&) {
    CompileOptions o;
    o.communicator = comm;
    o.time_budget_seconds = 600;
    const Callable fn = compile(g, target.emulated(), o);
    const auto* cpu_exe = dynamic_cast<const cpu::CpuExecutable*>(fn.state()->exe.get());
    if (!cpu_exe) throw std::runtime_error("the emulated target's program is not a CpuExecutable");
    if (r != 0) return;
    gpu_test::HostDeviceApi api("sm_90");
    try {
      gpu::DeviceExecutable exe(api, cpu_exe->plan(), std::make_shared<const detail::GraphImpl>(*g.impl()),
                                target, host_build(target));
    } catch (const CompileError& e) {
      error = e.what();
    }
  });
  for (const auto& e : errors) {
    INFO(e);
    REQUIRE(e.empty());
  }
  CHECK(error.find("the program has collectives") != std::string::npos);
}
