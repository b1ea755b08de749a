// Golden comparison against PyTorch: every op of API.md, several cases each (data from
// tools/golden/gen_golden.py in tests/data/golden), on every available target.
//
// LUMINAL_GOLDEN_FILTER=<substring> runs only the cases whose name contains it, e.g.
// LUMINAL_GOLDEN_FILTER=softmax/bf16 ./golden_tests
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "backends/cuda/cuda_module.hpp"
#include "golden/golden_data.hpp"
#include "golden/golden_ops.hpp"
#include "golden/golden_runner.hpp"
#include "golden/tolerance.hpp"

namespace lm = luminal;

namespace {

const std::vector<golden::Case>& all_cases() {
  static const std::vector<golden::Case> cases =
      golden::load_cases(std::string(LUMINAL_TEST_DATA_DIR) + "/golden");
  return cases;
}

std::vector<const golden::Case*> selected_cases() {
  const char* filter = std::getenv("LUMINAL_GOLDEN_FILTER");
  std::vector<const golden::Case*> out;
  for (const auto& c : all_cases()) {
    if (!filter || c.name.find(filter) != std::string::npos) out.push_back(&c);
  }
  return out;
}

/// Runs every selected case on `target`, one graph per op when `group_by_op` (fewer JIT
/// compiles) or one graph per case, and fails with a per-op summary and the reasons.
void check_target(const lm::Target& target, bool group_by_op, golden::RunOptions options = {}) {
  if (!target.is_available() && !options.compile_only) {
    WARN("golden: target " << target.to_string() << " is not available here; skipped");
    return;
  }
  std::map<std::string, std::vector<const golden::Case*>> by_op;
  for (const golden::Case* c : selected_cases()) {
    if (!options.members || golden::has_member_builder(c->op)) by_op[c->op].push_back(c);
  }

  std::map<std::string, std::pair<int, int>> tally;  // op -> (cases, failed)
  std::string failures;
  int total = 0, failed = 0, with_symbolic = 0;
  std::set<std::string> stop_reasons;
  for (const auto& [op, cases] : by_op) {
    std::vector<golden::CaseResult> results;
    if (group_by_op) {
      results = golden::run_cases(cases, target, options);
    } else {
      for (const golden::Case* c : cases) results.push_back(golden::run_cases({c}, target, options).front());
    }
    for (const auto& r : results) {
      ++total;
      with_symbolic += r.symbolic;
      if (!r.stop_reason.empty()) stop_reasons.insert(r.stop_reason);
      ++tally[op].first;
      if (r.ok) continue;
      ++failed;
      ++tally[op].second;
      failures += "  " + r.c->name + " [reference: " + r.c->reference + "]: " + r.message + "\n";
    }
  }
  // One line per target even on success, so a log shows what was compared.
  std::printf("golden: %s%s: %d cases of %zu ops (%d with symbolic input dims), %d failed\n",
              target.to_string().c_str(), options.members ? " (Tensor member forms)" : "", total,
              by_op.size(), with_symbolic, failed);
  for (const auto& why : stop_reasons)
    std::printf("  compile report on %s: %s\n", target.to_string().c_str(), why.c_str());
  INFO("target " << target.to_string() << ": " << total << " golden cases, " << failed << " failed");
  if (failed > 0) {
    std::string table = "per-op (cases / failed):\n";
    for (const auto& [op, t] : tally) {
      if (t.second)
        table += "  " + op + ": " + std::to_string(t.first) + " / " + std::to_string(t.second) + "\n";
    }
    FAIL_CHECK(table << "failures on " << target.to_string() << ":\n" << failures);
  }
  CHECK(failed == 0);
  CHECK(total > 0);
}

}  // namespace

TEST_CASE("golden data covers every op of the API", "[golden][coverage]") {
  std::map<std::string, int> counts;
  for (const std::string& op : golden::api_ops()) counts[op] = 0;
  std::set<std::string> unknown;
  for (const auto& c : all_cases()) {
    if (counts.count(c.op))
      ++counts[c.op];
    else
      unknown.insert(c.op);
    if (!golden::has_builder(c.op)) unknown.insert(c.op);
  }
  std::string table, missing;
  for (const auto& [op, n] : counts) {
    table += "  " + op + ": " + std::to_string(n) + "\n";
    if (n == 0) missing += " " + op;
  }
  INFO("golden cases per op:\n" << table);
  INFO("ops without a golden case:" << (missing.empty() ? " none" : missing));
  CHECK(missing.empty());
  std::string unknown_list;
  for (const auto& op : unknown) unknown_list += " " + op;
  INFO("cases for ops the test cannot build:" << unknown_list);
  CHECK(unknown.empty());
  CHECK(all_cases().size() >= 3 * golden::api_ops().size());
}

TEST_CASE("golden: the reference interpreter matches PyTorch", "[golden][reference]") {
  check_target(lm::Target::reference(), /*group_by_op=*/true);
}

TEST_CASE("golden: the CPU backend matches PyTorch", "[golden][cpu]") {
  check_target(lm::Target::cpu(), /*group_by_op=*/true);
}

TEST_CASE("golden: GPU backends match PyTorch where present", "[golden][gpu]") {
  check_target(lm::Target::cuda(), /*group_by_op=*/true);
  check_target(lm::Target::hip(), /*group_by_op=*/true);
}

TEST_CASE("golden: the GPU kernels on the host emulator match PyTorch", "[golden][emu]") {
  // The very kernel source NVRTC compiles, run by the emulator (docs/cuda.md).
  check_target(lm::Target::parse("cuda:sm_90+emu"), /*group_by_op=*/true);
}

TEST_CASE("golden: the HIP dialect on the emulator, wave64 (gfx90a), matches PyTorch",
          "[golden][emu][hip][wave64]") {
  check_target(lm::Target::parse("hip:gfx90a+emu"), /*group_by_op=*/true);
}

TEST_CASE("golden: the HIP dialect on the emulator, wave32 (gfx1030), matches PyTorch",
          "[golden][emu][hip][wave32]") {
  check_target(lm::Target::parse("hip:gfx1030+emu"), /*group_by_op=*/true);
}

TEST_CASE("golden: every kernel compiles with NVRTC for sm_80 and sm_90", "[golden][nvrtc]") {
  // compile_only: generated and compiled to CUBIN, none interpreted, none spilling. The
  // golden groups are one graph each, so one NVRTC program per group.
  std::string why;
  if (!lm::cuda::nvrtc_available(&why)) {
    WARN("golden: NVRTC is not available here (" << why << "); skipped");
    return;
  }
  for (const char* arch : {"cuda:sm_80", "cuda:sm_90"})
    check_target(lm::Target::parse(arch), /*group_by_op=*/true, {.compile_only = true});
}

TEST_CASE("golden: the reference interpreter matches PyTorch with symbolic input dims",
          "[golden][symbolic]") {
  check_target(lm::Target::reference(), /*group_by_op=*/true, {.symbolic = true});
}

TEST_CASE("golden: the Tensor member forms match PyTorch", "[golden][members]") {
  check_target(lm::Target::reference(), /*group_by_op=*/true, {.members = true});
}

TEST_CASE("golden comparison: NaN, inf, tolerances, dtype and shape", "[golden][compare]") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  golden::Expected e;
  e.dtype = lm::f32;
  e.shape = {4};
  e.floats = {1.0f, nan, inf, 0.0f};
  auto got = [](std::vector<float> v) { return lm::HostTensor::from(v, {static_cast<int64_t>(v.size())}); };
  const golden::Tolerance tol = golden::tolerance_for(lm::f32);
  const float within = static_cast<float>(1.0 + 0.5 * tol.rtol);
  const float outside = static_cast<float>(1.0 + 4 * (tol.rtol + tol.atol));
  CHECK_FALSE(golden::compare(e, got({within, nan, inf, -0.0f})));  // -0 == 0, NaN meets NaN
  CHECK(golden::compare(e, got({outside, nan, inf, 0.0f})));        // beyond the tolerance
  CHECK(golden::compare(e, got({1.0f, 0.0f, inf, 0.0f})));          // NaN expected
  CHECK(golden::compare(e, got({1.0f, nan, -inf, 0.0f})));          // wrong infinity
  CHECK(golden::compare(e, got({1.0f, nan, 3e38f, 0.0f})));         // finite for inf
  CHECK(golden::compare(e, got({1.0f, nan, inf, nan})));            // NaN for a number
  CHECK(golden::compare(e, got({1.0f, nan, inf})));                 // shape
  CHECK(golden::compare(e, lm::HostTensor::from_f32({1.0f, 0.0f, 0.0f, 0.0f}, {4}, lm::bf16)));  // dtype

  golden::Expected ints;
  ints.dtype = lm::i32;
  ints.shape = {2};
  ints.ints = {16777217, -3};
  CHECK_FALSE(golden::compare(ints, lm::HostTensor::from(std::vector<int32_t>{16777217, -3}, {2})));
  CHECK(golden::compare(
      ints, lm::HostTensor::from(std::vector<int32_t>{16777216, -3}, {2})));  // exact, not via f32

  golden::Expected bools;
  bools.dtype = lm::boolean;
  bools.shape = {2};
  bools.ints = {1, 0};
  CHECK_FALSE(golden::compare(bools, lm::HostTensor::from(std::vector<bool>{true, false}, {2})));
  CHECK(golden::compare(bools, lm::HostTensor::from(std::vector<bool>{true, true}, {2})));

  // one bf16 ulp at 1.0 is within the bf16 tolerance, three are not
  golden::Expected b;
  b.dtype = lm::bf16;
  b.shape = {1};
  b.floats = {1.0f};
  CHECK_FALSE(golden::compare(b, lm::HostTensor::from_f32({1.0078125f}, {1}, lm::bf16)));
  CHECK(golden::compare(b, lm::HostTensor::from_f32({1.0234375f}, {1}, lm::bf16)));
}
