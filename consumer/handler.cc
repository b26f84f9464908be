#include "consumer/handler.h"

#include <exception>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace partq {

void Handler::HandleBatch(absl::Span<HandlerCall* const> calls,
                          std::vector<absl::Status>* statuses) {
  statuses->clear();
  for (HandlerCall* call : calls) statuses->push_back(CallHandle(*this, *call));
}

absl::Status CallHandle(Handler& handler, HandlerCall& call) {
  try {
    return handler.Handle(call);
  } catch (const std::exception& e) {
    return absl::UnknownError(absl::StrCat("handler threw: ", e.what()));
  } catch (...) {
    return absl::UnknownError("handler threw a non-standard exception");
  }
}

namespace {
// Type URLs of the failure hints' payloads (absl::Status::SetPayload).
constexpr char kRetryInUrl[] = "type.partq.dev/handler.retry_in";  // nanoseconds, decimal
constexpr char kDeadNowUrl[] = "type.partq.dev/handler.dead_now";
constexpr char kThrottledUrl[] = "type.partq.dev/handler.throttled";
constexpr char kKindUrl[] = "type.partq.dev/handler.failure_kind";  // FailureKindName
}  // namespace

const char* FailureKindName(FailureKind kind) {
  switch (kind) {
    case FailureKind::kHandlerError:
      return "handler_error";
    case FailureKind::kEffect:
      return "effect";
    case FailureKind::kTimeout:
      return "timeout";
    case FailureKind::kCrash:
      return "crash";
    case FailureKind::kProtocol:
      return "protocol";
    case FailureKind::kConnection:
      return "connection";
    case FailureKind::kThrottled:
      return "throttled";
  }
  return "handler_error";
}

absl::Status WithFailureKind(absl::Status failure, FailureKind kind) {
  failure.SetPayload(kKindUrl, absl::Cord(FailureKindName(kind)));
  return failure;
}

FailureKind FailureKindOf(const absl::Status& failure) {
  if (IsThrottled(failure)) return FailureKind::kThrottled;
  if (const auto p = failure.GetPayload(kKindUrl)) {
    for (FailureKind k : kFailureKinds) {
      if (*p == FailureKindName(k)) return k;
    }
  }
  if (absl::IsDeadlineExceeded(failure)) return FailureKind::kTimeout;
  return FailureKind::kHandlerError;
}

absl::Status RetryIn(absl::Status failure, absl::Duration delay) {
  failure.SetPayload(kRetryInUrl, absl::Cord(absl::StrCat(absl::ToInt64Nanoseconds(delay))));
  return failure;
}

absl::Status DeadNow(absl::Status failure) {
  failure.SetPayload(kDeadNowUrl, absl::Cord("1"));
  return failure;
}

std::optional<absl::Duration> RetryInOf(const absl::Status& status) {
  const auto p = status.GetPayload(kRetryInUrl);  // absl::optional
  int64_t ns;
  if (!p || !absl::SimpleAtoi(std::string(*p), &ns)) return std::nullopt;
  return absl::Nanoseconds(ns);
}

bool IsDeadNow(const absl::Status& status) { return status.GetPayload(kDeadNowUrl).has_value(); }

absl::Status Throttled(absl::Status failure, absl::Duration delay) {
  failure = RetryIn(std::move(failure), delay);
  failure.SetPayload(kThrottledUrl, absl::Cord("1"));
  return failure;
}

bool IsThrottled(const absl::Status& status) {
  return status.GetPayload(kThrottledUrl).has_value();
}

absl::Status HandleAsBatch(Handler& handler, HandlerCall& call) {
  HandlerCall* one[] = {&call};
  std::vector<absl::Status> statuses;
  handler.HandleBatch(one, &statuses);
  if (statuses.empty()) return absl::InternalError("the handler gave no status for its one item");
  return statuses[0];
}

namespace {
class FunctionHandler : public Handler {
 public:
  explicit FunctionHandler(std::function<absl::Status(HandlerCall&)> fn) : fn_(std::move(fn)) {}
  absl::Status Handle(HandlerCall& call) override { return fn_(call); }

 private:
  std::function<absl::Status(HandlerCall&)> fn_;
};
}  // namespace

std::unique_ptr<Handler> MakeHandler(std::function<absl::Status(HandlerCall&)> fn) {
  return std::make_unique<FunctionHandler>(std::move(fn));
}

}  // namespace partq
