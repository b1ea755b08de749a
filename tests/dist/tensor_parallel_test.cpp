// Tensor parallelism found by the search (docs/distributed.md): ranks as threads of one
// process (Communicator::local_group) compile the same decoder block; each runs its share
// and the collectives; the outputs equal the single-process program's on every rank.
#include <catch2/catch.hpp>
#include <thread>

#include "compiler/translation_models.hpp"
#include "luminal/luminal.hpp"

using namespace luminal;
using luminal::test::BlockConfig;

namespace {

// A block large enough that a weight shard saves more memory traffic than an all_reduce
// costs on the shared-memory link (the cost model decides; smaller blocks stay whole).
BlockConfig tp_block() { return BlockConfig{4, 512, 8, 4, 1536}; }

struct RankRun {
  std::map<std::string, HostTensor> out;
  CompileReport report;
};

std::vector<RankRun> run_ranks(const Graph& g, const std::map<std::string, HostTensor>& data, int P, Target target) {
  auto comms = Communicator::local_group(P);
  std::vector<RankRun> runs(static_cast<size_t>(P));
  std::vector<std::string> errors(static_cast<size_t>(P));
  std::vector<std::thread> ts;
  for (int r = 0; r < P; ++r)
    ts.emplace_back([&, r] {
      try {
        CompileOptions o;
        o.communicator = comms[static_cast<size_t>(r)];
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
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : ts) t.join();
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
double error_ratio(const std::map<std::string, HostTensor>& got, const std::map<std::string, HostTensor>& want) {
  double scale = 0;
  for (float v : want.at("y").to_f32()) scale = std::max(scale, static_cast<double>(std::abs(v)));
  return test::compare_outputs(got, want, 1e-5 * scale, 1e-4);
}

}  // namespace

TEST_CASE("the search shards a decoder block Megatron-style; every rank's output equals one process's", "[dist]") {
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

TEST_CASE("a small block stays whole: the cost model finds no gain in sharding it", "[dist]") {
  Graph g;
  test::build_model(g, BlockConfig{}, 1);  // d_model 64: every weight is cache-resident
  const auto data = test::random_inputs(*g.impl(), 5);
  auto runs = run_ranks(g, data, 2, Target::cpu());
  CHECK(runs[0].report.collectives == 0);
  CHECK(error_ratio(runs[1].out, run_single(g, data, Target::cpu())) <= 1.0);
}

TEST_CASE("ranks that compile different programs fail at compile time, naming the ranks", "[dist]") {
  // Rank 1 compiles another graph (as a rank whose time-budgeted search extracted another
  // plan would): its collectives would pair with the wrong ones, so compile() refuses.
  Graph g0, g1;
  test::build_model(g0, tp_block(), 1);
  test::build_model(g1, BlockConfig{}, 1);
  auto comms = Communicator::local_group(2);
  std::vector<std::string> errors(2);
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; ++r)
    ts.emplace_back([&, r] {
      try {
        CompileOptions o;
        o.communicator = comms[static_cast<size_t>(r)];
        compile(r == 0 ? g0 : g1, Target::cpu(), o);
      } catch (const CompileError& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : ts) t.join();
  for (const auto& e : errors) {
    INFO(e);
    CHECK(e.find("rank(s) 1 compiled a different plan than rank 0") != std::string::npos);
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
