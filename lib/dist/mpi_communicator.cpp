// Communicator over MPI, loaded with dlopen (Open MPI's ABI: handles are pointers to the
// library's objects, MPI_COMM_WORLD and MPI_BYTE are its exported globals). Every
// collective is non-blocking and polled against the communicator's timeout, so a rank
// that died or hangs makes the others fail with a clear error instead of waiting forever.
#include <sched.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <mutex>
#include <string>

#include "dist/dl.hpp"
#include "luminal/communicator.hpp"
#include "luminal/error.hpp"

namespace luminal {

namespace {

using Handle = void*;  // MPI_Comm, MPI_Datatype, MPI_Request: pointers in Open MPI

struct MpiApi {
  void* lib = nullptr;
  int (*initialized)(int*) = nullptr;
  int (*finalized)(int*) = nullptr;
  int (*init_thread)(int*, char***, int, int*) = nullptr;
  int (*finalize)() = nullptr;
  int (*comm_rank)(Handle, int*) = nullptr;
  int (*comm_size)(Handle, int*) = nullptr;
  int (*iallgather)(const void*, int, Handle, void*, int, Handle, Handle, Handle*) = nullptr;
  int (*ialltoall)(const void*, int, Handle, void*, int, Handle, Handle, Handle*) = nullptr;
  int (*ibarrier)(Handle, Handle*) = nullptr;
  int (*test)(Handle*, int*, void*) = nullptr;
  Handle comm_world = nullptr;
  Handle byte = nullptr;

  static const MpiApi& get() {
    static const MpiApi api = [] {
      const std::string what = "mpi";
      MpiApi a;
      // RTLD_GLOBAL: Open MPI's plugins resolve the library's symbols globally.
      a.lib = dist::open_library({"libmpi.so.40", "libmpi.so"}, what, RTLD_NOW | RTLD_GLOBAL);
      if (!dlsym(a.lib, "ompi_mpi_comm_world"))
        throw RuntimeError("[mpi] the loaded MPI library is not Open MPI: only Open MPI's ABI is supported");
      a.initialized = dist::symbol<decltype(a.initialized)>(a.lib, "MPI_Initialized", what);
      a.finalized = dist::symbol<decltype(a.finalized)>(a.lib, "MPI_Finalized", what);
      a.init_thread = dist::symbol<decltype(a.init_thread)>(a.lib, "MPI_Init_thread", what);
      a.finalize = dist::symbol<decltype(a.finalize)>(a.lib, "MPI_Finalize", what);
      a.comm_rank = dist::symbol<decltype(a.comm_rank)>(a.lib, "MPI_Comm_rank", what);
      a.comm_size = dist::symbol<decltype(a.comm_size)>(a.lib, "MPI_Comm_size", what);
      a.iallgather = dist::symbol<decltype(a.iallgather)>(a.lib, "MPI_Iallgather", what);
      a.ialltoall = dist::symbol<decltype(a.ialltoall)>(a.lib, "MPI_Ialltoall", what);
      a.ibarrier = dist::symbol<decltype(a.ibarrier)>(a.lib, "MPI_Ibarrier", what);
      a.test = dist::symbol<decltype(a.test)>(a.lib, "MPI_Test", what);
      a.comm_world = dlsym(a.lib, "ompi_mpi_comm_world");
      a.byte = dist::symbol<Handle>(a.lib, "ompi_mpi_byte", what);
      return a;
    }();
    return api;
  }
};

// Set when a collective timed out: its request is still pending, so MPI_Finalize could
// wait for it forever; the process exits without it (mpirun then ends the job).
std::atomic<bool> g_broken{false};

double default_timeout() {
  const char* v = std::getenv("LUMINAL_DIST_TIMEOUT");
  const double t = v && *v ? std::atof(v) : 0;
  return t > 0 ? t : 120;
}

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(Handle comm) : api_(MpiApi::get()), comm_(comm) {
    check(api_.comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check(api_.comm_size(comm_, &size_), "MPI_Comm_size");
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "mpi"; }

  void all_gather(const void* send, void* recv, std::size_t bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    Handle req = nullptr;
    check(api_.iallgather(send, count(bytes, "all_gather"), api_.byte, recv, count(bytes, "all_gather"), api_.byte,
                          comm_, &req),
          "MPI_Iallgather");
    wait(req, "all_gather", bytes);
  }
  void all_to_all(const void* send, void* recv, std::size_t bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    Handle req = nullptr;
    check(api_.ialltoall(send, count(bytes, "all_to_all"), api_.byte, recv, count(bytes, "all_to_all"), api_.byte,
                         comm_, &req),
          "MPI_Ialltoall");
    wait(req, "all_to_all", bytes);
  }
  void barrier() override {
    std::lock_guard<std::mutex> lock(mu_);
    Handle req = nullptr;
    check(api_.ibarrier(comm_, &req), "MPI_Ibarrier");
    wait(req, "barrier", 0);
  }

 private:
  void check(int rc, const char* call) const {
    if (rc != 0) throw RuntimeError("[mpi] " + std::string(call) + " failed with error " + std::to_string(rc));
  }
  int count(std::size_t bytes, const char* op) const {
    if (bytes > static_cast<std::size_t>(INT_MAX))
      throw RuntimeError("[" + std::string(op) + "] " + std::to_string(bytes) +
                         " bytes per rank: more than MPI's int count allows");
    return static_cast<int>(bytes);
  }
  // Polls the request; yields the core between polls (ranks may share cores) and gives
  // up after the timeout. The request is left pending then: the job must end (the
  // RuntimeError says so), which mpirun does once this process exits.
  void wait(Handle& req, const char* op, std::size_t bytes) {
    const auto t0 = std::chrono::steady_clock::now();
    for (long spin = 0;; ++spin) {
      int done = 0;
      check(api_.test(&req, &done, nullptr), "MPI_Test");
      if (done) return;
      if (spin > 64) sched_yield();
      if ((spin & 1023) == 0 &&
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout_seconds()) {
        g_broken = true;
        throw RuntimeError("[" + std::string(op) + "] rank " + std::to_string(rank_) + " of " +
                           std::to_string(size_) + ": the other ranks did not complete the collective (" +
                           std::to_string(bytes) + " bytes per rank) within " +
                           std::to_string(static_cast<int>(timeout_seconds())) +
                           " s (LUMINAL_DIST_TIMEOUT): a rank died, hangs or runs another program; end the job");
      }
    }
  }

  const MpiApi& api_;
  Handle comm_;
  int rank_ = 0, size_ = 1;
  std::mutex mu_;
};

// MPI initialised by from_environment is finalised at exit (after every communicator's
// last use: static destruction order runs this after main returns).
struct MpiLifetime {
  bool we_initialised = false;
  ~MpiLifetime() {
    if (!we_initialised || g_broken) return;
    const MpiApi& api = MpiApi::get();
    int fin = 0;
    api.finalized(&fin);
    if (!fin) api.finalize();
  }
};

}  // namespace

Communicator::Communicator() : timeout_s_(default_timeout()) {}

std::shared_ptr<Communicator> Communicator::mpi_from_handle(std::uint64_t handle, std::size_t handle_size) {
  if (handle_size != sizeof(Handle))
    throw RuntimeError("[mpi] this MPI_Comm is not a pointer: only Open MPI's ABI is supported");
  Handle h = nullptr;
  std::memcpy(&h, &handle, sizeof h);
  const MpiApi& api = MpiApi::get();
  int init = 0;
  api.initialized(&init);
  if (!init) throw RuntimeError("[mpi] MPI is not initialised: call MPI_Init first (or use from_environment)");
  return std::make_shared<MpiCommunicator>(h);
}

bool Communicator::launched_by_mpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (const char* s = std::getenv(v); s && *s) return true;
  return false;
}

std::shared_ptr<Communicator> Communicator::from_environment() {
  static MpiLifetime lifetime;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const MpiApi& api = MpiApi::get();
  int init = 0;
  api.initialized(&init);
  if (!init) {
    int provided = 0;
    // MPI_THREAD_SERIALIZED (2 in Open MPI): calls come from any thread, one at a time.
    if (api.init_thread(nullptr, nullptr, 2, &provided) != 0) throw RuntimeError("[mpi] MPI_Init_thread failed");
    lifetime.we_initialised = true;
  }
  return std::make_shared<MpiCommunicator>(api.comm_world);
}

}  // namespace luminal
