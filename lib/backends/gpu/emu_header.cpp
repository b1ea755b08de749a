#include "backends/gpu/emu_header.hpp"

namespace luminal::gpu {

namespace {

const char* kRuntime = R"LMEMU(
/* ---- Luminal GPU emulation header (host C++17) ---- */
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <pthread.h>
#include <sys/mman.h>
#if !defined(__x86_64__)
#include <ucontext.h>
#endif

struct dim3 {
  unsigned int x, y, z;
};

/* fragment words a thread posts for a matrix instruction: 6 for mma.sync, 4 for MFMA,
   16 for WMMA (a whole row of A and column of B) */
#define LM_EMU_FRAG_WORDS 16

namespace lm_emu {

enum { kReady = 0, kBlockWait = 1, kWarpWait = 2, kDone = 3 };

struct Fiber {
  void* sp;
  dim3 tid;
  unsigned int linear;
  int state;
#if !defined(__x86_64__)
  ucontext_t ctx;
#endif
};

/* One cp.async: its destination, the source bytes (read at issue: sources are the
   kernel's inputs, which nothing writes while it runs), the bytes to write and its group. */
struct AsyncCopy {
  void* dst;
  unsigned int group, bytes;
  unsigned char data[16];
};
enum { kAsyncSlots = 64 };

typedef void (*Body)(void*);

struct Block {
  Fiber* fibers;
  unsigned int n;
  int fibered;
  void* sched_sp;
#if !defined(__x86_64__)
  ucontext_t sched_ctx;
#endif
  Body body;
  void* arg;
  uint32_t* xchg;     /* one word per thread: shuffles */
  uint32_t* frags;    /* LM_EMU_FRAG_WORDS a thread: matrix-instruction fragments */
  /* cp.async copies a thread has issued and not yet written (kAsyncSlots a thread,
     allocated at the first copy), their count, and the number of its open group */
  struct AsyncCopy* async;
  unsigned int* async_n;
  unsigned int* async_group;
  char* stacks;
  size_t stack_bytes;
  const char* kernel;
};

static thread_local Block* cur_block;
static thread_local Fiber* cur;
static thread_local dim3 block_idx, block_dim, grid_dim;

#if defined(__x86_64__)
/* Saves the callee-saved registers on the current stack, stores the stack pointer in
   *save, switches to `to` and restores the registers saved there. */
extern "C" __attribute__((visibility("hidden"))) void lm_emu_switch(void** save, void* to);
__asm__(
    ".text\n"
    ".p2align 4\n"
    ".globl lm_emu_switch\n"
    ".hidden lm_emu_switch\n"
    ".type lm_emu_switch,@function\n"
    "lm_emu_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n"
    ".size lm_emu_switch, .-lm_emu_switch\n");
#endif

static void to_scheduler() {
#if defined(__x86_64__)
  lm_emu_switch(&cur->sp, cur_block->sched_sp);
#else
  swapcontext(&cur->ctx, &cur_block->sched_ctx);
#endif
}

static void entry() {
  Block* b = cur_block;
  b->body(b->arg);
  cur->state = kDone;
  to_scheduler();
  __builtin_trap(); /* a finished fiber is never resumed */
}

static void wait(int kind) {
  if (!cur_block->fibered) {
    fprintf(stderr, "[luminal emulator] kernel %s uses a barrier or warp operation but was launched as barrier-free\n",
            cur_block->kernel);
    abort();
  }
  cur->state = kind;
  to_scheduler();
}

static void run_block(Block* b) {
  const unsigned int n = b->n;
  if (b->async) { /* copies a block left pending are dropped (undefined on the device) */
    memset(b->async_n, 0, n * sizeof(unsigned int));
    memset(b->async_group, 0, n * sizeof(unsigned int));
  }
  if (!b->fibered) {
    Fiber f;
    f.state = kReady;
    unsigned int i = 0;
    for (unsigned int z = 0; z < block_dim.z; ++z)
      for (unsigned int y = 0; y < block_dim.y; ++y)
        for (unsigned int x = 0; x < block_dim.x; ++x) {
          f.tid.x = x; f.tid.y = y; f.tid.z = z;
          f.linear = i++;
          cur = &f;
          b->body(b->arg);
        }
    return;
  }
  for (unsigned int i = 0; i < n; ++i) {
    Fiber* f = &b->fibers[i];
    f->linear = i;
    f->tid.x = i % block_dim.x;
    f->tid.y = (i / block_dim.x) % block_dim.y;
    f->tid.z = i / (block_dim.x * block_dim.y);
    f->state = kReady;
    char* top = b->stacks + (size_t)(i + 1) * b->stack_bytes;
#if defined(__x86_64__)
    void** sp = (void**)(top - 64); /* 6 registers, then the "return address" entry() */
    for (int r = 0; r < 8; ++r) sp[r] = 0;
    sp[6] = (void*)&entry;
    f->sp = sp;
#else
    getcontext(&f->ctx);
    f->ctx.uc_stack.ss_sp = top - b->stack_bytes + 4096;
    f->ctx.uc_stack.ss_size = b->stack_bytes - 4096;
    f->ctx.uc_link = 0;
    makecontext(&f->ctx, entry, 0);
#endif
  }
  for (;;) {
    for (unsigned int i = 0; i < n; ++i) {
      Fiber* f = &b->fibers[i];
      if (f->state != kReady) continue;
      cur = f;
#if defined(__x86_64__)
      lm_emu_switch(&b->sched_sp, f->sp);
#else
      swapcontext(&b->sched_ctx, &f->ctx);
#endif
    }
    unsigned int live = 0;
    for (unsigned int i = 0; i < n; ++i) live += b->fibers[i].state != kDone;
    if (live == 0) return;
    int released = 0;
    for (unsigned int w0 = 0; w0 < n; w0 += LM_WARP) {
      const unsigned int w1 = w0 + LM_WARP < n ? w0 + LM_WARP : n;
      int all = 1, any = 0;
      for (unsigned int i = w0; i < w1 && all; ++i) {
        const int s = b->fibers[i].state;
        if (s == kDone) continue;
        if (s != kWarpWait) all = 0;
        any = 1;
      }
      if (all && any) {
        for (unsigned int i = w0; i < w1; ++i)
          if (b->fibers[i].state == kWarpWait) b->fibers[i].state = kReady;
        released = 1;
      }
    }
    if (!released) {
      int all = 1;
      for (unsigned int i = 0; i < n && all; ++i) {
        const int s = b->fibers[i].state;
        if (s != kDone && s != kBlockWait) all = 0;
      }
      if (all) {
        for (unsigned int i = 0; i < n; ++i)
          if (b->fibers[i].state == kBlockWait) b->fibers[i].state = kReady;
        released = 1;
      }
    }
    if (!released) {
      fprintf(stderr,
              "[luminal emulator] kernel %s, block (%u, %u, %u): threads wait at different barriers "
              "(a barrier or warp operation in divergent control flow)\n",
              b->kernel, block_idx.x, block_idx.y, block_idx.z);
      abort();
    }
  }
}

struct Launch {
  dim3 grid, block;
  int fibered;
  const char* kernel;
  Body body;
  void* arg;
  uint64_t next; /* next block to run (atomic) */
};

static void* worker(void* p) {
  Launch* L = (Launch*)p;
  Block b;
  memset(&b, 0, sizeof b);
  b.n = L->block.x * L->block.y * L->block.z;
  b.fibered = L->fibered;
  b.body = L->body;
  b.arg = L->arg;
  b.kernel = L->kernel;
  size_t map_bytes = 0;
  if (b.fibered) {
    b.fibers = (Fiber*)calloc(b.n, sizeof(Fiber));
    b.xchg = (uint32_t*)calloc(b.n, sizeof(uint32_t));
    b.frags = (uint32_t*)calloc((size_t)b.n * LM_EMU_FRAG_WORDS, sizeof(uint32_t));
    b.stack_bytes = 64 * 1024;
    map_bytes = (size_t)b.n * b.stack_bytes;
    b.stacks = (char*)mmap(0, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (b.stacks == (char*)MAP_FAILED || !b.fibers || !b.xchg || !b.frags) {
      fprintf(stderr, "[luminal emulator] cannot allocate fiber stacks for kernel %s\n", b.kernel);
      abort();
    }
    for (unsigned int i = 0; i < b.n; ++i) /* a guard page below each stack */
      mprotect(b.stacks + (size_t)i * b.stack_bytes, 4096, PROT_NONE);
  }
  cur_block = &b;
  block_dim = L->block;
  grid_dim = L->grid;
  const uint64_t total = (uint64_t)L->grid.x * L->grid.y * L->grid.z;
  for (;;) {
    const uint64_t i = __atomic_fetch_add(&L->next, 1, __ATOMIC_RELAXED);
    if (i >= total) break;
    block_idx.x = (unsigned int)(i % L->grid.x);
    block_idx.y = (unsigned int)((i / L->grid.x) % L->grid.y);
    block_idx.z = (unsigned int)(i / ((uint64_t)L->grid.x * L->grid.y));
    run_block(&b);
  }
  cur_block = 0;
  cur = 0;
  if (b.fibered) {
    munmap(b.stacks, map_bytes);
    free(b.fibers);
    free(b.xchg);
    free(b.frags);
  }
  free(b.async);
  free(b.async_n);
  free(b.async_group);
  return 0;
}

static int workers() {
  const char* e = getenv("LUMINAL_EMU_THREADS");
  int n = e && *e ? atoi(e) : (int)sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (n < 256 ? n : 256) : 1;
}

/* Runs `body` as every thread of every block of the grid. */
template <class F>
static void launch(dim3 grid, dim3 block, int fibered, const char* kernel, F& f) {
  const uint64_t blocks = (uint64_t)grid.x * grid.y * grid.z;
  const uint64_t threads = (uint64_t)block.x * block.y * block.z;
  if (blocks == 0 || threads == 0) return;
  Launch L;
  L.grid = grid;
  L.block = block;
  L.fibered = fibered;
  L.kernel = kernel;
  L.body = [](void* p) { (*(F*)p)(); };
  L.arg = &f;
  L.next = 0;
  uint64_t n = (uint64_t)workers();
  if (n > blocks) n = blocks;
  if (blocks * threads < 8192) n = 1; /* not worth a thread */
  pthread_t tids[256];
  uint64_t started = 0;
  for (uint64_t i = 1; i < n; ++i)
    if (pthread_create(&tids[started], 0, worker, &L) == 0) ++started;
  worker(&L);
  for (uint64_t i = 0; i < started; ++i) pthread_join(tids[i], 0);
}

}  // namespace lm_emu

#define threadIdx (lm_emu::cur->tid)
#define blockIdx (lm_emu::block_idx)
#define blockDim (lm_emu::block_dim)
#define gridDim (lm_emu::grid_dim)
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __shared__ static thread_local
#define LM_INLINE static inline __attribute__((always_inline))
#define LM_DEVICE static inline
/* the device computes every FMA of the math prelude as one rounding: so does the host */
#define LM_FMA(a, b, c) __builtin_fmaf((a), (b), (c))

/* ---- host definitions of the device helpers (gpu_prelude.hpp has the layouts) ---- */
LM_DEVICE void lm_sync() { lm_emu::wait(lm_emu::kBlockWait); }

LM_DEVICE uint32_t lm_emu_exchange(uint32_t v, int m) {
  lm_emu::Block* b = lm_emu::cur_block;
  const unsigned int me = lm_emu::cur->linear;
  b->xchg[me] = v;
  lm_emu::wait(lm_emu::kWarpWait);
  const uint32_t r = b->xchg[(me / LM_WARP) * LM_WARP + ((me % LM_WARP) ^ (unsigned int)m)];
  lm_emu::wait(lm_emu::kWarpWait);
  return r;
}
LM_DEVICE float lm_shfl_xor_f32(float v, int m) {
  uint32_t u;
  memcpy(&u, &v, 4);
  u = lm_emu_exchange(u, m);
  memcpy(&v, &u, 4);
  return v;
}
LM_DEVICE int32_t lm_shfl_xor_i32(int32_t v, int m) { return (int32_t)lm_emu_exchange((uint32_t)v, m); }

/* A 128-bit load: on the device one ld.global.v4 that faults unless the address is 16-byte
   aligned, so the emulator refuses a misaligned one too (the renderer's run-time guard
   must have sent such a tile to its scalar loads). */
struct alignas(16) lm_u32x4 {
  uint32_t x, y, z, w;
};
LM_DEVICE int lm_aligned16(const void* p) { return ((uintptr_t)p & 15u) == 0; }
static unsigned long long lm_emu_ld128_n; /* 128- and 64-bit loads run (tests ask lm_emu_ld128_count) */
extern "C" unsigned long long lm_emu_ld128_count(void) { return __atomic_load_n(&lm_emu_ld128_n, __ATOMIC_RELAXED); }
/* One vector load of `bytes` (16 or 8), counted; refused unless `bytes`-aligned. */
static void lm_emu_vector_load(void* dst, const void* p, unsigned bytes) {
  __atomic_fetch_add(&lm_emu_ld128_n, 1ull, __ATOMIC_RELAXED);
  if (((uintptr_t)p & (bytes - 1u)) != 0) {
    fprintf(stderr, "[luminal emulator] kernel %s: misaligned %u-bit load at %p\n",
            lm_emu::cur_block ? lm_emu::cur_block->kernel : "?", bytes * 8u, p);
    abort();
  }
  memcpy(dst, p, bytes);
}
LM_DEVICE lm_u32x4 lm_ld128(const void* p) {
  lm_u32x4 r;
  lm_emu_vector_load(&r, p, 16);
  return r;
}
/* ... and a 64-bit one (ld.global.v2.u32: 8-byte aligned), refused the same way. */
struct alignas(8) lm_u32x2 {
  uint32_t x, y;
};
LM_DEVICE int lm_aligned8(const void* p) { return ((uintptr_t)p & 7u) == 0; }
LM_DEVICE lm_u32x2 lm_ld64(const void* p) {
  lm_u32x2 r;
  lm_emu_vector_load(&r, p, 8);
  return r;
}
/* 4 floats of shared memory in one 16-byte load (ld.shared.v4.f32): misaligned faults on
   the device, so it is refused here too; not counted among the global vector loads. */
struct alignas(16) lm_f32x4 {
  float x, y, z, w;
};
LM_DEVICE lm_f32x4 lm_lds128f(const float* p) {
  if (((uintptr_t)p & 15u) != 0) {
    fprintf(stderr, "[luminal emulator] kernel %s: misaligned 128-bit shared load at %p\n",
            lm_emu::cur_block ? lm_emu::cur_block->kernel : "?", (const void*)p);
    abort();
  }
  lm_f32x4 r;
  memcpy(&r, p, 16);
  return r;
}

LM_DEVICE void lm_atomic_add_f32(float* p, float v) {
  uint32_t* u = (uint32_t*)p;
  uint32_t old = __atomic_load_n(u, __ATOMIC_RELAXED), upd;
  do {
    float f;
    memcpy(&f, &old, 4);
    f = f + v;
    memcpy(&upd, &f, 4);
  } while (!__atomic_compare_exchange_n(u, &old, upd, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
}
/* Blocks run on host threads: a sequentially consistent add and fence. */
LM_DEVICE int32_t lm_atomic_add_i32(int32_t* p, int32_t v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
LM_DEVICE void lm_threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
)LMEMU";

// The warp-wide product, by the layout in gpu_prelude.hpp: every lane posts its
// fragments, then computes its own four outputs from the warp's A and B, products exact
// (f16 x f16 fits in f32), sums in k order in f32.
const char* kMma = R"LMEMU(
LM_DEVICE float lm_emu_mma_in(uint16_t h, int bf16) { return bf16 ? lm_bf16_to_f32(h) : lm_f16_to_f32(h); }
LM_DEVICE void lm_emu_mma(float* d, const uint32_t* a, const uint32_t* b, const float* c, int bf16) {
  lm_emu::Block* bk = lm_emu::cur_block;
  const unsigned int me = lm_emu::cur->linear, lane = me % 32, w0 = me - lane;
  uint32_t* mine = bk->frags + (size_t)me * LM_EMU_FRAG_WORDS;
  for (int i = 0; i < 4; ++i) mine[i] = a[i];
  mine[4] = b[0];
  mine[5] = b[1];
  lm_emu::wait(lm_emu::kWarpWait);
  const unsigned int g = lane / 4, t = lane % 4;
  float out[4];
  for (int i = 0; i < 4; ++i) {
    const unsigned int row = g + 8 * (i / 2), col = 2 * t + i % 2;
    float s = c[i];
    for (unsigned int k = 0; k < 16; ++k) {
      const uint32_t* fa = bk->frags + (size_t)(w0 + (row % 8) * 4 + (k % 8) / 2) * LM_EMU_FRAG_WORDS;
      const uint32_t wa = fa[(row >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0)];
      const uint32_t* fb = bk->frags + (size_t)(w0 + col * 4 + (k % 8) / 2) * LM_EMU_FRAG_WORDS;
      const uint32_t wb = fb[4 + (k >= 8 ? 1 : 0)];
      const float x = lm_emu_mma_in((uint16_t)((k & 1) ? wa >> 16 : wa & 0xffffu), bf16);
      const float y = lm_emu_mma_in((uint16_t)((k & 1) ? wb >> 16 : wb & 0xffffu), bf16);
      s = s + x * y;
    }
    out[i] = s;
  }
  lm_emu::wait(lm_emu::kWarpWait);
  for (int i = 0; i < 4; ++i) d[i] = out[i];
}
LM_DEVICE void lm_mma_m16n8k16_f16(float* d, const uint32_t* a, const uint32_t* b, const float* c) {
  lm_emu_mma(d, a, b, c, 0);
}
LM_DEVICE void lm_mma_m16n8k16_bf16(float* d, const uint32_t* a, const uint32_t* b, const float* c) {
  lm_emu_mma(d, a, b, c, 1);
}
)LMEMU";

// The wavefront-wide MFMA, by the layout in gpu_prelude.hpp: every lane posts its two A
// and two B words, then computes its own four outputs (column r, rows 4g..4g+3) from
// the wavefront's A and B, products exact in f32, sums in k order.
const char* kMfma = R"LMEMU(
LM_DEVICE void lm_emu_mfma(float* d, const uint32_t* a, const uint32_t* b, const float* c, int bf16) {
  lm_emu::Block* bk = lm_emu::cur_block;
  const unsigned int me = lm_emu::cur->linear, lane = me % 64, w0 = me - lane;
  uint32_t* mine = bk->frags + (size_t)me * LM_EMU_FRAG_WORDS;
  mine[0] = a[0];
  mine[1] = a[1];
  mine[2] = b[0];
  mine[3] = b[1];
  lm_emu::wait(lm_emu::kWarpWait);
  const unsigned int r = lane % 16, g = lane / 16;
  float out[4];
  for (int q = 0; q < 4; ++q) {
    const unsigned int row = 4 * g + q, col = r;
    float s = c[q];
    for (unsigned int k = 0; k < 16; ++k) {
      /* A[row][k] is item k % 4 of lane row + 16 (k / 4); B[k][col] of lane col + 16 (k / 4) */
      const uint32_t wa = bk->frags[(size_t)(w0 + row + 16 * (k / 4)) * LM_EMU_FRAG_WORDS + (k % 4) / 2];
      const uint32_t wb = bk->frags[(size_t)(w0 + col + 16 * (k / 4)) * LM_EMU_FRAG_WORDS + 2 + (k % 4) / 2];
      const float x = lm_emu_mma_in((uint16_t)((k & 1) ? wa >> 16 : wa & 0xffffu), bf16);
      const float y = lm_emu_mma_in((uint16_t)((k & 1) ? wb >> 16 : wb & 0xffffu), bf16);
      s = s + x * y;
    }
    out[q] = s;
  }
  lm_emu::wait(lm_emu::kWarpWait);
  for (int q = 0; q < 4; ++q) d[q] = out[q];
}
LM_DEVICE void lm_mfma_16x16x16_f16(float* d, const uint32_t* a, const uint32_t* b, const float* c) {
  lm_emu_mfma(d, a, b, c, 0);
}
LM_DEVICE void lm_mfma_16x16x16_bf16(float* d, const uint32_t* a, const uint32_t* b, const float* c) {
  lm_emu_mfma(d, a, b, c, 1);
}
)LMEMU";

// RDNA3's wave32 WMMA, by the layout in gpu_prelude.hpp: every lane posts its row of A
// and column of B (8 words each), then computes its own 8 outputs (column r, rows 2v + h)
// from lanes 0-15, products exact in f32, sums in k order. The instruction requires lanes
// r and r + 16 to hold the same operands; a kernel that breaks that would compute garbage
// on the device, so the emulator refuses it.
const char* kWmma = R"LMEMU(
LM_DEVICE void lm_emu_wmma(float* d, const uint32_t* a, const uint32_t* b, const float* c, int bf16) {
  lm_emu::Block* bk = lm_emu::cur_block;
  const unsigned int me = lm_emu::cur->linear, lane = me % 32, w0 = me - lane;
  uint32_t* mine = bk->frags + (size_t)me * LM_EMU_FRAG_WORDS;
  for (int i = 0; i < 8; ++i) {
    mine[i] = a[i];
    mine[8 + i] = b[i];
  }
  lm_emu::wait(lm_emu::kWarpWait);
  const unsigned int r = lane % 16, h = lane / 16;
  const uint32_t* twin = bk->frags + (size_t)(w0 + (lane ^ 16u)) * LM_EMU_FRAG_WORDS;
  if (memcmp(mine, twin, 16 * sizeof(uint32_t)) != 0) {
    fprintf(stderr, "[luminal emulator] kernel %s: WMMA operands of lanes %u and %u differ (the "
            "instruction needs both half-waves to hold the same A and B)\n",
            bk->kernel, lane, lane ^ 16u);
    abort();
  }
  float out[8];
  for (int v = 0; v < 8; ++v) {
    const unsigned int row = 2 * v + h, col = r;
    float s = c[v];
    for (unsigned int k = 0; k < 16; ++k) {
      const uint32_t wa = bk->frags[(size_t)(w0 + row) * LM_EMU_FRAG_WORDS + k / 2];
      const uint32_t wb = bk->frags[(size_t)(w0 + col) * LM_EMU_FRAG_WORDS + 8 + k / 2];
      const float x = lm_emu_mma_in((uint16_t)((k & 1) ? wa >> 16 : wa & 0xffffu), bf16);
      const float y = lm_emu_mma_in((uint16_t)((k & 1) ? wb >> 16 : wb & 0xffffu), bf16);
      s = s + x * y;
    }
    out[v] = s;
  }
  lm_emu::wait(lm_emu::kWarpWait);
  for (int v = 0; v < 8; ++v) d[v] = out[v];
}
LM_DEVICE void lm_wmma_16x16x16_f16(float* d, const uint32_t* a, const uint32_t* b, const float* c) {
  lm_emu_wmma(d, a, b, c, 0);
}
LM_DEVICE void lm_wmma_16x16x16_bf16(float* d, const uint32_t* a, const uint32_t* b, const float* c) {
  lm_emu_wmma(d, a, b, c, 1);
}
)LMEMU";

// ldmatrix and cp.async, by the layouts in gpu_prelude.hpp. ldmatrix: every lane posts
// its row address, then gathers its four words from the rows of lanes 8q + i. cp.async:
// the copy is queued with its group and written when the issuing thread's wait completes
// that group -- not at issue -- so a kernel that reads a tile before waiting for it (and
// a barrier) reads stale bytes here, as it may on the device.
const char* kAsync = R"LMEMU(
LM_DEVICE void lm_emu_ldmatrix(uint32_t* r, const uint16_t* row, int trans) {
  lm_emu::Block* bk = lm_emu::cur_block;
  const unsigned int me = lm_emu::cur->linear, lane = me % 32, w0 = me - lane;
  if (((uintptr_t)row & 15u) != 0) {
    fprintf(stderr, "[luminal emulator] kernel %s: ldmatrix row address %p is not 16-byte aligned\n", bk->kernel,
            (const void*)row);
    abort();
  }
  memcpy(bk->frags + (size_t)me * LM_EMU_FRAG_WORDS, &row, sizeof row);
  lm_emu::wait(lm_emu::kWarpWait);
  uint32_t out[4];
  for (unsigned int q = 0; q < 4; ++q) {
    const uint16_t* rows[8];
    for (unsigned int i = 0; i < 8; ++i) memcpy(&rows[i], bk->frags + (size_t)(w0 + 8 * q + i) * LM_EMU_FRAG_WORDS, sizeof rows[i]);
    const unsigned int a = lane / 4, b = 2 * (lane % 4);
    const uint16_t lo = trans ? rows[b][a] : rows[a][b], hi = trans ? rows[b + 1][a] : rows[a][b + 1];
    out[q] = (uint32_t)lo | ((uint32_t)hi << 16);
  }
  lm_emu::wait(lm_emu::kWarpWait);
  for (int q = 0; q < 4; ++q) r[q] = out[q];
}
LM_DEVICE void lm_ldmatrix_x4(uint32_t* r, const uint16_t* row) { lm_emu_ldmatrix(r, row, 0); }
LM_DEVICE void lm_ldmatrix_x4_trans(uint32_t* r, const uint16_t* row) { lm_emu_ldmatrix(r, row, 1); }

static unsigned long long lm_emu_cp_async_n; /* copies issued (tests ask lm_emu_cp_async_count) */
extern "C" unsigned long long lm_emu_cp_async_count(void) { return __atomic_load_n(&lm_emu_cp_async_n, __ATOMIC_RELAXED); }
LM_DEVICE void lm_cp_async16(uint16_t* dst, const uint16_t* src, int src_bytes) {
  lm_emu::Block* bk = lm_emu::cur_block;
  const unsigned int me = lm_emu::cur->linear;
  __atomic_fetch_add(&lm_emu_cp_async_n, 1ull, __ATOMIC_RELAXED);
  if (((uintptr_t)dst & 15u) != 0 || (src_bytes > 0 && ((uintptr_t)src & 15u) != 0) || src_bytes < 0 || src_bytes > 16) {
    fprintf(stderr, "[luminal emulator] kernel %s: cp.async of %d bytes from %p to %p (both must be 16-byte aligned)\n",
            bk->kernel, src_bytes, (const void*)src, (void*)dst);
    abort();
  }
  if (!bk->async) {
    bk->async = (lm_emu::AsyncCopy*)calloc((size_t)bk->n * lm_emu::kAsyncSlots, sizeof(lm_emu::AsyncCopy));
    bk->async_n = (unsigned int*)calloc(bk->n, sizeof(unsigned int));
    bk->async_group = (unsigned int*)calloc(bk->n, sizeof(unsigned int));
    if (!bk->async || !bk->async_n || !bk->async_group) abort();
  }
  unsigned int* n = &bk->async_n[me];
  if (*n == lm_emu::kAsyncSlots) {
    fprintf(stderr, "[luminal emulator] kernel %s: more than %d cp.async copies pending in one thread\n", bk->kernel,
            (int)lm_emu::kAsyncSlots);
    abort();
  }
  lm_emu::AsyncCopy* c = &bk->async[(size_t)me * lm_emu::kAsyncSlots + (*n)++];
  c->dst = dst;
  c->group = bk->async_group[me];
  c->bytes = (unsigned int)src_bytes;
  memset(c->data, 0, 16);
  if (src_bytes > 0) memcpy(c->data, src, (size_t)src_bytes);
}
LM_DEVICE void lm_cp_async_commit() {
  lm_emu::Block* bk = lm_emu::cur_block;
  if (bk->async_group) ++bk->async_group[lm_emu::cur->linear];
}
/* Writes the thread's copies of every group but its newest N closed ones (and the
   open one, which no wait covers on the device either: it is committed later). */
template <int N>
LM_DEVICE void lm_cp_async_wait() {
  lm_emu::Block* bk = lm_emu::cur_block;
  if (!bk->async) return;
  const unsigned int me = lm_emu::cur->linear, open = bk->async_group[me];
  lm_emu::AsyncCopy* q = bk->async + (size_t)me * lm_emu::kAsyncSlots;
  unsigned int kept = 0;
  for (unsigned int i = 0; i < bk->async_n[me]; ++i) {
    if (q[i].group + (unsigned int)N < open) {
      memcpy(q[i].dst, q[i].data, 16);
    } else {
      q[kept++] = q[i];
    }
  }
  bk->async_n[me] = kept;
}
)LMEMU";

// lm_emu_mma_in (the operand decode) lives with the mma helpers.
std::string mma_operand_decode() {
  return std::string(kMma).substr(0, std::string(kMma).find("LM_DEVICE void lm_emu_mma("));
}

}  // namespace

std::string emulation_header(const GpuArch& arch) {
  return "#define LM_WARP " + std::to_string(arch.warp) + "\n" + kRuntime;
}

std::string emulation_mma_helpers() { return kMma; }

std::string emulation_async_helpers() { return kAsync; }

std::string emulation_mfma_helpers() { return mma_operand_decode() + kMfma; }

std::string emulation_wmma_helpers() { return mma_operand_decode() + kWmma; }

}  // namespace luminal::gpu
