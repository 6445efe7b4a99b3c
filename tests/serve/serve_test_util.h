// Helpers of the server tests: a Server on a free loopback port serving in a thread, the
// cavs-serve binary started as a child process, and a POST from cpp-httplib's client.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "examples/serve/server.h"
#include "examples/trainer/saved_model.h"

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

// The cavs-serve binary (CAVS_SERVE_BINARY) started with `flags` and --port=0, its stdout in
// `stdout_path`: its pid and the port it printed (0 if it printed none within 10 s).
inline std::pair<pid_t, int> StartBinary(const std::vector<std::string>& flags,
                                         const std::string& stdout_path) {
  std::vector<std::string> args = {CAVS_SERVE_BINARY, "--port=0"};
  args.insert(args.end(), flags.begin(), flags.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    std::freopen(stdout_path.c_str(), "w", stdout);
    execv(CAVS_SERVE_BINARY, argv.data());
    _exit(127);
  }
  int port = 0;
  for (int i = 0; i < 2000 && pid > 0 && port == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::ifstream f(stdout_path);
    std::string line;
    std::getline(f, line);
    const size_t colon = line.rfind(':');
    if (line.find("http://") != std::string::npos) port = std::stoi(line.substr(colon + 1));
  }
  return {pid, port};
}

}  // namespace cavs::serve::testing
