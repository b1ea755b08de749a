// Llama end to end on the CPU: Luminal's examples/llama against llama.cpp and PyTorch
// eager on the same weights, in one run, same thread count. Prints medians and ratios.
//
//   llama_bench --model DIR [--gguf FILE --llamacpp PATH --bins DIR] [--prompt 128]
//               [--decode 32] [--reps 5] [--threads 2] [--kv f32|f16|bf16] [--no-torch] [--mmap]
//
// --kv: the KV cache's dtype (default f32; llama.cpp's cache, as its child runs it, is f16).
// Luminal runs in this process: a warm-up, then per repetition a fresh cache, a P-token
// prefill (timed) and D decode steps after it (timed together: decode at P..P+D past
// tokens). llama.cpp (bench/llama/llamacpp_bench, over its prebuilt libraries) and
// PyTorch (bench/llama/torch_llama.py) run as child processes with the same prompt,
// the same greedy loop and the same thread count; their greedy ids are compared with
// ours. llama.cpp's repetitions are paired with ours: its child stays loaded and runs
// one repetition right after (or, every other round, right before) each of ours, and
// the ratios are the medians of the per-round ratios. On these shared machines the
// memory bandwidth of a whole run drifts by 20% or more within seconds; a ratio of
// two medians taken seconds apart measured the drift as much as the programs. Also
// printed: a plain 2-thread copy of 512 MB (the bandwidth roofline of this run), the
// weight bytes one decode step reads and the bandwidth that implies, and this process's
// resident memory against weights + KV cache.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "llama_model.hpp"
#include "luminal/luminal.hpp"

namespace {

namespace lm = luminal;
using Clock = std::chrono::steady_clock;

/// The median (the mean of the middle two of an even count).
double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

long rss_kb(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) return std::atol(line.c_str() + std::strlen(key));
  return 0;
}

/// GB/s of a plain parallel copy (bytes read + bytes written), median of 5: `threads`
/// std::threads each copying a contiguous slice (starting them costs ~0.1 ms of a ~50 ms copy).
double copy_bandwidth(int threads) {
  const size_t n = size_t{64} << 21;  // 128M floats = 512 MB per side
  std::unique_ptr<float[]> a(new float[n]), b(new float[n]);
  auto parallel = [&](auto&& body) {
    const size_t T = static_cast<size_t>(std::max(threads, 1));
    std::vector<std::thread> team;
    for (size_t t = 0; t < T; ++t) team.emplace_back([&, t] { body(n * t / T, n * (t + 1) / T); });
    for (auto& th : team) th.join();
  };
  parallel([&](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) a[i] = static_cast<float>(i & 1023), b[i] = 0;
  });
  std::vector<double> t;
  for (int r = 0; r < 6; ++r) {
    const auto t0 = Clock::now();
    parallel(
        [&](size_t lo, size_t hi) { std::memcpy(b.get() + lo, a.get() + lo, (hi - lo) * sizeof(float)); });
    if (r) t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  if (b[n - 1] != a[n - 1]) std::abort();
  return 2.0 * static_cast<double>(n) * 4 / median(t) / 1e9;
}

struct Result {
  double prefill = 0, decode = 0;  // tokens/s
  std::string tokens;
  bool ok = false;
};

/// llamacpp_bench --serve as a child: one repetition per rep(), on request.
class PairedChild {
 public:
  explicit PairedChild(const std::string& cmd) {
    int to[2], from[2];
    if (::pipe(to) != 0 || ::pipe(from) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(to[0], 0);
      ::dup2(from[1], 1);
      ::close(to[0]), ::close(to[1]), ::close(from[0]), ::close(from[1]);
      ::execl("/bin/sh", "sh", "-c", (cmd + " --serve").c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(to[0]);
    ::close(from[1]);
    in_ = ::fdopen(to[1], "w");
    out_ = ::fdopen(from[0], "r");
    ok_ = pid_ > 0 && in_ && out_ && read_line().rfind("ready", 0) == 0;
  }
  ~PairedChild() {
    if (in_) std::fclose(in_);  // EOF: the child frees its model and exits
    if (out_) std::fclose(out_);
    if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
  }
  bool ok() const { return ok_; }
  /// One repetition of the child's; ok = false when it did not answer.
  Result rep() {
    Result r;
    if (!ok_ || std::fputs("rep\n", in_) < 0 || std::fflush(in_) != 0) return r;
    const std::string line = read_line();
    char ids[1 << 15] = {0};
    if (std::sscanf(line.c_str(), "rep %lf %lf %32767s", &r.prefill, &r.decode, ids) >= 2) {
      r.tokens = ids;
      r.ok = r.prefill > 0;
    }
    ok_ = r.ok;
    return r;
  }

 private:
  std::string read_line() {
    char buf[1 << 16];
    if (!out_ || !std::fgets(buf, sizeof buf, out_)) return "";
    return buf;
  }
  pid_t pid_ = -1;
  std::FILE* in_ = nullptr;
  std::FILE* out_ = nullptr;
  bool ok_ = false;
};

Result run_child(const std::string& cmd) {
  Result r;
  std::FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[1 << 16];
  while (std::fgets(buf, sizeof buf, p)) {
    std::string line(buf);
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    if (line.rfind("tokens: ", 0) == 0) r.tokens = line.substr(8);
    if (line.rfind("prefill_tokens_per_s=", 0) == 0) r.prefill = std::atof(line.c_str() + 21);
    if (line.rfind("decode_tokens_per_s=", 0) == 0) r.decode = std::atof(line.c_str() + 20);
  }
  r.ok = ::pclose(p) == 0 && r.prefill > 0;
  return r;
}

}  // namespace

int main(int argc, char** argv) try {
  std::map<std::string, std::string> a;
  bool torch = true, mmap_weights = false;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--no-torch") {
      torch = false;
    } else if (k == "--mmap") {
      mmap_weights = true;
    } else if (i + 1 < argc) {
      a[k] = argv[++i];
    }
  }
  if (!a.count("--model")) {
    std::fprintf(stderr,
                 "usage: llama_bench --model DIR [--gguf FILE --llamacpp PATH --bins DIR] [--prompt N] "
                 "[--decode N] [--reps N] [--threads N] [--kv f32|f16|bf16] [--no-torch] [--mmap]\n");
    return 2;
  }
  const std::string dir = a["--model"];
  const int P = a.count("--prompt") ? std::atoi(a["--prompt"].c_str()) : 128;
  const int D = a.count("--decode") ? std::atoi(a["--decode"].c_str()) : 32;
  const int reps = a.count("--reps") ? std::atoi(a["--reps"].c_str()) : 5;
  const int threads = a.count("--threads") ? std::atoi(a["--threads"].c_str()) : 2;
  const lm::DType kv = a.count("--kv") ? llama::kv_dtype_from_name(a["--kv"]) : lm::f32;

  const long rss0 = rss_kb("VmRSS:");
  // As llama-generate: the weights in huge pages (--mmap: views of the mapped file).
  lm::LoadOptions placement;
  placement.huge_pages = !mmap_weights;
  const llama::Model model = llama::Model::load(dir, {}, placement);
  const llama::Config& c = model.config();
  auto t0 = Clock::now();
  lm::CompileOptions options;
  options.time_budget_seconds = 120;  // as llama-generate: let the search finish
  options.threads = threads;          // each call: the caller + threads - 1 pool workers
  llama::Session s(model, lm::Target::cpu(), options, {}, kv);
  const double compile_s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::vector<int32_t> prompt(static_cast<size_t>(P));
  for (int i = 0; i < P; ++i)
    prompt[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919 + 13) % c.vocab_size);

  auto our_rep = [&] {
    Result x;
    s.reset(P + D + 1);
    t0 = Clock::now();
    int32_t next = llama::argmax(s.prefill(prompt));
    const double tp = std::chrono::duration<double>(Clock::now() - t0).count();
    x.tokens = std::to_string(next);
    t0 = Clock::now();
    for (int i = 0; i < D; ++i) {
      next = llama::argmax(s.decode(next));
      x.tokens += ',';
      x.tokens += std::to_string(next);
    }
    const double td = std::chrono::duration<double>(Clock::now() - t0).count();
    x.prefill = P / tp;
    x.decode = D / td;
    x.ok = true;
    return x;
  };
  const bool with_cpp = a.count("--gguf") && a.count("--llamacpp") && a.count("--bins");
  std::unique_ptr<PairedChild> cpp_child;
  if (with_cpp)
    cpp_child = std::make_unique<PairedChild>(a["--llamacpp"] + " --bins '" + a["--bins"] + "' --gguf '" +
                                              a["--gguf"] + "' --prompt " + std::to_string(P) + " --decode " +
                                              std::to_string(D) + " --threads " + std::to_string(threads));
  our_rep();  // warm-up
  Result ours, cpp;
  std::vector<double> pre, dec, cpp_pre, cpp_dec, ratio_pre, ratio_dec;
  for (int r = 0; r < reps; ++r) {
    // ABBA order: a drift in one direction over a round favours neither program.
    Result x, y;
    if (cpp_child && cpp_child->ok() && r % 2 == 1) y = cpp_child->rep();
    x = our_rep();
    if (cpp_child && cpp_child->ok() && r % 2 == 0) y = cpp_child->rep();
    pre.push_back(x.prefill);
    dec.push_back(x.decode);
    ours.tokens = x.tokens;
    if (!y.ok) continue;
    cpp_pre.push_back(y.prefill);
    cpp_dec.push_back(y.decode);
    ratio_pre.push_back(x.prefill / y.prefill);
    ratio_dec.push_back(x.decode / y.decode);
    cpp.tokens = y.tokens;
  }
  ours.prefill = median(pre);
  ours.decode = median(dec);
  if (with_cpp && cpp_dec.size() == static_cast<size_t>(reps)) {
    cpp.prefill = median(cpp_pre);
    cpp.decode = median(cpp_dec);
    cpp.ok = true;
  } else if (with_cpp) {
    std::fprintf(stderr, "llama_bench: the llama.cpp child answered %zu of %d rounds: llama.cpp skipped\n",
                 cpp_dec.size(), reps);
  }
  cpp_child.reset();
  const long rss = rss_kb("VmRSS:"), hwm = rss_kb("VmHWM:");

  // Bytes one decode step reads: every weight but the embedding table (one row of it),
  // unless the table is also the output head.
  int64_t step_bytes = 0;
  for (const auto& [name, t] : model.weights())
    if (name != llama::kEmbed || c.tie_word_embeddings) step_bytes += static_cast<int64_t>(t.nbytes());
  const double copy = copy_bandwidth(threads);

  Result pt;
  if (torch)
    pt = run_child(std::string("/usr/bin/python3 ") + LUMINAL_BENCH_LLAMA_DIR + "/torch_llama.py '" + dir +
                   "' --prompt " + std::to_string(P) + " --decode " + std::to_string(D) + " --reps " +
                   std::to_string(reps) + " --threads " + std::to_string(threads));

  std::printf(
      "model: %s, weights %s %.1f MB, KV cache %s; %d threads; prompt %d, %d decode steps, medians of %d\n",
      c.summary().c_str(), model.weight_dtype().c_str(), model.weight_bytes() / 1e6,
      std::string(lm::dtype_name(kv)).c_str(), threads, P, D, reps);
  std::printf("compile (both graphs): %.3f s; prefill %s\n", compile_s,
              s.prefill_fn().report().to_string().c_str());
  std::printf("decode %s\n", s.decode_fn().report().to_string().c_str());
  std::printf("%-10s %14s %14s\n", "", "prefill tok/s", "decode tok/s");
  std::printf("%-10s %14.1f %14.2f\n", "luminal", ours.prefill, ours.decode);
  if (cpp.ok) {
    auto [lo_d, hi_d] = std::minmax_element(ratio_dec.begin(), ratio_dec.end());
    std::printf("%-10s %14.1f %14.2f   luminal/llama.cpp: prefill %.2fx, decode %.2fx; same ids: %s\n",
                "llama.cpp", cpp.prefill, cpp.decode, median(ratio_pre), median(ratio_dec),
                cpp.tokens == ours.tokens ? "yes" : "no");
    std::printf("paired rounds: %d; decode ratio per round %.2f-%.2fx, %d of %d rounds >= 1.0x\n", reps,
                *lo_d, *hi_d,
                static_cast<int>(
                    std::count_if(ratio_dec.begin(), ratio_dec.end(), [](double v) { return v >= 1.0; })),
                reps);
  }
  if (pt.ok)
    std::printf("%-10s %14.1f %14.2f   luminal/pytorch:   prefill %.2fx, decode %.2fx; same ids: %s\n",
                "pytorch", pt.prefill, pt.decode, ours.prefill / pt.prefill, ours.decode / pt.decode,
                pt.tokens == ours.tokens ? "yes" : "no");
  const double bw = step_bytes * ours.decode / 1e9;
  std::printf(
      "decode reads %.1f MB of weights per token: %.1f GB/s = %.0f%% of this run's copy bandwidth (%.1f "
      "GB/s)\n",
      step_bytes / 1e6, bw, 100 * bw / copy, copy);
  const double need = (model.weight_bytes() + s.cache_bytes()) / 1e6;
  std::printf(
      "memory: resident %.1f MB after the runs (peak %.1f MB, %.1f MB before loading); weights + KV cache "
      "%.1f MB: %.0f%%\n",
      rss / 1e3, hwm / 1e3, rss0 / 1e3, need, 100.0 * (rss - rss0) / 1e3 / need);
  std::printf("luminal ids: %s\n", ours.tokens.c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "llama_bench: %s\n", e.what());
  return 1;
}
