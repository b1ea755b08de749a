// Tensor parallelism found by the search (docs/distributed.md): ranks as threads of one
// process (Communicator::local_group) compile the same decoder block; each runs its share
// and the collectives; the outputs equal the single-process program's on every rank.
#include <catch2/catch.hpp>
#include <cctype>
#include <cstring>
#include <functional>
#include <thread>

#include "backends/hip/hip_module.hpp"
#include "compiler/translation_models.hpp"
#include "decode_step_model.hpp"
#include "dist/on_ranks.hpp"
#include "luminal/luminal.hpp"
#include "support/scoped_env.hpp"

using namespace luminal;
using luminal::test::BlockConfig;

namespace {

// A block large enough that a weight shard saves more memory traffic than an all_reduce
// costs on the shared-memory link (the cost model decides; smaller blocks stay whole).
BlockConfig tp_block() { return BlockConfig{4, 512, 8, 4, 1536}; }
// On a GPU a launch costs microseconds and HBM is fast: sharding pays from larger weights
// (84 MB here; tp_block's 14 MB stay whole on NVLink).
BlockConfig gpu_tp_block() { return BlockConfig{4, 1024, 16, 8, 5632}; }

struct RankRun {
  std::map<std::string, HostTensor> out;
  CompileReport report;
};

std::vector<RankRun> run_ranks(const Graph& g, const std::map<std::string, HostTensor>& data, int P,
                               Target target, const std::vector<std::string>& skip_rules = {}) {
  std::vector<RankRun> runs(static_cast<size_t>(P));
  const auto errors = test::on_ranks(P, [&](int r, const std::shared_ptr<Communicator>& comm, std::string&) {
    CompileOptions o;
    o.communicator = comm;
    o.skip_rules = skip_rules;
    // Ranks must extract the same plan (compile() checks): a search cut short by the
    // wall clock (threads compiling at once, sanitizers, a loaded host) may differ.
    o.time_budget_seconds = 600;
    Callable fn = compile(g, target, o);
    std::map<std::string, HostTensor> inputs;
    for (const auto& name : fn.param_names()) fn.bind(name, data.at(name));
    for (const auto& name : fn.input_names()) inputs.emplace(name, data.at(name));
    runs[static_cast<size_t>(r)].out = fn(inputs);
    runs[static_cast<size_t>(r)].out = fn(inputs);  // a second call reuses the program
    runs[static_cast<size_t>(r)].report = fn.report();
  });
  for (const auto& e : errors) {
    INFO(e);
    REQUIRE(e.empty());
  }
  return runs;
}

std::map<std::string, HostTensor> run_single(const Graph& g, const std::map<std::string, HostTensor>& data,
                                             Target target) {
  Callable fn = compile(g, target);
  std::map<std::string, HostTensor> inputs;
  for (const auto& name : fn.param_names()) fn.bind(name, data.at(name));
  for (const auto& name : fn.input_names()) inputs.emplace(name, data.at(name));
  return fn(inputs);
}

// Within rounding: a rank's partial products are summed over its block of the contracted
// axis, then over the ranks -- another order than one process's, so the absolute error
// follows the output's scale (f32 sums of 512-1536 products: ~1e-6 of it), not each
// element's size.
double error_ratio(const std::map<std::string, HostTensor>& got,
                   const std::map<std::string, HostTensor>& want) {
  double scale = 0;
  for (float v : want.at("y").to_f32()) scale = std::max(scale, static_cast<double>(std::abs(v)));
  return test::compare_outputs(got, want, 1e-5 * scale, 1e-4);
}

// Over NVLink's stated 8 us a step, sharding a 4-token block of a GPU's HBM-fast weights
// costs more than it saves (the search keeps it whole), so the GPU tests state a link of
// 0.5 us a step.
constexpr const char* kFastLinkUs = "0.5";

}  // namespace

TEST_CASE("the search shards a decoder block Megatron-style; every rank's output equals one process's",
          "[dist]") {
  Graph g;
  test::build_model(g, tp_block(), 1);
  const auto data = test::random_inputs(*g.impl(), 7);
  const auto want = run_single(g, data, Target::cpu());
  for (int P : {2, 4}) {
    INFO("ranks " << P);
    auto runs = run_ranks(g, data, P, Target::cpu());
    const CompileReport& rep = runs[0].report;
    INFO(rep.to_string());
    CHECK(rep.ranks == P);
    // QKV and gate/up split by columns, o_proj and down by rows: one all_reduce each.
    CHECK(rep.collectives == 2);
    CHECK(rep.sharding.find("2 all_reduce") != std::string::npos);
    CHECK(rep.comm_bytes == 2 * (P - 1) * 4 * 512 * 4);
    for (const RankRun& run : runs) {
      CHECK(error_ratio(run.out, want) <= 1.0);
      // Sums over ranks are added in rank order after a gather: bit-identical everywhere.
      CHECK(std::memcmp(run.out.at("y").data(), runs[0].out.at("y").data(), run.out.at("y").nbytes()) == 0);
    }
  }
}

TEST_CASE("the reference target runs the sharded plan's kernels with the interpreter", "[dist]") {
  Graph g;
  test::build_model(g, tp_block(), 1);
  const auto data = test::random_inputs(*g.impl(), 3);
  const auto want = run_single(g, data, Target::reference());
  auto runs = run_ranks(g, data, 2, Target::reference());
  CHECK(runs[0].report.collectives == 2);
  for (const RankRun& run : runs) CHECK(error_ratio(run.out, want) <= 1.0);
}

TEST_CASE("an emulated GPU runs the sharded plan: kernels on the emulator, collectives between them",
          "[dist][gpu]") {
  // The GPU search shards with the GPU's link (NVLink, PCIe) in its costs; the emulator runs each
  // rank's kernels (the very source NVRTC compiles) and the communicator's collectives on
  // the host between them, storing only the rank's block of each split weight.
  const testsupport::ScopedEnv fast_link("LUMINAL_LINK_LATENCY_US", kFastLinkUs);
  Graph g;
  test::build_model(g, gpu_tp_block(), 1);
  const auto data = test::random_inputs(*g.impl(), 9);
  const auto want = run_single(g, data, Target::cpu());
  for (const char* t : {"cuda:sm_90+emu", "hip:gfx90a+emu"}) {
    INFO(t);
    auto runs = run_ranks(g, data, 2, Target::parse(t));
    const CompileReport& rep = runs[0].report;
    INFO(rep.to_string());
    CHECK(rep.ranks == 2);
    CHECK(rep.collectives >= 1);
    CHECK(rep.sharding.find(std::string(t).rfind("cuda", 0) == 0 ? "nvlink" : "pcie") != std::string::npos);
    CHECK(rep.codegen.rfind("emulator", 0) == 0);
    CHECK(rep.interpreted_kernels == 0);
    for (const RankRun& run : runs) {
      CHECK(error_ratio(run.out, want) <= 1.0);
      CHECK(std::memcmp(run.out.at("y").data(), runs[0].out.at("y").data(), run.out.at("y").nbytes()) == 0);
    }
  }
}

TEST_CASE("a GPU device target with a communicator: compile_only compiles each rank's kernels",
          "[dist][gpu]") {
  // Without a GPU the device runtime cannot run (compile() says so before anything else);
  // compile_only still searches once for all ranks and compiles each rank's kernels with
  // hipRTC, which is here.
  std::string why;
  if (!hip::hiprtc_available(&why)) {
    WARN("hipRTC is not available here (" << why << "); skipped");
    return;
  }
  const testsupport::ScopedEnv fast_link("LUMINAL_LINK_LATENCY_US", kFastLinkUs);
  Graph g;
  test::build_model(g, gpu_tp_block(), 1);
  std::vector<CompileReport> reps(2);
  const auto errors = test::on_ranks(2, [&](int r, const std::shared_ptr<Communicator>& comm, std::string&) {
    CompileOptions o;
    o.communicator = comm;
    o.compile_only = true;
    o.time_budget_seconds = 600;
    reps[static_cast<size_t>(r)] = compile(g, Target::parse("hip:gfx90a"), o).report();
  });
  for (const auto& e : errors) {
    INFO(e);
    REQUIRE(e.empty());
  }
  for (const CompileReport& rep : reps) {
    INFO(rep.to_string());
    CHECK(rep.ranks == 2);
    CHECK(rep.collectives >= 1);
    CHECK(rep.codegen.find("gfx90a") != std::string::npos);
    CHECK(rep.generated_kernels == rep.kernels);
  }
}

TEST_CASE("a small block stays whole: the cost model finds no gain in sharding it", "[dist]") {
  Graph g;
  test::build_model(g, BlockConfig{}, 1);  // d_model 64: every weight is cache-resident
  const auto data = test::random_inputs(*g.impl(), 5);
  auto runs = run_ranks(g, data, 2, Target::cpu());
  CHECK(runs[0].report.collectives == 0);
  CHECK(error_ratio(runs[1].out, run_single(g, data, Target::cpu())) <= 1.0);
}

namespace {

// compile() on `P` in-process ranks, rank r with graph graphs[r] and options made by
// opts(r); each rank's CompileError message ("" when it compiled) and report.
struct RankCompile {
  std::string error;
  CompileReport report;
};
std::vector<RankCompile> compile_ranks(const std::vector<const Graph*>& graphs,
                                       const std::function<CompileOptions(int)>& opts) {
  const int P = static_cast<int>(graphs.size());
  auto comms = Communicator::local_group(P);
  std::vector<RankCompile> out(static_cast<size_t>(P));
  std::vector<std::thread> ts;
  for (int r = 0; r < P; ++r)
    ts.emplace_back([&, r] {
      CompileOptions o = opts(r);
      o.communicator = comms[static_cast<size_t>(r)];
      try {
        out[static_cast<size_t>(r)].report = compile(*graphs[static_cast<size_t>(r)], Target::cpu(), o).report();
      } catch (const CompileError& e) {
        out[static_cast<size_t>(r)].error = e.what();
      }
    });
  for (auto& t : ts) t.join();
  return out;
}

}  // namespace

TEST_CASE("ranks that compile different programs fail at compile time, naming the ranks", "[dist]") {
  // Rank 1 compiles another graph: its collectives would pair with the wrong ones, so
  // compile() refuses on every rank before any search.
  Graph g0, g1;
  test::build_model(g0, tp_block(), 1);
  test::build_model(g1, BlockConfig{}, 1);
  for (const auto& r : compile_ranks({&g0, &g1}, [](int) { return CompileOptions{}; })) {
    INFO(r.error);
    CHECK(r.error.find("rank(s) 1 compile a different graph, target or search options than rank 0") !=
          std::string::npos);
  }
  // The same graph with other search options on rank 2 of 3: refused, naming rank 2.
  for (const auto& r : compile_ranks({&g0, &g0, &g0}, [](int rank) {
         CompileOptions o;
         if (rank == 2) o.node_limit = 1234;
         return o;
       })) {
    INFO(r.error);
    CHECK(r.error.find("rank(s) 2 compile a different") != std::string::npos);
  }
}

TEST_CASE("one search for every rank: rank 0's plan runs everywhere", "[dist]") {
  // The search is wall-clock budgeted, so ranks searching on their own could extract
  // different plans on a busy machine; rank 0 searches and sends its plan instead.
  Graph g;
  test::build_model(g, tp_block(), 1);
  const auto runs = compile_ranks({&g, &g, &g, &g}, [](int) { return CompileOptions{}; });
  for (size_t r = 0; r < runs.size(); ++r) {
    INFO("rank " << r << ": " << runs[r].error);
    REQUIRE(runs[r].error.empty());
    CHECK(runs[r].report.kernels == runs[0].report.kernels);
    CHECK(runs[r].report.egraph_nodes == runs[0].report.egraph_nodes);  // the searched e-graph: rank 0's
    CHECK(runs[r].report.collectives == runs[0].report.collectives);
    CHECK((runs[r].report.stop_reason.find("plan searched by rank 0") != std::string::npos) == (r > 0));
  }
  // A search that fails on rank 0 fails every rank with its message; no rank is left
  // waiting in a collective.
  for (const auto& r : compile_ranks({&g, &g}, [](int) {
         CompileOptions o;
         o.skip_rules = {"no-such-rule"};
         return o;
       })) {
    INFO(r.error);
    CHECK(r.error.find("no-such-rule") != std::string::npos);
  }
}

TEST_CASE("a decode step (one token) is sharded too, and equals one process's", "[dist]") {
  // With one row the projections reach the search as batched matmuls with a unit batch
  // axis; the column split applies to them as well (the decode bench's case).
  Graph g;
  BlockConfig c = tp_block();
  c.seq = 1;
  test::build_model(g, c, 1);
  const auto data = test::random_inputs(*g.impl(), 9);
  const auto want = run_single(g, data, Target::cpu());
  auto runs = run_ranks(g, data, 2, Target::cpu());
  INFO(runs[0].report.to_string());
  CHECK(runs[0].report.collectives > 0);
  for (const RankRun& run : runs) {
    CHECK(error_ratio(run.out, want) <= 1.0);
    CHECK(std::memcmp(run.out.at("y").data(), runs[0].out.at("y").data(), run.out.at("y").nbytes()) == 0);
  }
}

namespace {

// Each output of `got` against `want` within rounding relative to that output's scale
// (a rank sums its block of a contraction, then the ranks are summed: another order).
void check_outputs_within_scale(const std::map<std::string, HostTensor>& got,
                                const std::map<std::string, HostTensor>& want) {
  for (const auto& [name, t] : want) {
    INFO(name);
    double scale = 0;
    for (float v : t.to_f32()) scale = std::max(scale, static_cast<double>(std::abs(v)));
    CHECK(test::compare_outputs({{name, got.at(name)}}, {{name, t}}, 1e-5 * std::max(scale, 1.0), 1e-4) <=
          1.0);
  }
}

// "... 2 all_gather, 4 all_reduce; ..." -> 4 for "all_reduce".
int64_t count_in_plan(const std::string& sharding, const std::string& what) {
  const size_t at = sharding.find(" " + what);
  if (at == std::string::npos) return 0;
  size_t b = at;
  while (b > 0 && std::isdigit(static_cast<unsigned char>(sharding[b - 1]))) --b;
  return std::stoll(sharding.substr(b, at - b));
}

}  // namespace

TEST_CASE("a Llama decode step with its KV cache takes Megatron's plan: 2 all_reduce per layer", "[dist]") {
  // The decode form: one row (the projections are batched matmuls with a unit axis), the
  // KV cache appended by concat, and the new K/V rows as outputs (replicated, like every
  // output: gathered when their projection is split). Two layers: the greedy extraction
  // over tree costs used to gather the second layer's heads and FFN columns instead.
  const int64_t layers = 2;
  const Graph g = test::tp_decode_step(layers);
  const auto data = test::random_inputs(*g.impl(), 21, {{"P", 9}});
  const auto want = run_single(g, data, Target::cpu());
  for (int P : {2, 4}) {
    INFO("ranks " << P);
    auto runs = run_ranks(g, data, P, Target::cpu());
    const CompileReport& rep = runs[0].report;
    INFO(rep.to_string());
    CHECK(count_in_plan(rep.sharding, "all_reduce") == 2 * layers);
    // Besides the all_reduces only the new K/V rows (the outputs) may be gathered.
    CHECK(rep.collectives - 2 * layers == count_in_plan(rep.sharding, "all_gather"));
    CHECK(count_in_plan(rep.sharding, "all_gather") <= 2 * layers);
    for (const RankRun& run : runs) {
      check_outputs_within_scale(run.out, want);
      for (const auto& [name, t] : want) {
        INFO(name);
        CHECK(std::memcmp(run.out.at(name).data(), runs[0].out.at(name).data(), t.nbytes()) == 0);
      }
    }
  }
}

TEST_CASE("sharded programs are fused: the decode step's kernels absorb their producers on every rank",
          "[dist]") {
  // absorb-producers on a sharded program: fewer kernels than without it, the same
  // collectives (Megatron's two all_reduce per layer), and every rank's outputs those of
  // one process. (Priced as if each rank had the host to itself, the fused plan made one
  // layer's attention whole on every rank instead, and measured 9-10% dearer:
  // cost/target_desc.hpp, per_rank_share.)
  const int64_t layers = 2;
  const Graph g = test::tp_decode_step(layers);
  const auto data = test::random_inputs(*g.impl(), 23, {{"P", 5}});
  const auto want = run_single(g, data, Target::cpu());
  const auto fused = run_ranks(g, data, 2, Target::cpu());
  const auto unfused = run_ranks(g, data, 2, Target::cpu(), {"absorb-producers"});
  const CompileReport &a = fused[0].report, &b = unfused[0].report;
  INFO(a.to_string() << "\nwithout absorb-producers: " << b.to_string());
  CHECK(a.kernels < b.kernels);
  CHECK(a.estimated_seconds <= b.estimated_seconds);
  CHECK(count_in_plan(a.sharding, "all_reduce") == 2 * layers);
  CHECK(a.collectives == b.collectives);
  for (const RankRun& run : fused) check_outputs_within_scale(run.out, want);
}
