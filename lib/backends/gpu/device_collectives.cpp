#include "backends/gpu/device_collectives.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "luminal/error.hpp"

namespace luminal::gpu {

namespace {

// Grid-stride loops of 256 threads. The sum adds block q to the running value in rank
// order, one element per thread: the host's order (reference::sum_in_rank_order), so the
// same bits; i32 wraps (unsigned). The copies move rows of any type (a null source writes
// zeros): lm_coll_copy4 in 4-byte words when every address, length and stride allows,
// lm_coll_copy bytewise otherwise.
const char* kKernels = R"LMCOLL(
/* ---- the local steps of collectives on device memory (gpu/device_collectives.hpp) ---- */
extern "C" __global__ void __launch_bounds__(256) lm_coll_sum_f32(float* __restrict__ dst,
    const float* __restrict__ src, int64_t n, int64_t world) {
  for (int64_t i = (int64_t)blockIdx.x * 256 + threadIdx.x; i < n; i += (int64_t)gridDim.x * 256) {
    float acc = src[i];
    for (int64_t q = 1; q < world; ++q) acc = acc + src[q * n + i];
    dst[i] = acc;
  }
}
extern "C" __global__ void __launch_bounds__(256) lm_coll_sum_i32(uint32_t* __restrict__ dst,
    const uint32_t* __restrict__ src, int64_t n, int64_t world) {
  for (int64_t i = (int64_t)blockIdx.x * 256 + threadIdx.x; i < n; i += (int64_t)gridDim.x * 256) {
    uint32_t acc = src[i];
    for (int64_t q = 1; q < world; ++q) acc = acc + src[q * n + i];
    dst[i] = acc;
  }
}
#define LM_COLL_COPY(name, T)                                                                           \
  extern "C" __global__ void __launch_bounds__(256) name(T* dst, const T* src, int64_t row, int64_t outer,  \
                                                         int64_t world, int64_t dq, int64_t dout, int64_t sq, \
                                                         int64_t so) {                                      \
    const int64_t total = row * outer * world;                                                            \
    for (int64_t i = (int64_t)blockIdx.x * 256 + threadIdx.x; i < total; i += (int64_t)gridDim.x * 256) { \
      const int64_t b = i % row, o = (i / row) % outer, q = i / (row * outer);                            \
      dst[q * dq + o * dout + b] = src ? src[q * sq + o * so + b] : (T)0;                                 \
    }                                                                                                     \
  }
LM_COLL_COPY(lm_coll_copy, unsigned char)
LM_COLL_COPY(lm_coll_copy4, uint32_t)
)LMCOLL";

const char* kEntries = R"LMCOLL(
/* ---- host entries of the collectives' kernels (the driver's launch ABI) ---- */
#define LM_COLL_PTR(T, i) ((T*)(uintptr_t)*(const uint64_t*)lm_args[i])
#define LM_COLL_I64(i) (*(const int64_t*)lm_args[i])
extern "C" void lm_coll_sum_f32_launch(const unsigned* lm_gd, const unsigned* lm_bd, void** lm_args) {
  const dim3 lm_grid = {lm_gd[0], lm_gd[1], lm_gd[2]}, lm_block = {lm_bd[0], lm_bd[1], lm_bd[2]};
  auto lm_body = [&]() { lm_coll_sum_f32(LM_COLL_PTR(float, 0), LM_COLL_PTR(const float, 1), LM_COLL_I64(2),
                                         LM_COLL_I64(3)); };
  lm_emu::launch(lm_grid, lm_block, 0, "lm_coll_sum_f32", lm_body);
}
extern "C" const int lm_coll_sum_f32_nargs = 4;
extern "C" void lm_coll_sum_i32_launch(const unsigned* lm_gd, const unsigned* lm_bd, void** lm_args) {
  const dim3 lm_grid = {lm_gd[0], lm_gd[1], lm_gd[2]}, lm_block = {lm_bd[0], lm_bd[1], lm_bd[2]};
  auto lm_body = [&]() { lm_coll_sum_i32(LM_COLL_PTR(uint32_t, 0), LM_COLL_PTR(const uint32_t, 1), LM_COLL_I64(2),
                                         LM_COLL_I64(3)); };
  lm_emu::launch(lm_grid, lm_block, 0, "lm_coll_sum_i32", lm_body);
}
extern "C" const int lm_coll_sum_i32_nargs = 4;
#define LM_COLL_COPY_ENTRY(name, T)                                                                          \
  extern "C" void name##_launch(const unsigned* lm_gd, const unsigned* lm_bd, void** lm_args) {              \
    const dim3 lm_grid = {lm_gd[0], lm_gd[1], lm_gd[2]}, lm_block = {lm_bd[0], lm_bd[1], lm_bd[2]};          \
    auto lm_body = [&]() {                                                                                     \
      name(LM_COLL_PTR(T, 0), LM_COLL_PTR(const T, 1), LM_COLL_I64(2), LM_COLL_I64(3), LM_COLL_I64(4),       \
           LM_COLL_I64(5), LM_COLL_I64(6), LM_COLL_I64(7), LM_COLL_I64(8));                                    \
    };                                                                                                         \
    lm_emu::launch(lm_grid, lm_block, 0, #name, lm_body);                                                      \
  }                                                                                                            \
  extern "C" const int name##_nargs = 9;
LM_COLL_COPY_ENTRY(lm_coll_copy, unsigned char)
LM_COLL_COPY_ENTRY(lm_coll_copy4, uint32_t)
)LMCOLL";

}  // namespace

bool has_collectives(const compiler::KernelPlan& plan) {
  for (const auto& st : plan.steps)
    if (st.spec->kind == ir::KernelKind::Collective) return true;
  return false;
}

void add_collective_kernels(GpuSource& src) {
  if (src.collective_kernels) return;
  src.kernels += kKernels;
  src.collective_kernels = true;
}

const char* collective_kernel_entries() { return kEntries; }

DeviceLocalOps::DeviceLocalOps(const DeviceApi& api, void* module, void* stream)
    : api_(api),
      stream_(stream),
      sum_f32_(api.function(module, "lm_coll_sum_f32")),
      sum_i32_(api.function(module, "lm_coll_sum_i32")),
      copy_(api.function(module, "lm_coll_copy")),
      copy4_(api.function(module, "lm_coll_copy4")) {}

DeviceLocalOps::~DeviceLocalOps() {
  if (scratch_) api_.free(scratch_);
}

std::byte* DeviceLocalOps::scratch(std::size_t bytes) {
  if (bytes > capacity_) {
    api_.synchronize(stream_, "the steps before a collective's scratch grows");  // the old one may be in use
    if (scratch_) api_.free(scratch_);
    scratch_ = 0;
    capacity_ = 0;
    scratch_ = api_.alloc(bytes);
    capacity_ = bytes;
  }
  return reinterpret_cast<std::byte*>(scratch_);
}

void DeviceLocalOps::launch(void* fn, const char* name, int64_t work,
                            std::initializer_list<uint64_t> params) {
  if (work <= 0) return;
  std::vector<uint64_t> values(params);
  std::vector<void*> args;
  for (auto& v : values) args.push_back(&v);
  const unsigned grid[3] = {static_cast<unsigned>(std::min<int64_t>((work + 255) / 256, 65535)), 1, 1};
  const unsigned block[3] = {256, 1, 1};
  api_.launch(fn, grid, block, args.data(), stream_, name);
}

void DeviceLocalOps::sum_in_rank_order(DType dt, const std::byte* blocks, std::size_t world, int64_t n,
                                       std::byte* dst) {
  if (dt != DType::f32 && dt != DType::i32)
    throw InternalError(std::string("[collective] a sum over ranks of ") + std::string(dtype_name(dt)));
  launch(dt == DType::f32 ? sum_f32_ : sum_i32_, dt == DType::f32 ? "lm_coll_sum_f32" : "lm_coll_sum_i32", n,
         {reinterpret_cast<uint64_t>(dst), reinterpret_cast<uint64_t>(blocks), static_cast<uint64_t>(n),
          static_cast<uint64_t>(world)});
}

void DeviceLocalOps::copy_rows(std::byte* dst, const std::byte* src, std::size_t row, std::size_t outer,
                               std::size_t world, std::size_t dq, std::size_t dout, std::size_t sq,
                               std::size_t so) {
  const auto d = reinterpret_cast<uint64_t>(dst), s = reinterpret_cast<uint64_t>(src);
  if ((d | s | row | dq | dout | sq | so) % 4 == 0) {  // f32 and i32 rows: a word per thread
    launch(copy4_, "lm_coll_copy4", static_cast<int64_t>(row / 4 * outer * world),
           {d, s, row / 4, outer, world, dq / 4, dout / 4, sq / 4, so / 4});
    return;
  }
  launch(copy_, "lm_coll_copy", static_cast<int64_t>(row * outer * world),
         {d, s, row, outer, world, dq, dout, sq, so});
}

void DeviceLocalOps::before_communicator() { api_.synchronize(stream_, "the steps before a collective"); }

}  // namespace luminal::gpu
