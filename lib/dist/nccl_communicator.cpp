// Communicator over NCCL, loaded with dlopen (libnccl.so.2 and the CUDA runtime). Its
// buffers are device memory of its GPU; each collective is issued on the default stream
// and polled (cudaStreamQuery, ncclCommGetAsyncError) against the timeout, after which the
// communicator is aborted and a RuntimeError thrown. Written against NCCL's C API; on a
// machine without a GPU (this one) it can only report that clearly -- no backend here
// hands it device buffers yet (docs/distributed.md).
#include <sched.h>

#include <chrono>
#include <string>

#include "dist/dl.hpp"
#include "luminal/communicator.hpp"
#include "luminal/error.hpp"

namespace luminal {

namespace {

struct NcclUid {
  char internal[128];
};
using Comm = void*;
using Stream = void*;

struct NcclApi {
  int (*get_unique_id)(NcclUid*) = nullptr;
  int (*comm_init_rank)(Comm*, int, NcclUid, int) = nullptr;
  int (*comm_destroy)(Comm) = nullptr;
  int (*comm_abort)(Comm) = nullptr;
  int (*async_error)(Comm, int*) = nullptr;
  const char* (*error_string)(int) = nullptr;
  int (*all_gather)(const void*, void*, std::size_t, int, Comm, Stream) = nullptr;
  int (*send)(const void*, std::size_t, int, int, Comm, Stream) = nullptr;
  int (*recv)(void*, std::size_t, int, int, Comm, Stream) = nullptr;
  int (*group_start)() = nullptr;
  int (*group_end)() = nullptr;
  int (*set_device)(int) = nullptr;
  int (*stream_query)(Stream) = nullptr;

  static const NcclApi& get() {
    static const NcclApi api = [] {
      const std::string what = "nccl";
      NcclApi a;
      void* cudart = dist::open_library({"libcudart.so.13", "libcudart.so.12", "libcudart.so"}, what,
                                        RTLD_NOW | RTLD_LOCAL);
      void* nccl = dist::open_library({"libnccl.so.2", "libnccl.so"}, what, RTLD_NOW | RTLD_LOCAL);
      a.get_unique_id = dist::symbol<decltype(a.get_unique_id)>(nccl, "ncclGetUniqueId", what);
      a.comm_init_rank = dist::symbol<decltype(a.comm_init_rank)>(nccl, "ncclCommInitRank", what);
      a.comm_destroy = dist::symbol<decltype(a.comm_destroy)>(nccl, "ncclCommDestroy", what);
      a.comm_abort = dist::symbol<decltype(a.comm_abort)>(nccl, "ncclCommAbort", what);
      a.async_error = dist::symbol<decltype(a.async_error)>(nccl, "ncclCommGetAsyncError", what);
      a.error_string = dist::symbol<decltype(a.error_string)>(nccl, "ncclGetErrorString", what);
      a.all_gather = dist::symbol<decltype(a.all_gather)>(nccl, "ncclAllGather", what);
      a.send = dist::symbol<decltype(a.send)>(nccl, "ncclSend", what);
      a.recv = dist::symbol<decltype(a.recv)>(nccl, "ncclRecv", what);
      a.group_start = dist::symbol<decltype(a.group_start)>(nccl, "ncclGroupStart", what);
      a.group_end = dist::symbol<decltype(a.group_end)>(nccl, "ncclGroupEnd", what);
      a.set_device = dist::symbol<decltype(a.set_device)>(cudart, "cudaSetDevice", what);
      a.stream_query = dist::symbol<decltype(a.stream_query)>(cudart, "cudaStreamQuery", what);
      return a;
    }();
    return api;
  }
  void check(int rc, const char* call) const {
    if (rc != 0) throw RuntimeError("[nccl] " + std::string(call) + ": " + error_string(rc));
  }
};

constexpr int kNcclInt8 = 0;          // ncclInt8: byte counts
constexpr int kCudaErrorNotReady = 600;

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(const NcclId& id, int rank, int size, int device)
      : api_(NcclApi::get()), rank_(rank), size_(size), device_(device) {
    if (rank < 0 || size < 1 || rank >= size)
      throw RuntimeError("[nccl] rank " + std::to_string(rank) + " of " + std::to_string(size) + " is out of range");
    if (int rc = api_.set_device(device); rc != 0)
      throw RuntimeError("[nccl] cudaSetDevice(" + std::to_string(device) + ") failed with CUDA error " +
                         std::to_string(rc) + " (no GPU or no driver?)");
    NcclUid uid;
    std::memcpy(uid.internal, id.data(), sizeof uid.internal);
    api_.check(api_.comm_init_rank(&comm_, size, uid, rank), "ncclCommInitRank");
  }
  ~NcclCommunicator() override {
    if (comm_) api_.comm_destroy(comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "nccl"; }
  bool device_buffers() const override { return true; }

  void all_gather(const void* send, void* recv, std::size_t bytes) override {
    api_.set_device(device_);
    api_.check(api_.all_gather(send, recv, bytes, kNcclInt8, comm_, nullptr), "ncclAllGather");
    wait("all_gather");
  }
  void all_to_all(const void* send, void* recv, std::size_t bytes) override {
    api_.set_device(device_);
    api_.check(api_.group_start(), "ncclGroupStart");
    for (int q = 0; q < size_; ++q) {
      api_.check(api_.send(static_cast<const char*>(send) + q * bytes, bytes, kNcclInt8, q, comm_, nullptr),
                 "ncclSend");
      api_.check(api_.recv(static_cast<char*>(recv) + q * bytes, bytes, kNcclInt8, q, comm_, nullptr), "ncclRecv");
    }
    api_.check(api_.group_end(), "ncclGroupEnd");
    wait("all_to_all");
  }
  void barrier() override {
    api_.set_device(device_);
    // NCCL has no barrier: an all_gather of nothing orders the ranks the same way.
    api_.check(api_.all_gather(nullptr, nullptr, 0, kNcclInt8, comm_, nullptr), "ncclAllGather");
    wait("barrier");
  }

 private:
  void wait(const char* op) {
    const auto t0 = std::chrono::steady_clock::now();
    for (;;) {
      const int q = api_.stream_query(nullptr);
      if (q == 0) return;
      if (q != kCudaErrorNotReady)
        throw RuntimeError("[" + std::string(op) + "] CUDA error " + std::to_string(q) + " on rank " +
                           std::to_string(rank_));
      int async = 0;
      api_.async_error(comm_, &async);
      const bool late =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout_seconds();
      if (async != 0 || late) {
        api_.comm_abort(comm_);
        comm_ = nullptr;
        // appends, not "..." + string: GCC 12 warns falsely (-Wrestrict) on that form
        std::string msg = "[";
        msg.append(op).append("] rank ").append(std::to_string(rank_)).append(" of ").append(std::to_string(size_));
        msg.append(late ? ": the other ranks did not complete the collective within the timeout" : ": ");
        if (!late) msg.append(api_.error_string(async));
        throw RuntimeError(msg.append("; the communicator is aborted"));
      }
      sched_yield();
    }
  }

  const NcclApi& api_;
  int rank_, size_, device_;
  Comm comm_ = nullptr;
};

}  // namespace

Communicator::NcclId Communicator::nccl_unique_id() {
  const NcclApi& api = NcclApi::get();
  NcclUid uid;
  api.check(api.get_unique_id(&uid), "ncclGetUniqueId");
  NcclId id;
  std::memcpy(id.data(), uid.internal, id.size());
  return id;
}

std::shared_ptr<Communicator> Communicator::nccl(const NcclId& id, int rank, int size, int cuda_device) {
  return std::make_shared<NcclCommunicator>(id, rank, size, cuda_device);
}

}  // namespace luminal
