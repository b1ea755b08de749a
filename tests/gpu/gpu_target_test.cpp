// Target plumbing for GPU targets: the emulated form, availability with a reason, the
// code generator named in the report.
#include <catch2/catch.hpp>

#include "luminal/luminal.hpp"
#include "runtime/device_probe.hpp"

using namespace luminal;

TEST_CASE("emulated GPU targets round-trip through strings", "[gpu][target]") {
  for (const char* s : {"cuda+emu", "cuda:sm_90+emu", "cuda:sm_80+emu", "cuda:1:sm_90+emu", "hip:gfx90a+emu",
                        "hip:gfx1030+emu"}) {
    const Target t = Target::parse(s);
    CHECK(t.to_string() == s);
    CHECK(t.is_emulated());
    CHECK(t.is_available());
    CHECK(t.unavailable_reason().empty());
  }
  const Target t = Target::cuda().with_arch("sm_90").emulated();
  CHECK(t.to_string() == "cuda:sm_90+emu");
  CHECK(t == Target::parse("cuda:sm_90+emu"));
  CHECK_FALSE(t == Target::parse("cuda:sm_90"));
  CHECK(t.with_arch("sm_80").is_emulated());
  CHECK_FALSE(Target::parse("cuda:sm_90").is_emulated());
  CHECK(Target::hip(2).emulated().to_string() == "hip:2+emu");
}

TEST_CASE("only GPU targets have an emulated form", "[gpu][target]") {
  CHECK_THROWS_AS(Target::cpu().emulated(), CompileError);
  CHECK_THROWS_AS(Target::reference().emulated(), CompileError);
  CHECK_THROWS_WITH(Target::parse("cpu+emu"), Catch::Contains("cpu+emu") && Catch::Contains("only cuda and hip"));
  CHECK_THROWS_AS(Target::parse("reference+emu"), CompileError);
  CHECK_THROWS_WITH(Target::parse("cuda:sm_13+emu"), Catch::Contains("sm_13"));
  CHECK_THROWS_AS(Target::parse("cuda:sm_90+emu+emu"), CompileError);
}

TEST_CASE("without a GPU: cuda is unavailable with a reason and best() is the CPU", "[gpu][target]") {
  if (detail::cuda_device_count() > 0) {
    WARN("a CUDA device is present: the no-GPU checks are skipped");
    return;
  }
  const Target c = Target::cuda();
  CHECK_FALSE(c.is_available());
  CHECK_FALSE(c.unavailable_reason().empty());
  INFO(c.unavailable_reason());
  CHECK(Target::best() == Target::cpu());
  Graph g;
  g.output("y", g.input("x", {4}) * 2.f);
  // Calling compile() for it names the reason and the ways out.
  CHECK_THROWS_WITH(compile(g, c), Catch::Contains(c.unavailable_reason()) && Catch::Contains("compile_only") &&
                                       Catch::Contains("cuda+emu"));
  CHECK_FALSE(Target::hip().is_available());
  CHECK_FALSE(Target::hip().unavailable_reason().empty());
}

TEST_CASE("the report names the code generator", "[gpu][target]") {
  Graph g;
  g.output("y", exp(g.input("x", {4, 4})) + 1.f);
  CHECK(compile(g, Target::reference()).report().codegen == "interpreter");
  const std::string cpu = compile(g, Target::cpu()).report().codegen;
  CHECK(cpu.rfind("cc ", 0) == 0);
  const CompileReport r = compile(g, Target::parse("cuda:sm_90+emu")).report();
  CHECK(r.codegen.rfind("emulator cuda sm_90 (", 0) == 0);
  CHECK(r.target == "cuda:sm_90+emu");
  CHECK(r.generated_kernels == r.kernels);
  CHECK(r.interpreted_kernels == 0);
  CHECK(r.to_string().find(r.codegen) != std::string::npos);
}
