// Server: cavs-serve's HTTP/1.1 front end over a Batcher, with cpp-httplib.
//
//   POST /v1/predict   a body as request.h describes -> 200 {"predictions": [...]}: per input
//                      a tree model's class and probabilities, or a language model's next-word
//                      predictions and perplexity (sentence_score.h); a bad body
//                      -> 400 (413 over the size limit) {"error": {"kind", "message"}}; a full
//                      queue or a server shutting down -> 503 with Retry-After
//   GET  /healthz      200 {"status": "ok", "model", "checkpoint", "step"} (503 once stopping)
//   GET  /metrics      Prometheus text (serve_metrics.h)
//
// cpp-httplib (Debian's libcpp-httplib-dev) serves each connection on a thread of its pool; a
// predict handler parses and checks its body on that thread, queues the samples and waits for
// its Ticket, so a bad request never reaches a batch and a batch's failure answers only its own
// requests. Shutdown stops accepting connections, lets every request already read finish, then
// stops the batcher (what was queued is answered first).
//
// Thread-safety: Shutdown may be called from any thread (not from a signal handler: cavs-serve
// waits for signals on a thread of its own).
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "examples/serve/batch_policy.h"
#include "examples/serve/batcher.h"
#include "examples/serve/request.h"
#include "examples/serve/serve_metrics.h"
#include "examples/trainer/saved_model.h"
#include "scheduler/engine.h"
#include "scheduler/plan.h"

namespace httplib {
class Server;
}

namespace cavs::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                          // 0: any free port (Bind returns it)
  size_t max_body_bytes = size_t{1} << 20;  // a longer body is refused with 413
  int http_threads = 64;                    // connections served at once
  int keep_alive_seconds = 2;               // an idle connection is closed after this
  int listen_backlog = 1024;                // connections waiting to be accepted
  RequestLimits limits;
  std::string policy = "size-or-deadline";
  BatchPolicyOptions batching;
  BatcherOptions batcher;
  scheduler::PlanOptions plan;  // the engine's round policy (cavs-train's --policy)
};

class Server {
 public:
  // Builds the engine on the model's device and starts the batcher. REQUIRES: the model's store
  // is on the device it was loaded for.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Server>> Create(trainer::SavedModel model,
                                                                      ServerOptions options);
  ~Server();

  // Binds options.host:options.port; returns the port. Unavailable if it is taken.
  [[nodiscard]] absl::StatusOr<int> Bind();
  // Serves until Shutdown; returns once every accepted request is answered. REQUIRES: Bind.
  [[nodiscard]] absl::Status Serve();
  // Stops accepting and makes Serve return (at once if it has not started). Idempotent.
  void Shutdown();

  const ServeMetrics& metrics() const { return metrics_; }
  const trainer::SavedModel& model() const { return model_; }

 private:
  Server(trainer::SavedModel model, ServerOptions options);
  void Route();
  // POST /v1/predict's answer: the HTTP status and the JSON body (and whether it is a 503).
  struct Reply {
    int status = 200;
    std::string body;
  };
  Reply Predict(const std::string& body);
  Reply ErrorReply(const absl::Status& status);
  // The 200 body: a tree model's classes, or a language model's sentences scored (Internal if
  // the engine's answer does not fit the request: a bug).
  [[nodiscard]] absl::StatusOr<std::string> FormatPredictions(const ParsedRequest& request,
                                                              const Ticket& ticket) const;

  trainer::SavedModel model_;
  const InputForm form_;  // kChain for a language model
  const ServerOptions options_;
  ServeMetrics metrics_;
  std::unique_ptr<BatchPolicy> policy_;
  std::unique_ptr<scheduler::Engine> engine_;
  std::unique_ptr<Batcher> batcher_;
  std::unique_ptr<httplib::Server> http_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> serving_{false};
  int listen_socket_ = -1;  // the listening socket (set while binding)
};

}  // namespace cavs::serve
