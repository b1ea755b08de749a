// The public face of the worker pool (luminal/serving.hpp over runtime/thread_pool.hpp).
#include "luminal/serving.hpp"

#include <cmath>

#include "luminal/error.hpp"
#include "runtime/thread_pool.hpp"

namespace luminal {

namespace {
std::shared_ptr<detail::WorkerPool> make_pool(const ThreadPoolOptions& o) {
  if (o.workers < -1) throw RuntimeError("[ThreadPool] workers must be >= 0, or -1 for the default");
  if (!(o.spin_microseconds >= 0) || !std::isfinite(o.spin_microseconds))
    throw RuntimeError("[ThreadPool] spin_microseconds must be a finite value >= 0");
  const int workers = o.workers >= 0 ? o.workers : detail::available_cpus() - 1;
  return std::make_shared<detail::WorkerPool>(workers, static_cast<int64_t>(o.spin_microseconds * 1000));
}
}  // namespace

ThreadPool::ThreadPool(ThreadPoolOptions options) : impl_(make_pool(options)) {}
ThreadPool::~ThreadPool() = default;

std::shared_ptr<ThreadPool> ThreadPool::shared() {
  // The same workers as every Callable compiled without a pool of its own.
  static auto* pool = new std::shared_ptr<ThreadPool>(new ThreadPool(detail::WorkerPool::shared()));
  return *pool;
}

int ThreadPool::workers() const { return impl_->capacity(); }
int ThreadPool::threads_started() const { return impl_->threads_started(); }

}  // namespace luminal
