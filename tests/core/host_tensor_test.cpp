// HostTensor: construction from every element type, dtype-checked access, and exact
// f16/bf16 rounding (round to nearest even) on known bit patterns.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>

#include "luminal/luminal.hpp"
#include "runtime/half.hpp"

using namespace luminal;

namespace {
float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t half_bits(float v, DType t) {
  const HostTensor h = HostTensor::from_f32(std::vector<float>{v}, {1}, t);
  return h.values<uint16_t>()[0];
}
}  // namespace

TEST_CASE("from() keeps values, shape and dtype", "[host]") {
  const HostTensor f = HostTensor::from(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(f.shape() == std::vector<int64_t>{2, 3});
  CHECK(f.dtype() == f32);
  CHECK(f.values<float>()[5] == 6.0f);
  CHECK(f.nbytes() == 24);
  const HostTensor i = HostTensor::from(std::vector<int32_t>{-1, 7}, {2});
  CHECK(i.dtype() == i32);
  CHECK(i.values<int32_t>()[0] == -1);
  const HostTensor b = HostTensor::from(std::vector<bool>{true, false, true}, {3});
  CHECK(b.dtype() == boolean);
  CHECK(b.values<bool>()[2]);
  CHECK(b.to_f32() == std::vector<float>{1, 0, 1});
  const bool raw[2] = {false, true};
  CHECK(HostTensor::from(std::span<const bool>(raw, 2), {2}).values<bool>()[1]);
  const float fs[2] = {3, 4};
  CHECK(HostTensor::from(std::span<const float>(fs, 2), {1, 2}).to_f32() == std::vector<float>{3, 4});
  const HostTensor z(i32, {2, 2});
  CHECK(z.values<int32_t>()[3] == 0);
  const HostTensor s = HostTensor::from(std::vector<float>{42}, {});
  CHECK(s.numel() == 1);
  CHECK(s.rank() == 0);
}

TEST_CASE("from() rejects a value count that does not fill the shape", "[host]") {
  CHECK_THROWS_AS(HostTensor::from(std::vector<float>{1, 2, 3}, {2, 2}), RuntimeError);
  CHECK_THROWS_AS(HostTensor(f32, {-1}), RuntimeError);
}

TEST_CASE("values<T> checks the dtype", "[host]") {
  const HostTensor f = HostTensor::from(std::vector<float>{1}, {1});
  CHECK_THROWS_AS(f.values<int32_t>(), DTypeError);
  CHECK_THROWS_WITH(f.values<bool>(), Catch::Contains("f32") && Catch::Contains("bool"));
  const HostTensor h = HostTensor::from_f32(std::vector<float>{1}, {1}, f16);
  CHECK_THROWS_AS(h.values<float>(), DTypeError);
  CHECK(h.values<uint16_t>()[0] == 0x3C00);
}

TEST_CASE("f32 -> f16 rounds to nearest even, exactly", "[host][half]") {
  CHECK(half_bits(1.0f, f16) == 0x3C00);
  CHECK(half_bits(-2.0f, f16) == 0xC000);
  CHECK(half_bits(0.1f, f16) == 0x2E66);
  CHECK(half_bits(65504.0f, f16) == 0x7BFF);                      // largest finite
  CHECK(half_bits(65519.0f, f16) == 0x7BFF);                      // below the halfway point
  CHECK(half_bits(65520.0f, f16) == 0x7C00);                      // halfway: ties to even = inf
  CHECK(half_bits(std::ldexp(1.0f, -24), f16) == 0x0001);         // smallest subnormal
  CHECK(half_bits(std::ldexp(1.0f, -25), f16) == 0x0000);         // tie -> even (0)
  CHECK(half_bits(std::ldexp(3.0f, -26), f16) == 0x0001);         // 1.5 ulp/2 -> 1
  CHECK(half_bits(std::ldexp(3.0f, -25), f16) == 0x0002);         // 1.5 ulp: tie -> even (2)
  CHECK(half_bits(std::ldexp(1023.0f, -24), f16) == 0x03FF);      // largest subnormal
  CHECK(half_bits(1.0f + std::ldexp(1.0f, -11), f16) == 0x3C00);  // tie -> even
  CHECK(half_bits(1.0f + std::ldexp(3.0f, -11), f16) == 0x3C02);  // tie -> even (up)
  CHECK(half_bits(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20), f16) == 0x3C01);
  CHECK(half_bits(std::numeric_limits<float>::infinity(), f16) == 0x7C00);
  CHECK(half_bits(-0.0f, f16) == 0x8000);
  const uint16_t nan = half_bits(std::numeric_limits<float>::quiet_NaN(), f16);
  CHECK((nan & 0x7C00) == 0x7C00);
  CHECK((nan & 0x03FF) != 0);
}

TEST_CASE("f32 -> bf16 rounds to nearest even, exactly", "[host][half]") {
  CHECK(half_bits(1.0f, bf16) == 0x3F80);
  CHECK(half_bits(0.1f, bf16) == 0x3DCD);
  CHECK(half_bits(1.0f + std::ldexp(1.0f, -8), bf16) == 0x3F80);        // tie -> even
  CHECK(half_bits(1.0f + std::ldexp(3.0f, -8), bf16) == 0x3F82);        // tie -> even (up)
  CHECK(half_bits(bits_to_float(0x3F808001), bf16) == 0x3F81);          // just above the tie
  CHECK(half_bits(std::numeric_limits<float>::max(), bf16) == 0x7F80);  // rounds to inf
  CHECK(half_bits(-std::numeric_limits<float>::infinity(), bf16) == 0xFF80);
  const uint16_t nan = half_bits(std::numeric_limits<float>::quiet_NaN(), bf16);
  CHECK((nan & 0x7F80) == 0x7F80);
  CHECK((nan & 0x007F) != 0);
}

TEST_CASE("to_f32 converts every dtype exactly", "[host][half]") {
  const std::vector<float> v{1.5f, -0.1f, 65504.0f, std::ldexp(1.0f, -24), 3.0e38f};
  const auto h = HostTensor::from_f32(v, {5}, f16).to_f32();
  CHECK(h[0] == 1.5f);
  CHECK(h[1] == -0.0999755859375f);
  CHECK(h[2] == 65504.0f);
  CHECK(h[3] == std::ldexp(1.0f, -24));
  CHECK(std::isinf(h[4]));
  const auto b = HostTensor::from_f32(v, {5}, bf16).to_f32();
  CHECK(b[0] == 1.5f);
  CHECK(b[1] == -0.10009765625f);
  CHECK(b[4] == bits_to_float(0x7F620000));  // 3e38 = 0x7F61B1E6 rounds up
  CHECK(HostTensor::from_f32(std::vector<float>{-2.7f, 3.9f}, {2}, i32).to_f32() ==
        std::vector<float>{-2, 3});
  // Every f16 bit pattern survives f16 -> f32 -> f16.
  int mismatches = 0;
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const float f = luminal::detail::f16_to_f32(static_cast<uint16_t>(bits));
    if (!std::isnan(f) && luminal::detail::f32_to_f16(f) != bits) ++mismatches;
  }
  CHECK(mismatches == 0);
}

TEST_CASE("view() reads caller memory without copying", "[host]") {
  std::vector<float> data{1, 2, 3};
  const HostTensor v = HostTensor::view(f32, {3}, data.data());
  CHECK(v.is_view());
  CHECK(v.values<float>().data() == data.data());
  data[1] = 20;
  CHECK(v.values<float>()[1] == 20);
  HostTensor copy = v;  // still a view
  CHECK(copy.values<float>().data() == data.data());
}

TEST_CASE("views with an owner keep it alive; adopted storage is owned and deep-copied", "[host]") {
  auto block = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3, 4});
  std::weak_ptr<std::vector<float>> watch = block;
  HostTensor v = HostTensor::view(f32, {4}, static_cast<const void*>(block->data()), block);
  block.reset();
  CHECK(v.is_view());
  CHECK(v.has_owner());
  CHECK_FALSE(v.is_writable());
  HostTensor copy = v;  // shares the owner
  v = HostTensor();
  CHECK_FALSE(watch.expired());
  CHECK(copy.values<float>()[3] == 4.0f);
  copy = HostTensor();
  CHECK(watch.expired());

  int released = 0;
  std::shared_ptr<std::byte> storage(reinterpret_cast<std::byte*>(new float[3]{5, 6, 7}), [&](std::byte* p) {
    ++released;
    delete[] reinterpret_cast<float*>(p);
  });
  HostTensor a = HostTensor::adopt(f32, {3}, storage);
  storage.reset();
  CHECK_FALSE(a.is_view());
  CHECK(a.is_writable());
  HostTensor deep = a;  // an owning copy with its own bytes
  a.mutable_values<float>()[0] = -1.0f;
  CHECK(deep.values<float>()[0] == 5.0f);
  CHECK(a.values<float>()[0] == -1.0f);
  HostTensor moved = std::move(a);
  CHECK(released == 0);
  moved = HostTensor();
  CHECK(released == 1);
  CHECK(deep.values<float>()[2] == 7.0f);
}
