// How the ranks of a distributed program talk (docs/distributed.md). Every rank (an MPI
// process, or one GPU of an NCCL clique) compiles the same graph with the same
// communicator size in CompileOptions::communicator; the search shards the program over
// the ranks, and each rank's Callable call runs its share and the collectives.
//
// The interface is three calls on raw memory. Open MPI and NCCL are loaded with dlopen
// when first used: including this header needs neither mpi.h nor nccl.h, and a program
// linking Luminal runs on a machine without them until it asks for a communicator.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace luminal {

class Communicator {
 public:
  virtual ~Communicator() = default;

  /// This process's rank, 0 .. size() - 1, and the number of ranks.
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "mpi" or "nccl".
  virtual std::string name() const = 0;

  /// Every rank contributes `bytes` bytes at `send`; `recv` (size() * bytes) receives
  /// rank q's contribution at offset q * bytes, on every rank. Host memory for MPI, the
  /// communicator's device memory for NCCL.
  virtual void all_gather(const void* send, void* recv, std::size_t bytes) = 0;
  /// Block q of `send` (size() blocks of `bytes` each) goes to rank q; block q of `recv`
  /// comes from rank q.
  virtual void all_to_all(const void* send, void* recv, std::size_t bytes) = 0;
  virtual void barrier() = 0;
  /// Whether all_gather and all_to_all take device memory (NCCL: the GPU runtime then runs
  /// a collective's local steps as device kernels) rather than host memory (MPI, local).
  virtual bool device_buffers() const { return false; }

  /// A collective that the other ranks do not complete within this many seconds (a rank
  /// died, hangs, or runs another program) throws RuntimeError naming the operation and
  /// the ranks instead of waiting forever. Default: LUMINAL_DIST_TIMEOUT, else 120 s.
  double timeout_seconds() const { return timeout_s_; }
  void set_timeout_seconds(double s) { timeout_s_ = s; }

  /// An existing MPI communicator (MPI_Comm) of an MPI program that has initialised MPI.
  /// A template, so this header needs no mpi.h; the MPI library is the one the program
  /// already loaded (Open MPI's ABI; another MPI is a RuntimeError).
  template <class MpiComm>
  static std::shared_ptr<Communicator> mpi(MpiComm comm) {
    static_assert(std::is_trivially_copyable_v<MpiComm> && sizeof(MpiComm) <= sizeof(std::uint64_t),
                  "Communicator::mpi takes an MPI_Comm");
    std::uint64_t handle = 0;
    std::memcpy(&handle, &comm, sizeof comm);
    return mpi_from_handle(handle, sizeof comm);
  }
  /// MPI_COMM_WORLD of the job `mpirun` started (MPI is initialised here when the program
  /// has not, and finalised at exit). Without mpirun: a job of one rank.
  static std::shared_ptr<Communicator> from_environment();
  /// True when this process was started by mpirun (its environment names a rank).
  static bool launched_by_mpirun();

  /// `size` ranks as threads of one process, sharing memory (tests, experiments on one
  /// host without mpirun): element r is rank r. Each rank's calls come from its own thread.
  static std::vector<std::shared_ptr<Communicator>> local_group(int size);

  /// NCCL's ncclUniqueId: rank 0 creates it (nccl_unique_id), the program hands it to every
  /// rank (by MPI, a file, ...), and each calls nccl(id, rank, size, device).
  using NcclId = std::array<char, 128>;
  static NcclId nccl_unique_id();
  /// A communicator over GPUs through NCCL (libnccl.so.2 and libcudart, dlopen'ed). Its
  /// buffers are device memory of `cuda_device`. Throws RuntimeError when NCCL or a GPU is
  /// missing.
  static std::shared_ptr<Communicator> nccl(const NcclId& id, int rank, int size, int cuda_device = 0);

 protected:
  Communicator();

 private:
  static std::shared_ptr<Communicator> mpi_from_handle(std::uint64_t handle, std::size_t handle_size);
  double timeout_s_ = 120;
};

}  // namespace luminal
