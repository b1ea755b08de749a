// The liveness-based memory planner: no two lifetime-overlapping buffers overlap in
// memory (randomized), offsets are aligned, a chain reuses memory, lifetimes come from a
// kernel program.
#include <catch2/catch.hpp>

#include <random>

#include "kernel/memory_plan.hpp"
#include "kernel/kernel_math.hpp"
#include "luminal/error.hpp"

using namespace luminal::kernel;

namespace {
void check_plan(const std::vector<BufferLifetime>& b, const MemoryPlan& plan, size_t align) {
  REQUIRE(plan.offsets.size() == b.size());
  size_t sum = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    REQUIRE(plan.offsets[i] % align == 0);
    REQUIRE(plan.offsets[i] + b[i].bytes <= plan.arena_bytes);
    sum += (b[i].bytes + align - 1) / align * align;
    for (size_t j = i + 1; j < b.size(); ++j) {
      bool live_together = b[i].first_def <= b[j].last_use && b[j].first_def <= b[i].last_use;
      bool mem_overlap =
          plan.offsets[i] < plan.offsets[j] + b[j].bytes && plan.offsets[j] < plan.offsets[i] + b[i].bytes;
      if (live_together && b[i].bytes && b[j].bytes) {
        INFO("buffers " << i << " and " << j);
        REQUIRE(!mem_overlap);
      }
    }
  }
  REQUIRE(plan.total_bytes == sum);
  REQUIRE(plan.arena_bytes <= plan.total_bytes);
}
}  // namespace

TEST_CASE("memory plan: randomized lifetimes never share live bytes", "[cpu][memplan]") {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 200; ++trial) {
    int n = 1 + static_cast<int>(rng() % 60), steps = 1 + static_cast<int>(rng() % 40);
    std::vector<BufferLifetime> b(static_cast<size_t>(n));
    for (auto& x : b) {
      x.first_def = static_cast<int>(rng() % steps);
      x.last_use = x.first_def + static_cast<int>(rng() % 6);
      x.bytes = (rng() % 4 == 0) ? 0 : 1 + rng() % 100000;
    }
    size_t align = trial % 2 ? 64 : 256;
    MemoryPlan plan = plan_memory(b, align);
    check_plan(b, plan, align);
    // Lower bound: at every step, the live buffers must fit.
    for (int s = 0; s < steps + 6; ++s) {
      size_t live = 0;
      for (const auto& x : b)
        if (x.first_def <= s && s <= x.last_use) live += (x.bytes + align - 1) / align * align;
      REQUIRE(plan.arena_bytes >= live);
    }
  }
}

TEST_CASE("memory plan: a chain needs two buffers, not ten", "[cpu][memplan]") {
  // kernel i reads buffer i-1 and writes buffer i
  std::vector<BufferLifetime> b;
  for (int i = 0; i < 10; ++i) b.push_back({1000, i, i + 1});
  MemoryPlan plan = plan_memory(b);
  check_plan(b, plan, 64);
  CHECK(plan.total_bytes == 10 * 1024);
  CHECK(plan.arena_bytes == 2 * 1024);
  CHECK(plan.summary().find("(20%)") != std::string::npos);
}

TEST_CASE("memory plan: lifetimes from a kernel program", "[cpu][memplan]") {
  // x -> t0 = exp(x) -> t1 = t0 + 1 -> t2 = t1 * t0 -> y = t2 - 1 ; t0 lives until step 2
  Program p;
  p.symbols = {"N"};
  Index N = Index::sym("N");
  p.buffers = {{"x", luminal::DType::f32, N, BufferRole::Input},
               {"t0", luminal::DType::f32, N, BufferRole::Intermediate},
               {"t1", luminal::DType::f32, N, BufferRole::Intermediate},
               {"t2", luminal::DType::f32, N, BufferRole::Intermediate},
               {"y", luminal::DType::f32, N, BufferRole::Output}};
  Index i = Index::var(0);
  auto ld = [&](int b) { return load(b, luminal::DType::f32, i); };
  std::vector<Loop> L = {{0, N, true, true}};
  p.kernels = {{"k0", KernelKind::Elementwise, L, {1, i, math::exp(ld(0))}, {}, {}},
               {"k1", KernelKind::Elementwise, L, {2, i, binary(BinaryOp::Add, ld(1), constant(1))}, {}, {}},
               {"k2", KernelKind::Elementwise, L, {3, i, binary(BinaryOp::Mul, ld(2), ld(1))}, {}, {}},
               {"k3", KernelKind::Elementwise, L, {4, i, binary(BinaryOp::Sub, ld(3), constant(1))}, {}, {}}};
  std::vector<int> ids;
  auto lt = intermediate_lifetimes(p, {{"N", 1000}}, &ids);
  REQUIRE(ids == std::vector<int>{1, 2, 3});
  CHECK(lt[0].first_def == 0);
  CHECK(lt[0].last_use == 2);
  CHECK(lt[1].first_def == 1);
  CHECK(lt[1].last_use == 2);
  CHECK(lt[2].first_def == 2);
  CHECK(lt[2].last_use == 3);
  MemoryPlan plan = plan_memory(lt);
  check_plan(lt, plan, 64);
  CHECK(plan.arena_bytes == 3 * 4032);  // t0, t1, t2 all live at step 2
  CHECK_THROWS_AS(plan_memory({{10, 3, 1}}), luminal::InternalError);
}
