#include "handlers/http_handler.h"

#include <algorithm>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "base/log.h"

namespace partq {
namespace {

// The longest a batch waits for a handler that cannot be reached.
constexpr absl::Duration kMaxConnectWait = absl::Seconds(30);

// How an item counts a failure of its batch's request (FailureKind).
FailureKind KindOf(HttpFailure failure) {
  switch (failure) {
    case HttpFailure::kTimeout:
    case HttpFailure::kTooSlow:
      return FailureKind::kTimeout;
    case HttpFailure::kConnect:
    case HttpFailure::kTls:
    case HttpFailure::kTransport:
    case HttpFailure::kCancelled:
      return FailureKind::kConnection;
    case HttpFailure::kServerError:
      return FailureKind::kCrash;  // the handler's server failed (5xx)
    default:
      return FailureKind::kProtocol;
  }
}

bool IsHttpUrl(absl::string_view url) {
  return absl::StartsWithIgnoreCase(url, "http://") || absl::StartsWithIgnoreCase(url, "https://");
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpHandler>> HttpHandler::Create(HttpHandlerOptions options) {
  if (absl::Status url = CheckHttpUrl(options.url); !url.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("http handler: ", url.message()));
  }
  if (!options.authorization.empty()) {
    if (HasLineBreakOrNul(options.authorization)) {
      return absl::InvalidArgumentError(
          "http handler: the Authorization value contains a line break or NUL character");
    }
    if (UrlHasCredentials(options.url)) {
      return absl::InvalidArgumentError(
          "http handler: the URL has a user name or password and an Authorization value is "
          "given too: give the credentials once (better not in the URL, which shows in the "
          "process's command line)");
    }
  }
  // The client options are checked now (a CA file that cannot be read), so
  // a worker refuses to start instead of failing every batch.
  auto probe = HttpClient::Create(options.client);
  if (!probe.ok()) {
    return absl::Status(probe.status().code(),
                        absl::StrCat("http handler: ", probe.status().message()));
  }
  auto handler = std::unique_ptr<HttpHandler>(new HttpHandler(std::move(options)));
  handler->Release(std::move(*probe));
  return handler;
}

HttpHandler::HttpHandler(HttpHandlerOptions options)
    : options_(std::move(options)),
      url_for_messages_(RedactUrl(options_.url)),
      batch_prefix_(absl::StrFormat("%016x", absl::Uniform<uint64_t>(absl::BitGen()))) {}

HttpHandler::~HttpHandler() = default;

std::unique_ptr<HttpClient> HttpHandler::Acquire() {
  {
    absl::MutexLock lock(&mu_);
    if (!idle_.empty()) {
      std::unique_ptr<HttpClient> client = std::move(idle_.back());  // its connection is warm
      idle_.pop_back();
      return client;
    }
  }
  auto client = HttpClient::Create(options_.client);  // the options were checked in Create
  return client.ok() ? std::move(*client) : nullptr;
}

void HttpHandler::Release(std::unique_ptr<HttpClient> client) {
  if (client == nullptr) return;
  absl::MutexLock lock(&mu_);
  idle_.push_back(std::move(client));
}

HttpHandler::ConnectWait HttpHandler::ConnectFailed() {
  absl::MutexLock lock(&backoff_mu_);
  const absl::Time now = options_.clock->Now();
  // Past the last wait's end (InfinitePast after a connection): a longer one.
  const bool longer = now >= connect_wait_end_;
  if (longer) connect_step_ = std::min(connect_step_ + 1, 16);
  const absl::Duration wait =
      std::min(options_.default_retry_after * (int64_t{1} << (connect_step_ - 1)), kMaxConnectWait);
  if (longer) connect_wait_end_ = now + wait;
  return {wait, longer};
}

void HttpHandler::Connected() {
  absl::MutexLock lock(&backoff_mu_);
  connect_step_ = 0;
  connect_wait_end_ = absl::InfinitePast();
}

void HttpHandler::FailBatch(absl::Span<HandlerCall* const> calls, absl::string_view reason,
                            const std::string& message, FailureKind kind,
                            std::vector<absl::Status>* statuses) {
  if (options_.metrics != nullptr) options_.metrics->Failure(reason);
  PARTQ_LOG(Warning) << message;
  if (calls.size() == 1) {
    statuses->push_back(WithFailureKind(absl::UnavailableError(message), kind));
  }
}

void HttpHandler::ThrottleBatch(absl::Span<HandlerCall* const> calls, const HttpResult& r,
                                std::vector<absl::Status>* statuses) {
  Connected();
  // The server did nothing with the batch and said when to come back:
  // every item waits that long, its attempt given back.
  if (options_.metrics != nullptr) options_.metrics->Throttled();
  const absl::Duration wait = r.retry_after.value_or(options_.default_retry_after);
  // The items' error leaves the wait out: their failure line adds "retry
  // in", which said twice read "retrying in 1s; retry in 1s".
  const std::string message = absl::StrCat("http handler: ", r.error);
  PARTQ_LOG(Info) << message << "; retrying in " << absl::FormatDuration(wait);
  statuses->assign(calls.size(), Throttled(absl::UnavailableError(message), wait));
}

void HttpHandler::RequestFailed(absl::Span<HandlerCall* const> calls, const HttpResult& r,
                                std::vector<absl::Status>* statuses) {
  if (r.failure == HttpFailure::kConnect) {
    // Nothing reached the server: not the items' failure. They wait,
    // longer while it stays away, without using an attempt.
    if (options_.metrics != nullptr) options_.metrics->Failure(HttpFailureName(r.failure));
    const ConnectWait w = ConnectFailed();
    const std::string message =
        absl::StrCat("http handler: ", r.error, "; nothing was sent, so no item used an attempt");
    const std::string line = absl::StrCat(message, "; retrying in ", absl::FormatDuration(w.wait));
    if (w.longer) {
      PARTQ_LOG(Warning) << line;
    } else {
      PARTQ_LOG(Info) << line;  // said already, for the batches before it
    }
    statuses->assign(calls.size(), Throttled(absl::UnavailableError(message), w.wait));
    return;
  }
  if (r.failure == HttpFailure::kCancelled) {
    // The consumer gave the call up (it is stopping): not the server's
    // failure, nor the batch's; as the exec handler, said at info.
    PARTQ_LOG(Info) << "http handler: " << r.error;
    if (calls.size() == 1) statuses->push_back(absl::CancelledError(r.error));
    return;
  }
  Connected();
  // The deadline is the worker's --handler-timeout from the batch's start.
  FailBatch(calls, HttpFailureName(r.failure),
            absl::StrCat("http handler: ", r.error,
                         r.failure == HttpFailure::kTimeout
                             ? "; the deadline is the worker's --handler-timeout"
                             : ""),
            KindOf(r.failure), statuses);
}

void HttpHandler::HandleBatch(absl::Span<HandlerCall* const> calls,
                              std::vector<absl::Status>* statuses) {
  statuses->clear();
  if (calls.empty()) return;
  const absl::Time now = absl::Now();
  absl::Time deadline = absl::InfiniteFuture();
  for (const HandlerCall* call : calls) deadline = std::min(deadline, call->deadline);
  if (deadline == absl::InfiniteFuture()) deadline = now + options_.default_timeout;

  BatchRequest request;
  request.batch_id = absl::StrCat(batch_prefix_, "-", batches_.fetch_add(1) + 1);
  request.queue = options_.queue;
  request.max_attempts = options_.max_attempts;
  request.deadline = deadline;
  request.now = now;
  std::vector<const Item*> items;
  std::vector<int64_t> ids;
  for (const HandlerCall* call : calls) {
    items.push_back(call->item);
    ids.push_back(call->item->id);
  }
  HttpRequestHeaders headers;
  headers.idempotency_key = absl::StrCat(options_.queue, ":", absl::StrJoin(ids, ","));
  if (!options_.authorization.empty()) headers.extra = {{"Authorization", options_.authorization}};

  std::unique_ptr<HttpClient> client = Acquire();
  if (client == nullptr) {
    return FailBatch(calls, "client", "http handler: cannot make an HTTP client",
                     FailureKind::kConnection, statuses);
  }
  const absl::Time sent = absl::Now();
  // The calls share one cancel flag (HandlerCall::cancel): the consumer
  // giving up on a stop; libcurl sees it within about a second.
  HttpResult r = client->Post(options_.url, EncodeRequest(request, items), headers, deadline,
                              calls.front()->cancel);
  Release(std::move(client));
  if (options_.metrics != nullptr) options_.metrics->Request(absl::Now() - sent);

  switch (r.outcome) {
    case HttpOutcome::kThrottled:
      return ThrottleBatch(calls, r, statuses);
    case HttpOutcome::kFailed:
      return RequestFailed(calls, r, statuses);
    case HttpOutcome::kOk:
      Connected();
      break;
  }
  auto replies = ParseReply(r.body, request.batch_id, ids, options_.limits);
  if (!replies.ok()) {
    return FailBatch(
        calls, "bad_reply",
        absl::StrCat("http handler: POST ", url_for_messages_, ": HTTP ", r.status,
                     " with a reply that breaks the protocol: ", replies.status().message()),
        FailureKind::kProtocol, statuses);
  }
  *statuses = ApplyReplies(calls, *replies, options_.apply_effects);
}

absl::Status HttpHandler::Handle(HandlerCall& call) { return HandleAsBatch(*this, call); }

absl::StatusOr<std::unique_ptr<Handler>> ParseHttpSpec(absl::string_view spec,
                                                       HttpHandlerOptions options) {
  // "http:URL", and the URL alone ("http://...", "https://..."), which is
  // what people type.
  absl::string_view url = spec;
  // The spec as messages may show it: its URL may hold a password.
  auto shown = [&] {
    const std::string redacted = RedactUrl(url);
    return absl::StrCat("http:", redacted.empty() ? "(not shown)" : redacted);
  };
  if (!IsHttpUrl(spec) && !absl::ConsumePrefix(&url, "http:")) {
    return absl::InvalidArgumentError("handler is not http:URL");
  }
  if (!IsHttpUrl(url)) {
    return absl::InvalidArgumentError(
        absl::StrCat("handler \"", shown(),
                     "\": http:URL needs an http:// or https:// URL, like "
                     "http:http://localhost:8080/handle"));
  }
  options.url = std::string(url);
  auto handler = HttpHandler::Create(std::move(options));
  if (!handler.ok()) return handler.status();
  return std::unique_ptr<Handler>(std::move(*handler));
}

}  // namespace partq
