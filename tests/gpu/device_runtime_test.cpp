// The device runtime (gpu::DeviceExecutable: memory plan, arena per binding of the dims,
// pinned staging, launch order, collectives between kernels) run on the host through
// HostDeviceApi: device memory is host memory and each launch calls the kernel's entry
// with the driver's launch ABI. What only a GPU can show -- the driver, NVRTC/hipRTC
// images, graph capture -- is tests/gpu/run.sh's; everything the runtime itself decides
// is checked here, against the reference interpreter.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/cpu/cpu_executable.hpp"
#include "backends/cpu/cpu_program.hpp"
#include "backends/cuda/cuda_module.hpp"
#include "backends/cuda/nvrtc.hpp"
#include "backends/gpu/device_collectives.hpp"
#include "backends/gpu/device_executable.hpp"
#include "backends/gpu/gpu_arch.hpp"
#include "backends/gpu/gpu_program.hpp"
#include "backends/gpu/gpu_renderer.hpp"
#include "backends/hip/hip_module.hpp"
#include "backends/reference/interpreter.hpp"
#include "compiler/compile_graph.hpp"
#include "compiler/translation_models.hpp"
#include "dist/param_block.hpp"
#include "dist/collectives.hpp"
#include "dist/on_ranks.hpp"
#include "graph/primitives.hpp"
#include "ir/tensor_lang.hpp"
#include "gpu/gpu_test_util.hpp"
#include "gpu/host_device_api.hpp"
#include "luminal/luminal.hpp"
#include "support/scoped_env.hpp"

using namespace luminal;

namespace {

using gpu_test::host_build;
using gpu_test::pointers;

// A local rank whose buffers count as device memory. With HostDeviceApi the device is this
// process, so the path a GPU runtime takes for NCCL -- the communicator on the arena, the
// collectives' local steps as device kernels -- runs here.
class DeviceBuffersComm final : public Communicator {
 public:
  explicit DeviceBuffersComm(std::shared_ptr<Communicator> c) : c_(std::move(c)) {}
  int rank() const override { return c_->rank(); }
  int size() const override { return c_->size(); }
  std::string name() const override { return "local, device buffers"; }
  void all_gather(const void* send, void* recv, std::size_t bytes) override {
    c_->all_gather(send, recv, bytes);
  }
  void all_to_all(const void* send, void* recv, std::size_t bytes) override {
    c_->all_to_all(send, recv, bytes);
  }
  void barrier() override { c_->barrier(); }
  bool device_buffers() const override { return true; }

 private:
  std::shared_ptr<Communicator> c_;
};

// One collective node as the search lowers it: one slot, the op over `world` ranks.
ir::KernelSpec collective_spec(detail::PrimOp op, DType dt, const std::vector<int64_t>& shape, int axis,
                               int64_t world, bool scatter_gather) {
  Graph g;
  Tensor x = g.input(ir::slot_name(0), std::vector<Dim>(shape.begin(), shape.end()), dt);
  g.output("out", detail::prim_collective(op, x, axis, world, "test", Loc::current()));
  ir::KernelSpec spec;
  spec.kind = ir::KernelKind::Collective;
  spec.body = g.impl();
  spec.slots = 1;
  if (scatter_gather) spec.launch = {ir::kAllReduceScatterGather};
  spec.finalize();
  return spec;
}

// `g` compiled for `target`'s emulated form (with `comm`: this rank's program, one search
// for every rank). Its plan is what the device runtime runs in these tests, so both run the
// same kernels (a second search cut short by its time budget -- sanitizers, a loaded host
// -- may extract another plan).
Callable emulated_program(const Graph& g, const Target& target,
                          std::shared_ptr<Communicator> comm = nullptr) {
  CompileOptions o;
  o.communicator = std::move(comm);
  if (o.communicator) o.time_budget_seconds = 600;  // every rank must extract the same plan
  return compile(g, target.emulated(), o);
}

// The plan's kernels that are library GEMM calls on a GPU (no launch of ours).
std::size_t library_kernels(const compiler::KernelPlan& plan) {
  std::size_t n = 0;
  for (const kernel::Kernel& k : cpu::lower_plan(plan, gpu::gpu_lower_options()).prog.kernels)
    n += k.kind == kernel::KernelKind::Gemm && k.gemm && k.gemm->impl == kernel::GemmImpl::Library ? 1 : 0;
  return n;
}

std::shared_ptr<const compiler::KernelPlan> plan_of(const Callable& fn) {
  const auto* cpu_exe = dynamic_cast<const cpu::CpuExecutable*>(fn.state()->exe.get());
  if (!cpu_exe) throw std::runtime_error("the emulated target's program is not a CpuExecutable");
  return cpu_exe->plan();
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
    Callable emulated = emulated_program(g, target);
    const auto plan = plan_of(emulated);
    gpu_test::HostDeviceApi api(gpu::arch_for(target).arch);
    const gpu::DeviceExecutable exe(api, plan, std::make_shared<const detail::GraphImpl>(*g.impl()), target,
                                    host_build(target));
    const auto got = exe.run({}, pointers(data));
    // The same kernels as the emulated target runs through the CPU executable's machinery:
    // the same bits.
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
    // Every kernel a launch, but the library GEMMs the search chose (BLAS calls).
    const size_t library = library_kernels(*plan);
    CHECK(api.launches + library == static_cast<size_t>(exe.kernels()));
    const size_t params = g.impl()->params.size();
    // One arena for the binding, one per param, the BLAS workspace when there are calls.
    const size_t workspace = api.blas_calls > 0 ? 1 : 0;
    CHECK(api.allocations == 1 + params + workspace);
    // A second call reuses the binding's memory and queues the same work.
    const auto again = exe.run({}, pointers(data));
    CHECK(api.launches + 2 * library == 2 * static_cast<size_t>(exe.kernels()));
    CHECK(api.allocations == 1 + params + workspace);
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
    CHECK(graphs.launches + 2 * library == 2 * static_cast<size_t>(captured.kernels()));
  }
}

TEST_CASE("the device runtime on the host: a split attention's counts are zero at every call",
          "[gpu][runtime][attention]") {
  // A decode step's attention over 700 keys: three ranges a row, the last of a row's range
  // blocks merging it and resetting the row's count (Attention::Split::counter). The runtime
  // zeroes the count buffer once, when it allocates the binding (device memory is not
  // zero: the host API fills it with a pattern); every later call, queued or replayed from
  // the captured graph, must find the counts the previous one left at zero.
  Graph g;
  test::build_decode_attention(g, 8, 2, 16);
  const DimBindings dims{{"past", 700}};
  for (const char* t : {"cuda:sm_90", "hip:gfx90a"}) {
    INFO(t);
    const Target target = Target::parse(t);
    const auto plan = compiler::compile_graph(*g.impl(), target, {}).plan;
    for (bool capture : {false, true}) {
      INFO("captured " << capture);
      gpu_test::HostDeviceApi api(gpu::arch_for(target).arch, capture);
      const gpu::DeviceExecutable exe(api, plan, std::make_shared<const detail::GraphImpl>(*g.impl()), target,
                                      host_build(target));
      for (uint64_t seed : {3, 4, 5}) {
        const auto data = test::random_inputs(*g.impl(), seed, dims);
        const auto want = detail::reference::run(*g.impl(), dims, pointers(data));
        CHECK(test::compare_outputs(exe.run(dims, pointers(data)), want) <= 1.0);
      }
    }
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
  CHECK(api.allocations == 3 + 2);  // n = 3, 17 and 0 (the second n = 3 reuses the first); w, b
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
    const Callable fn = emulated_program(g, target, comm);
    collectives[static_cast<size_t>(r)] = fn.report().collectives;
    const auto plan = plan_of(fn);
    // The rank holds only its block of each split weight, as the emulated target does.
    const auto& blocks = fn.state()->param_blocks;
    gpu_test::HostDeviceApi api("sm_90");
    const gpu::DeviceExecutable exe(api, plan, std::make_shared<const detail::GraphImpl>(*g.impl()), target,
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
    const Callable fn = emulated_program(g, target, comm);
    const auto plan = plan_of(fn);
    if (r != 0) return;
    gpu_test::HostDeviceApi api("sm_90");
    try {
      gpu::DeviceExecutable exe(api, plan, std::make_shared<const detail::GraphImpl>(*g.impl()), target,
                                host_build(target));
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

TEST_CASE("collectives on device memory: the local steps as device kernels give the host's bits",
          "[gpu][runtime][dist]") {
  // Every form run_collective has -- all_reduce gathering and scatter-gather (padded when
  // the ranks do not divide the elements; empty), all_gather along an outer and an inner
  // axis, reduce_scatter -- once with the local steps on the host and once as the device
  // kernels (lm_coll_*) through HostDeviceApi, at 2, 3 and 4 ranks: the same bits (signed
  // zeros, infinities, cancellation, i32 wrap-around included).
  using detail::PrimOp;
  for (int P : {2, 3, 4}) {
    INFO(P << " ranks");
    struct Case {
      PrimOp op;
      DType dt;
      std::vector<int64_t> shape;
      int axis;
      bool scatter_gather;
    };
    std::vector<Case> cases;
    for (DType dt : {DType::f32, DType::i32}) {
      for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{P - 1}, int64_t{7}, int64_t{64}})
        for (bool sg : {false, true}) cases.push_back({PrimOp::AllReduce, dt, {n}, 0, sg});
      cases.push_back({PrimOp::AllGather, dt, {3, 2}, 0, false});
      cases.push_back({PrimOp::AllGather, dt, {3, 2}, 1, false});
      cases.push_back({PrimOp::ReduceScatter, dt, {2, 2 * P, 3}, 1, false});
    }
    // Rows of 2-byte elements, 6 bytes long along the inner axis: the bytewise copy (the
    // 4-byte rows above take the word copy).
    for (int axis : {0, 1}) {
      cases.push_back({PrimOp::AllGather, DType::f16, {3, 3}, axis, false});
    }
    const auto errors =
        test::on_ranks(P, [&](int r, const std::shared_ptr<Communicator>& comm, std::string& err) {
          gpu_test::HostDeviceApi api("sm_90");
          gpu::GpuSource src;
          gpu::add_collective_kernels(src);
          void* module = api.load_module(
              gpu::emulation_source(src, kernel::Program{}, gpu::arch_for(Target::parse("cuda:sm_90"))));
          void* stream = api.create_stream();
          {
            gpu::DeviceLocalOps ops(api, module, stream);
            std::mt19937_64 rng(static_cast<uint64_t>(100 + r));
            for (size_t c = 0; c < cases.size(); ++c) {
              const Case& k = cases[c];
              const ir::KernelSpec spec = collective_spec(k.op, k.dt, k.shape, k.axis, P, k.scatter_gather);
              int64_t numel = 1;
              for (int64_t d : k.shape) numel *= d;
              const std::size_t bytes = static_cast<std::size_t>(numel) * dtype_size(k.dt);
              const std::size_t out_bytes = k.op == PrimOp::AllGather ? bytes * static_cast<std::size_t>(P)
                                            : k.op == PrimOp::ReduceScatter
                                                ? bytes / static_cast<std::size_t>(P)
                                                : bytes;
              std::vector<uint32_t> in(static_cast<std::size_t>(numel));
              for (auto& v : in) {
                const uint64_t u = rng();
                if (k.dt == DType::i32) {
                  v = static_cast<uint32_t>(u) | 0x40000000u;
                  continue;
                }
                float f = std::ldexp(1.0f + static_cast<float>(u % 1000) / 1000.0f,
                                     static_cast<int>(u >> 20) % 54 - 27);
                if (u & 1) f = -f;
                if (u % 13 == 0) f = (u & 2) ? 0.0f : -0.0f;
                if (u % 29 == 0) f = (u & 2) ? INFINITY : -INFINITY;
                std::memcpy(&v, &f, 4);
              }
              std::vector<std::byte> host(out_bytes), device(out_bytes);
              dist::run_collective(*comm, spec, k.shape, in.data(), host.data());
              const uint64_t dev_in = api.alloc(std::max<std::size_t>(bytes, 1)),
                             dev_out = api.alloc(std::max<std::size_t>(out_bytes, 1));
              if (bytes) std::memcpy(reinterpret_cast<void*>(dev_in), in.data(), bytes);
              dist::run_collective(*comm, spec, k.shape, reinterpret_cast<const void*>(dev_in),
                                   reinterpret_cast<void*>(dev_out), ops);
              api.synchronize(stream, "test");
              if (out_bytes) std::memcpy(device.data(), reinterpret_cast<const void*>(dev_out), out_bytes);
              api.free(dev_in);
              api.free(dev_out);
              if (host != device) err += "case " + std::to_string(c) + " differs; ";
            }
          }
          if (api.launches == 0) err += "no device kernel ran; ";
          api.destroy_stream(stream);
          api.unload_module(module);
        });
    for (const auto& e : errors) {
      INFO(e);
      CHECK(e.empty());
    }
  }
}

TEST_CASE("the device runtime with a device-memory communicator: collectives on the arena, same bits",
          "[gpu][runtime][dist]") {
  // NCCL's path (Communicator::device_buffers): the communicator gets arena addresses and
  // the local steps run as device kernels on the program's stream. Each rank runs its
  // plan both ways; the outputs are the same bits, and equal to the reference within
  // rounding.
  const testsupport::ScopedEnv fast_link("LUMINAL_LINK_LATENCY_US", "0.5");
  Graph g;
  test::build_model(g, test::BlockConfig{4, 1024, 16, 8, 5632}, 1);
  const auto data = test::random_inputs(*g.impl(), 17);
  const auto want = detail::reference::run(*g.impl(), {}, pointers(data));
  const Target target = Target::parse("cuda:sm_90");
  std::vector<std::map<std::string, HostTensor>> staged(2), on_device(2);
  std::vector<std::size_t> device_launches(2), kernels(2);
  const auto errors = test::on_ranks(2, [&](int r, const std::shared_ptr<Communicator>& comm, std::string&) {
    const Callable fn = emulated_program(g, target, comm);
    const auto plan = plan_of(fn);
    const auto graph = std::make_shared<const detail::GraphImpl>(*g.impl());
    const auto i = static_cast<std::size_t>(r);
    {
      gpu_test::HostDeviceApi api("sm_90");
      const gpu::DeviceExecutable exe(api, plan, graph, target, host_build(target), comm);
      staged[i] = exe.run({}, pointers(data));
    }
    gpu_test::HostDeviceApi api("sm_90");
    const gpu::DeviceExecutable exe(api, plan, graph, target, host_build(target),
                                    std::make_shared<DeviceBuffersComm>(comm));
    on_device[i] = exe.run({}, pointers(data));
    device_launches[i] = api.launches + library_kernels(*plan);
    kernels[i] = static_cast<std::size_t>(exe.kernels());
  });
  for (const auto& e : errors) {
    INFO(e);
    REQUIRE(e.empty());
  }
  double scale = 0;
  for (float v : want.at("y").to_f32()) scale = std::max(scale, static_cast<double>(std::abs(v)));
  for (int r = 0; r < 2; ++r) {
    const auto i = static_cast<std::size_t>(r);
    CHECK(std::memcmp(on_device[i].at("y").data(), staged[i].at("y").data(), staged[i].at("y").nbytes()) ==
          0);
    CHECK(test::compare_outputs(on_device[i], want, 1e-5 * scale, 1e-4) <= 1.0);
    // The collectives' sums ran as device kernels (library GEMMs counted as launches).
    CHECK(device_launches[i] > kernels[i]);
  }
}

TEST_CASE("the collectives' device kernels compile with NVRTC and hipRTC", "[gpu][runtime][nvrtc][hiprtc]") {
  // What the emulator ran above, compiled for the devices as the backends compile a
  // program with collectives (its source plus the lm_coll_* kernels).
  for (const char* t : {"cuda:sm_90", "cuda:sm_80", "hip:gfx90a", "hip:gfx1030"}) {
    INFO(t);
    const Target target = Target::parse(t);
    gpu::GpuSource src = gpu::render_gpu(kernel::Program{}, gpu::arch_for(target), {});
    gpu::add_collective_kernels(src);
    std::string why;
    std::vector<KernelResources> res;
    if (target.kind() == Target::Kind::cuda) {
      if (!gpu_test::have_nvrtc()) continue;
      res = cuda::compile_module(src.device_source(), target.arch(), true).resources;
    } else {
      if (!hip::hiprtc_available(&why)) {
        WARN("hipRTC is not available here (" << why << "); skipped");
        continue;
      }
      res = hip::compile_module(src.device_source(), target.arch()).resources;
    }
    std::set<std::string> names;
    for (const auto& r : res) {
      names.insert(r.name);
      CHECK(r.spill_bytes == 0);
    }
    CHECK(names ==
          std::set<std::string>{"lm_coll_copy", "lm_coll_copy4", "lm_coll_sum_f32", "lm_coll_sum_i32"});
  }
}
