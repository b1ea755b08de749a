// The device runtime's calls (gpu::DeviceExecutable) through HostDeviceApi, whose device
// is this process: params kept on the device across calls, and run_device -- inputs and
// outputs in the caller's device memory, the program ordered on the caller's stream --
// checked against the reference interpreter, with what the runtime queued counted; and
// run_device on a real CUDA device where there is one (tests/gpu/run.sh).
#include <catch2/catch.hpp>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/cuda_driver.hpp"
#include "backends/gpu/device_executable.hpp"
#include "backends/reference/interpreter.hpp"
#include "compiler/compile_graph.hpp"
#include "compiler/translation_models.hpp"
#include "gpu/host_device_api.hpp"
#include "luminal/luminal.hpp"

using namespace luminal;
using gpu_test::host_build;
using gpu_test::pointers;

namespace {

// Token ids -> embedding -> linear -> gelu, output twice and with the ids passed through:
// a gather by caller ids, params, a second name for one value and a pass-through output.
Graph embed_program() {
  Graph g;
  const Dim n = Dim::variable("n", 0, 32);
  Tensor ids = g.input("ids", {n}, i32);
  Tensor y =
      gelu(linear(embedding(g.param("emb", {32, 48}), ids), g.param("w", {40, 48}), g.param("b", {40})));
  g.output("y", y);
  g.output("y_again", y);
  g.output("ids_out", ids);
  return g;
}

detail::ParamMap handles(const std::map<std::string, HostTensor>& data, const Graph& g) {
  detail::ParamMap p;
  for (uint32_t id : g.impl()->params) {
    const std::string& name = g.impl()->nodes[id].name;
    p.emplace(name, std::make_shared<const HostTensor>(data.at(name)));
  }
  return p;
}

std::map<std::string, const HostTensor*> call_tensors(const std::map<std::string, HostTensor>& inputs,
                                                      const detail::ParamMap& params) {
  auto t = pointers(inputs);
  for (const auto& [name, h] : params) t[name] = h.get();
  return t;
}

// Device memory of HostDeviceApi (host memory) holding a copy of `t`.
struct DeviceCopy {
  std::vector<std::byte> bytes;
  DeviceTensor tensor;
  explicit DeviceCopy(const HostTensor& t) : bytes(t.data(), t.data() + t.nbytes()) {
    tensor = {t.dtype(), t.shape(), reinterpret_cast<std::uint64_t>(bytes.data())};
  }
  DeviceCopy(DType dt, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    bytes.assign(static_cast<size_t>(n) * dtype_size(dt), std::byte{0x7f});  // not the answer
    tensor = {dt, std::move(shape), reinterpret_cast<std::uint64_t>(bytes.data())};
  }
  HostTensor host() const {
    return HostTensor::from_bytes(tensor.dtype, tensor.shape, std::span<const std::byte>(bytes));
  }
};

}  // namespace

TEST_CASE("params stay on the device: uploaded by the first call after a bind", "[gpu][runtime]") {
  Graph g = embed_program();
  const Target target = Target::parse("cuda:sm_90");
  const auto plan = compiler::compile_graph(*g.impl(), target, {}).plan;
  const auto graph = std::make_shared<const detail::GraphImpl>(*g.impl());
  const DimBindings dims{{"n", 5}};
  const auto data = test::random_inputs(*g.impl(), 3, dims);
  const std::map<std::string, HostTensor> inputs{{"ids", data.at("ids")}};
  size_t param_bytes = 0;
  for (uint32_t id : g.impl()->params) param_bytes += data.at(g.impl()->nodes[id].name).nbytes();
  const size_t input_bytes = data.at("ids").nbytes();
  for (bool capture : {false, true}) {
    INFO((capture ? "captured" : "queued"));
    gpu_test::HostDeviceApi api("sm_90", capture);
    const gpu::DeviceExecutable exe(api, plan, graph, target, host_build(target));
    detail::ParamMap params = handles(data, g);
    const auto want = detail::reference::run(*g.impl(), dims, pointers(data));
    CHECK(test::compare_outputs(exe.run_with_params(dims, call_tensors(inputs, params), params), want) <=
          1.0);
    CHECK(api.bytes_in == param_bytes + input_bytes);
    CHECK(test::compare_outputs(exe.run_with_params(dims, call_tensors(inputs, params), params), want) <=
          1.0);
    CHECK(api.bytes_in == param_bytes + 2 * input_bytes);  // the params stayed
    // A bind replaces one handle: only that param goes up again, and the next results use it.
    auto rebound = data;
    rebound.insert_or_assign("w", test::random_inputs(*g.impl(), 4, dims).at("w"));
    params["w"] = std::make_shared<const HostTensor>(rebound.at("w"));
    const auto want2 = detail::reference::run(*g.impl(), dims, pointers(rebound));
    CHECK(test::compare_outputs(exe.run_with_params(dims, call_tensors(inputs, params), params), want2) <=
          1.0);
    CHECK(api.bytes_in == param_bytes + 3 * input_bytes + rebound.at("w").nbytes());
    // Without handles (run()), every call uploads every param.
    CHECK(test::compare_outputs(exe.run(dims, pointers(rebound)), want2) <= 1.0);
    CHECK(api.bytes_in == 2 * param_bytes + 4 * input_bytes + rebound.at("w").nbytes());
    CHECK(api.graph_launches == (capture ? 4u : 0u));
  }
}

TEST_CASE("run_device: caller memory in and out, the program joined to the caller's stream",
          "[gpu][runtime]") {
  Graph g = embed_program();
  const Target target = Target::parse("cuda:sm_90");
  const auto plan = compiler::compile_graph(*g.impl(), target, {}).plan;
  const auto graph = std::make_shared<const detail::GraphImpl>(*g.impl());
  for (bool capture : {false, true}) {
    INFO((capture ? "captured" : "queued"));
    gpu_test::HostDeviceApi api("sm_90", capture);
    const gpu::DeviceExecutable exe(api, plan, graph, target, host_build(target));
    int caller_stream_storage = 0;
    void* caller = &caller_stream_storage;
    const DimBindings dims{{"n", 7}};
    const auto data = test::random_inputs(*g.impl(), 5, dims);
    const detail::ParamMap params = handles(data, g);
    const auto want = detail::reference::run(*g.impl(), dims, pointers(data));
    DeviceCopy ids(data.at("ids"));
    // Two sets of output buffers, used in turn, as a server's double buffering does.
    std::vector<std::map<std::string, DeviceCopy>> outs(2);
    for (auto& o : outs) {
      o.emplace("y", DeviceCopy(f32, {7, 40}));
      o.emplace("y_again", DeviceCopy(f32, {7, 40}));
      o.emplace("ids_out", DeviceCopy(i32, {7}));
    }
    size_t bytes_in_after_first = 0;
    for (int call = 0; call < 4; ++call) {
      INFO("call " << call);
      auto& o = outs[static_cast<size_t>(call % 2)];
      std::map<std::string, DeviceTensor> out_tensors;
      for (auto& [name, d] : o) out_tensors.emplace(name, d.tensor);
      api.recorded_on.clear();
      api.waited_on.clear();
      exe.run_device(dims, {{"ids", ids.tensor}}, params, out_tensors, caller);
      std::map<std::string, HostTensor> got;
      for (auto& [name, d] : o) got.emplace(name, d.host());
      CHECK(test::compare_outputs(got, want) <= 1.0);
      // The executable's stream waited for the caller's, and the caller's for the program.
      REQUIRE(api.recorded_on.size() == 2);
      REQUIRE(api.waited_on.size() == 2);
      CHECK(api.recorded_on[0] == caller);
      CHECK(api.waited_on[1] == caller);
      CHECK(api.recorded_on[1] == api.waited_on[0]);
      CHECK(api.waited_on[0] != caller);
      if (call == 0) bytes_in_after_first = api.bytes_in;
    }
    // Nothing went through the host but the params (once) and the ids (checked on the
    // host once a call: the program gathers by them).
    CHECK(bytes_in_after_first == [&] {
      size_t b = 0;
      for (const auto& [name, h] : params) b += h->nbytes();
      return b;
    }());
    CHECK(api.bytes_in == bytes_in_after_first);
    CHECK(api.bytes_out == 4 * data.at("ids").nbytes());
    // The pass-through and the second name: device-to-device copies.
    CHECK(api.bytes_device == 4 * (data.at("ids").nbytes() + 7 * 40 * 4));
    if (capture) {
      CHECK(api.captures == 2);  // one graph per set of output addresses, then replays
      CHECK(api.graph_launches == 4);
    }
    // An id out of range: refused before anything runs.
    DeviceCopy bad(HostTensor::from(std::vector<int32_t>{1, 2, 32, 0, 0, 0, 0}, {7}));
    std::map<std::string, DeviceTensor> out_tensors;
    for (auto& [name, d] : outs[0]) out_tensors.emplace(name, d.tensor);
    const size_t launches = api.launches + api.graph_launches;
    CHECK_THROWS_WITH(exe.run_device(dims, {{"ids", bad.tensor}}, params, out_tensors, caller),
                      Catch::Contains("32"));
    CHECK(api.launches + api.graph_launches == launches);
  }
}

TEST_CASE("Callable::run_device on an emulated target, and its bad calls", "[gpu][runtime]") {
  Graph g = embed_program();
  Callable fn = compile(g, Target::parse("cuda:sm_90+emu"));
  const DimBindings dims{{"n", 4}};
  const auto data = test::random_inputs(*g.impl(), 9, dims);
  for (const auto& name : fn.param_names()) fn.bind(name, data.at(name));
  const auto want = fn({{"ids", data.at("ids")}});
  DeviceCopy ids(data.at("ids"));
  std::map<std::string, DeviceCopy> o;
  o.emplace("y", DeviceCopy(f32, {4, 40}));
  o.emplace("y_again", DeviceCopy(f32, {4, 40}));
  o.emplace("ids_out", DeviceCopy(i32, {4}));
  auto tensors = [&] {
    std::map<std::string, DeviceTensor> t;
    for (auto& [name, d] : o) t.emplace(name, d.tensor);
    return t;
  };
  const Status ok = fn.run_device({{"ids", ids.tensor}}, tensors());
  INFO(ok.message);
  REQUIRE(ok);
  for (const auto& [name, d] : o)
    CHECK(std::memcmp(d.bytes.data(), want.at(name).data(), d.bytes.size()) == 0);

  auto fails = [&](const std::map<std::string, DeviceTensor>& in,
                   const std::map<std::string, DeviceTensor>& out, const std::string& why) {
    const Status s = fn.run_device(in, out);
    INFO(s.message);
    CHECK(!s);
    CHECK(s.message.find(why) != std::string::npos);
  };
  auto missing = tensors();
  missing.erase("y_again");
  fails({{"ids", ids.tensor}}, missing, "missing output 'y_again'");
  auto wrong = tensors();
  wrong.at("y").shape = {4, 41};
  fails({{"ids", ids.tensor}}, wrong, "output 'y' is f32 (4, 41), the call makes f32 (4, 40)");
  auto overlapping = tensors();
  overlapping.at("ids_out").address = ids.tensor.address + 4;
  fails({{"ids", ids.tensor}}, overlapping, "output 'ids_out' overlaps input 'ids'");
  auto shared = tensors();
  shared.at("y_again").address = shared.at("y").address;
  fails({{"ids", ids.tensor}}, shared, "share memory");
  DeviceTensor null_ids = ids.tensor;
  null_ids.address = 0;
  fails({{"ids", null_ids}}, tensors(), "null address");
  fails({}, tensors(), "missing input 'ids'");
  // The callable is still usable after bad calls.
  CHECK(fn.run_device({{"ids", ids.tensor}}, tensors()));

  const Callable cpu = compile(g, Target::cpu());
  const Status on_cpu = cpu.run_device({{"ids", ids.tensor}}, tensors());
  CHECK(!on_cpu);
  CHECK(on_cpu.message.find("has no device memory") != std::string::npos);
}

TEST_CASE("run_device on the CUDA device, where there is one", "[gpu][device]") {
  // tests/gpu/run.sh's: device buffers from the driver, a stream of the test's own, the
  // program queued on it twice (the params uploaded by the first call), the outputs read
  // back after the stream's work and compared with the host call's.
  const Target t = Target::cuda();
  if (!t.is_available()) {
    WARN("no CUDA device here (" << t.unavailable_reason() << "); skipped");
    return;
  }
  std::string why;
  const cuda::Driver* d = cuda::Driver::get(&why);
  REQUIRE(d);
  Graph g = embed_program();
  Callable fn = compile(g, t);
  const DimBindings dims{{"n", 6}};
  const auto data = test::random_inputs(*g.impl(), 21, dims);
  for (const auto& name : fn.param_names()) fn.bind(name, data.at(name));
  const auto want = fn({{"ids", data.at("ids")}});
  d->make_current(0);
  void* stream = d->create_stream();
  std::map<std::string, std::uint64_t> buffers;
  auto device = [&](const std::string& name, DType dt, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t x : shape) n *= x;
    const std::uint64_t a = d->alloc(static_cast<size_t>(n) * dtype_size(dt));
    buffers[name] = a;
    return DeviceTensor{dt, std::move(shape), a};
  };
  const DeviceTensor ids = device("ids", i32, {6});
  d->copy_in(ids.address, data.at("ids").data(), data.at("ids").nbytes(), stream);
  std::map<std::string, DeviceTensor> outs;
  for (const auto& [name, w] : want) outs.emplace(name, device(name, w.dtype(), w.shape()));
  for (int call = 0; call < 2; ++call) {
    const Status s = fn.run_device({{"ids", ids}}, outs, stream);
    INFO(s.message);
    REQUIRE(s);
  }
  std::map<std::string, std::vector<std::byte>> got;
  for (const auto& [name, w] : want) {
    got[name].resize(w.nbytes());
    d->copy_out(got[name].data(), outs.at(name).address, w.nbytes(), stream);
  }
  d->synchronize(stream, "the test's stream");
  for (const auto& [name, w] : want) {
    INFO(name);
    CHECK(std::memcmp(got.at(name).data(), w.data(), w.nbytes()) == 0);
  }
  for (const auto& [name, a] : buffers) d->free(a);
  d->destroy_stream(stream);
}
