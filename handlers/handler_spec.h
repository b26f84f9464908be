// `partq worker --handler SPEC`: what runs the items.
//   exec:COMMAND      a child process per worker thread speaking the handler
//                     protocol in JSON Lines (exec_handler.h); COMMAND runs
//                     with /bin/sh -c and may contain commas
//   http:URL          each batch POSTed to URL (http_handler.h); the bare URL
//                     (http://..., https://...) works too
//   a chain of built-ins, comma-separated (consumer/builtin_handlers.h):
//                     noop, sleep:MS, fail:RATE, record:TABLE, crash:PAYLOAD,
//                     publish:TOPIC, and last in a chain sql:STATEMENT
//                     (sql_handler.h)
// exec and http take the whole spec: they are not part of a chain.
#ifndef PARTQ_HANDLERS_HANDLER_SPEC_H_
#define PARTQ_HANDLERS_HANDLER_SPEC_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "consumer/handler.h"
#include "prometheus/registry.h"
#include "store/types.h"

namespace partq {

struct HandlerSpecOptions {
  QueueConfig queue;    // the queue the worker consumes (name, max_attempts)
  std::string ca_file;  // http: a CA bundle to verify the server with; empty: the system's
  // http: the Authorization header's value (HttpHandlerOptions::authorization).
  std::string http_authorization;
  // exec: the PG*/PARTQ_* variables a child gets all the same (ExecOptions).
  std::vector<std::string> exec_pass_env;
  bool exec_pass_all_env = false;
  // Where exec and http handlers report (handler_metrics.h); null: nowhere.
  // Must outlive the handler.
  prometheus::Registry* registry = nullptr;
};

// InvalidArgument naming what is wrong with `spec`.
absl::StatusOr<std::unique_ptr<Handler>> MakeHandler(absl::string_view spec,
                                                     const HandlerSpecOptions& options);

}  // namespace partq

#endif  // PARTQ_HANDLERS_HANDLER_SPEC_H_
