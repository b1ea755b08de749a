// Run under mpirun: every rank compiles the same decoder block with the communicator
// mpirun's environment gives (Communicator::from_environment), binds the full weights,
// runs its share, and checks its output against the single-process program it also
// compiles. Exit status 0 on every rank when all agree.
//   mpirun -np 2 dist_mpi_block            the check (also -np 4 --oversubscribe)
//   mpirun -np 2 dist_mpi_block --hang     rank 1 never calls: rank 0 must report the
//                                          timeout (LUMINAL_DIST_TIMEOUT) and exit 3
//   mpirun -np 2 dist_mpi_block --die      rank 1 exits before calling
//   mpirun -np 4 dist_mpi_block --scatter-gather
//                                          64 tokens: the all_reduces (128 KB) run as
//                                          reduce-scatter + all_gather over MPI's
//                                          all_to_all (the cost model's choice at 4 ranks)
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "compiler/translation_models.hpp"
#include "luminal/luminal.hpp"

using namespace luminal;

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  auto comm = Communicator::from_environment();
  const int rank = comm->rank(), P = comm->size();
  Graph g;
  const bool scatter_gather = mode == "--scatter-gather";
  test::build_model(g, test::BlockConfig{scatter_gather ? 64 : 4, 512, 8, 4, 1536}, 1);
  const auto data = test::random_inputs(*g.impl(), 11);
  auto run = [&](const CompileOptions& o) {
    Callable fn = compile(g, Target::cpu(), o);
    for (const auto& name : fn.param_names()) fn.bind(name, data.at(name));
    std::map<std::string, HostTensor> in;
    for (const auto& name : fn.input_names()) in.emplace(name, data.at(name));
    return std::make_pair(fn(in), fn.report());
  };
  const auto [want, single_report] = run(CompileOptions{});
  CompileOptions o;
  o.communicator = comm;
  o.time_budget_seconds = 600;  // every rank's search saturates: the same plan everywhere
  Callable fn = compile(g, Target::cpu(), o);
  for (const auto& name : fn.param_names()) fn.bind(name, data.at(name));
  std::map<std::string, HostTensor> in;
  for (const auto& name : fn.input_names()) in.emplace(name, data.at(name));
  if (rank == 1 && mode == "--die") _exit(1);
  if (rank == 1 && mode == "--hang") {
    sleep(60);
    return 0;
  }
  try {
    auto got = fn(in);
    got = fn(in);
    // Within rounding relative to the output's scale (partial sums in another order).
    double scale = 0;
    for (float v : want.at("y").to_f32()) scale = std::max(scale, static_cast<double>(std::abs(v)));
    const double err = test::compare_outputs(got, want, 1e-5 * scale, 1e-4);
    // Rank 0's output, gathered, must be bit-identical on every rank.
    const HostTensor& y = got.at("y");
    std::vector<std::byte> all(y.nbytes() * static_cast<size_t>(P));
    comm->all_gather(y.data(), all.data(), y.nbytes());
    bool same = true;
    for (int q = 1; q < P; ++q) same = same && std::memcmp(all.data(), all.data() + q * y.nbytes(), y.nbytes()) == 0;
    std::printf("rank %d of %d: error ratio %.3g, identical on every rank: %s, collectives %lld\n", rank, P, err,
                same ? "yes" : "no", static_cast<long long>(fn.report().collectives));
    if (rank == 0) std::printf("%s\n", fn.report().to_string().c_str());
    std::fflush(stdout);
    const bool form_ok =
        !scatter_gather ||
        fn.report().sharding.find("2 all_reduce (2 as reduce-scatter + all_gather)") != std::string::npos;
    const bool ok = err <= 1.0 && same && fn.report().collectives == 2 && form_ok;
    comm->barrier();
    return ok ? 0 : 1;
  } catch (const Error& e) {
    std::printf("rank %d: %s\n", rank, e.what());
    std::fflush(stdout);
    return 3;
  }
}
