// One decode step of a ~110M Llama (d 768, 12 layers, 12 heads, 4 KV heads, FFN 2048,
// vocab 32000; a KV cache of 128 positions), f32 weights:
//   run alone:         one process
//   under mpirun -np N: tensor parallel over N ranks (Communicator::from_environment)
// Threads per process: LUMINAL_BENCH_THREADS (CompileOptions::threads; default 0, all);
// LUMINAL_BENCH_LAYERS overrides the 12 layers.
// Counters: comm_bytes and collectives from the compile report, est_step_us (the cost
// model's step; rank 0 prints the report, whose sharding line gives the collectives'
// estimated share), comm_share (measured: time inside the communicator / step time,
// rank 0), load1 (the 1-minute load average when the run ended).
// Every rank runs the same fixed number of iterations (the steps are collectives).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>

#include "luminal/luminal.hpp"
#include "rank_main.hpp"

using namespace luminal;

namespace {

struct Cfg {
  int64_t d = 768, layers = 12, heads = 12, kv = 4, ffn = 2048, vocab = 32000, cache = 128;
  int64_t hd() const { return d / heads; }
};

// The communicator, timed: what the step spends inside collectives.
class TimedComm final : public Communicator {
 public:
  explicit TimedComm(std::shared_ptr<Communicator> c) : c_(std::move(c)) {}
  int rank() const override { return c_->rank(); }
  int size() const override { return c_->size(); }
  std::string name() const override { return c_->name(); }
  void all_gather(const void* s, void* r, std::size_t n) override { timed([&] { c_->all_gather(s, r, n); }); }
  void all_to_all(const void* s, void* r, std::size_t n) override { timed([&] { c_->all_to_all(s, r, n); }); }
  void barrier() override { c_->barrier(); }
  double seconds = 0;

 private:
  template <class F>
  void timed(F f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  std::shared_ptr<Communicator> c_;
};

// The parameters' shapes, recorded as the graph declares them (bound with random values).
using Shapes = std::map<std::string, std::vector<int64_t>>;

Graph decode_graph(const Cfg& c, Shapes& shapes) {
  Graph g;
  auto param = [&](const std::string& name, std::vector<int64_t> shape) {
    shapes[name] = shape;
    return g.param(name, std::vector<Dim>(shape.begin(), shape.end()));
  };
  const int64_t H = c.heads, KV = c.kv, hd = c.hd(), P = c.cache, G = H / KV;
  Tensor tok = g.input("tokens", {1}, i32);
  Tensor pos = g.input("pos", {1}, i32);
  Tensor x = embedding(param("embed", {c.vocab, c.d}), tok);  // [1, d]
  for (int64_t l = 0; l < c.layers; ++l) {
    std::string p = "l";
    p.append(std::to_string(l)).append(".");
    Tensor h = rms_norm(x, param(p + "attn_norm", {c.d}));
    Tensor q = permute(reshape(linear(h, param(p + "wq", {H * hd, c.d})), {1, H, hd}), {1, 0, 2});
    Tensor k = permute(reshape(linear(h, param(p + "wk", {KV * hd, c.d})), {1, KV, hd}), {1, 0, 2});
    Tensor v = permute(reshape(linear(h, param(p + "wv", {KV * hd, c.d})), {1, KV, hd}), {1, 0, 2});
    q = rope(q, pos);
    k = rope(k, pos);
    g.output(p + "k", k);
    g.output(p + "v", v);
    Tensor kc = concat({permute(g.input(p + "k_cache", {P, KV, hd}), {1, 0, 2}), k}, 1);  // [KV, P+1, hd]
    Tensor vc = concat({permute(g.input(p + "v_cache", {P, KV, hd}), {1, 0, 2}), v}, 1);
    auto rep = [&](const Tensor& t) {
      return reshape(expand(reshape(t, {KV, 1, P + 1, hd}), {KV, G, P + 1, hd}), {H, P + 1, hd});
    };
    Tensor a = scaled_dot_product_attention(q, rep(kc), rep(vc), true);  // [H, 1, hd]
    x = x + linear(reshape(permute(a, {1, 0, 2}), {1, H * hd}), param(p + "wo", {c.d, H * hd}));
    Tensor h2 = rms_norm(x, param(p + "ffn_norm", {c.d}));
    x = x + linear(silu(linear(h2, param(p + "w_gate", {c.ffn, c.d}))) * linear(h2, param(p + "w_up", {c.ffn, c.d})),
                   param(p + "w_down", {c.d, c.ffn}));
  }
  g.output("logits", linear(rms_norm(x, param("norm", {c.d})), param("lm_head", {c.vocab, c.d})));
  return g;
}

double load1() {
  double l = -1;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &l) != 1) l = -1;
    std::fclose(f);
  }
  return l;
}

// Compiled and bound once for all repetitions (a compile takes tens of seconds).
struct Step {
  std::shared_ptr<TimedComm> comm;
  int threads = 0;
  std::unique_ptr<Callable> fn;
  std::map<std::string, HostTensor> in;
};

Step& step() {
  static std::unique_ptr<Step> s;
  if (s) return *s;
  s = std::make_unique<Step>();
  Cfg c;
  if (const char* l = std::getenv("LUMINAL_BENCH_LAYERS")) c.layers = std::atoi(l);  // quicker experiments
  Shapes shapes;
  Graph g = decode_graph(c, shapes);
  CompileOptions o;
  if (const char* t = std::getenv("LUMINAL_BENCH_THREADS")) o.threads = std::atoi(t);
  // Every rank must extract the same plan (compile() checks): a search cut short by its
  // wall-clock budget on a loaded host can differ between ranks, so the budget is large.
  o.time_budget_seconds = 300;
  if (Communicator::launched_by_mpirun()) {
    s->comm = std::make_shared<TimedComm>(Communicator::from_environment());
    o.communicator = s->comm;
  }
  s->threads = o.threads;
  s->fn = std::make_unique<Callable>(compile(g, Target::cpu(), o));
  Callable& fn = *s->fn;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-0.05f, 0.05f);
  for (const auto& name : fn.param_names()) {
    const std::vector<int64_t>& shape = shapes.at(name);
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = name.find("norm") != std::string::npos ? 1.f : u(rng);
    fn.bind(name, HostTensor::from(v, shape));
  }
  auto& in = s->in;
  in.emplace("tokens", HostTensor::from(std::vector<int32_t>{17}, {1}));
  in.emplace("pos", HostTensor::from(std::vector<int32_t>{static_cast<int32_t>(c.cache)}, {1}));
  for (int64_t l = 0; l < c.layers; ++l)
    for (const char* kv : {"k_cache", "v_cache"}) {
      std::string name = "l";
      name.append(std::to_string(l)).append(".").append(kv);
      std::vector<float> v(static_cast<size_t>(c.cache * c.kv * c.hd()));
      for (float& x : v) x = u(rng);
      in.emplace(name, HostTensor::from(v, {c.cache, c.kv, c.hd()}));
    }
  const bool rank0 = !s->comm || s->comm->rank() == 0;
  if (rank0) std::fprintf(stderr, "%s\n", fn.report().to_string().c_str());
  return *s;
}

void BM_Decode110M(benchmark::State& st) {
  Step& stp = step();
  Callable& fn = *stp.fn;
  const auto& in = stp.in;
  const auto& comm = stp.comm;
  std::map<std::string, HostTensor> out;
  if (!fn.run(in, out)) st.SkipWithError("the step failed");  // warm-up
  if (comm) comm->seconds = 0;
  double step_s = 0;
  for (auto _ : st) {
    const auto t0 = std::chrono::steady_clock::now();
    Status s = fn.run(in, out);
    step_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!s) st.SkipWithError(s.message.c_str());
  }
  const CompileReport& r = fn.report();
  st.counters["ranks"] = static_cast<double>(r.ranks);
  st.counters["threads"] = stp.threads;
  st.counters["collectives"] = static_cast<double>(r.collectives);
  st.counters["comm_bytes"] = static_cast<double>(r.comm_bytes);
  st.counters["est_step_us"] = r.estimated_seconds * 1e6;
  st.counters["comm_share"] = comm && step_s > 0 ? comm->seconds / step_s : 0;
  st.counters["load1"] = load1();
}
BENCHMARK(BM_Decode110M)->Unit(benchmark::kMillisecond)->Iterations(30)->Repetitions(5)->ReportAggregatesOnly(true);

}  // namespace

int main(int argc, char** argv) { return luminal::bench::run_on_every_rank(argc, argv); }
