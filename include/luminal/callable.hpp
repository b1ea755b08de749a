// A compiled program: immutable after compile(), cheap to copy (copies share the program
// and the bound params), safe to call from many threads at once.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "luminal/host_tensor.hpp"
#include "luminal/serving.hpp"
#include "luminal/target.hpp"

namespace luminal {

namespace detail {
struct CallableState;
}

/// What a GPU code generator's compiler reports for one kernel (ptxas -v, comgr): the
/// resources that bound its occupancy. A kernel that spills is a cost-model error: the
/// schedule asked for more registers than the architecture gives a thread.
struct KernelResources {
  std::string name;
  int registers = 0;       ///< per thread
  int shared_bytes = 0;    ///< static shared memory (LDS) per block
  int spill_bytes = 0;     ///< spill stores + loads, bytes
  int stack_bytes = 0;     ///< per-thread stack frame
};

struct CompileReport {
  std::string target;         // Target::to_string() of the compiled target
  int64_t kernels = 0;        // kernels in the chosen program
  int64_t primitive_ops = 0;  // primitive nodes of the input graph that the outputs need
  int64_t egraph_nodes = 0;
  int64_t egraph_classes = 0;
  int64_t iterations = 0;
  std::string stop_reason;  // why the search stopped ("saturated", "time budget", ...)
  double compile_seconds = 0;
  double estimated_seconds = 0;  // the cost model's estimate of one call
  // Code generation: generated kernels (CPU: C kernels; GPU: plan kernels), plan steps that had to run on the
  // interpreter (never silently: each is counted here and named in stop_reason), the
  // arena holding every intermediate vs the sum of the intermediates' sizes.
  int64_t generated_kernels = 0;
  int64_t interpreted_kernels = 0;
  int64_t arena_bytes = 0;
  int64_t intermediate_bytes = 0;
  double codegen_seconds = 0;  // lowering + rendering + C compiler (or JIT cache load)
  // The code generator and its version: "nvrtc 13.0 cubin sm_90", "hiprtc 5.2 gfx90a",
  // "cc gcc 12.2.0", "emulator cuda sm_90 (c++ g++ 12.2.0)", "interpreter".
  std::string codegen;
  // GPU targets compiled by NVRTC/hipRTC: one entry per kernel, in program order.
  std::vector<KernelResources> kernel_resources;
  // Tensor parallelism (CompileOptions::communicator): ranks, collective steps of this
  // rank's program, bytes one rank sends or receives per call (at the dims' planning
  // values), and the plan in words (docs/distributed.md).
  int64_t ranks = 1;
  int64_t collectives = 0;
  int64_t comm_bytes = 0;
  std::string sharding;
  // The search was skipped: this graph was compiled before (same target, options and
  // library build) and its plan came from the plan cache (memory or disk).
  bool plan_cached = false;
  std::string to_string() const;
};

/// Why a call did not complete (Status::code).
enum class StatusCode {
  ok,
  error,              ///< a bad call or a failure: the message says which (RuntimeError...)
  cancelled,          ///< its CallOptions::cancel token was cancelled (CancelledError)
  deadline_exceeded,  ///< its CallOptions::deadline passed (DeadlineExceededError)
};

/// What Callable::run reports instead of throwing.
struct Status {
  bool ok = true;
  std::string message;  // the message the equivalent throwing call would carry
  StatusCode code = StatusCode::ok;
  explicit operator bool() const { return ok; }
};

/// A box of a param's elements: per axis, [start, end) (Callable::param_region).
struct ParamRegion {
  std::vector<int64_t> start, end;
};

/// A tensor in a GPU's memory, owned by the caller (Callable::run_device): its device
/// address (a CUdeviceptr or hipDeviceptr_t; on an emulated target, host memory), dtype
/// and shape, dense and row-major.
struct DeviceTensor {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::uint64_t address = 0;
};

class Callable {
 public:
  /// An empty Callable: calling it throws RuntimeError.
  Callable() = default;
  explicit Callable(std::shared_ptr<detail::CallableState> state) : state_(std::move(state)) {}

  /// Binds the param `name` (validated: known param, dtype, shape). Safe while other
  /// threads call this Callable (a live weight swap): calls that start afterwards see the
  /// new value, calls already running finish with the old one (kept alive until they end).
  void bind(const std::string& name, HostTensor value);
  /// Binds several params at once: a call sees either all of the new values or none.
  void bind(const std::map<std::string, HostTensor>& params);
  /// Runs the program. Validates the inputs (unknown or missing names, rank, dims,
  /// dims outside their range, dtype, unbound params, the graph's guards) and throws
  /// RuntimeError on a bad call; the Callable stays usable.
  std::map<std::string, HostTensor> operator()(const std::map<std::string, HostTensor>& inputs) const;

  /// The non-throwing call: `inputs` may be HostTensor::view()s of caller memory (never
  /// copied); an entry of `outputs` that already has the output's dtype and shape and is
  /// writable (e.g. a writable view) is filled in place, any other is replaced.
  /// An output whose memory overlaps an input's (an in-place update, x = f(x)) is
  /// computed into a fresh buffer and copied over it afterwards (one allocation); two
  /// outputs sharing memory are an error.
  Status run(const std::map<std::string, HostTensor>& inputs,
             std::map<std::string, HostTensor>& outputs) const noexcept;
  /// The same with per-call options: threads, a deadline, a cancel token (serving.hpp).
  Status run(const std::map<std::string, HostTensor>& inputs, std::map<std::string, HostTensor>& outputs,
             const CallOptions& options) const noexcept;
  /// operator() with per-call options; a stopped call throws CancelledError or
  /// DeadlineExceededError.
  std::map<std::string, HostTensor> operator()(const std::map<std::string, HostTensor>& inputs,
                                               const CallOptions& options) const;

  /// Runs a GPU program on the caller's device memory, with no copies to or from the
  /// host. Every input and every output is given, on the Callable's device, outputs with
  /// the dtype and shape the inputs' dims imply; no output may overlap an input or another
  /// output. The work is ordered on the caller's `stream` (a CUstream or hipStream_t;
  /// null: the default stream) -- after what was queued there before, before what is
  /// queued after -- and the call returns without waiting for it. Params stay on the
  /// device: the first call after bind() uploads them. A bad call comes back as a Status
  /// before anything is queued; a program that gathers rows by ids from an input (an
  /// embedding) checks the ids on the host, so that call waits for the stream. On an
  /// emulated target the addresses are host memory and the work is done on return; on
  /// the CPU and reference targets the Status is an error.
  Status run_device(const std::map<std::string, DeviceTensor>& inputs,
                    const std::map<std::string, DeviceTensor>& outputs,
                    void* stream = nullptr) const noexcept;

  /// Bytes of scratch memory this Callable holds for its calls (in use and idle).
  int64_t memory_held() const;
  /// Frees the scratch memory no call is using now.
  void trim_memory() const;

  /// Writes the compiled program (graph, kernel plan, compiled code, bound params) to
  /// `path`; luminal::load() runs it without a C compiler. CPU target only.
  void save(const std::string& path) const;

  const CompileReport& report() const;
  const Target& target() const;
  /// Names in declaration order.
  std::vector<std::string> input_names() const;
  std::vector<std::string> param_names() const;
  /// The part of param `name` this program reads: its whole shape, except in a program
  /// compiled with a communicator of several ranks that reads only this rank's block of a
  /// sharded weight (docs/distributed.md). Elements outside it may be bound with any
  /// value -- bind_safetensors (safetensors.hpp) reads only the region from the file.
  ParamRegion param_region(const std::string& name) const;
  std::vector<std::string> output_names() const;

  /// Internal.
  const std::shared_ptr<detail::CallableState>& state() const { return state_; }

 private:
  std::shared_ptr<detail::CallableState> state_;
};

/// Loads a program written by Callable::save (same Luminal build and CPU features).
Callable load(const std::string& path);

}  // namespace luminal
