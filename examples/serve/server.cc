#include "examples/serve/server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "examples/data/text_reader.h"
#include "examples/serve/sentence_score.h"
#include "scheduler/executor_common.h"

namespace cavs::serve {
namespace {

constexpr char kJson[] = "application/json";

// The predictions' JSON keeps its fields in the order written (the most useful first).
using Json = nlohmann::ordered_json;

// The HTTP status of an error kind.
int HttpStatus(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kBodyTooLarge:
      return 413;
    case ErrorKind::kQueueFull:
    case ErrorKind::kShuttingDown:
      return 503;
    case ErrorKind::kInternal:
      return 500;
    default:
      return 400;
  }
}

std::string ErrorBody(ErrorKind kind, absl::string_view message) {
  nlohmann::json j;
  j["error"] = {{"kind", ErrorKindName(kind)}, {"message", std::string(message)}};
  return j.dump() + "\n";
}

// One vertex's class, probabilities (softmax in double) and `classes` logits.
Json VertexJson(const float* logits, int64_t classes) {
  int64_t best = 0;
  for (int64_t c = 1; c < classes; ++c) {
    if (logits[c] > logits[best]) best = c;
  }
  std::vector<double> p(classes);
  double sum = 0;
  for (int64_t c = 0; c < classes; ++c) sum += p[c] = std::exp(double{logits[c]} - logits[best]);
  for (double& x : p) x /= sum;
  return {{"class", best},
          {"probabilities", p},
          {"logits", std::vector<float>(logits, logits + classes)}};
}

// A language model's answer for one sentence: per position the token read, the sentence's next
// token with its probability, the most probable one (and with top_k the k most probable); the
// sentence's log-probability and perplexity.
Json SentenceJson(const SentenceScore& score, const scheduler::Graph& chain,
                  const std::vector<int32_t>& next, const examples::Vocabulary& vocab) {
  Json positions = Json::array();
  for (size_t t = 0; t < score.positions.size(); ++t) {
    const PositionScore& p = score.positions[t];
    Json j = {{"word", vocab.Word(chain.tokens[t])},
              {"next", vocab.Word(next[t])},
              {"next_probability", p.next_probability},
              {"best", vocab.Word(p.best)},
              {"best_probability", p.best_probability}};
    if (!p.top.empty()) {
      Json top = Json::array();
      for (const auto& [id, probability] : p.top) {
        top.push_back({{"word", vocab.Word(id)}, {"probability", probability}});
      }
      j["top"] = std::move(top);
    }
    positions.push_back(std::move(j));
  }
  // Vertex 0 reads <s>; the words follow.
  const auto unknown =
      std::count(chain.tokens.begin() + 1, chain.tokens.end(), examples::Vocabulary::kUnkId);
  return {{"log_prob", score.log_prob},
          {"perplexity", score.perplexity},
          {"tokens", score.tokens},
          {"unknown_words", unknown},
          {"positions", std::move(positions)}};
}

}  // namespace

Server::Server(trainer::SavedModel model, ServerOptions options)
    : model_(std::move(model)),
      form_(trainer::IsLanguageModel(model_.kind) ? InputForm::kChain : InputForm::kTree),
      options_(std::move(options)) {}

Server::~Server() {
  Shutdown();
  if (batcher_ != nullptr) batcher_->Stop();
}

absl::StatusOr<std::unique_ptr<Server>> Server::Create(trainer::SavedModel model,
                                                       ServerOptions options) {
  if (options.batching.max_batch < 1) {
    return absl::InvalidArgumentError("--max-batch must be at least 1");
  }
  if (trainer::IsLanguageModel(model.kind)) {
    // The chains read <s> and predict </s>: a language model's vocabulary always has both.
    if (absl::Status s = examples::CheckSpecialTokens(model.vocabulary, /*add_begin_token=*/true,
                                                      trainer::ModelKindName(model.kind));
        !s.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(model.path, ": ", s.message()));
    }
  }
  std::unique_ptr<Server> s(new Server(std::move(model), std::move(options)));
  CAVS_ASSIGN_OR_RETURN(s->policy_, MakeBatchPolicy(s->options_.policy, s->options_.batching));
  scheduler::EngineOptions eo;
  eo.device = s->model_.store->device();
  eo.plan = s->options_.plan;
  CAVS_ASSIGN_OR_RETURN(
      s->engine_, scheduler::Engine::Create(s->model_.function.get(), s->model_.store.get(), eo));
  CAVS_ASSIGN_OR_RETURN(s->batcher_, Batcher::Create(s->engine_.get(), s->policy_.get(),
                                                     &s->metrics_, s->options_.batcher));
  s->http_ = std::make_unique<httplib::Server>();
  s->Route();
  return s;
}

Server::Reply Server::ErrorReply(const absl::Status& status) {
  const ErrorKind kind = ErrorKindOf(status);
  metrics_.CountError(kind);
  return {HttpStatus(kind), ErrorBody(kind, status.message())};
}

absl::StatusOr<std::string> Server::FormatPredictions(const ParsedRequest& request,
                                                      const Ticket& ticket) const {
  const int64_t classes = model_.cell.classes;
  Json predictions = Json::array();
  for (size_t i = 0; i < request.graphs.size(); ++i) {
    const std::vector<float>& logits = ticket.logits(i);
    const int vertices = request.graphs[i].num_vertices();
    if (static_cast<int64_t>(logits.size()) != vertices * classes) {
      return absl::InternalError(absl::StrCat("input ", i, ": ", logits.size(), " logits for ",
                                              vertices, " vertices of ", classes, " classes"));
    }
    if (form_ == InputForm::kChain) {
      CAVS_ASSIGN_OR_RETURN(SentenceScore score,
                            ScoreSentence(logits, classes, request.next_tokens[i], request.top_k));
      predictions.push_back(
          SentenceJson(score, request.graphs[i], request.next_tokens[i], model_.vocabulary));
      continue;
    }
    // The root is the last vertex: parsed trees and sentences are in post-order.
    Json p = VertexJson(logits.data() + (vertices - 1) * classes, classes);
    if (request.nodes) {
      Json nodes = Json::array();
      for (int v = 0; v < vertices; ++v) nodes.push_back(VertexJson(&logits[v * classes], classes));
      p["nodes"] = std::move(nodes);
    }
    predictions.push_back(std::move(p));
  }
  return Json{{"predictions", std::move(predictions)}}.dump() + "\n";
}

Server::Reply Server::Predict(const std::string& body) {
  const auto t0 = std::chrono::steady_clock::now();
  if (stopping_.load()) {
    return ErrorReply(RequestError(ErrorKind::kShuttingDown, "the server is shutting down"));
  }
  absl::StatusOr<ParsedRequest> request =
      ParseRequest(body, model_.vocabulary, options_.limits, form_);
  if (!request.ok()) return ErrorReply(request.status());
  // The parser's graphs are well formed; this is the engine's own check, per request, so that
  // nothing a batch runs can fail it.
  if (absl::Status valid = scheduler::ValidateBatch(*model_.function, request->graphs);
      !valid.ok()) {
    return ErrorReply(RequestError(ErrorKind::kMalformedInput, valid.message()));
  }
  absl::StatusOr<std::shared_ptr<Ticket>> ticket = batcher_->Submit(request->graphs);
  if (!ticket.ok()) return ErrorReply(ticket.status());
  if (absl::Status done = (*ticket)->Wait(); !done.ok()) return ErrorReply(done);
  absl::StatusOr<std::string> answer = FormatPredictions(*request, **ticket);
  if (!answer.ok()) {
    return ErrorReply(RequestError(ErrorKind::kInternal, answer.status().message()));
  }
  Reply reply{200, *std::move(answer)};
  metrics_.ObserveLatency(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return reply;
}

void Server::Route() {
  httplib::Server& h = *http_;
  const int threads = options_.http_threads;
  h.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  h.set_payload_max_length(options_.max_body_bytes);
  h.set_keep_alive_timeout(options_.keep_alive_seconds);
  h.set_keep_alive_max_count(1 << 20);
  h.set_tcp_nodelay(true);
  // httplib's own options also set SO_REUSEPORT, which would let a second server bind the
  // same port silently; the socket is kept to widen its backlog after the bind (Bind).
  h.set_socket_options([this](socket_t sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listen_socket_ = sock;
  });
  h.Post("/v1/predict", [this](const httplib::Request& req, httplib::Response& res) {
    Reply r = Predict(req.body);
    res.status = r.status;
    if (r.status == 503) res.set_header("Retry-After", "1");
    res.set_content(std::move(r.body), kJson);
  });
  h.Get("/healthz", [this](const httplib::Request&, httplib::Response& res) {
    nlohmann::json j = {{"status", stopping_ ? "stopping" : "ok"},
                        {"model", trainer::ModelKindName(model_.kind)},
                        {"checkpoint", model_.path},
                        {"step", model_.step}};
    res.status = stopping_ ? 503 : 200;
    res.set_content(j.dump() + "\n", kJson);
  });
  h.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.Render(), "text/plain; version=0.0.4");
  });
  // Errors httplib answers itself (an unknown path, a body over the limit) get a JSON body too;
  // the handlers' own errors already have one.
  h.set_error_handler(
      httplib::Server::HandlerWithResponse([this](const httplib::Request&, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        if (res.status == 413) {
          metrics_.CountError(ErrorKind::kBodyTooLarge);
          res.set_content(
              ErrorBody(ErrorKind::kBodyTooLarge, absl::StrCat("the body is over the limit of ",
                                                               options_.max_body_bytes, " bytes")),
              kJson);
        } else {
          res.set_content(ErrorBody(ErrorKind::kNone, absl::StrCat("HTTP ", res.status)), kJson);
        }
        return httplib::Server::HandlerResponse::Handled;
      }));
  // Before the response is written, so that a client that has its answer sees it counted.
  h.set_post_routing_handler([this](const httplib::Request&, httplib::Response& res) {
    metrics_.CountRequest(res.status);
  });
}

absl::StatusOr<int> Server::Bind() {
  int port = options_.port;
  if (port == 0) {
    port = http_->bind_to_any_port(options_.host);
    if (port <= 0) return absl::UnavailableError(absl::StrCat("cannot bind ", options_.host));
  } else if (!http_->bind_to_port(options_.host, options_.port)) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options_.host, ":",
                                               options_.port, " (in use, or not permitted)"));
  }
  // cpp-httplib listens with a backlog of 5 (a constant of Debian's build): a burst of
  // connections beyond it loses SYNs, which clients resend only after a second. Listening
  // again on a listening socket sets its backlog (Linux).
  if (listen_socket_ >= 0 && ::listen(listen_socket_, options_.listen_backlog) != 0) {
    return absl::InternalError(absl::StrCat("listen(): ", std::strerror(errno)));
  }
  return port;
}

absl::Status Server::Serve() {
  serving_ = true;
  const bool clean = stopping_ || http_->listen_after_bind();
  serving_ = false;
  // Every connection's handler has returned: what was accepted is answered. The batcher's
  // queue is empty by then; Stop joins its threads.
  batcher_->Stop();
  if (!clean && !stopping_) return absl::InternalError("the HTTP server stopped on an error");
  return absl::OkStatus();
}

void Server::Shutdown() {
  stopping_ = true;
  if (batcher_ != nullptr) batcher_->Flush();
  // httplib's stop() does nothing before the listening loop runs: wait for it to start.
  while (serving_ && !http_->is_running())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (http_ != nullptr) http_->stop();
}

}  // namespace cavs::serve
