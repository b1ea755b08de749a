// The golden cases (tests/data/golden, PyTorch results) on the CPU target with symbolic
// input dims: every case's input dims become variables bound at call time, so the
// generated kernels index through symbols (tests/golden runs the same cases with concrete
// dims on every target; this adds the dynamic-shape path of generated code).
//
// One section per op, so a single op runs alone: `cpu_e2e_golden_symbolic_test -c prod`;
// each prints its time and any plan steps the interpreter ran instead of generated code.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <set>
#include <map>
#include <string>
#include <vector>

#include "golden/golden_data.hpp"
#include "golden/golden_runner.hpp"

TEST_CASE("golden: the CPU backend matches PyTorch with symbolic input dims", "[cpu][e2e][golden]") {
  static const auto cases = golden::load_cases(std::string(LUMINAL_TEST_DATA_DIR) + "/golden");
  std::map<std::string, std::vector<const golden::Case*>> by_op;
  for (const auto& c : cases) by_op[c.op].push_back(&c);
  REQUIRE(by_op.size() > 20);
  golden::RunOptions opt;
  opt.symbolic = true;
  for (const auto& [op, cs] : by_op) {
    DYNAMIC_SECTION(op) {
      int failed = 0, symbolic = 0;
      std::string failures;
      std::set<std::string> stops;
      const auto t0 = std::chrono::steady_clock::now();
      const auto results = golden::run_cases(cs, luminal::Target::cpu(), opt);
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      for (const auto& r : results) {
        symbolic += r.symbolic;
        stops.insert(r.stop_reason);
        if (r.ok) continue;
        ++failed;
        failures += "  " + r.c->name + ": " + r.message + "\n";
      }
      std::printf("golden (symbolic dims): cpu: %-14s %3zu cases, %3d with symbolic dims, %d failed, %.2f s\n",
                  op.c_str(), results.size(), symbolic, failed, secs);
      for (const auto& s : stops)
        if (s.find("interpret") != std::string::npos) std::printf("    %s\n", s.c_str());
      INFO(failures);
      CHECK(failed == 0);
      // The symbolic mode must really declare dims: matmul's cases all have free extents.
      if (op == "matmul") CHECK(symbolic > 0);
    }
  }
}
