#include "ops/cpu/cpu_parallel.h"

#include <cblas.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/flush_denormal.h"

namespace cavs::ops::cpu {
namespace {

// How long an idle worker spins before it sleeps: long enough to bridge the gap between the
// kernels of one round, short enough not to burn a shared machine's cores between batches.
constexpr std::chrono::microseconds kWorkerSpin(50);
// The smallest piece of work worth handing to another thread.
constexpr int64_t kMinTaskWork = kParallelMinWork / 4;
constexpr int kMaxThreads = 256;

// True on pool workers, and on a caller while it runs a job: a nested loop runs serially.
thread_local bool t_in_pool = false;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// One RunTasks call. Shared (shared_ptr) with workers that may look at it after the caller
// has returned; `fn` is only called for a claimed task < num_tasks, and the caller waits until
// every such call has finished, so the reference never outlives the caller's frame in use.
struct Job {
  Job(absl::FunctionRef<void(int64_t)> f, int64_t n) : fn(f), num_tasks(n) {}
  absl::FunctionRef<void(int64_t)> fn;
  const int64_t num_tasks;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
};

// Claims and runs tasks of `job` until none are left.
void Work(Job& job) {
  int64_t finished = 0;
  for (int64_t t = job.next.fetch_add(1, std::memory_order_relaxed); t < job.num_tasks;
       t = job.next.fetch_add(1, std::memory_order_relaxed)) {
    job.fn(t);
    ++finished;
  }
  if (finished > 0) job.done.fetch_add(finished, std::memory_order_acq_rel);
}

class Pool {
 public:
  explicit Pool(int threads) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
  }
  ~Pool() {
    stop_.store(true);
    Publish();
    for (std::thread& t : workers_) t.join();
  }
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  void Run(int64_t num_tasks, absl::FunctionRef<void(int64_t)> fn) {
    auto job = std::make_shared<Job>(fn, num_tasks);
    {
      std::lock_guard<std::mutex> lock(job_mu_);
      job_ = job;
    }
    Publish();
    Work(*job);
    for (int spins = 0; job->done.load(std::memory_order_acquire) < num_tasks; ++spins) {
      if (spins < 4096) {
        CpuRelax();
      } else {
        std::this_thread::yield();  // a worker was descheduled mid-task
      }
    }
  }

 private:
  void WorkerLoop() {
    t_in_pool = true;
    core::FlushDenormalsForThisThread();  // see core/flush_denormal.h
    // The generation at construction, not a fresh load: a job or the shutdown may have been
    // published before this thread got to run.
    uint32_t seen = 0;
    while (true) {
      WaitForChange(seen);
      // Read the generation before testing stop_: a shutdown published after this load is
      // then a generation this worker has not seen, so the next wait returns at once. (The
      // other order could consume the shutdown's generation here and sleep forever.)
      seen = generation_.load(std::memory_order_acquire);
      if (stop_.load(std::memory_order_acquire)) return;
      std::shared_ptr<Job> job;
      {
        std::lock_guard<std::mutex> lock(job_mu_);
        job = job_;
      }
      if (job != nullptr) Work(*job);
    }
  }

  // Starts a new generation (a job, or shutdown) and wakes sleeping workers. The seq_cst
  // increment and the seq_cst read of sleepers_ pair with the opposite order in WaitForChange:
  // either the worker sees the new generation or this sees the sleeper, and the wake-up goes
  // through sleep_mu_, so none is lost. (std::atomic::wait is avoided: libstdc++ 12's can miss
  // a notification.)
  void Publish() {
    generation_.fetch_add(1);
    if (sleepers_.load() > 0) {
      { std::lock_guard<std::mutex> lock(sleep_mu_); }
      sleep_cv_.notify_all();
    }
  }

  // Spins for up to kWorkerSpin, then sleeps until the generation differs from `seen`.
  void WaitForChange(uint32_t seen) {
    const auto start = std::chrono::steady_clock::now();
    for (int spins = 1; generation_.load(std::memory_order_acquire) == seen; ++spins) {
      CpuRelax();
      if (spins % 64 == 0 && std::chrono::steady_clock::now() - start > kWorkerSpin) break;
    }
    if (generation_.load(std::memory_order_acquire) != seen) return;
    sleepers_.fetch_add(1);
    {
      std::unique_lock<std::mutex> lock(sleep_mu_);
      sleep_cv_.wait(lock, [&] { return generation_.load() != seen; });
    }
    sleepers_.fetch_sub(1);
  }

  std::vector<std::thread> workers_;
  std::atomic<uint32_t> generation_{0};  // bumped once per job (and at shutdown)
  std::atomic<bool> stop_{false};
  std::atomic<int> sleepers_{0};  // workers in (or entering) sleep_cv_.wait
  std::mutex sleep_mu_;
  std::condition_variable sleep_cv_;
  std::mutex job_mu_;  // guards job_
  std::shared_ptr<Job> job_;
};

// The process-wide pool and its thread count.
struct PoolState {
  std::mutex mu;  // held while a job runs and while the pool is rebuilt
  std::unique_ptr<Pool> pool;
  std::atomic<int> threads{0};  // 0 until first use
};

PoolState& State() {
  static PoolState* state = new PoolState();  // never destroyed: workers outlive static dtors
  return *state;
}

int DefaultThreads() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    return std::clamp(CPU_COUNT(&set), 1, kMaxThreads);
  }
  return std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, kMaxThreads);
}

// REQUIRES: s.mu held.
void Configure(PoolState& s, int n) {
  n = n > 0 ? std::min(n, kMaxThreads) : DefaultThreads();
  // OpenBLAS never starts threads of its own: large GEMMs are split over this pool instead.
  openblas_set_num_threads(1);
  if (s.threads.load() == n && (n == 1 || s.pool != nullptr)) return;
  s.pool.reset();
  if (n > 1) s.pool = std::make_unique<Pool>(n);
  s.threads.store(n);
}

void EnsureConfigured() {
  PoolState& s = State();
  if (s.threads.load(std::memory_order_acquire) > 0) return;
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.threads.load() == 0) Configure(s, 0);
}

// n * work_per_item, saturated.
int64_t TotalWork(int64_t n, int64_t work_per_item) {
  work_per_item = std::max<int64_t>(work_per_item, 1);
  if (n > std::numeric_limits<int64_t>::max() / work_per_item) {
    return std::numeric_limits<int64_t>::max();
  }
  return n * work_per_item;
}

}  // namespace

void RunTasks(int64_t num_tasks, absl::FunctionRef<void(int64_t)> fn) {
  if (num_tasks <= 0) return;
  EnsureConfigured();
  PoolState& s = State();
  std::unique_lock<std::mutex> lock(s.mu, std::defer_lock);
  if (num_tasks == 1 || t_in_pool || !lock.try_lock() || s.pool == nullptr) {
    for (int64_t t = 0; t < num_tasks; ++t) fn(t);
    return;
  }
  t_in_pool = true;
  s.pool->Run(num_tasks, fn);
  t_in_pool = false;
}

void ParallelFor(int64_t n, int64_t work_per_item,
                 absl::FunctionRef<void(int64_t begin, int64_t end)> fn) {
  if (n <= 0) return;
  const int64_t work = TotalWork(n, work_per_item);
  const int threads = CpuThreads();
  if (threads <= 1 || work < kParallelMinWork || t_in_pool) {
    fn(0, n);
    return;
  }
  const int64_t tasks =
      std::clamp<int64_t>(std::min<int64_t>(threads * 4, work / kMinTaskWork), 1, n);
  const int64_t chunk = (n + tasks - 1) / tasks;
  RunTasks(NumChunks(n, chunk), [&](int64_t t) { fn(t * chunk, std::min(n, (t + 1) * chunk)); });
}

void ParallelForChunks(int64_t n, int64_t chunk_size, int64_t work_per_item,
                       absl::FunctionRef<void(int64_t chunk, int64_t begin, int64_t end)> fn) {
  if (n <= 0) return;
  chunk_size = std::max<int64_t>(chunk_size, 1);
  const int64_t chunks = NumChunks(n, chunk_size);
  auto body = [&](int64_t t) { fn(t, t * chunk_size, std::min(n, (t + 1) * chunk_size)); };
  if (CpuThreads() <= 1 || TotalWork(n, work_per_item) < kParallelMinWork) {
    for (int64_t t = 0; t < chunks; ++t) body(t);
    return;
  }
  RunTasks(chunks, body);
}

void SetCpuThreads(int n) {
  PoolState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  Configure(s, n);
}

int CpuThreads() {
  EnsureConfigured();
  return State().threads.load(std::memory_order_acquire);
}

}  // namespace cavs::ops::cpu
