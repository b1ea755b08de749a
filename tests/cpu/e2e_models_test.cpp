// End to end on the CPU target: translation validation of an MLP and a Llama-style
// decoder block against the interpreter (generated C, no kernel interpreted), dynamic dims
// bound from the inputs, many threads calling one Callable, and the in-place hot path.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <new>
#include <thread>
#include <vector>

#include "backends/cpu/cpu_executable.hpp"
#include "compiler/translation_models.hpp"
#include "runtime/executable.hpp"
#include "luminal/luminal.hpp"

namespace lm = luminal;
using lm::Tensor;

// Counts heap allocations while enabled: the steady-state hot path must make none. Every
// allocation of the process is seen, C's as well as C++'s (the generated code's GEMM
// packing buffers came from aligned_alloc): with AddressSanitizer through its allocator
// hooks, otherwise by replacing the C allocation functions of this executable, which
// the library and the JIT-compiled code bind to.
namespace {
std::atomic<bool> g_counting{false};
std::atomic<long> g_allocations{0};
void count_allocation() {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace
#if defined(__SANITIZE_ADDRESS__)
#define LM_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LM_TEST_ASAN 1
#endif
#endif
#ifdef LM_TEST_ASAN
// Declared here rather than through <sanitizer/allocator_interface.h>: g++ 12 on Debian
// ships the runtime (libasan) but not that header (it comes with clang's runtime package).
extern "C" int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void*, size_t),
                                                         void (*free_hook)(const volatile void*));
namespace {
const int g_hooks = __sanitizer_install_malloc_and_free_hooks(
    [](const volatile void*, size_t) { count_allocation(); }, [](const volatile void*) {});
}  // namespace
#else
#include <cerrno>
extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void __libc_free(void*);
void* malloc(size_t n) {
  count_allocation();
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t m) {
  count_allocation();
  return __libc_calloc(n, m);
}
void* realloc(void* p, size_t n) {
  count_allocation();
  return __libc_realloc(p, n);
}
void* aligned_alloc(size_t a, size_t n) {
  count_allocation();
  return __libc_memalign(a, n);
}
void* memalign(size_t a, size_t n) {
  count_allocation();
  return __libc_memalign(a, n);
}
int posix_memalign(void** out, size_t a, size_t n) {
  count_allocation();
  void* p = __libc_memalign(a, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
void free(void* p) { __libc_free(p); }
}
#endif
// Every replaceable form goes through malloc/free, so no pairing of forms can mismatch
// (std::stable_sort's temporary buffer uses the nothrow form and frees with the sized one).
void* operator new(std::size_t n) {
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return std::malloc(n ? n : 1); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return std::malloc(n ? n : 1); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
// GCC pairs these free() calls with the operator new above and warns; they are its twin.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

namespace {

std::map<std::string, lm::HostTensor> interpret(const lm::Graph& g,
                                                const std::map<std::string, lm::HostTensor>& in,
                                                const lm::DimBindings& dims = {}) {
  std::map<std::string, const lm::HostTensor*> ptrs;
  for (const auto& [k, t] : in) ptrs.emplace(k, &t);
  return lm::detail::reference::run(*g.impl(), dims, ptrs);
}

lm::Callable compile_bound(const lm::Graph& g, const std::map<std::string, lm::HostTensor>& in) {
  lm::Callable f = lm::compile(g, lm::Target::cpu());
  for (const auto& p : f.param_names()) f.bind(p, in.at(p));
  return f;
}

std::map<std::string, lm::HostTensor> inputs_only(const lm::Callable& f,
                                                  const std::map<std::string, lm::HostTensor>& all) {
  std::map<std::string, lm::HostTensor> out;
  for (const auto& n : f.input_names()) out.emplace(n, all.at(n));
  return out;
}

}  // namespace

namespace {
// Heap allocations made by 20 steady-state Callable::run calls (each must succeed).
long allocations_of_20_runs(const lm::Callable& f, const std::map<std::string, lm::HostTensor>& in,
                            std::map<std::string, lm::HostTensor>& out) {
  bool ok = true;
  g_allocations = 0;
  g_counting = true;
  for (int i = 0; i < 20; ++i) ok = f.run(in, out).ok && ok;
  g_counting = false;
  CHECK(ok);
  return g_allocations.load();
}
}  // namespace

TEST_CASE("cpu: MLP linear->gelu->linear matches the interpreter in generated code", "[cpu][e2e]") {
  lm::Graph g;
  lm::test::build_mlp(g, 4, 32, 64);
  auto all = lm::test::random_inputs(*g.impl(), 3);
  lm::Callable f = compile_bound(g, all);
  const auto& rep = f.report();
  INFO(rep.to_string());
  CHECK(rep.interpreted_kernels == 0);
  CHECK(rep.generated_kernels >= 1);
  CHECK(rep.arena_bytes <= rep.intermediate_bytes);
  CHECK(lm::test::compare_outputs(f(inputs_only(f, all)), interpret(g, all)) <= 1.0);
}

TEST_CASE("cpu: Llama-style decoder block matches the interpreter in generated code", "[cpu][e2e]") {
  lm::Graph g;
  lm::test::BlockConfig c;
  lm::test::build_model(g, c, 1);
  auto all = lm::test::random_inputs(*g.impl(), 5);
  lm::Callable f = compile_bound(g, all);
  const auto& rep = f.report();
  INFO(rep.to_string());
  CHECK(rep.interpreted_kernels == 0);
  CHECK(rep.arena_bytes > 0);
  CHECK(rep.arena_bytes <= rep.intermediate_bytes);
  std::printf(
      "decoder block (cpu): %lld plan kernels, %lld generated C kernels, arena %lld bytes for %lld bytes of "
      "intermediates\n",
      static_cast<long long>(rep.kernels), static_cast<long long>(rep.generated_kernels),
      static_cast<long long>(rep.arena_bytes), static_cast<long long>(rep.intermediate_bytes));
  CHECK(lm::test::compare_outputs(f(inputs_only(f, all)), interpret(g, all)) <= 1.0);
}

TEST_CASE("cpu: dynamic dims are bound from the inputs", "[cpu][e2e][dynamic]") {
  lm::Graph g;
  lm::Dim B = g.dim("B", 1, 64);
  Tensor x = g.input("x", {B, 16});
  Tensor w = g.param("w", {24, 16});
  Tensor y = lm::softmax(lm::linear(x, w), -1);
  g.output("y", lm::concat({y, lm::pad(x, {{0, 0}, {0, 8}}, 1.f)}, 1));
  g.output("s", lm::sum(x, {0}));
  lm::Callable f = lm::compile(g, lm::Target::cpu());
  CHECK(f.report().interpreted_kernels == 0);
  for (int64_t b : {1, 3, 17, 64}) {
    auto all = lm::test::random_inputs(*g.impl(), static_cast<uint64_t>(b), {{"B", b}});
    f.bind("w", all.at("w"));
    auto got = f(inputs_only(f, all));
    REQUIRE(got.at("y").shape() == std::vector<int64_t>{b, 48});
    CHECK(lm::test::compare_outputs(got, interpret(g, all, {{"B", b}})) <= 1.0);
  }
}

TEST_CASE("cpu: one Callable called from many threads at once", "[cpu][e2e][threads]") {
  lm::Graph g;
  lm::test::build_mlp(g, 8, 32, 64);
  auto all = lm::test::random_inputs(*g.impl(), 11);
  lm::Callable f = compile_bound(g, all);
  // per-thread inputs and their expected outputs
  constexpr int kThreads = 6, kCalls = 25;
  std::vector<std::map<std::string, lm::HostTensor>> in(kThreads), want(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    auto r = lm::test::random_inputs(*g.impl(), 100 + static_cast<uint64_t>(t));
    in[static_cast<size_t>(t)] = {{"x", r.at("x")}};
    auto full = all;
    full.insert_or_assign("x", r.at("x"));
    want[static_cast<size_t>(t)] = interpret(g, full);
  }
  std::atomic<int> bad{0};
  std::vector<std::thread> th;
  for (int t = 0; t < kThreads; ++t)
    th.emplace_back([&, t] {
      lm::Callable mine = f;  // cheap copy, shares the program
      std::map<std::string, lm::HostTensor> out;
      for (int i = 0; i < kCalls; ++i) {
        if (!mine.run(in[static_cast<size_t>(t)], out))
          ++bad;
        else if (lm::test::compare_outputs(out, want[static_cast<size_t>(t)]) > 1.0)
          ++bad;
      }
    });
  for (auto& x : th) x.join();
  CHECK(bad.load() == 0);
}

TEST_CASE("cpu: run() writes caller-provided outputs in place", "[cpu][e2e][hot_path]") {
  lm::Graph g;
  lm::test::build_mlp(g, 2, 16, 32);
  auto all = lm::test::random_inputs(*g.impl(), 21);
  lm::Callable f = compile_bound(g, all);
  std::vector<float> x = all.at("x").to_f32();
  std::vector<float> y(2 * 16, -1.f);
  std::map<std::string, lm::HostTensor> in{
      {"x", lm::HostTensor::view(lm::f32, {2, 16}, static_cast<const void*>(x.data()))}};
  std::map<std::string, lm::HostTensor> out{
      {"y", lm::HostTensor::view(lm::f32, {2, 16}, static_cast<void*>(y.data()))}};
  for (int i = 0; i < 3; ++i) REQUIRE(f.run(in, out));
  CHECK(out.at("y").data() == reinterpret_cast<const std::byte*>(y.data()));
  auto want = interpret(g, all).at("y").to_f32();
  for (size_t i = 0; i < y.size(); ++i) CHECK(y[i] == Approx(want[i]).margin(1e-4));
  // a bad call is a Status, not an exception
  std::map<std::string, lm::HostTensor> bad{{"x", lm::HostTensor(lm::f32, {3, 16})}};
  lm::Status s = f.run(bad, out);
  CHECK_FALSE(s.ok);
  CHECK(!s.message.empty());
}

TEST_CASE("cpu: the steady-state hot path allocates nothing", "[cpu][e2e][hot_path]") {
  lm::Graph g;
  lm::Dim B = g.dim("B", 1, 16);
  Tensor x = g.input("x", {B, 32});
  g.output("y", lm::softmax(lm::gelu(lm::linear(x, g.param("w", {48, 32}), g.param("b", {48}))), -1));
  lm::Callable f = lm::compile(g, lm::Target::cpu());
  auto all = lm::test::random_inputs(*g.impl(), 4, {{"B", 3}});
  f.bind("w", all.at("w"));
  f.bind("b", all.at("b"));
  std::vector<float> xs = all.at("x").to_f32(), ys(3 * 48);
  std::map<std::string, lm::HostTensor> in{
      {"x", lm::HostTensor::view(lm::f32, {3, 32}, static_cast<const void*>(xs.data()))}};
  std::map<std::string, lm::HostTensor> out{
      {"y", lm::HostTensor::view(lm::f32, {3, 48}, static_cast<void*>(ys.data()))}};
  REQUIRE(f.run(in, out));  // warm: arena, layout for B = 3
  CHECK(allocations_of_20_runs(f, in, out) == 0);
  auto want = interpret(g, all, {{"B", 3}}).at("y").to_f32();
  for (size_t i = 0; i < ys.size(); ++i) CHECK(ys[i] == Approx(want[i]).margin(1e-5));
}

TEST_CASE("cpu: the allocation counter sees allocations made by generated code", "[cpu][e2e][hot_path]") {
  // The counter the hot-path tests rely on must see C allocations in JIT-compiled code
  // (where the GEMM packing buffers used to come from), not only operator new.
  auto lib = lm::cpu::Jit::global().compile(
      "#include <stdlib.h>\nvoid* lm_test_alloc(void) { return aligned_alloc(64, 4096); }\n");
  auto alloc = lib->function<void* (*)()>("lm_test_alloc");
  g_allocations = 0;
  g_counting = true;
  void* p = alloc();
  g_counting = false;
  std::free(p);
  CHECK(g_allocations.load() >= 1);
}

TEST_CASE("cpu: a prefill-sized call allocates nothing either (GEMM packing from the arena)",
          "[cpu][e2e][hot_path]") {
  // 64 tokens through a decoder block: the projections are packed GEMMs (M = 64 > 4),
  // large enough to run on the team, so every thread packs into its scratch in the arena.
  lm::Graph g;
  const lm::test::BlockConfig c{64, 128, 4, 2, 192};
  lm::test::build_model(g, c, 1);
  auto all = lm::test::random_inputs(*g.impl(), 8);
  lm::Callable f = compile_bound(g, all);
  REQUIRE(f.report().interpreted_kernels == 0);
  std::map<std::string, lm::HostTensor> in = inputs_only(f, all), out;
  REQUIRE(f.run(in, out));  // warm: arena, layout, outputs, the pool's threads
  CHECK(allocations_of_20_runs(f, in, out) == 0);
  // sums of 128-192 products in another order than the interpreter's
  CHECK(lm::test::compare_outputs(out, interpret(g, all), 1e-3, 1e-3) <= 1.0);
}

TEST_CASE("cpu: neither the library nor generated code uses an OpenMP runtime", "[cpu][e2e]") {
  lm::Graph g;
  lm::test::build_mlp(g, 32, 64, 256);  // large enough for parallel loops and GEMM tasks
  auto all = lm::test::random_inputs(*g.impl(), 9);
  lm::Callable f = compile_bound(g, all);
  CHECK(lm::test::compare_outputs(f(inputs_only(f, all)), interpret(g, all)) <= 1.0);
  std::ifstream maps("/proc/self/maps");
  std::stringstream ms;
  ms << maps.rdbuf();
  CHECK(ms.str().find("libgomp") == std::string::npos);
  CHECK(ms.str().find("libomp") == std::string::npos);
  const auto* exe = dynamic_cast<const lm::cpu::CpuExecutable*>(f.state()->exe.get());
  REQUIRE(exe);
  std::ifstream so(exe->library_path(), std::ios::binary);
  std::stringstream bytes;
  bytes << so.rdbuf();
  REQUIRE(bytes.str().size() > 1000);
  CHECK(bytes.str().find("GOMP_") == std::string::npos);
  CHECK(bytes.str().find("omp_get") == std::string::npos);
}

TEST_CASE("cpu: an embedding lookup is generated code with checked ids and no allocation",
          "[cpu][e2e][hot_path][gather]") {
  lm::Graph g;
  lm::Dim B = g.dim("B", 1, 16);
  Tensor ids = g.input("ids", {B}, lm::i32);
  g.output("y", lm::embedding(g.param("table", {50, 24}), ids) * 2.f + 1.f);
  lm::Callable f = lm::compile(g, lm::Target::cpu());
  INFO(f.report().to_string());
  CHECK(f.report().interpreted_kernels == 0);
  auto all = lm::test::random_inputs(*g.impl(), 5, {{"B", 4}});
  f.bind("table", all.at("table"));
  std::vector<int32_t> good{0, 49, 7, 7}, bad{3, 1, 50, 2};
  std::vector<float> ys(4 * 24);
  std::map<std::string, lm::HostTensor> in{
      {"ids", lm::HostTensor::view(lm::i32, {4}, static_cast<const void*>(good.data()))}};
  std::map<std::string, lm::HostTensor> out{
      {"y", lm::HostTensor::view(lm::f32, {4, 24}, static_cast<void*>(ys.data()))}};
  REQUIRE(f.run(in, out));
  CHECK(allocations_of_20_runs(f, in, out) == 0);
  const std::vector<float> table = all.at("table").to_f32();
  for (size_t i = 0; i < good.size(); ++i)
    for (size_t j = 0; j < 24; ++j)
      CHECK(ys[i * 24 + j] == table[static_cast<size_t>(good[i]) * 24 + j] * 2.f + 1.f);

  // An id outside the table: the same RuntimeError as the interpreter, never a wild read,
  // and the Callable keeps answering.
  const std::string want = "[embedding] id 50 at position 2 is outside [0, 50)";
  std::map<std::string, lm::HostTensor> in_bad{
      {"ids", lm::HostTensor::view(lm::i32, {4}, static_cast<const void*>(bad.data()))}};
  lm::Status st = f.run(in_bad, out);
  CHECK_FALSE(st.ok);
  CHECK_THAT(st.message, Catch::Contains(want));
  for (lm::Target t : {lm::Target::cpu(), lm::Target::reference()}) {
    lm::Callable h = lm::compile(g, t);
    h.bind("table", all.at("table"));
    INFO(t.to_string());
    try {
      h(std::map<std::string, lm::HostTensor>{{"ids", lm::HostTensor::from(bad, {4})}});
      FAIL("a bad id was accepted");
    } catch (const lm::RuntimeError& e) {
      CHECK_THAT(e.what(), Catch::Contains(want));
    }
  }
  REQUIRE(f.run(in, out));
  CHECK(ys[24] == table[49 * 24] * 2.f + 1.f);
}

TEST_CASE("cpu: many dim bindings from several threads: bounded layouts, right answers",
          "[cpu][e2e][dynamic]") {
  // More distinct bindings than the executable keeps layouts for (256), from two threads
  // at once: evicting a layout must never disturb a call that is using it.
  lm::Graph g;
  lm::Dim B = g.dim("B", 1, 400);
  Tensor x = g.input("x", {B, 8});
  g.output("y", lm::softmax(x * 2.f, -1) + lm::sum(x, {0}, true));
  lm::Callable f = lm::compile(g, lm::Target::cpu());
  auto check_batch = [&](int64_t b) {
    auto all = lm::test::random_inputs(*g.impl(), static_cast<uint64_t>(b), {{"B", b}});
    return lm::test::compare_outputs(f(all), interpret(g, all, {{"B", b}})) <= 1.0;
  };
  std::atomic<int> bad{0};
  auto sweep = [&](int64_t from, int64_t step) {
    for (int64_t b = from; b >= 1 && b <= 300; b += step)
      if (!check_batch(b)) ++bad;
  };
  std::thread up(sweep, 1, 1), down(sweep, 300, -1);
  up.join();
  down.join();
  CHECK(bad.load() == 0);
  CHECK(check_batch(1));  // evicted long ago: laid out again
}
