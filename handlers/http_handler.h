// `--handler http:URL`: a handler in any language, served over HTTP — the
// Kubernetes sidecar pattern, where the application container serves URL on
// localhost beside the worker. Each batch is POSTed to URL as one request of
// the handler protocol (docs/handler-protocol.md); the response body is the
// reply, and an ok item's effects are applied in the ack transaction
// (options.apply_effects, effects.h), exactly as for exec.
//
// Per batch:
//   2xx with a valid JSON reply  each item as the reply says, final
//                                (Handler::StatusesAreFinal): recorded in
//                                one ack, no item sent again
//   429 or 503                   every item is throttled (handler.h,
//                                Throttled): run again after Retry-After
//                                (default_retry_after when the server sent
//                                none), the attempt given back
//   no connection                nothing was sent (name not resolved,
//                                refused, unreachable: the sidecar is not up
//                                yet): every item is throttled the same way,
//                                after default_retry_after doubled with each
//                                such failure in a row, up to 30 s. Batches
//                                that fail while the last wait runs (other
//                                threads, new items) wait as long and do
//                                not double it; only a failure after it
//                                ended does (and logs a warning)
//   anything else                a failure of the whole batch, without blame
//                                (no statuses; the consumer runs each item
//                                alone): timeout,
//                                trickling, 5xx, 4xx, a redirect (never
//                                followed), a body that is not JSON (an HTML
//                                error page) or too large, a reply that
//                                breaks the protocol. Each is logged with
//                                what the server sent, and counted.
//
// Credentials: user info in the URL (http://user:password@host/...) is sent
// as HTTP basic auth by libcurl; options.authorization as the Authorization
// header. Neither is ever shown: every message names the URL as RedactUrl
// does (http_client.h).
//
// The request carries `Idempotency-Key: QUEUE:ID[,ID...]`: the queue and the
// ids of the batch's items, so a server can recognise a batch it has seen
// (a batch is re-sent after a rollback or a crash; items carry their own ids
// for finer dedup).
//
// Connections: one HttpClient (http_client.h) per concurrent call, from a
// pool, so each worker thread keeps its own keep-alive connection.
//
// Threading: HandleBatch and Handle may be called from many threads at once.
#ifndef PARTQ_HANDLERS_HTTP_HANDLER_H_
#define PARTQ_HANDLERS_HTTP_HANDLER_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "consumer/handler.h"
#include "handlers/effects.h"
#include "handlers/handler_metrics.h"
#include "handlers/http_client.h"
#include "handlers/protocol.h"

namespace partq {

struct HttpHandlerOptions {
  std::string url;           // http:// or https://
  std::string queue;         // the queue the items come from (sent with each item)
  int max_attempts = 0;      // the queue's (sent with each item)
  ReplyLimits limits;        // limits.max_reply_bytes also caps the response body
  HttpClientOptions client;  // TLS (ca_file, insecure), connect and low-speed limits
  // A batch whose calls have no deadline (InfiniteFuture) gets this long.
  absl::Duration default_timeout = absl::Minutes(5);
  // How long a throttled batch waits when the server sent no Retry-After.
  absl::Duration default_retry_after = absl::Seconds(1);
  // Sent as the Authorization header of every request when not empty
  // ("Bearer TOKEN", "Basic BASE64"): credentials that need not be in the
  // URL, where they show in the process's command line (partq worker takes
  // it from --handler-auth-file or $PARTQ_HANDLER_AUTH). Not with a URL that
  // has user info.
  std::string authorization;
  EffectsApplier apply_effects = ApplyEffects;
  std::shared_ptr<HandlerMetrics> metrics;  // may be null
  // Times the waits after failed connections; must outlive the handler.
  Clock* clock = Clock::Real();
};

class HttpHandler : public Handler {
 public:
  // InvalidArgument for a URL that is not http(s) or unusable client options
  // (an unreadable CA file...), so a worker fails at start, not per batch.
  static absl::StatusOr<std::unique_ptr<HttpHandler>> Create(HttpHandlerOptions options);
  ~HttpHandler() override;

  absl::Status Handle(HandlerCall& call) override;
  // One request for all `calls`; see above for what the statuses are.
  void HandleBatch(absl::Span<HandlerCall* const> calls,
                   std::vector<absl::Status>* statuses) override;
  // True: each item's status is the reply's, its effects applied by
  // ApplyReplies (effects.h), and a failure without blame writes nothing.
  bool StatusesAreFinal() const override { return true; }

 private:
  explicit HttpHandler(HttpHandlerOptions options);
  std::unique_ptr<HttpClient> Acquire() ABSL_LOCKS_EXCLUDED(mu_);
  void Release(std::unique_ptr<HttpClient> client) ABSL_LOCKS_EXCLUDED(mu_);

  const HttpHandlerOptions options_;
  const std::string url_for_messages_;  // RedactUrl(options_.url)
  const std::string batch_prefix_;  // random, so batch ids differ across processes
  std::atomic<int64_t> batches_{0};
  // The wait after a failed connection, and whether it is a new step.
  struct ConnectWait {
    absl::Duration wait;
    bool longer;
  };
  ConnectWait ConnectFailed() ABSL_LOCKS_EXCLUDED(backoff_mu_);
  void Connected() ABSL_LOCKS_EXCLUDED(backoff_mu_);

  // HandleBatch's outcomes other than a reply. FailBatch: a failure of the
  // whole batch, logged and counted as `reason`: alone, the item's; in a
  // batch, no one's in particular (no statuses: the consumer runs each item
  // alone).
  void FailBatch(absl::Span<HandlerCall* const> calls, absl::string_view reason,
                 const std::string& message, FailureKind kind, std::vector<absl::Status>* statuses);
  // A 429 or 503 (r.outcome kThrottled): every item waits for its
  // Retry-After (default_retry_after when the server sent none).
  void ThrottleBatch(absl::Span<HandlerCall* const> calls, const HttpResult& r,
                     std::vector<absl::Status>* statuses);
  // r.outcome kFailed: no connection throttles every item, a cancelled call
  // is given up, anything else fails the batch.
  void RequestFailed(absl::Span<HandlerCall* const> calls, const HttpResult& r,
                     std::vector<absl::Status>* statuses);

  absl::Mutex backoff_mu_;
  // Failed connections in a row, counted once per wait: the step of the
  // current wait (0: none), and when it ends.
  int connect_step_ ABSL_GUARDED_BY(backoff_mu_) = 0;
  absl::Time connect_wait_end_ ABSL_GUARDED_BY(backoff_mu_) = absl::InfinitePast();
  absl::Mutex mu_;
  std::vector<std::unique_ptr<HttpClient>> idle_ ABSL_GUARDED_BY(mu_);
};

// "http:URL" / "https:URL" as a handler: URL is everything after "http:"
// (so http must be the whole spec, not part of a chain). InvalidArgument
// for anything else.
absl::StatusOr<std::unique_ptr<Handler>> ParseHttpSpec(absl::string_view spec,
                                                       HttpHandlerOptions options);

}  // namespace partq

#endif  // PARTQ_HANDLERS_HTTP_HANDLER_H_
