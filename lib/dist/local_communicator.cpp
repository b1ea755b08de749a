// Ranks as threads of one process: each collective is a rendezvous -- every rank posts
// its send buffer, then each copies what it needs from the others' buffers, and nobody
// leaves before everybody has copied (the send buffers stay valid). The same timeout as
// MPI's: a thread that never arrives makes the others throw.
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>

#include "luminal/communicator.hpp"
#include "luminal/error.hpp"

namespace luminal {

namespace {

struct Rendezvous {
  explicit Rendezvous(int n) : size(n), send(static_cast<std::size_t>(n), nullptr) {}
  const int size;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<const void*> send;
  int arrived = 0, copied = 0;
  uint64_t generation = 0;  // completed collectives
  bool posting = true;      // false while the ranks copy
};

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<Rendezvous> rv, int rank) : rv_(std::move(rv)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return rv_->size; }
  std::string name() const override { return "local"; }

  void all_gather(const void* send, void* recv, std::size_t bytes) override {
    exchange(send, "all_gather", [&](int q, const void* src) {
      if (bytes) std::memcpy(static_cast<char*>(recv) + static_cast<std::size_t>(q) * bytes, src, bytes);
    });
  }
  void all_to_all(const void* send, void* recv, std::size_t bytes) override {
    exchange(send, "all_to_all", [&](int q, const void* src) {
      if (bytes)
        std::memcpy(static_cast<char*>(recv) + static_cast<std::size_t>(q) * bytes,
                    static_cast<const char*>(src) + static_cast<std::size_t>(rank_) * bytes, bytes);
    });
  }
  void barrier() override {
    exchange(nullptr, "barrier", [](int, const void*) {});
  }

 private:
  template <class Copy>
  void exchange(const void* send, const char* op, Copy copy) {
    Rendezvous& r = *rv_;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds());
    std::unique_lock<std::mutex> lock(r.mu);
    auto wait = [&](auto ready) {
      if (!r.cv.wait_until(lock, deadline, ready))
        throw RuntimeError("[" + std::string(op) + "] rank " + std::to_string(rank_) + " of " + std::to_string(r.size) +
                           ": the other ranks did not complete the collective within " +
                           std::to_string(static_cast<int>(timeout_seconds())) + " s");
    };
    wait([&] { return r.posting; });  // the previous collective has drained
    const uint64_t gen = r.generation;
    r.send[static_cast<std::size_t>(rank_)] = send;
    if (++r.arrived == r.size) {
      r.posting = false;
      r.cv.notify_all();
    }
    wait([&] { return !r.posting || r.generation != gen; });
    lock.unlock();
    for (int q = 0; q < r.size; ++q) copy(q, r.send[static_cast<std::size_t>(q)]);
    lock.lock();
    if (++r.copied == r.size) {
      r.arrived = r.copied = 0;
      r.posting = true;
      ++r.generation;
      r.cv.notify_all();
    }
    wait([&] { return r.generation != gen; });
  }

  std::shared_ptr<Rendezvous> rv_;
  int rank_;
};

}  // namespace

std::vector<std::shared_ptr<Communicator>> Communicator::local_group(int size) {
  if (size < 1) throw RuntimeError("[local_group] the number of ranks must be >= 1, got " + std::to_string(size));
  auto rv = std::make_shared<Rendezvous>(size);
  std::vector<std::shared_ptr<Communicator>> out;
  for (int r = 0; r < size; ++r) out.push_back(std::make_shared<LocalCommunicator>(rv, r));
  return out;
}

}  // namespace luminal
