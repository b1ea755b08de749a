// Recycled output storage: the convenience call hands back the storage of outputs the
// caller has dropped (no fresh pages per call), never storage a live tensor still uses.
#include <catch2/catch.hpp>

#include "luminal/luminal.hpp"
#include "runtime/output_pool.hpp"

namespace lm = luminal;

TEST_CASE("outputs reuse dropped storage and never alias live tensors", "[output_pool]") {
  lm::Graph g;
  lm::Tensor x = g.input("x", {1024, 1024});
  g.output("y", x * 2.0f + 1.0f);
  lm::Callable fn = lm::compile(g, lm::Target::cpu());
  std::vector<float> xs(1024 * 1024);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i % 1000);
  const lm::HostTensor in = lm::HostTensor::from(xs, {1024, 1024});
  auto check = [&](const lm::HostTensor& y, float scale) {
    auto v = y.values<float>();
    for (size_t i = 0; i < v.size(); i += 4099) REQUIRE(v[i] == scale * (2.0f * xs[i] + 1.0f));
  };
  const std::byte* first = nullptr;
  {
    auto out = fn({{"x", in}});
    first = out.at("y").data();
    check(out.at("y"), 1.0f);
  }
  auto out2 = fn({{"x", in}});
  CHECK(out2.at("y").data() == first);  // the dropped output's storage, recycled
  check(out2.at("y"), 1.0f);
  auto out3 = fn({{"x", in}});  // out2 is alive: fresh storage
  CHECK(out3.at("y").data() != out2.at("y").data());
  check(out2.at("y"), 1.0f);
  check(out3.at("y"), 1.0f);
  // A copy is deep: writing the output does not change the copy, and both outlive the
  // Callable.
  lm::HostTensor copy = out3.at("y");
  out3.at("y").mutable_values<float>()[0] = -5.0f;
  CHECK(copy.values<float>()[0] == 1.0f);
  fn = lm::Callable();
  check(copy, 1.0f);
  CHECK(out3.at("y").values<float>()[0] == -5.0f);
}

TEST_CASE("the pool keeps a bounded number of free blocks", "[output_pool]") {
  auto pool = lm::detail::OutputPool::create(size_t{64} << 10);  // 64 KiB of free blocks at most
  {
    lm::HostTensor a = pool->take(lm::f32, {1000});
    lm::HostTensor b = pool->take(lm::f32, {1000});
    lm::HostTensor big = pool->take(lm::f32, {100000});  // 400 KB: above the cap, not kept
  }
  auto s = pool->stats();
  CHECK(s.allocations == 3);
  CHECK(s.cached_bytes == 2 * 4032);  // two 4000-byte blocks rounded to 64
  lm::HostTensor c = pool->take(lm::f32, {1000});
  lm::HostTensor d = pool->take(lm::i32, {1000});  // same size: reused whatever the dtype
  lm::HostTensor e = pool->take(lm::f32, {1000});
  s = pool->stats();
  CHECK(s.reuses == 2);
  CHECK(s.allocations == 4);
  CHECK(s.cached_bytes == 0);
  pool.reset();
  c.mutable_values<float>()[999] = 1.0f;  // still valid after the pool is gone
  CHECK(c.values<float>()[999] == 1.0f);
}
