// cavs-serve: answers predictions of a model trained by cavs-train over HTTP/1.1
// (docs/serving.md, --help). SIGTERM or SIGINT stops it gracefully: it stops accepting, answers
// every request it has read, and exits 0. Exit status 2 on a usage or checkpoint error, 1 on
// any other failure (a port in use included).
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/device.h"
#include "core/status.h"
#include "examples/serve/serve_config.h"
#include "examples/serve/server.h"
#include "examples/trainer/model_registry.h"
#include "examples/trainer/saved_model.h"
#include "ops/kernels.h"

namespace {

int Fail(const absl::Status& status) {
  const std::string line = absl::StrCat("cavs-serve: error: ", status.message(), "\n");
  std::fwrite(line.data(), 1, line.size(), stderr);
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kDataLoss:
      return 2;
    default:
      return 1;
  }
}

int stop_pipe[2] = {-1, -1};

void OnStopSignal(int) {
  const char byte = 1;
  [[maybe_unused]] const ssize_t n = write(stop_pipe[1], &byte, 1);
}

absl::StatusOr<std::unique_ptr<cavs::serve::Server>> Start(const cavs::serve::ServeConfig& c) {
  CAVS_ASSIGN_OR_RETURN(cavs::core::Device device, cavs::core::ParseDevice(c.device));
  if (c.threads > 0) {
    cavs::ops::KernelOptions options = cavs::ops::GetKernelOptions();
    options.cpu.threads = c.threads;
    CAVS_RETURN_IF_ERROR(cavs::ops::SetKernelOptions(options));
  }
  CAVS_ASSIGN_OR_RETURN(cavs::trainer::SavedModel model,
                        cavs::trainer::LoadSavedModel(c.checkpoint, device));
  return cavs::serve::Server::Create(std::move(model), c.server);
}

}  // namespace

int main(int argc, char** argv) {
  // A stop signal only writes a byte to a pipe; a thread reading it stops the server (nothing
  // a handler may call could). A handler, not a blocked mask and sigwait: OpenBLAS starts its
  // threads before main, and a signal reaching one of those would take the default action.
  if (pipe(stop_pipe) != 0) return Fail(absl::InternalError("pipe() failed"));
  struct sigaction sa = {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a client that hangs up is an error of its write, not a kill

  absl::StatusOr<cavs::serve::ServeConfig> config =
      cavs::serve::ParseServeFlags(std::vector<std::string>(argv, argv + argc));
  if (!config.ok()) return Fail(config.status());
  if (config->help) {
    std::cout << cavs::serve::ServeHelpText() << std::flush;
    return 0;
  }
  absl::StatusOr<std::unique_ptr<cavs::serve::Server>> server = Start(*config);
  if (!server.ok()) return Fail(server.status());
  absl::StatusOr<int> port = (*server)->Bind();
  if (!port.ok()) return Fail(port.status());
  const cavs::trainer::SavedModel& m = (*server)->model();
  std::cout << "cavs-serve: " << cavs::trainer::ModelKindName(m.kind) << " from " << m.path
            << " (step " << m.step << ", " << m.vocabulary.size() << " words) on http://"
            << config->server.host << ":" << *port << std::endl;
  std::thread waiter([s = server->get()] {
    char byte = 0;
    while (read(stop_pipe[0], &byte, 1) < 0 && errno == EINTR) {
    }
    s->Shutdown();
  });
  absl::Status served = (*server)->Serve();
  OnStopSignal(0);  // wakes the waiter if Serve returned on its own
  waiter.join();
  if (!served.ok()) return Fail(served);
  std::cout << "cavs-serve: stopped; every accepted request was answered" << std::endl;
  return 0;
}
