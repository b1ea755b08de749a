// The llama.cpp baseline for bench/llama: greedy prefill + decode of a GGUF model through
// llama.cpp's prebuilt CPU libraries (node-llama-cpp@3.21.1's @node-llama-cpp/linux-x64,
// llama.cpp release v0.4.0), loaded with dlopen -- nothing of llama.cpp is linked or
// committed. The few C API entry points used are declared here; the two parameter
// structs are treated as opaque blocks of their v0.4.0 size, filled by the library's own
// *_default_params() and patched at the documented offsets of the fields we set.
//
// Runs like llama-bench: a persistent ggml threadpool attached to the context (its
// workers poll between graph nodes and stay warm across calls), a warm-up call, then per
// repetition a fresh KV cache: prompt of P tokens in one batch, then D decode steps.
//
//   llamacpp_bench --bins DIR --gguf FILE [--prompt 128] [--decode 32] [--reps 5] [--threads 2] [--serve]
//
// Prints medians: prefill_tokens_per_s=..., decode_tokens_per_s=... and the greedy ids
// (tokens: ...) so they can be compared with Luminal's on the same weights. With
// --serve it prints "ready" after its warm-up, then runs one repetition per "rep" line
// on stdin and answers "rep <prefill tok/s> <decode tok/s> <ids>": llama_bench pairs
// each of its own repetitions with one of these.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace {

// ---- the v0.4.0 ABI (include/llama.h, ggml/include/ggml.h) ----
struct ModelParams {
  alignas(8) unsigned char bytes[80];
};
struct ContextParams {
  alignas(8) unsigned char bytes[160];
};
constexpr size_t kCtxNCtx = 0, kCtxNBatch = 4, kCtxNUbatch = 8, kCtxNThreads = 28, kCtxNThreadsBatch = 32;
struct Batch {  // struct llama_batch
  int32_t n_tokens;
  int32_t* token;
  float* embd;
  int32_t* pos;
  int32_t* n_seq_id;
  int32_t** seq_id;
  int8_t* logits;
};
static_assert(sizeof(Batch) == 56);
struct ThreadpoolParams {  // struct ggml_threadpool_params
  alignas(4) unsigned char bytes[528];
};
constexpr size_t kTpNThreads = 512;

using LogFn = void (*)(int, const char*, void*);
struct Api {
  void (*backend_load_all_from_path)(const char*);
  void* (*dev_by_type)(int);
  void* (*dev_backend_reg)(void*);
  void* (*reg_get_proc_address)(void*, const char*);
  ThreadpoolParams (*threadpool_params_default)(int);
  void (*log_set)(LogFn, void*);
  void (*backend_init)();
  ModelParams (*model_default_params)();
  ContextParams (*context_default_params)();
  void* (*model_load_from_file)(const char*, ModelParams);
  void* (*init_from_model)(void*, ContextParams);
  void (*attach_threadpool)(void*, void*, void*);
  Batch (*batch_get_one)(int32_t*, int32_t);
  int32_t (*decode)(void*, Batch);
  float* (*get_logits_ith)(void*, int32_t);
  void (*free_ctx)(void*);
  void (*model_free)(void*);
  int32_t (*model_n_vocab)(const void*);
  const void* (*model_get_vocab)(const void*);
};

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "llamacpp_bench: %s\n", msg.c_str());
  std::exit(1);
}

void* sym(void* lib, const char* name) {
  void* p = dlsym(lib, name);
  if (!p) die(std::string("missing symbol ") + name);
  return p;
}

template <class F>
void bind(F& f, void* lib, const char* name) {
  f = reinterpret_cast<F>(sym(lib, name));
}

void quiet(int, const char*, void*) {}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int32_t argmax(const float* x, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  std::string bins, gguf;
  int prompt = 128, decode_steps = 32, reps = 5, threads = 2;
  bool serve = false;
  for (int i = 1; i < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--serve") {
      serve = true;
      --i;
      continue;
    }
    if (i + 1 >= argc) die("option " + a + " needs a value");
    const std::string v = argv[i + 1];
    if (a == "--bins") bins = v;
    else if (a == "--gguf") gguf = v;
    else if (a == "--prompt") prompt = std::atoi(v.c_str());
    else if (a == "--decode") decode_steps = std::atoi(v.c_str());
    else if (a == "--reps") reps = std::atoi(v.c_str());
    else if (a == "--threads") threads = std::atoi(v.c_str());
    else die("unknown option " + a);
  }
  if (bins.empty() || gguf.empty()) die("usage: llamacpp_bench --bins DIR --gguf FILE [--prompt N] [--decode N] [--reps N] [--threads N]");

  void* base = dlopen((bins + "/libggml-base.so").c_str(), RTLD_NOW | RTLD_GLOBAL);
  void* ggml = dlopen((bins + "/libggml.v0.4.0.so").c_str(), RTLD_NOW | RTLD_GLOBAL);
  void* llama = dlopen((bins + "/libllama.v0.4.0.so").c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!base || !ggml || !llama) die(std::string("dlopen: ") + dlerror());
  Api api{};
  bind(api.backend_load_all_from_path, ggml, "ggml_backend_load_all_from_path");
  bind(api.dev_by_type, ggml, "ggml_backend_dev_by_type");
  bind(api.dev_backend_reg, ggml, "ggml_backend_dev_backend_reg");
  bind(api.reg_get_proc_address, ggml, "ggml_backend_reg_get_proc_address");
  bind(api.threadpool_params_default, base, "ggml_threadpool_params_default");
  bind(api.log_set, llama, "llama_log_set");
  bind(api.backend_init, llama, "llama_backend_init");
  bind(api.model_default_params, llama, "llama_model_default_params");
  bind(api.context_default_params, llama, "llama_context_default_params");
  bind(api.model_load_from_file, llama, "llama_model_load_from_file");
  bind(api.init_from_model, llama, "llama_init_from_model");
  bind(api.attach_threadpool, llama, "llama_attach_threadpool");
  bind(api.batch_get_one, llama, "llama_batch_get_one");
  bind(api.decode, llama, "llama_decode");
  bind(api.get_logits_ith, llama, "llama_get_logits_ith");
  bind(api.free_ctx, llama, "llama_free");
  bind(api.model_free, llama, "llama_model_free");
  bind(api.model_n_vocab, llama, "llama_vocab_n_tokens");
  bind(api.model_get_vocab, llama, "llama_model_get_vocab");

  if (!std::getenv("LLAMACPP_VERBOSE")) api.log_set(quiet, nullptr);
  api.backend_load_all_from_path(bins.c_str());
  api.backend_init();
  void* cpu_dev = api.dev_by_type(0);  // GGML_BACKEND_DEVICE_TYPE_CPU
  if (!cpu_dev) die("the CPU backend did not load");
  void* cpu_reg = api.dev_backend_reg(cpu_dev);
  auto tp_new = reinterpret_cast<void* (*)(ThreadpoolParams*)>(api.reg_get_proc_address(cpu_reg, "ggml_threadpool_new"));
  auto tp_free = reinterpret_cast<void (*)(void*)>(api.reg_get_proc_address(cpu_reg, "ggml_threadpool_free"));
  if (!tp_new || !tp_free) die("no ggml_threadpool_new in the CPU backend");

  void* model = api.model_load_from_file(gguf.c_str(), api.model_default_params());
  if (!model) die("cannot load " + gguf);
  const int32_t n_vocab = api.model_n_vocab(api.model_get_vocab(model));

  ContextParams cp = api.context_default_params();
  const uint32_t n_ctx = static_cast<uint32_t>(prompt + decode_steps + 64), n_batch = static_cast<uint32_t>(prompt);
  std::memcpy(cp.bytes + kCtxNCtx, &n_ctx, 4);
  std::memcpy(cp.bytes + kCtxNBatch, &n_batch, 4);
  std::memcpy(cp.bytes + kCtxNUbatch, &n_batch, 4);
  std::memcpy(cp.bytes + kCtxNThreads, &threads, 4);
  std::memcpy(cp.bytes + kCtxNThreadsBatch, &threads, 4);
  ThreadpoolParams tpp = api.threadpool_params_default(threads);
  std::memcpy(tpp.bytes + kTpNThreads, &threads, 4);
  void* pool = tp_new(&tpp);
  if (!pool) die("threadpool creation failed");

  std::vector<int32_t> tokens(static_cast<size_t>(prompt));
  for (int i = 0; i < prompt; ++i) tokens[static_cast<size_t>(i)] = (i * 7919 + 13) % n_vocab;
  using Clock = std::chrono::steady_clock;
  // One repetition: a fresh KV cache, the prompt in one batch, then the decode steps.
  struct Rep {
    double prefill = 0, decode = 0;  // tokens/s
    std::string ids;
  };
  auto one_rep = [&] {
    Rep out;
    void* ctx = api.init_from_model(model, cp);
    if (!ctx) die("cannot create a context");
    api.attach_threadpool(ctx, pool, pool);
    auto t0 = Clock::now();
    if (api.decode(ctx, api.batch_get_one(tokens.data(), prompt)) != 0) die("llama_decode (prompt) failed");
    int32_t next = argmax(api.get_logits_ith(ctx, -1), n_vocab);
    const double tp = std::chrono::duration<double>(Clock::now() - t0).count();
    std::vector<int32_t> ids{next};
    t0 = Clock::now();
    for (int s = 0; s < decode_steps; ++s) {
      if (api.decode(ctx, api.batch_get_one(&next, 1)) != 0) die("llama_decode (step) failed");
      next = argmax(api.get_logits_ith(ctx, -1), n_vocab);
      ids.push_back(next);
    }
    const double td = std::chrono::duration<double>(Clock::now() - t0).count();
    api.free_ctx(ctx);
    out.prefill = prompt / tp;
    out.decode = decode_steps / td;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) out.ids += ',';
      out.ids += std::to_string(ids[i]);
    }
    return out;
  };
  if (serve) {
    // Paired runs (llama_bench --reps, interleaved with its own): one repetition per
    // "rep" line on stdin, answered on stdout; the pool is paused in between so that
    // its workers do not poll while the other program runs on the same cores.
    // The registry hands out threadpool_new/free only: take pause/resume from the CPU
    // variant the loader chose (already loaded: RTLD_NOLOAD finds it among the files).
    void (*tp_pause)(void*) = nullptr;
    void (*tp_resume)(void*) = nullptr;
    for (const auto& f : std::filesystem::directory_iterator(bins)) {
      const std::string name = f.path().filename().string();
      if (name.rfind("libggml-cpu-", 0) != 0) continue;
      if (void* h = dlopen(f.path().c_str(), RTLD_NOW | RTLD_NOLOAD)) {
        tp_pause = reinterpret_cast<void (*)(void*)>(dlsym(h, "ggml_threadpool_pause"));
        tp_resume = reinterpret_cast<void (*)(void*)>(dlsym(h, "ggml_threadpool_resume"));
        dlclose(h);
        if (tp_pause && tp_resume) break;
      }
    }
    if (!tp_pause || !tp_resume) die("no ggml_threadpool_pause/resume in the loaded CPU backend");
    one_rep();  // warm-up
    tp_pause(pool);
    std::printf("ready\n");
    std::fflush(stdout);
    char line[64];
    while (std::fgets(line, sizeof line, stdin) && std::strncmp(line, "rep", 3) == 0) {
      tp_resume(pool);
      const Rep r = one_rep();
      tp_pause(pool);
      std::printf("rep %.4f %.4f %s\n", r.prefill, r.decode, r.ids.c_str());
      std::fflush(stdout);
    }
    tp_free(pool);
    api.model_free(model);
    return 0;
  }
  std::vector<double> pre, dec;
  std::string ids;
  for (int r = -1; r < reps; ++r) {  // r = -1: warm-up
    const Rep x = one_rep();
    if (r < 0) continue;
    pre.push_back(x.prefill);
    dec.push_back(x.decode);
    ids = x.ids;
  }
  std::printf("tokens: %s\n", ids.c_str());
  std::printf("prefill_tokens_per_s=%.2f\n", median(pre));
  std::printf("decode_tokens_per_s=%.2f\n", median(dec));
  tp_free(pool);
  api.model_free(model);
  return 0;
}
