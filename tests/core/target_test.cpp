// Target: parsing, printing (round trip), clear errors, availability.
#include <catch2/catch.hpp>

#include "runtime/device_probe.hpp"
#include "luminal/luminal.hpp"

using namespace luminal;

TEST_CASE("targets round-trip through strings", "[target]") {
  for (const char* s : {"reference", "cpu", "cpu:avx512", "cpu:avx2", "cuda", "cuda:sm_90", "cuda:1",
                        "cuda:1:sm_80", "hip", "hip:gfx90a", "hip:2:gfx942"}) {
    INFO(s);
    CHECK(Target::parse(s).to_string() == s);
    CHECK(Target::parse(Target::parse(s).to_string()) == Target::parse(s));
  }
  CHECK(Target::reference().to_string() == "reference");
  CHECK(Target::cpu().to_string() == "cpu");
  CHECK(Target::cuda().to_string() == "cuda");
  CHECK(Target::cuda(2).to_string() == "cuda:2");
  CHECK(Target::hip(0).to_string() == "hip");
  const Target t = Target::parse("cuda:sm_90");
  CHECK(t.kind() == Target::Kind::cuda);
  CHECK(t.arch() == "sm_90");
  CHECK(t.device() == 0);
}

TEST_CASE("unknown targets and architectures are clear errors", "[target]") {
  CHECK_THROWS_AS(Target::parse("tpu"), CompileError);
  CHECK_THROWS_WITH(Target::parse("tpu"), Catch::Contains("'tpu'") && Catch::Contains("cuda"));
  CHECK_THROWS_WITH(Target::parse("cuda:sm_13"), Catch::Contains("sm_13") && Catch::Contains("sm_90"));
  CHECK_THROWS_WITH(Target::parse("hip:gfx1"), Catch::Contains("gfx1") && Catch::Contains("gfx90a"));
  CHECK_THROWS_AS(Target::parse("cpu:avx9000"), CompileError);
  CHECK_THROWS_AS(Target::parse("reference:x"), CompileError);
  CHECK_THROWS_AS(Target::parse("cuda:sm_90:extra"), CompileError);
  CHECK_THROWS_AS(Target::parse(""), CompileError);
  CHECK_THROWS_AS(Target::cuda(-1), CompileError);
}

TEST_CASE("availability: reference and cpu always; best() is available", "[target]") {
  CHECK(Target::reference().is_available());
  CHECK(Target::cpu().is_available());
  CHECK(Target::best().is_available());
  CHECK_FALSE(Target::cuda(1000).is_available());
  CHECK_FALSE(Target::hip(1000).is_available());
  // A GPU is best only where this build runs generated code on it: otherwise the
  // CPU backend, never a GPU target whose kernels would run on the host interpreter.
  const Target b = Target::best();
  if (detail::has_cuda_codegen() && Target::cuda().is_available()) {
    CHECK(b == Target::cuda());
  } else if (detail::has_hip_codegen() && Target::hip().is_available()) {
    CHECK(b == Target::hip());
  } else {
    CHECK(b == Target::cpu());
  }
}
