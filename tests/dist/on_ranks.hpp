// Ranks as threads for the distributed tests: one local communicator group, one thread
// per rank, every rank's errors collected (an exception a rank throws is its error).
#pragma once

#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "luminal/communicator.hpp"

namespace luminal::test {

/// Runs `body(rank, comm, err)` on P threads over Communicator::local_group(P); returns
/// each rank's `err` (what the body appended, then what it threw).
template <class F>
std::vector<std::string> on_ranks(int P, F body) {
  auto comms = Communicator::local_group(P);
  std::vector<std::string> errors(static_cast<size_t>(P));
  std::vector<std::thread> ts;
  for (int r = 0; r < P; ++r)
    ts.emplace_back([&, r] {
      try {
        body(r, comms[static_cast<size_t>(r)], errors[static_cast<size_t>(r)]);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] += e.what();
      }
    });
  for (auto& t : ts) t.join();
  return errors;
}

}  // namespace luminal::test
