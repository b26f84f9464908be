#include "handlers/handler_spec.h"

#include <utility>

#include "absl/strings/match.h"
#include "consumer/builtin_handlers.h"
#include "handlers/exec_handler.h"
#include "handlers/http_handler.h"
#include "handlers/sql_handler.h"

namespace partq {

absl::StatusOr<std::unique_ptr<Handler>> MakeHandler(absl::string_view spec,
                                                     const HandlerSpecOptions& options) {
  auto metrics = [&](const char* transport) -> std::shared_ptr<HandlerMetrics> {
    if (options.registry == nullptr) return nullptr;
    return std::make_shared<HandlerMetrics>(*options.registry, options.queue.name, transport);
  };
  if (absl::StartsWith(spec, "exec:")) {
    ExecOptions o;
    o.queue = options.queue.name;
    o.max_attempts = options.queue.max_attempts;
    o.metrics = metrics("exec");
    o.pass_env = options.exec_pass_env;
    o.pass_all_env = options.exec_pass_all_env;
    return ParseExecSpec(spec, std::move(o));
  }
  if (absl::StartsWith(spec, "http:") || absl::StartsWith(spec, "https:")) {
    HttpHandlerOptions o;
    o.queue = options.queue.name;
    o.max_attempts = options.queue.max_attempts;
    o.client.ca_file = options.ca_file;
    o.authorization = options.http_authorization;
    o.metrics = metrics("http");
    return ParseHttpSpec(spec, std::move(o));
  }
  return ParseHandlerSpec(spec, {SqlStageKind(options.queue.name)});
}

}  // namespace partq
