// The HIP runtime binding (backends/hip/hip_driver.hpp) without an AMD GPU: the
// hand-declared layout constant against the installed HIP header, the architecture parser,
// and, where libamdhip64 is installed, that every entry point the runtime uses resolves in
// it and a machine without a device gets a clear reason instead of a crash.
#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <cstring>
#include <string>
#include <type_traits>

#include "backends/hip/hip_driver.hpp"
#include "luminal/luminal.hpp"
#include "runtime/device_probe.hpp"

#if __has_include(<hip/hip_runtime_api.h>)
#define __HIP_PLATFORM_AMD__ 1
#include <hip/hip_runtime_api.h>
#define LUMINAL_TEST_HAVE_HIP_HEADER 1
#endif

namespace lm = luminal;
using lm::hip::arch_from_gcn_name;

TEST_CASE("hip driver: gcnArchName lies where the hand-declared layout says", "[gpu][hip]") {
#ifdef LUMINAL_TEST_HAVE_HIP_HEADER
  CHECK(offsetof(hipDeviceProp_t, gcnArchName) == lm::hip::Driver::kGcnArchNameOffset);
  CHECK(sizeof(hipDeviceProp_t) <= 4096);  // the buffer hip_driver.cpp passes
#else
  WARN("no HIP header installed: the layout constant is not checked here");
#endif
}

TEST_CASE("hip driver: the architecture from gcnArchName", "[gpu][hip]") {
  char buf[256] = {};
  auto parse = [&](const char* s) {
    std::memset(buf, 0, sizeof buf);
    std::strncpy(buf, s, sizeof buf - 1);
    return arch_from_gcn_name(buf, sizeof buf);
  };
  CHECK(parse("gfx90a:sramecc+:xnack-") == "gfx90a");
  CHECK(parse("gfx1030") == "gfx1030");
  CHECK(parse("gfx942:sramecc+:xnack-") == "gfx942");
  // Bytes that are not an architecture name (another layout): refused, never guessed.
  CHECK(parse("") == "");
  CHECK(parse("AMD Instinct MI210") == "");
  CHECK(parse("gfx") == "");
  CHECK(parse("gfx9 0a") == "");
  std::memset(buf, 'g', sizeof buf);  // no terminator within the field
  CHECK(arch_from_gcn_name(buf, sizeof buf) == "");
}

TEST_CASE("hip driver: every entry point resolves; no device is a clear reason", "[gpu][hip]") {
  std::string why;
  const lm::hip::Driver* d = lm::hip::Driver::get(&why);
  if (lm::detail::hip_probe().error.find("not found") != std::string::npos) {
    WARN("libamdhip64 is not installed: " << lm::detail::hip_probe().error);
    CHECK(d == nullptr);
    return;
  }
  if (lm::detail::hip_device_count() > 0) {
    REQUIRE(d != nullptr);
    CHECK(!d->arch(0).empty());
    return;
  }
  // The library loaded and every symbol bound; only the device is missing.
  CHECK(d == nullptr);
  CHECK_THAT(why, !Catch::Contains("lacks entry points"));
  CHECK_THAT(why, Catch::Contains("hip") || Catch::Contains("HIP"));
  // Compiling for the device says why, and names the way out.
  lm::Graph g;
  g.output("y", g.input("x", {4}) * 2.f);
  try {
    (void)lm::compile(g, lm::Target::hip());
    FAIL("compiled for a HIP device that is not there");
  } catch (const lm::Error& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("emulated") || Catch::Contains("compile_only"));
  }
}

TEST_CASE("hip driver: graph capture where the runtime's graph API is trusted, or asked for", "[gpu][hip]") {
  using D = lm::hip::Driver;
  CHECK(D::graphs_wanted(6, nullptr));
  CHECK(D::graphs_wanted(7, ""));
  CHECK_FALSE(D::graphs_wanted(5, nullptr));  // beta in ROCm 5's headers
  CHECK_FALSE(D::graphs_wanted(0, nullptr));  // an unversioned soname: unknown
  CHECK(D::graphs_wanted(5, "1"));
  CHECK_FALSE(D::graphs_wanted(6, "0"));
  // The entry points resolve in the installed runtime (with the arguments the header
  // declares: the hand-written pointer types are checked against it below).
  void* h = dlopen("libamdhip64.so.5", RTLD_NOW | RTLD_LOCAL);
  if (!h) h = dlopen("libamdhip64.so.6", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    WARN("libamdhip64 is not installed: graph entry points not checked");
    return;
  }
  D d;
  CHECK(D::bind_graph_api(h, d));
  CHECK(d.hipGraphInstantiate != nullptr);
  CHECK(d.hipGraphDestroy != nullptr);
#ifdef LUMINAL_TEST_HAVE_HIP_HEADER
  // The declarations the driver's pointer types were written from (unevaluated: nothing
  // links the runtime); the handles are pointers, as the driver declares them.
  static_assert(sizeof(hipStreamCaptureMode) == sizeof(int));
  static_assert(hipStreamCaptureModeThreadLocal == 1);
  static_assert(std::is_same_v<decltype(&hipGraphInstantiate),
                               hipError_t (*)(hipGraphExec_t*, hipGraph_t, hipGraphNode_t*, char*, size_t)>);
  static_assert(std::is_same_v<decltype(&hipStreamEndCapture), hipError_t (*)(hipStream_t, hipGraph_t*)>);
  static_assert(std::is_pointer_v<hipGraph_t> && std::is_pointer_v<hipGraphExec_t>);
#endif
}
