// Child process of aot_test.cpp: loads a saved program, runs it on an input large enough
// for the generated code to run on worker threads, destroys the last Callable, and does
// it again. It must exit 0. When the generated code used OpenMP, nothing but
// luminal::load() brought libgomp into this process, so unloading the program unloaded
// that runtime under its parked workers (SIGSEGV at the first destruction); today the
// workers are libluminal's pool, and whatever library an object needs is still pinned.
#include <cstdio>
#include <vector>

#include "luminal/luminal.hpp"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  namespace lm = luminal;
  std::vector<float> xs(1 << 20, 0.5f);
  for (int round = 0; round < 3; ++round) {
    lm::Callable h = lm::load(argv[1]);
    auto out = h({{"x", lm::HostTensor::from(xs, {1024, 1024})}});
    if (out.at("y").values<float>()[12345] != out.at("y").values<float>()[0]) return 3;
  }  // the last Callable of each round is destroyed here
  std::puts("ok");
  return 0;
}
