#include "consumer/handler.h"

#include <exception>

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
