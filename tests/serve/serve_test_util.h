// Helpers of the server tests: a Server on a free loopback port serving in a thread, the
// cavs-serve binary started as a child process, a POST from cpp-httplib's client, the offline
// engine's run of the same inputs, and a queue filled up before a shutdown.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "examples/serve/request.h"
#include "examples/serve/server.h"
#include "examples/trainer/saved_model.h"
#include "scheduler/engine.h"

namespace cavs::serve::testing {

// A server on a free port, serving in a thread until the object dies.
struct RunningServer {
  std::unique_ptr<Server> server;
  int port = 0;
  std::thread thread;
  ~RunningServer() {
    if (server != nullptr) server->Shutdown();
    if (thread.joinable()) thread.join();
  }
};

// Serves `checkpoint` on the CPU with `o` (its port replaced by a free one).
inline std::unique_ptr<RunningServer> StartServer(const std::string& checkpoint,
                                                  ServerOptions o = {}) {
  o.port = 0;
  o.http_threads = 16;
  auto r = std::make_unique<RunningServer>();
  absl::StatusOr<trainer::SavedModel> m = trainer::LoadSavedModel(checkpoint, core::Device::Cpu());
  EXPECT_TRUE(m.ok()) << m.status();
  absl::StatusOr<std::unique_ptr<Server>> s = Server::Create(*std::move(m), o);
  EXPECT_TRUE(s.ok()) << s.status();
  r->server = *std::move(s);
  absl::StatusOr<int> port = r->server->Bind();
  EXPECT_TRUE(port.ok()) << port.status();
  r->port = *port;
  r->thread = std::thread([s = r->server.get()] { EXPECT_TRUE(s->Serve().ok()); });
  return r;
}

inline httplib::Result Post(int port, const std::string& body) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(30, 0);
  client.set_tcp_nodelay(true);  // else the body waits for a delayed ACK (40 ms)
  return client.Post("/v1/predict", body, "application/json");
}

// A bad request and the answer it must get.
struct BadRequest {
  std::string body;
  int status = 400;
  std::string kind;     // the error's "kind"
  std::string message;  // a part of its "message"
};

// Posts each of `cases` to the server on `port` and checks its answer; after each, `good` must
// still be answered 200 (the server keeps serving).
inline void ExpectEachRefusedWhileServing(int port, const std::vector<BadRequest>& cases,
                                          const std::string& good) {
  for (const BadRequest& c : cases) {
    httplib::Result res = Post(port, c.body);
    ASSERT_TRUE(res) << c.kind << ": " << httplib::to_string(res.error());
    EXPECT_EQ(res->status, c.status) << c.kind << ": " << res->body;
    const nlohmann::json error = nlohmann::json::parse(res->body)["error"];
    EXPECT_EQ(error["kind"], c.kind);
    EXPECT_NE(error["message"].get<std::string>().find(c.message), std::string::npos)
        << error["message"];
    httplib::Result ok = Post(port, good);
    ASSERT_TRUE(ok && ok->status == 200) << c.kind;
  }
}

// What the offline engine makes of `lines`, parsed as a server of `form` parses them.
struct OfflineRun {
  ParsedRequest parsed;
  scheduler::RunResult result;  // outputs and predictions per line
  examples::Vocabulary vocabulary;
  int64_t classes = 0;
};

// `lines` run in one batch by the engine as cavs-train evaluates: training and backward off,
// folded input projections, batch invariant.
inline OfflineRun RunOffline(const std::string& checkpoint, const std::vector<std::string>& lines,
                             InputForm form) {
  OfflineRun out;
  absl::StatusOr<trainer::SavedModel> m = trainer::LoadSavedModel(checkpoint, core::Device::Cpu());
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return out;
  absl::StatusOr<ParsedRequest> parsed =
      ParseRequest(nlohmann::json(lines).dump(), m->vocabulary, {}, form);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  auto engine = scheduler::Engine::Create(m->function.get(), m->store.get(), {});
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!parsed.ok() || !engine.ok()) return out;
  EXPECT_TRUE((*engine)->FoldInputProjections().ok());
  scheduler::RunOptions ro;
  ro.training = false;
  ro.backward = false;
  ro.keep_outputs = true;
  ro.folded_projections = true;
  ro.batch_invariant = true;
  absl::StatusOr<scheduler::RunResult> r = (*engine)->Run(parsed->graphs, ro);
  EXPECT_TRUE(r.ok()) << r.status();
  if (r.ok()) out.result = *std::move(r);
  out.parsed = *std::move(parsed);
  out.vocabulary = m->vocabulary;
  out.classes = m->cell.classes;
  return out;
}

// A request's HTTP status (-1: no answer) and, for a 200, its JSON body.
struct Answer {
  int status = -1;
  nlohmann::json body;
};

// Serves `checkpoint` with a queue of bodies.size() samples and a batch deadline of a minute, so
// that nothing runs: sends each body from a client of its own, waits until all are queued,
// checks that one more (`one_more`) is answered 503 queue_full with Retry-After, then shuts the
// server down and returns what each client got (a graceful shutdown answers every accepted
// request). REQUIRES: each body holds one input.
inline std::vector<Answer> FillTheQueueThenShutDown(const std::string& checkpoint,
                                                    const std::vector<std::string>& bodies,
                                                    const std::string& one_more) {
  ServerOptions o;
  o.batching.max_batch = 1000;
  o.batching.max_wait = std::chrono::seconds(60);  // nothing runs until the shutdown
  o.batcher.queue_capacity = bodies.size();
  auto s = StartServer(checkpoint, o);
  std::vector<Answer> answers(bodies.size());
  std::vector<std::thread> clients;
  for (size_t c = 0; c < bodies.size(); ++c) {
    clients.emplace_back([&, c] {
      httplib::Result r = Post(s->port, bodies[c]);
      answers[c].status = r ? r->status : -1;
      if (r && r->status == 200) answers[c].body = nlohmann::json::parse(r->body);
    });
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (s->server->metrics().queued() < static_cast<int64_t>(bodies.size()) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(s->server->metrics().queued(), static_cast<int64_t>(bodies.size()));
  httplib::Result full = Post(s->port, one_more);
  EXPECT_TRUE(full);
  if (full) {
    EXPECT_EQ(full->status, 503);
    EXPECT_EQ(full->get_header_value("Retry-After"), "1");
    EXPECT_EQ(nlohmann::json::parse(full->body)["error"]["kind"], "queue_full");
  }
  s->server->Shutdown();
  for (std::thread& t : clients) t.join();
  s->thread.join();
  EXPECT_FALSE(Post(s->port, one_more));  // no longer listening
  return answers;
}

// The cavs-serve binary (CAVS_SERVE_BINARY) as a child process, started with `flags` and
// --port=0, its stdout in `stdout_path`; killed at destruction if it still runs.
class RunningBinary {
 public:
  RunningBinary(const std::vector<std::string>& flags, const std::string& stdout_path) {
    std::vector<std::string> args = {CAVS_SERVE_BINARY, "--port=0"};
    args.insert(args.end(), flags.begin(), flags.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      std::freopen(stdout_path.c_str(), "w", stdout);
      execv(CAVS_SERVE_BINARY, argv.data());
      _exit(127);
    }
    for (int i = 0; i < 2000 && pid_ > 0 && port_ == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      std::ifstream f(stdout_path);
      std::string line;
      std::getline(f, line);
      const size_t colon = line.rfind(':');
      if (line.find("http://") != std::string::npos) port_ = std::stoi(line.substr(colon + 1));
    }
  }
  ~RunningBinary() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }

  // The port it printed (0: none within 10 s).
  int port() const { return port_; }
  // Sends SIGTERM and waits for the exit: its wait status (-1 if it was not running).
  int Stop() {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    int wstatus = -1;
    if (waitpid(pid_, &wstatus, 0) != pid_) wstatus = -1;
    pid_ = -1;
    return wstatus;
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace cavs::serve::testing
