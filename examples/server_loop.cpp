// A small inference server loop on the CPU target (docs/serving.md):
//  * one compiled program (a 2-layer MLP) shared by 4 request threads, each call on one
//    thread of a pool the server sized itself, with a deadline per request;
//  * the weights reloaded live every 5 ms while requests run (bind() of a whole set);
//  * one request cancelled by the client while it waits its turn;
//  * the scratch memory the program keeps, capped.
// Prints what happened; exits non-zero if a request got a wrong answer.
#include <luminal/luminal.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <queue>
#include <string>
#include <thread>
#include <vector>

namespace lm = luminal;
using namespace std::chrono_literals;

namespace {

constexpr int64_t kIn = 256, kHidden = 512, kOut = 64, kBatch = 4;

// Weights of version `v`: every weight v / 1000, biases 0, so a request's answer says
// which version computed it (each output = relu(sum x * v/1000) summed again * v/1000).
std::map<std::string, lm::HostTensor> weights(int v) {
  const float w = static_cast<float>(v) / 1000.f;
  return {{"w1", lm::HostTensor::from(std::vector<float>(kHidden * kIn, w), {kHidden, kIn})},
          {"b1", lm::HostTensor::from(std::vector<float>(kHidden, 0.f), {kHidden})},
          {"w2", lm::HostTensor::from(std::vector<float>(kOut * kHidden, w), {kOut, kHidden})},
          {"b2", lm::HostTensor::from(std::vector<float>(kOut, 0.f), {kOut})}};
}

struct Request {
  int id = 0;
  std::vector<float> x;  // [kBatch, kIn], all ones
  lm::CancelToken cancel;
};

}  // namespace

int main() {
  // The model.
  lm::Graph g;
  lm::Tensor x = g.input("x", {kBatch, kIn});
  lm::Tensor h = lm::relu(lm::linear(x, g.param("w1", {kHidden, kIn}), g.param("b1", {kHidden})));
  g.output("y", lm::linear(h, g.param("w2", {kOut, kHidden}), g.param("b2", {kOut})));

  // The server's own pool (2 workers), one thread per call (requests run side by side),
  // and at most 4 MB of scratch kept for calls.
  lm::CompileOptions opt;
  opt.thread_pool = std::make_shared<lm::ThreadPool>(lm::ThreadPoolOptions{2, 50});
  opt.threads = 1;
  opt.max_arena_bytes = 4 << 20;
  lm::Callable model = lm::compile(g, lm::Target::cpu(), opt);
  model.bind(weights(1));

  // Requests: 1000, queued at once; number 7 is cancelled by its client before it runs.
  std::vector<Request> requests(1000);
  std::queue<Request*> queue;
  for (int i = 0; i < 1000; ++i) {
    requests[static_cast<size_t>(i)].id = i;
    requests[static_cast<size_t>(i)].x.assign(kBatch * kIn, 1.f);
    queue.push(&requests[static_cast<size_t>(i)]);
  }
  requests[7].cancel.cancel();
  std::mutex mu;

  std::atomic<bool> serving{true};
  std::atomic<int> version{1}, ok{0}, cancelled{0}, late{0}, wrong{0};
  std::thread reloader([&] {  // hot reload: a new set of weights every 5 ms
    while (serving.load()) {
      std::this_thread::sleep_for(5ms);
      const int v = version.load() + 1;
      model.bind(weights(v));
      version.store(v);
    }
  });

  std::vector<std::thread> workers;
  for (int t = 0; t < 4; ++t)
    workers.emplace_back([&] {
      std::map<std::string, lm::HostTensor> out;
      for (;;) {
        Request* r = nullptr;
        {
          std::lock_guard<std::mutex> lock(mu);
          if (queue.empty()) return;
          r = queue.front();
          queue.pop();
        }
        lm::CallOptions call = lm::CallOptions::within(100ms);
        call.cancel = &r->cancel;
        const int before = version.load();
        const lm::Status s =
            model.run({{"x", lm::HostTensor::view(lm::f32, {kBatch, kIn}, r->x.data())}}, out, call);
        const int after = version.load();
        if (s.code == lm::StatusCode::cancelled) {
          ++cancelled;
          continue;
        }
        if (s.code == lm::StatusCode::deadline_exceeded) {
          ++late;
          continue;
        }
        if (!s) {
          std::fprintf(stderr, "request %d: %s\n", r->id, s.message.c_str());
          ++wrong;
          continue;
        }
        // The answer must come from one whole version of the weights, one of those live
        // during the call: y = kHidden * (kIn * w) * w with w = v / 1000. (The reloader
        // binds version v before it publishes the number v: hence after + 1.)
        const float y = out.at("y").values<float>()[0];
        bool matched = false;
        for (int v = before; v <= after + 1 && !matched; ++v) {
          const double w = v / 1000.0, want = kHidden * (kIn * w) * w;
          matched = std::abs(y - want) <= 1e-3 * want;
        }
        if (matched)
          ++ok;
        else
          ++wrong;
      }
    });
  for (auto& w : workers) w.join();
  serving = false;
  reloader.join();

  std::printf(
      "served %d requests (%d cancelled by their client, %d past their deadline, %d wrong); weights reloaded "
      "%d times while serving; pool threads started: %d; scratch held: %lld bytes\n",
      ok.load(), cancelled.load(), late.load(), wrong.load(), version.load() - 1,
      opt.thread_pool->threads_started(), static_cast<long long>(model.memory_held()));
  return wrong.load() == 0 && cancelled.load() == 1 ? 0 : 1;
}
