#include "consumer/builtin_handlers.h"

#include <signal.h>
#include <unistd.h>

#include <vector>

#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "base/utf8.h"
#include "store/validate.h"

namespace partq {
namespace {

constexpr char kKnown[] =
    "exec:COMMAND, http:URL, noop, sleep:MS, fail:RATE, record:TABLE, crash:PAYLOAD, "
    "publish:TOPIC";

bool IsIdentifier(absl::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  if (!(absl::ascii_islower(s[0]) || s[0] == '_')) return false;
  for (char c : s) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '_')) return false;
  }
  return true;
}

class Noop : public Handler {
 public:
  absl::Status Handle(HandlerCall&) override { return absl::OkStatus(); }
};

class Sleep : public Handler {
 public:
  explicit Sleep(absl::Duration d) : d_(d) {}
  absl::Status Handle(HandlerCall& call) override {
    // Honour the handler timeout: sleep no later than the deadline.
    const absl::Time until = std::min(absl::Now() + d_, call.deadline);
    absl::SleepFor(until - absl::Now());
    if (until == call.deadline && call.deadline < absl::InfiniteFuture()) {
      return absl::DeadlineExceededError("sleep interrupted by the handler timeout");
    }
    return absl::OkStatus();
  }

 private:
  absl::Duration d_;
};

class Fail : public Handler {
 public:
  explicit Fail(double rate) : rate_(rate) {}
  absl::Status Handle(HandlerCall&) override {
    thread_local absl::BitGen gen;
    if (absl::Bernoulli(gen, rate_)) return absl::UnknownError("fail: injected failure");
    return absl::OkStatus();
  }

 private:
  double rate_;
};

class Crash : public Handler {
 public:
  explicit Crash(std::string payload) : payload_(std::move(payload)) {}
  absl::Status Handle(HandlerCall& call) override {
    if (call.item->payload == payload_) kill(getpid(), SIGKILL);
    return absl::OkStatus();
  }

 private:
  std::string payload_;
};

class Record : public Handler {
 public:
  Record(std::string schema, std::string table) : schema_(std::move(schema)), table_(table) {}

  absl::Status Setup(Tx& tx) override {
    // A table that is there is used as it is: CREATE TABLE IF NOT EXISTS
    // needs CREATE on the schema even then, which a worker role must not
    // hold on partq's (docs/guide/operations-and-roles.md).
    auto there = tx.Exec("SELECT to_regclass($1) IS NOT NULL", {Name(tx)});
    if (absl::IsUnimplemented(there.status())) return absl::OkStatus();  // no SQL store
    if (!there.ok()) return there.status();
    if ((*there)[0][0] != "t") {
      // Several workers may start at once; CREATE TABLE IF NOT EXISTS is not
      // safe against itself, so serialize it.
      if (auto r =
              tx.Exec("SELECT pg_advisory_xact_lock(hashtext('partq.record.' || $1))", {Name(tx)});
          !r.ok()) {
        return r.status();
      }
      auto r = tx.Exec(absl::StrCat("CREATE TABLE IF NOT EXISTS ", Name(tx),
                                    " (item_id bigint NOT NULL, session_id uuid NOT NULL, "
                                    "acked_at timestamptz NOT NULL DEFAULT now())"));
      if (!r.ok()) return r.status();
    }
    return CheckOwner(tx);
  }

  absl::Status Handle(HandlerCall& call) override {
    auto r = call.tx->Exec(
        absl::StrCat("INSERT INTO ", Name(*call.tx), " (item_id, session_id) VALUES ($1, $2)"),
        {absl::StrCat(call.item->id), call.session->value});
    if (absl::IsUnimplemented(r.status())) return absl::OkStatus();
    return r.status();
  }

  // One INSERT for the whole batch.
  void HandleBatch(absl::Span<HandlerCall* const> calls,
                   std::vector<absl::Status>* statuses) override {
    statuses->assign(calls.size(), absl::OkStatus());
    if (calls.empty()) return;
    std::string ids = "{";
    for (size_t i = 0; i < calls.size(); ++i) {
      absl::StrAppend(&ids, i ? "," : "", calls[i]->item->id);
    }
    ids += "}";
    Tx& tx = *calls[0]->tx;
    auto r = tx.Exec(absl::StrCat("INSERT INTO ", Name(tx),
                                  " (item_id, session_id) SELECT unnest($1::bigint[]), $2::uuid"),
                     {ids, calls[0]->session->value});
    if (!r.ok() && !absl::IsUnimplemented(r.status())) {
      statuses->assign(calls.size(), r.status());
    }
  }

 private:
  std::string Name(const Tx& tx) const {
    return absl::StrCat("\"", schema_.empty() ? tx.schema() : schema_, "\".\"", table_, "\"");
  }
  // A table made before, by another role, is written only if that role is
  // this one or the schema's owner: a role that could create tables there
  // (a worker granted CREATE for its own record table) could have made it
  // first, with a trigger that runs, as this worker's role, whatever it
  // likes with each item (issue 48's second review).
  absl::Status CheckOwner(Tx& tx) const {
    auto r = tx.Exec(
        "SELECT pg_get_userbyid(c.relowner), "
        "c.relowner IN (n.nspowner, (SELECT oid FROM pg_roles WHERE rolname = current_user)), "
        "current_user FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.oid = $1::regclass",
        {Name(tx)});
    if (!r.ok()) return r.status();
    if (r->empty() || !(*r)[0][0] || !(*r)[0][1] || *(*r)[0][1] == "t") return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(
        "record:", table_, ": table ", Name(tx), " belongs to role ", Quoted(*(*r)[0][0]),
        ", neither this worker's role (", Quoted((*r)[0][2].value_or("")),
        ") nor the schema's owner: refusing to write into it (its triggers would run as this "
        "role); drop it, or have the schema's owner make it"));
  }

  std::string schema_;
  std::string table_;
};

// Writes the item's payload (and key) to the outbox inside the ack
// transaction; `partq bridge publish` sends it to TOPIC. The header
// partq.item.id names the item, so consumers can spot a re-send.
class Publish : public Handler {
 public:
  explicit Publish(std::string topic) : topic_(std::move(topic)) {}
  absl::Status Handle(HandlerCall& call) override {
    OutboxEvent e;
    e.topic = topic_;
    e.key = call.item->key;
    e.payload = call.item->payload;
    e.headers_json = absl::StrCat(R"([{"key":"partq.item.id","value":")", call.item->id, "\"}]");
    return call.tx->Publish(e);
  }

 private:
  std::string topic_;
};

class Chain : public Handler {
 public:
  explicit Chain(std::vector<std::unique_ptr<Handler>> stages) : stages_(std::move(stages)) {}

  absl::Status Setup(Tx& tx) override {
    for (auto& s : stages_) {
      if (absl::Status st = s->Setup(tx); !st.ok()) return st;
    }
    return absl::OkStatus();
  }
  absl::Status Handle(HandlerCall& call) override {
    for (auto& s : stages_) {
      if (absl::Status st = CallHandle(*s, call); !st.ok()) return st;
    }
    return absl::OkStatus();
  }
  void HandleBatch(absl::Span<HandlerCall* const> calls,
                   std::vector<absl::Status>* statuses) override {
    statuses->assign(calls.size(), absl::OkStatus());
    for (auto& s : stages_) {
      std::vector<HandlerCall*> live;
      std::vector<size_t> index;
      for (size_t i = 0; i < calls.size(); ++i) {
        if ((*statuses)[i].ok()) {
          live.push_back(calls[i]);
          index.push_back(i);
        }
      }
      if (live.empty()) return;
      std::vector<absl::Status> st;
      try {
        s->HandleBatch(absl::MakeConstSpan(live), &st);
      } catch (const std::exception& e) {
        st.assign(live.size(), absl::UnknownError(absl::StrCat("handler threw: ", e.what())));
      }
      for (size_t k = 0; k < index.size() && k < st.size(); ++k) (*statuses)[index[k]] = st[k];
    }
  }

 private:
  std::vector<std::unique_ptr<Handler>> stages_;
};

absl::StatusOr<std::unique_ptr<Handler>> ParseOne(absl::string_view spec, absl::string_view known) {
  std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(spec, absl::MaxSplits(':', 1));
  const absl::string_view name = kv.first, arg = kv.second;
  const bool has_arg = spec.find(':') != absl::string_view::npos;
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("handler \"", spec, "\": ", why));
  };
  if (name == "noop") {
    if (has_arg) return bad("noop takes no argument");
    return std::make_unique<Noop>();
  }
  if (name == "sleep") {
    int64_t ms;
    if (!absl::SimpleAtoi(arg, &ms) || ms < 0 || ms > 3'600'000) {
      return bad("sleep:MS needs milliseconds from 0 to 3600000");
    }
    return std::make_unique<Sleep>(absl::Milliseconds(ms));
  }
  if (name == "fail") {
    double rate;
    if (!absl::SimpleAtod(arg, &rate) || !(rate >= 0 && rate <= 1)) {
      return bad("fail:RATE needs a fraction from 0 to 1, like fail:0.01");
    }
    return std::make_unique<Fail>(rate);
  }
  if (name == "record") {
    std::vector<std::string> parts = absl::StrSplit(arg, '.');
    if (parts.size() == 1 && IsIdentifier(parts[0])) {
      return std::make_unique<Record>("", parts[0]);
    }
    if (parts.size() == 2 && IsIdentifier(parts[0]) && IsIdentifier(parts[1])) {
      return std::make_unique<Record>(parts[0], parts[1]);
    }
    return bad(
        "record:TABLE needs a table name of lowercase letters, digits and _ "
        "(optionally schema.table)");
  }
  if (name == "publish") {
    if (absl::Status st = ValidateTopicName(arg); !st.ok()) {
      return bad(absl::StrCat("publish:TOPIC needs a Kafka topic name: ", st.message()));
    }
    return std::make_unique<Publish>(std::string(arg));
  }
  if (name == "crash") {
    if (!has_arg || arg.empty()) return bad("crash:PAYLOAD needs the payload to crash on");
    return std::make_unique<Crash>(std::string(arg));
  }
  if (name == "exec" || name == "http" || name == "https") {
    // Reached only inside a chain: alone, these specs are parsed before it
    // (handlers/handler_spec.cc).
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": must be the whole --handler spec, not part of a chain (everything after \"", name,
        ":\" is its ", name == "exec" ? "command" : "URL", ", commas included)"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown handler \"", name, "\" (known: ", known, ")"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Handler>> ParseHandlerSpec(
    absl::string_view spec, const std::vector<HandlerStageKind>& more_kinds) {
  std::string known = kKnown;
  for (const HandlerStageKind& k : more_kinds) absl::StrAppend(&known, ", ", k.usage);
  if (spec.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("empty handler (known: ", known, ")"));
  }
  std::vector<std::unique_ptr<Handler>> stages;
  absl::string_view rest = spec;
  for (bool more = true; more;) {
    rest = absl::StripLeadingAsciiWhitespace(rest);
    const HandlerStageKind* kind = nullptr;
    for (const HandlerStageKind& k : more_kinds) {
      if (absl::StartsWith(rest, absl::StrCat(k.name, ":"))) kind = &k;
    }
    absl::StatusOr<std::unique_ptr<Handler>> h;
    if (kind != nullptr) {
      // The rest of the spec is its argument.
      h = kind->make(absl::StripAsciiWhitespace(rest.substr(kind->name.size() + 1)));
      more = false;
    } else {
      const size_t comma = rest.find(',');
      more = comma != absl::string_view::npos;
      h = ParseOne(absl::StripAsciiWhitespace(rest.substr(0, comma)), known);
      if (more) rest.remove_prefix(comma + 1);
    }
    if (!h.ok()) return h.status();
    stages.push_back(std::move(*h));
  }
  if (stages.size() == 1) return std::move(stages[0]);
  return std::unique_ptr<Handler>(std::make_unique<Chain>(std::move(stages)));
}

}  // namespace partq
