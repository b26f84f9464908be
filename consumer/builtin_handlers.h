// Built-in handlers for `partq worker --handler SPEC`, chainable with commas:
//   noop           acknowledge
//   sleep:MS       sleep MS milliseconds (0..3600000), then go on
//   fail:RATE      fail that fraction of calls (0..1), for retry tests
//   record:TABLE   insert (item_id, session_id, acked_at) into TABLE inside the
//                  ack transaction — the visible proof of exactly-once side
//                  effects. TABLE is [a-z_][a-z0-9_]* in partq's schema, or
//                  schema.table; created if missing.
//   publish:TOPIC  write the item's payload and key to the outbox inside the
//                  ack transaction, for `partq bridge publish` to send to TOPIC
//   crash:PAYLOAD  kill the process (SIGKILL) when an item's payload equals
//                  PAYLOAD — a poison item, for crash-loop tests
// A chain runs stage by stage; an item that fails a stage skips the rest.
// Example: "fail:0.01,sleep:2,record:effects".
#ifndef PARTQ_CONSUMER_BUILTIN_HANDLERS_H_
#define PARTQ_CONSUMER_BUILTIN_HANDLERS_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "consumer/handler.h"

namespace partq {

// A kind of stage that is not built in, defined by a layer above consumer/
// (the CLI adds `sql:STATEMENT` from handlers/). Its argument is the rest of
// the spec, commas included (a statement has commas), so it is the last
// stage: "fail:0.01,sql:CALL app.handle($1, $2)".
struct HandlerStageKind {
  std::string name;   // "sql": the stage is "sql:ARGUMENT"
  std::string usage;  // "sql:STATEMENT", for the list of known handlers
  // Makes the stage from ARGUMENT (without surrounding whitespace);
  // InvalidArgument for a bad one.
  std::function<absl::StatusOr<std::unique_ptr<Handler>>(absl::string_view argument)> make;
};

// InvalidArgument with a message naming the bad part of `spec`.
absl::StatusOr<std::unique_ptr<Handler>> ParseHandlerSpec(
    absl::string_view spec, const std::vector<HandlerStageKind>& more_kinds = {});

}  // namespace partq

#endif  // PARTQ_CONSUMER_BUILTIN_HANDLERS_H_
