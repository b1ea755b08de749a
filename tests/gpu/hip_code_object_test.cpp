// Kernel resources from an AMDGPU code object's metadata note (backends/hip/code_object),
// on objects hipRTC builds here: known LDS and scratch sizes read back, and every
// truncation or corrupted byte of a real object gives a result or nothing, never a crash.
#include <catch2/catch.hpp>

#include <string>

#include "backends/hip/code_object.hpp"
#include "backends/hip/hip_module.hpp"

namespace lm = luminal;

namespace {

// k0 keeps 256 floats in LDS (1024 bytes); k1 indexes a private array by a run-time value,
// so it lives in scratch.
const char* kSource =
    "extern \"C\" __global__ void k0(float* __restrict__ a, const float* __restrict__ b, long n) {\n"
    "  __shared__ float t[256];\n"
    "  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;\n"
    "  t[threadIdx.x] = i < n ? b[i] : 0.f;\n"
    "  __syncthreads();\n"
    "  if (i < n) a[i] = t[255 - threadIdx.x] * 2.f;\n"
    "}\n"
    "extern \"C\" __global__ void k1(float* __restrict__ a, const int* __restrict__ idx, long n) {\n"
    "  float p[64];\n"
    "  for (int j = 0; j < 64; ++j) p[j] = a[j] * (float)j;\n"
    "  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;\n"
    "  if (i < n) a[i] = p[idx[i] & 63];\n"
    "}\n";

}  // namespace

TEST_CASE("hip code object: resources read from the metadata note", "[gpu][hiprtc]") {
  std::string why;
  if (!lm::hip::hiprtc_available(&why)) {
    WARN("hipRTC is not available here (" << why << "); skipped");
    return;
  }
  for (const char* arch : {"gfx90a", "gfx1030"}) {
    INFO(arch);
    const lm::hip::HipModule m = lm::hip::compile_module(kSource, arch);
    const auto r = lm::hip::code_object_resources(m.image);
    REQUIRE(r.size() == 2);
    const lm::KernelResources& k0 = r[0].name == "k0" ? r[0] : r[1];
    const lm::KernelResources& k1 = r[0].name == "k0" ? r[1] : r[0];
    CHECK(k0.name == "k0");
    CHECK(k1.name == "k1");
    CHECK(k0.shared_bytes == 1024);
    CHECK(k0.stack_bytes == 0);
    CHECK(k0.registers > 0);
    CHECK(k1.shared_bytes == 0);
    CHECK(k1.stack_bytes >= 256);  // 64 floats per lane
    CHECK(k0.spill_bytes == 0);
    CHECK(m.resources.size() == 2);  // what compile_module reports
  }
}

TEST_CASE("hip code object: truncated and corrupted objects never crash", "[gpu][hiprtc]") {
  std::string why;
  if (!lm::hip::hiprtc_available(&why)) return;
  const std::string image = lm::hip::compile_module(kSource, "gfx90a").image;
  CHECK(lm::hip::code_object_resources("").empty());
  CHECK(lm::hip::code_object_resources("\x7f" "ELF").empty());
  CHECK(lm::hip::code_object_resources(std::string(100, '\0')).empty());
  size_t whole = 0;
  for (size_t n = 0; n <= image.size(); ++n) {
    const auto r = lm::hip::code_object_resources(std::string_view(image).substr(0, n));
    if (r.size() == 2) ++whole;
    for (const auto& k : r) CHECK(!k.name.empty());
  }
  CHECK(whole >= 1);  // at least the complete object
  // Every byte flipped in turn (three patterns): any result, never a crash or a sanitizer report.
  for (size_t i = 0; i < image.size(); ++i)
    for (unsigned char x : {0x01, 0x80, 0xff}) {
      std::string bad = image;
      bad[i] = static_cast<char>(static_cast<unsigned char>(bad[i]) ^ x);
      (void)lm::hip::code_object_resources(bad);
    }
}
