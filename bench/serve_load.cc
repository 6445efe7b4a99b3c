// serve_load: an open-loop load generator for cavs-serve (docs/serving.md). Requests are single
// SST trees taken round-robin from a file, sent at Poisson arrival times at each offered rate
// over keep-alive loopback connections (cpp-httplib's client, one per sender thread). A
// request's latency runs from its scheduled arrival, not from its send, so that a backlog in
// the generator counts against the server (no coordinated omission). Prints, per rate, the
// throughput achieved and the p50 / p99 / p99.9 latencies.
//
//   serve_load --port=8080 --trees=data/synthetic/test.txt --rates=500,1000,2000,max
//              [--seconds=5] [--connections=64] [--seed=1]
//
// "max" is closed-loop: every connection sends its next request when the last is answered, the
// server's saturated throughput. A plain timed driver (like distributed_benchmark): the server
// is another process, which Google Benchmark cannot time.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string trees = "data/synthetic/test.txt";
  std::vector<std::string> rates = {"500", "1000", "2000", "max"};
  double seconds = 5;
  int connections = 64;
  uint64_t seed = 1;
};

struct Figures {
  double offered = 0, achieved = 0;
  int64_t sent = 0, failed = 0;
  double p50 = 0, p99 = 0, p999 = 0;  // ms
};

double Percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(std::ceil(q * v.size())) - 1);
  std::nth_element(v.begin(), v.begin() + k, v.end());
  return v[k];
}

// Sends requests at the times `arrivals` (offsets from the start; empty: closed loop for
// o.seconds) from o.connections threads.
Figures Run(const Options& o, const std::vector<std::string>& trees,
            const std::vector<double>& arrivals) {
  const bool closed = arrivals.empty();
  std::atomic<size_t> next{0};
  std::atomic<int64_t> failed{0};
  std::mutex mu;
  std::vector<double> latencies;
  const Clock::time_point start = Clock::now() + std::chrono::milliseconds(20);
  const Clock::time_point stop =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
  std::vector<std::thread> senders;
  for (int c = 0; c < o.connections; ++c) {
    senders.emplace_back([&] {
      httplib::Client client(o.host, o.port);
      client.set_keep_alive(true);
      // httplib writes a request's headers and body apart: with Nagle's algorithm the body
      // waits for the server's delayed ACK of the headers, 40 ms on Linux.
      client.set_tcp_nodelay(true);
      client.set_read_timeout(30, 0);
      std::vector<double> mine;
      for (;;) {
        const size_t i = next.fetch_add(1);
        Clock::time_point due;
        if (closed) {
          due = std::max(Clock::now(), start);
          if (due >= stop) break;
        } else {
          if (i >= arrivals.size()) break;
          due = start + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(arrivals[i]));
        }
        std::this_thread::sleep_until(due);
        httplib::Result r = client.Post("/v1/predict", trees[i % trees.size()], "text/plain");
        if (!r || r->status != 200) failed.fetch_add(1);
        mine.push_back(std::chrono::duration<double, std::milli>(Clock::now() - due).count());
      }
      std::lock_guard<std::mutex> l(mu);
      latencies.insert(latencies.end(), mine.begin(), mine.end());
    });
  }
  for (std::thread& t : senders) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  Figures f;
  f.sent = static_cast<int64_t>(latencies.size());
  f.failed = failed.load();
  f.offered = closed ? 0 : arrivals.size() / o.seconds;
  f.achieved = (f.sent - f.failed) / elapsed;
  f.p50 = Percentile(latencies, 0.5);
  f.p99 = Percentile(latencies, 0.99);
  f.p999 = Percentile(latencies, 0.999);
  return f;
}

bool Parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const size_t eq = a.find('=');
    const std::string name = a.substr(0, eq), v = eq == std::string::npos ? "" : a.substr(eq + 1);
    bool ok = true;
    if (name == "--host") {
      o->host = v;
    } else if (name == "--port") {
      ok = absl::SimpleAtoi(v, &o->port);
    } else if (name == "--trees") {
      o->trees = v;
    } else if (name == "--rates") {
      o->rates = absl::StrSplit(v, ',');
    } else if (name == "--seconds") {
      ok = absl::SimpleAtod(v, &o->seconds) && o->seconds > 0;
    } else if (name == "--connections") {
      ok = absl::SimpleAtoi(v, &o->connections) && o->connections > 0;
    } else if (name == "--seed") {
      ok = absl::SimpleAtoi(v, &o->seed);
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "serve_load: bad flag '%s'\n", a.c_str());
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!Parse(argc, argv, &o)) return 2;
  std::vector<std::string> trees;
  std::ifstream in(o.trees);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) trees.push_back(line);
  }
  if (trees.empty()) {
    std::fprintf(stderr, "serve_load: no trees in %s\n", o.trees.c_str());
    return 2;
  }
  std::printf("%10s %10s %8s %7s %9s %9s %9s\n", "offered/s", "achieved/s", "sent", "failed",
              "p50_ms", "p99_ms", "p99.9_ms");
  std::mt19937_64 rng(o.seed);
  for (const std::string& rate : o.rates) {
    std::vector<double> arrivals;
    double per_second = 0;
    if (rate != "max") {
      if (!absl::SimpleAtod(rate, &per_second) || per_second <= 0) {
        std::fprintf(stderr, "serve_load: bad rate '%s'\n", rate.c_str());
        return 2;
      }
      std::exponential_distribution<double> gap(per_second);
      for (double t = gap(rng); t < o.seconds; t += gap(rng)) arrivals.push_back(t);
    }
    const Figures f = Run(o, trees, arrivals);
    std::printf("%10s %10.0f %8lld %7lld %9.2f %9.2f %9.2f\n", rate.c_str(), f.achieved,
                static_cast<long long>(f.sent), static_cast<long long>(f.failed), f.p50, f.p99,
                f.p999);
    std::fflush(stdout);
  }
  return 0;
}
