// migrate, queue, enqueue, wait, status.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "base/utf8.h"
#include "cli/common.h"
#include "cli/line_reader.h"
#include "console/console.h"
#include "coordinator/heartbeat.h"
#include "coordinator/queue_collector.h"
#include "pg/migrations.h"
#include "pg/pg_store.h"
#include "producer/producer.h"
#include "store/throughput.h"
#include "store/validate.h"

namespace partq::cli {
namespace {

// `partq status` names what holds the vacuum horizon once it has held it
// this long (the alert PartqVacuumHorizonHeld waits five minutes).
constexpr absl::Duration kHorizonWorthSaying = absl::Minutes(1);

// Standard input is a pipe or a regular file (not a terminal, not /dev/null).
bool StdinIsPipeOrFile() {
  struct stat st {};
  return fstat(STDIN_FILENO, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISREG(st.st_mode));
}

std::string Seconds(absl::Duration d) { return absl::StrFormat("%.3fs", absl::ToDoubleSeconds(d)); }

// `partq wait`'s exit status for an item that did not finish in time, for
// one that was dead-lettered, and for one that was cancelled (0 done, 1
// other errors, 2 usage).
constexpr int kWaitTimedOut = 3;
constexpr int kWaitDead = 4;
constexpr int kWaitCancelled = 5;
// `dead requeue`: some asked for were left dead (a live item holds their dedup key).
constexpr int kDeadRequeueKept = 3;
// `partq cancel`'s exit status when an asked-for item was not cancelled:
// too late (in flight, done or dead), or not an item of the queue at all
// (which wins: most likely a wrong id or queue).
constexpr int kCancelTooLate = 3;
constexpr int kCancelUnknown = 4;
// `enqueue --stdin` sends a chunk once its payloads reach this many bytes,
// before --chunk lines if they are large: memory stays bounded by this (and
// one line of at most the payload limit), not by --chunk times the limit.
constexpr size_t kStdinChunkBytes = 16 << 20;

// An item id as given on the command line; InvalidArgument (exit 2) if not
// a positive whole number.
absl::StatusOr<int64_t> ParseItemId(const std::string& text) {
  int64_t id = 0;
  if (!absl::SimpleAtoi(text, &id) || id <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("item id must be a positive whole number (got ", Quoted(text), ")"));
  }
  return id;
}

// "1 item", "2 items".
std::string Count(int64_t n, const char* noun) {
  return absl::StrCat(n, " ", noun, n == 1 ? "" : "s");
}

const char* AssignmentName(AssignmentKind k) {
  return k == AssignmentKind::kSticky ? "sticky" : "lexical";
}

// --dlq-topic T: the queue's dead-letter topic; an empty value means none.
absl::StatusOr<std::optional<std::string>> DlqTopicFlag(const Args& args) {
  auto topic = args.Get("dlq-topic");
  if (!topic || topic->empty()) return std::optional<std::string>();
  if (absl::Status st = ValidateTopicName(*topic); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--dlq-topic: ", st.message()));
  }
  return topic;
}

nlohmann::json DlqTopicJson(const QueueConfig& q) {
  return q.dlq_topic ? nlohmann::json(*q.dlq_topic) : nlohmann::json();
}

// The oldest ready item's age in --json: null when nothing is ready, as the
// text shows "-" (the metric, which cannot be null, says 0).
nlohmann::json OldestReadyJson(int64_t ready, absl::Duration age) {
  return ready > 0 ? nlohmann::json(absl::ToDoubleSeconds(age)) : nlohmann::json();
}

// QueueConfig::key_concurrency in --json: the number, or null for none.
nlohmann::json KeyConcurrencyJson(const QueueConfig& q) {
  return q.key_concurrency > 0 ? nlohmann::json(q.key_concurrency) : nlohmann::json();
}

// A rate limit as --rate takes it, in the unit that shows it without an
// exponent: 0.0001/h, not 2.77778e-08/s.
std::string RateText(std::optional<double> rate) {
  if (!rate) return "none";
  // Nine decimals, trailing zeros dropped: 1000000, 0.00001.
  auto plain = [](double v) {
    std::string s = absl::StrFormat("%.9f", v);
    s.erase(s.find_last_not_of('0') + 1);
    if (s.back() == '.') s.pop_back();
    return s;
  };
  if (*rate >= 1 || *rate <= 0) return plain(*rate) + "/s";
  if (*rate * 60 >= 1) return plain(*rate * 60) + "/min";
  return plain(*rate * 3600) + "/h";
}

// "16 parts, lexical assignment, session TTL 10s, max attempts 25[, ordered]
// [, dead-letter topic T][, rate limit R][, fair by key][, key concurrency N]
// [, payload limit N bytes]" (the limit when it is not the default 1 MiB).
std::string Settings(const QueueConfig& q) {
  return absl::StrCat(
      Count(q.parts, "part"), ", ", AssignmentName(q.assignment), " assignment, session TTL ",
      absl::FormatDuration(q.session_ttl), ", max attempts ", q.max_attempts,
      q.ordered ? ", ordered" : "",
      q.dlq_topic ? absl::StrCat(", dead-letter topic ", *q.dlq_topic) : "",
      q.rate ? absl::StrCat(", rate limit ", RateText(q.rate)) : "",
      q.fair_by != FairBy::kNone ? absl::StrCat(", fair by ", FairByName(q.fair_by)) : "",
      q.key_concurrency > 0 ? absl::StrCat(", key concurrency ", q.key_concurrency) : "",
      q.max_payload_bytes != kDefaultMaxPayloadBytes
          ? absl::StrCat(", payload limit ", q.max_payload_bytes, " bytes")
          : "");
}

// --key-concurrency N|none (absent: none).
absl::StatusOr<int> KeyConcurrencyFlag(const Args& args) {
  auto n = ParseKeyConcurrency(args.GetOr("key-concurrency", "none"));
  if (!n.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--key-concurrency: ", n.status().message()));
  }
  return n;
}

// --fair-by key|none.
absl::StatusOr<FairBy> FairByFlag(const Args& args) {
  auto fair_by = ParseFairBy(args.GetOr("fair-by", "none"));
  if (!fair_by.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--fair-by: ", fair_by.status().message()));
  }
  return fair_by;
}

// --rate: items a second for the whole fleet, as N/s, N/min or N/h (N alone
// is per second); "none", or no --rate, for no limit. An empty value is
// refused: an empty $RATE in a script would turn the limit off unseen.
absl::StatusOr<std::optional<double>> RateFlag(const Args& args) {
  std::string text = args.GetOr("rate", "");
  if (!args.Has("rate") || text == "none") return std::optional<double>();
  double per = 1;
  for (const auto& [suffix, seconds] :
       {std::pair<const char*, double>{"/s", 1}, {"/min", 60}, {"/m", 60}, {"/h", 3600}}) {
    if (absl::EndsWith(text, suffix)) {
      text.resize(text.size() - strlen(suffix));
      per = seconds;
      break;
    }
  }
  double n = 0;
  if (!absl::SimpleAtod(text, &n) || !std::isfinite(n)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rate must be N/s, N/min (or N/m), N/h or N alone (per second; e.g. 500/s, 200, "
        "10/min), or none; got ",
        Quoted(args.GetOr("rate", ""))));
  }
  const std::optional<double> rate = n / per;
  if (absl::Status st = ValidateRate(rate); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--rate: ", st.message()));
  }
  return rate;
}

// `queue create` of a queue that exists already, with `have` its settings
// and `want` the command's. Only the settings whose flags were given count
// as asked for: a flag left out asks for nothing, so a script that names
// only --parts accepts whatever the queue was created with, and a default
// changed by a later partq cannot make the same command fail. (--ordered
// can only ask for an ordered queue: no flag asks for an unordered one.)
// Exit 0 when every asked-for setting matches; otherwise exit 1 with each
// one next to the existing value (the queue is left as it is).
int CreateExisting(const Args& args, const QueueConfig& want, const QueueConfig& have) {
  struct Row {
    const char* setting;
    std::string existing, requested;
  };
  auto ttl = [](absl::Duration d) {
    // As stored: whole microseconds.
    return absl::FormatDuration(absl::Trunc(d, absl::Microseconds(1)));
  };
  auto topic = [](const QueueConfig& q) { return q.dlq_topic.value_or("(none)"); };
  std::vector<Row> rows = {{"parts", absl::StrCat(have.parts), absl::StrCat(want.parts)}};
  if (args.Has("assignment")) {
    rows.push_back(
        {"assignment", AssignmentName(have.assignment), AssignmentName(want.assignment)});
  }
  if (args.Has("max-attempts")) {
    rows.push_back(
        {"max attempts", absl::StrCat(have.max_attempts), absl::StrCat(want.max_attempts)});
  }
  if (args.Has("session-ttl")) {
    rows.push_back({"session TTL", ttl(have.session_ttl), ttl(want.session_ttl)});
  }
  if (args.Has("ordered")) rows.push_back({"ordered", have.ordered ? "yes" : "no", "yes"});
  if (args.Has("dlq-topic")) rows.push_back({"dead-letter topic", topic(have), topic(want)});
  if (args.Has("fair-by")) {
    rows.push_back({"fair by", FairByName(have.fair_by), FairByName(want.fair_by)});
  }
  if (args.Has("key-concurrency")) {
    rows.push_back({"key concurrency", KeyConcurrencyText(have.key_concurrency),
                    KeyConcurrencyText(want.key_concurrency)});
  }
  if (args.Has("max-payload")) {
    rows.push_back({"payload limit", absl::StrCat(have.max_payload_bytes),
                    absl::StrCat(want.max_payload_bytes)});
  }
  if (args.Has("rate")) rows.push_back({"rate limit", RateText(have.rate), RateText(want.rate)});

  bool same = true;
  for (const Row& r : rows) same = same && r.existing == r.requested;
  if (same) {
    printf("queue \"%s\" already exists with these settings: %s\n", have.name.c_str(),
           Settings(have).c_str());
    return 0;
  }
  rows.insert(rows.begin(), {"setting", "existing", "requested"});
  int w_setting = 0, w_existing = 0, w_requested = 0;  // column widths
  for (const Row& r : rows) {
    w_setting = std::max(w_setting, static_cast<int>(strlen(r.setting)));
    w_existing = std::max(w_existing, static_cast<int>(r.existing.size()));
    w_requested = std::max(w_requested, static_cast<int>(r.requested.size()));
  }
  std::string table;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    const bool differs = i > 0 && r.existing != r.requested;
    absl::StrAppend(&table,
                    absl::StripTrailingAsciiWhitespace(absl::StrFormat(
                        "  %-*s  %-*s  %-*s  %s", w_setting, r.setting, w_existing, r.existing,
                        w_requested, r.requested, differs ? "<- differs" : "")),
                    "\n");
  }
  return Fail(absl::AlreadyExistsError(absl::StrCat(
      "queue \"", have.name, "\" already exists with other settings; nothing was changed:\n", table,
      "A queue's settings are fixed when it is created, except its dead-letter topic, rate "
      "limit, fair share, key concurrency, payload limit and part count, which grows to a multiple "
      "(partq "
      "queue set).")));
}

// `partq status` prints a table of every part up to this many parts; past it,
// a summary by owner (--parts for the table: 4,096 lines otherwise).
constexpr int kPartsInFull = 64;
// The parts a summary names as the furthest behind.
constexpr int kMostBehind = 5;

// The parts of a queue too big for a line each: per owner (a row per
// session, and one for parts with no owner), the parts furthest behind, and
// the parts without a live owner.
void PrintPartsSummary(const QueueStatus& st) {
  struct Sum {
    int64_t parts = 0, ready = 0, delayed = 0, in_flight = 0, dead = 0;
    absl::Duration oldest;
  };
  std::map<std::string, Sum> by_owner;  // "" for no owner
  std::set<std::string> live;
  for (const SessionInfo& s : st.sessions) {
    if (SessionLive(s.expires_in)) live.insert(s.id.value);
  }
  std::vector<int> unowned;
  std::vector<const PartStatus*> behind;
  for (const PartStatus& p : st.parts) {
    Sum& s = by_owner[p.owner ? p.owner->value : ""];
    ++s.parts;
    s.ready += p.ready;
    s.delayed += p.delayed;
    s.in_flight += p.in_flight;
    s.dead += p.dead;
    s.oldest = std::max(s.oldest, p.oldest_ready_age);
    if (!p.owner || !live.count(p.owner->value)) unowned.push_back(p.part);
    if (p.ready > 0) behind.push_back(&p);
  }
  printf("\n%zu parts (the table of every part: --parts), by owner:\n", st.parts.size());
  printf("%-36s %6s %9s %9s %9s %7s %10s\n", "OWNER", "PARTS", "READY", "DELAYED", "IN_FLIGHT",
         "DEAD", "OLDEST");
  for (const auto& [owner, s] : by_owner) {
    printf("%-36s %6lld %9lld %9lld %9lld %7lld %10s\n",
           owner.empty() ? "(none)" : PrintableUtf8(owner).c_str(), static_cast<long long>(s.parts),
           static_cast<long long>(s.ready),
           static_cast<long long>(s.delayed), static_cast<long long>(s.in_flight),
           static_cast<long long>(s.dead), s.ready > 0 ? Seconds(s.oldest).c_str() : "-");
  }
  if (!behind.empty()) {
    const size_t n = std::min<size_t>(kMostBehind, behind.size());
    std::partial_sort(behind.begin(), behind.begin() + n, behind.end(),
                      [](const PartStatus* a, const PartStatus* b) {
                        return std::tie(b->oldest_ready_age, b->ready) <
                               std::tie(a->oldest_ready_age, a->ready);
                      });
    printf("furthest behind:");
    for (size_t i = 0; i < n; ++i) {
      printf("%s part %d (oldest ready %s, %lld ready)", i == 0 ? "" : ",", behind[i]->part,
             Seconds(behind[i]->oldest_ready_age).c_str(),
             static_cast<long long>(behind[i]->ready));
    }
    printf("\n");
  }
  if (!unowned.empty()) {
    printf("without a live owner: part%s %s\n", unowned.size() == 1 ? "" : "s",
           console::PartRanges(unowned).c_str());
  }
}

}  // namespace

namespace {

// `partq migrate --print`: the SQL, for a DBA's own tools; no connection.
int PrintMigrations(const Args& args) {
  auto from = args.Int("from", 0, 0, kSchemaVersion);
  if (!from.ok()) return Fail(from.status());
  auto to = args.Int("to", kSchemaVersion, 1, kSchemaVersion);
  if (!to.ok()) return Fail(to.status());
  // The schema as every command finds it: --schema, else $PARTQ_SCHEMA.
  auto o = ConnectionOptions(args);
  if (!o.ok()) return Fail(o.status());
  auto script = MigrationScript(o->schema, static_cast<int>(*from), static_cast<int>(*to));
  if (!script.ok()) return Fail(script.status());
  fputs(script->c_str(), stdout);
  return 0;
}

// `partq migrate --status`: every migration, applied (when) or pending.
int MigrationStatusCommand(const PgOptions& options) {
  auto all = PgMigrationStatus(options);
  if (!all.ok()) return Fail(all.status());
  int applied = 0;
  for (const AppliedMigration& m : *all) {
    if (m.applied_at) ++applied;
    const std::string when =
        m.applied_at ? absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", *m.applied_at, absl::UTCTimeZone())
                     : "pending";
    printf("%4d  %-23s  %s%s\n", m.version, when.c_str(), m.description.c_str(),
           m.known ? "" : "  (unknown to this partq: a newer one applied it)");
  }
  printf("schema \"%s\": %d of %zu applied; this partq is at version %d\n",
         options.schema.c_str(), applied, all->size(), kSchemaVersion);
  return 0;
}

}  // namespace

int CmdMigrate(const std::vector<std::string>& argv) {
  std::set<std::string> value_flags = ConnectionFlags();
  value_flags.insert({"to", "from"});
  auto args = Args::Parse(argv, value_flags, {"print", "status"});
  if (!args.ok()) return Fail(args.status());
  if (auto u = WrongPositionals(args->positional(), 0, {},
                                "usage: partq migrate [--to N] | --status | --print [--from N] "
                                "[--to N]")) {
    return *u;
  }
  if (args->Has("print") && args->Has("status")) {
    return Fail(absl::InvalidArgumentError("--print and --status do not go together"));
  }
  if (args->Has("print")) return PrintMigrations(*args);
  if (args->Has("from")) {
    return Fail(absl::InvalidArgumentError("--from goes with --print only"));
  }
  auto o = ConnectionOptions(*args);
  if (!o.ok()) return Fail(o.status());
  if (args->Has("status")) return MigrationStatusCommand(*o);
  auto to = args->Int("to", kSchemaVersion, 1, kSchemaVersion);
  if (!to.ok()) return Fail(to.status());
  if (absl::Status st = MigratePg(*o, static_cast<int>(*to)); !st.ok()) {
    // A producer's or worker's role met a table or schema it may not
    // change: the migration is the owner's to run.
    return FailNoting(st,
                      "partq migrate runs as the schema's owner: the role that made it, or for a "
                      "new schema one that may create in the database");
  }
  // What it is at, which --to does not lower: migrations only go up.
  int at = static_cast<int>(*to);
  if (auto all = PgMigrationStatus(*o); all.ok()) {
    for (const AppliedMigration& m : *all) {
      if (m.applied_at) at = std::max(at, m.version);
    }
  }
  printf("schema \"%s\" is at version %d%s\n", o->schema.c_str(), at,
         at > *to ? absl::StrCat(" (--to ", *to, ": migrations only go up)").c_str() : "");
  // Said, not refused: an upgrade must not stop on it (partq grant refuses).
  if (auto creators = PgSchemaCreators(*o); creators.ok() && !creators->empty()) {
    fprintf(stderr, "partq: warning: %s\n", SchemaCreatorsProblem(o->schema, *creators).c_str());
  }
  return 0;
}

namespace {

// Queue names are case-sensitive ("QA" and "qa" are two queues), as SQL
// values are: a warning on stderr names the others that differ only in case,
// in case one was meant.
void WarnOfNamesThatDifferInCase(Store& store, const std::string& name) {
  auto all = store.ListQueues();
  if (!all.ok()) return;  // a warning only: the queue is created
  for (const QueueConfig& other : *all) {
    if (other.name != name && absl::EqualsIgnoreCase(other.name, name)) {
      fprintf(stderr,
              "partq: warning: queue \"%s\" exists too; names are case-sensitive, so \"%s\" "
              "is another queue with workers and items of its own\n",
              other.name.c_str(), name.c_str());
    }
  }
}

// QueueConfig in --json (`queue list`, `status`).
nlohmann::json QueueJson(const QueueConfig& q) {
  return {{"name", q.name},
          {"parts", q.parts},
          {"assignment", AssignmentName(q.assignment)},
          {"session_ttl_seconds", absl::ToDoubleSeconds(q.session_ttl)},
          {"max_attempts", q.max_attempts},
          {"ordered", q.ordered},
          {"dlq_topic", DlqTopicJson(q)},
          {"paused", q.paused},
          {"rate_per_second", q.rate ? nlohmann::json(*q.rate) : nullptr},
          {"fair_by", FairByName(q.fair_by)},
          {"key_concurrency", KeyConcurrencyJson(q)},
          {"max_payload_bytes", q.max_payload_bytes}};
}

// `queue create`'s flags as a QueueConfig named `name`, not yet validated
// as a whole.
absl::StatusOr<QueueConfig> QueueFromFlags(const Args& args, const std::string& name) {
  QueueConfig q;
  q.name = name;
  auto parts = args.Int("parts", 0, 1, 4096);
  if (!parts.ok()) return parts.status();
  q.parts = static_cast<int>(*parts);
  const std::string assignment = args.GetOr("assignment", "lexical");
  if (assignment == "lexical") {
    q.assignment = AssignmentKind::kLexical;
  } else if (assignment == "sticky") {
    q.assignment = AssignmentKind::kSticky;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--assignment must be lexical or sticky (got ", Quoted(assignment), ")"));
  }
  auto attempts = args.Int("max-attempts", q.max_attempts, 1, 1000);
  if (!attempts.ok()) return attempts.status();
  q.max_attempts = static_cast<int>(*attempts);
  auto ttl = args.Duration("session-ttl", q.session_ttl, absl::Milliseconds(100), absl::Hours(24));
  if (!ttl.ok()) return ttl.status();
  q.session_ttl = *ttl;
  q.ordered = args.Has("ordered");
  auto dlq = DlqTopicFlag(args);
  if (!dlq.ok()) return dlq.status();
  q.dlq_topic = *dlq;
  auto rate = RateFlag(args);
  if (!rate.ok()) return rate.status();
  q.rate = *rate;
  auto fair_by = FairByFlag(args);
  if (!fair_by.ok()) return fair_by.status();
  q.fair_by = *fair_by;
  auto key_concurrency = KeyConcurrencyFlag(args);
  if (!key_concurrency.ok()) return key_concurrency.status();
  q.key_concurrency = *key_concurrency;
  // The queue's limit for the SQL API; the same flag is this command's own
  // limit as a client (ConnectionOptions), which a create does not use.
  auto max_payload = args.Int("max-payload", kDefaultMaxPayloadBytes, 1, kMaxMaxPayloadBytes);
  if (!max_payload.ok()) return max_payload.status();
  q.max_payload_bytes = *max_payload;
  return q;
}

int QueueCreate(const Args& args) {
  const auto& pos = args.positional();
  if (auto u =
          WrongPositionals(pos, 1, {"NAME"}, "usage: partq queue create NAME --parts N [...]")) {
    return *u;
  }
  if (!args.Has("parts")) {
    return Usage("queue create needs --parts N (1..4096), e.g. partq queue create " + pos[1] +
                 " --parts 8");
  }
  auto q = QueueFromFlags(args, pos[1]);
  if (!q.ok()) return Fail(q.status());
  if (absl::Status st = ValidateQueueConfig(*q); !st.ok()) return Fail(st);
  auto store = ConnectChecked(args);
  if (!store.ok()) return Fail(store.status());
  if (absl::Status st = (*store)->CreateQueue(*q); !st.ok()) {
    if (!absl::IsAlreadyExists(st)) return Fail(st);
    auto existing = (*store)->GetQueue(q->name);
    if (!existing.ok()) return Fail(existing.status());
    return CreateExisting(args, *q, *existing);
  }
  printf("created queue \"%s\": %s\n", q->name.c_str(), Settings(*q).c_str());
  WarnOfNamesThatDifferInCase(**store, q->name);
  return 0;
}

// `queue set NAME --parts N`.
int QueueSetParts(const Args& args, const std::string& name) {
  // What it can grow to depends on the current count: the store says.
  auto parts = args.Int("parts", 0, 1, 4096);
  if (!parts.ok()) return Fail(parts.status());
  auto store = ConnectChecked(args);
  if (!store.ok()) return Fail(store.status());
  auto before = (*store)->GrowParts(name, static_cast<int>(*parts));
  if (!before.ok()) return Fail(before.status());
  if (*before == *parts) {
    printf("queue \"%s\" has %d parts already\n", name.c_str(), *before);
  } else {
    printf(
        "queue \"%s\" grew from %d to %lld parts: its workers rebalance onto them; "
        "items enqueued before run in their old parts (an ordered queue's keys in order)\n",
        name.c_str(), *before, static_cast<long long>(*parts));
  }
  return 0;
}

// What every `queue set` of one setting does once its flag is read: connect,
// `set` the store, and on success print `said`.
int ApplyQueueSetting(const Args& args, const std::function<absl::Status(Store&)>& set,
                      const std::string& said) {
  auto store = ConnectChecked(args);
  if (!store.ok()) return Fail(store.status());
  if (absl::Status st = set(**store); !st.ok()) return Fail(st);
  printf("%s\n", said.c_str());
  return 0;
}

// `queue set NAME --fair-by key|none`.
int QueueSetFairBy(const Args& args, const std::string& name) {
  auto fair_by = FairByFlag(args);
  if (!fair_by.ok()) return Fail(fair_by.status());
  // Workers read it when they start (QueueConfig::fair_by).
  return ApplyQueueSetting(
      args, [&](Store& store) { return store.SetFairBy(name, *fair_by); },
      *fair_by == FairBy::kKey
          ? absl::StrCat("queue \"", name,
                         "\": each part's owner serves its keys in turn (workers started from "
                         "now on)")
          : absl::StrCat("queue \"", name, "\": no fair share (workers started from now on)"));
}

// `queue set NAME --key-concurrency N|none`.
int QueueSetKeyConcurrency(const Args& args, const std::string& name) {
  auto n = KeyConcurrencyFlag(args);
  if (!n.ok()) return Fail(n.status());
  // Workers read it when they start (QueueConfig::key_concurrency).
  return ApplyQueueSetting(
      args, [&](Store& store) { return store.SetKeyConcurrency(name, *n); },
      *n > 0 ? absl::StrCat("queue \"", name, "\": at most ", *n,
                            " items of a key in flight at once (workers started from now on)")
             : absl::StrCat("queue \"", name,
                            "\": no key concurrency bound (workers started from now on)"));
}

// `queue set NAME --max-payload BYTES`: the SQL API's limit for the queue
// (C++ producers keep theirs, the --max-payload of their own command).
int QueueSetMaxPayload(const Args& args, const std::string& name) {
  auto bytes = args.Int("max-payload", kDefaultMaxPayloadBytes, 1, kMaxMaxPayloadBytes);
  if (!bytes.ok()) return Fail(bytes.status());
  return ApplyQueueSetting(
      args, [&](Store& store) { return store.SetMaxPayload(name, *bytes); },
      absl::StrCat("queue \"", name, "\": the SQL API takes payloads of up to ", *bytes,
                   " bytes into it"));
}

// `queue set NAME --rate N/s|none`.
int QueueSetRate(const Args& args, const std::string& name) {
  auto rate = RateFlag(args);
  if (!rate.ok()) return Fail(rate.status());
  return ApplyQueueSetting(
      args, [&](Store& store) { return store.SetRate(name, *rate); },
      *rate ? absl::StrCat("queue \"", name, "\": its workers claim at most ", RateText(*rate),
                           " in all (each part's owner its part's share)")
            : absl::StrCat("queue \"", name, "\": no rate limit"));
}

// `queue set NAME --dlq-topic TOPIC|''`.
int QueueSetDlqTopic(const Args& args, const std::string& name) {
  auto dlq = DlqTopicFlag(args);
  if (!dlq.ok()) return Fail(dlq.status());
  return ApplyQueueSetting(
      args, [&](Store& store) { return store.SetDeadLetterTopic(name, *dlq); },
      *dlq ? absl::StrCat("queue \"", name, "\": dead-lettered items go to topic ", dlq->value())
           : absl::StrCat("queue \"", name, "\": no dead-letter topic"));
}

int QueueSet(const Args& args) {
  // Only settings that can change under a running group: the part count
  // (it grows), the dead-letter topic, the rate limit, fair share, key
  // concurrency and the payload limit; assignment and ordering are fixed at
  // creation.
  const auto& pos = args.positional();
  if (auto u = WrongPositionals(pos, 1, {"NAME"},
                                "usage: partq queue set NAME --parts N | --dlq-topic TOPIC|'' | "
                                "--rate N/s|none | --fair-by key|none | "
                                "--key-concurrency N|none | --max-payload BYTES")) {
    return *u;
  }
  for (const char* fixed : {"assignment", "max-attempts", "session-ttl", "ordered"}) {
    if (args.Has(fixed)) {
      return Usage(
          absl::StrCat("queue set cannot change --", fixed, " (fixed when the queue is created)"));
    }
  }
  const int settings = args.Has("parts") + args.Has("dlq-topic") + args.Has("rate") +
                       args.Has("fair-by") + args.Has("key-concurrency") + args.Has("max-payload");
  if (settings == 0) {
    return Usage(
        "queue set needs a setting to change: --parts N (a multiple of the current count), "
        "--dlq-topic TOPIC (or '' for none), --rate N/s (or none), --fair-by key (or none), "
        "--key-concurrency N (or none), --max-payload BYTES");
  }
  if (settings > 1) return Usage("queue set changes one setting at a time");
  if (absl::Status st = ValidateQueueName(pos[1]); !st.ok()) return Fail(st);
  if (args.Has("parts")) return QueueSetParts(args, pos[1]);
  if (args.Has("fair-by")) return QueueSetFairBy(args, pos[1]);
  if (args.Has("key-concurrency")) return QueueSetKeyConcurrency(args, pos[1]);
  if (args.Has("rate")) return QueueSetRate(args, pos[1]);
  if (args.Has("max-payload")) return QueueSetMaxPayload(args, pos[1]);
  return QueueSetDlqTopic(args, pos[1]);
}

// `queue pause NAME` (`pause`) and `queue resume NAME`.
int QueuePauseOrResume(const Args& args, bool pause) {
  // A flag on the queue row and a group notice: workers stop (or start)
  // claiming at once with LISTEN, at their next group read (every second)
  // without; what they hold runs to its end, their parts and heartbeats stay.
  const auto& pos = args.positional();
  if (auto u = WrongPositionals(pos, 1, {"NAME"},
                                absl::StrCat("usage: partq queue ", pos[0], " NAME"))) {
    return *u;
  }
  if (absl::Status st = ValidateQueueName(pos[1]); !st.ok()) return Fail(st);
  auto store = ConnectChecked(args);
  if (!store.ok()) return Fail(store.status());
  if (absl::Status st = (*store)->SetPaused(pos[1], pause); !st.ok()) return Fail(st);
  printf(pause ? "queue \"%s\" paused: its workers claim nothing until `partq queue resume`\n"
               : "queue \"%s\" resumed\n",
         pos[1].c_str());
  return 0;
}

int QueueList(const Args& args) {
  if (auto u = WrongPositionals(args.positional(), 1, {}, "usage: partq queue list")) return *u;
  auto store = ConnectChecked(args);
  if (!store.ok()) return Fail(store.status());
  auto queues = (*store)->ListQueues();
  if (!queues.ok()) return FailReadingTables(queues.status(), "queue list");
  if (args.Has("json")) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& q : *queues) out.push_back(QueueJson(q));
    PrintJson(out.dump(2));
    return 0;
  }
  printf("%-32s %6s %-10s %10s %12s %-7s %-6s %-10s %-7s %-8s %s\n", "NAME", "PARTS", "ASSIGNMENT",
         "TTL", "MAX_ATTEMPTS", "ORDERED", "PAUSED", "RATE", "FAIR_BY", "KEY_CONC", "DLQ_TOPIC");
  for (const auto& q : *queues) {
    printf("%-32s %6d %-10s %10s %12d %-7s %-6s %-10s %-7s %-8s %s\n", q.name.c_str(), q.parts,
           AssignmentName(q.assignment), absl::FormatDuration(q.session_ttl).c_str(),
           q.max_attempts, q.ordered ? "yes" : "no", q.paused ? "yes" : "no",
           q.rate ? RateText(q.rate).c_str() : "-",
           q.fair_by != FairBy::kNone ? FairByName(q.fair_by) : "-",
           q.key_concurrency > 0 ? absl::StrCat(q.key_concurrency).c_str() : "-",
           q.dlq_topic ? q.dlq_topic->c_str() : "-");
  }
  return 0;
}

int QueueDelete(const Args& args) {
  // Without --force the store refuses a queue that still holds work, in
  // the transaction that would delete it, and says what it holds.
  const auto& pos = args.positional();
  if (auto u = WrongPositionals(pos, 1, {"NAME"}, "usage: partq queue delete NAME [--force]")) {
    return *u;
  }
  const bool force = args.Has("force");
  auto store = ConnectChecked(args);
  if (!store.ok()) return Fail(store.status());
  auto deleted =
      (*store)->DeleteQueue(pos[1], force ? QueueContents::kDelete : QueueContents::kRefuse);
  if (!deleted.ok()) return Fail(deleted.status());
  // Its schedules went with it: said, as a forced delete's items are.
  const std::string schedules =
      deleted->schedules > 0
          ? absl::StrCat(" (and its ", Count(deleted->schedules, "schedule"), ")")
          : "";
  if (force) {
    printf("deleted queue \"%s\" with %s and %s%s\n", pos[1].c_str(),
           Count(deleted->items, "item").c_str(), Count(deleted->dead_items, "dead item").c_str(),
           schedules.c_str());
  } else {
    printf("deleted queue \"%s\"%s\n", pos[1].c_str(), schedules.c_str());
  }
  return 0;
}

}  // namespace

int CmdQueue(const std::vector<std::string>& argv) {
  auto args =
      Args::Parse(argv,
                  With(ConnectionFlags(), {"parts", "assignment", "max-attempts", "session-ttl",
                                           "dlq-topic", "rate", "fair-by", "key-concurrency"}),
                  {"ordered", "json", "force"});
  if (!args.ok()) return Fail(args.status());
  const auto& pos = args->positional();
  if (pos.empty()) {
    return Usage("queue needs a subcommand: create, set, pause, resume, list or delete");
  }
  const std::string& sub = pos[0];
  if (args->Has("force") && sub != "delete") return Usage("--force goes with queue delete");
  if (sub == "create") return QueueCreate(*args);
  if (sub == "set") return QueueSet(*args);
  if (sub == "pause" || sub == "resume") return QueuePauseOrResume(*args, sub == "pause");
  if (sub == "list") return QueueList(*args);
  if (sub == "delete") return QueueDelete(*args);
  return Usage(absl::StrCat("unknown queue subcommand ", Quoted(sub),
                            " (create, set, pause, resume, list, delete)"));
}

namespace {

// `enqueue --stdin`: `item` with each line of standard input as its payload,
// `chunk` lines (or kStdinChunkBytes) per COPY transaction, each at most
// `max_payload_bytes` (`limit_name` says whose limit); the exit status.
int EnqueueStdin(Producer& producer, const std::string& queue, const NewItem& item, int64_t chunk,
                 int64_t max_payload_bytes, const std::string& limit_name) {
  // Each chunk is one COPY transaction; a failure stops before the next chunk
  // and says how many lines were committed.
  const absl::Time start = absl::Now();
  int64_t total = 0, line_no = 0;
  std::vector<NewItem> batch;
  batch.reserve(chunk);
  std::string line;
  auto flush = [&]() -> absl::Status {
    if (batch.empty()) return absl::OkStatus();
    auto n = producer.EnqueueBatch(queue, batch);
    if (!n.ok() && OutcomeUnknown(n.status())) {
      // The connection broke during this chunk's COMMIT: a failover may have kept it.
      const int64_t last = total + static_cast<int64_t>(batch.size());
      return absl::Status(
          n.status().code(),
          absl::StrCat(n.status().message(), " (lines ", total + 1, " to ", last,
                       " may or may not have been enqueued; the ", total,
                       " lines before them were, lines after them were not)"));
    }
    if (!n.ok()) {
      return absl::Status(n.status().code(),
                          total == 0 ? absl::StrCat(n.status().message(), " (nothing enqueued)")
                                     : absl::StrCat(n.status().message(), " (lines ", total + 1,
                                                    " and after not enqueued; the ", total,
                                                    " lines before them were)"));
    }
    total += *n;
    batch.clear();
    return absl::OkStatus();
  };
  // Lines are read at most the payload limit at a time, so an over-limit
  // line is refused as soon as its limit is passed, in bounded memory; a
  // chunk is also sent once it holds kStdinChunkBytes of payloads.
  LineReader reader(STDIN_FILENO);
  size_t batch_bytes = 0;
  for (;;) {
    const LineReader::Result got = reader.Next(static_cast<size_t>(max_payload_bytes), &line);
    if (got == LineReader::Result::kEnd) break;
    if (got == LineReader::Result::kError) {
      const std::string why = absl::StrCat("reading line ", line_no + 1, " of standard input: ",
                                           strerror(errno));
      if (absl::Status st = flush(); !st.ok()) return Fail(st);
      return Fail(absl::UnavailableError(absl::StrCat(
          why, total == 0 ? " (nothing enqueued)"
                          : absl::StrCat(" (the ", total, " lines before it were enqueued)"))));
    }
    ++line_no;
    if (got == LineReader::Result::kTooLong) {
      if (absl::Status st = flush(); !st.ok()) return Fail(st);
      const std::string what =
          absl::StrCat("line ", line_no, " has more than ", max_payload_bytes,
                       " bytes; the limit is ", max_payload_bytes, " (", limit_name, "). ");
      // Bad input with nothing written is a usage error (2); once earlier
      // chunks committed it is a failure (1), so a script that retries any
      // non-zero status on the whole input is told it ran in part.
      if (total == 0) {
        return Fail(absl::InvalidArgumentError(absl::StrCat(what, "Nothing enqueued")));
      }
      return Fail(absl::FailedPreconditionError(
          absl::StrCat(what, "The ", total, " lines before it were enqueued, line ", line_no,
                       " and after were not: continue with `tail -n +", line_no, "` once fixed")));
    }
    NewItem it = item;
    batch_bytes += line.size();
    it.payload = std::move(line);
    batch.push_back(std::move(it));
    if (static_cast<int64_t>(batch.size()) >= chunk || batch_bytes >= kStdinChunkBytes) {
      if (absl::Status st = flush(); !st.ok()) return Fail(st);
      batch_bytes = 0;
    }
  }
  if (absl::Status st = flush(); !st.ok()) return Fail(st);
  const double secs = absl::ToDoubleSeconds(absl::Now() - start);
  fprintf(stderr, "partq: enqueued %lld item%s in %.2fs (%.0f items/s)\n",
          static_cast<long long>(total), total == 1 ? "" : "s", secs,
          secs > 0 ? total / secs : 0.0);
  printf("%lld\n", static_cast<long long>(total));
  return 0;
}

}  // namespace

int CmdEnqueue(const std::vector<std::string>& argv) {
  auto args = Args::Parse(
      argv, With(ConnectionFlags(), {"key", "priority", "delay", "dedup-key", "chunk", "group"}),
      {"stdin"});
  if (!args.ok()) return Fail(args.status());
  const auto& pos = args->positional();
  const bool from_stdin = args->Has("stdin");
  {
    // The payload is optional ('' by default): only the queue can be missing.
    const std::string usage = from_stdin
                                  ? "usage: partq enqueue QUEUE --stdin"
                                  : "usage: partq enqueue QUEUE [--key K] [...] [PAYLOAD]; quote "
                                    "a payload that has spaces";
    const std::vector<std::string> names = from_stdin
                                               ? std::vector<std::string>{"QUEUE"}
                                               : std::vector<std::string>{"QUEUE", "PAYLOAD"};
    if (pos.size() > names.size()) return *WrongPositionals(pos, 0, names, usage);
    if (pos.empty()) return *WrongPositionals(pos, 0, {"QUEUE"}, usage);
  }
  const std::string& queue = pos[0];
  if (!from_stdin && pos.size() == 1 && StdinIsPipeOrFile()) {
    // `echo hi | partq enqueue q` would enqueue one empty item and drop the
    // input; an empty payload on purpose is written ''.
    return Fail(absl::InvalidArgumentError(
        "no PAYLOAD given, and standard input is a pipe or a file: pass --stdin to enqueue "
        "one item per line (or '' for one empty payload)"));
  }
  NewItem item;
  if (auto k = args->Get("key")) item.key = *k;
  if (auto k = args->Get("dedup-key")) item.dedup_key = *k;
  if (auto g = args->Get("group")) {
    if (absl::Status st = ValidateGroupId(*g); !st.ok()) return Fail(st);
    item.group = *g;
  }
  // Refused here, naming the flag (with --stdin too, where --key is every
  // line's), rather than by the server's "invalid byte sequence".
  for (const char* flag : {"key", "dedup-key"}) {
    if (auto k = args->Get(flag)) {
      if (absl::Status st = ValidateKeyText(absl::StrCat("--", flag), *k); !st.ok()) {
        return Fail(st);
      }
    }
  }
  auto prio = args->Int("priority", 0, -32768, 32767);
  if (!prio.ok()) return Fail(prio.status());
  item.priority = static_cast<int>(*prio);
  auto delay =
      args->Duration("delay", absl::ZeroDuration(), absl::ZeroDuration(), absl::Hours(24 * 3650));
  if (!delay.ok()) return Fail(delay.status());
  item.delay = *delay;
  if (item.group && item.delay > absl::ZeroDuration()) {
    return Usage("--delay cannot be used with --group: a group's items run when it starts");
  }
  auto chunk = args->Int("chunk", 50000, 1, 1000000);
  if (!chunk.ok()) return Fail(chunk.status());
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return Fail(st);
  auto opts = ConnectionOptions(*args);
  if (!opts.ok()) return Fail(opts.status());

  auto store = ConnectChecked(*opts);
  if (!store.ok()) return Fail(store.status());
  // The limit's name in a refusal: the flag, or the queue's setting.
  std::string limit_name = "--max-payload";
  if (!args->Has("max-payload")) {
    // Without the flag the queue's payload limit is this command's, as it is
    // the SQL API's. (A role that may not read the queue's row enqueues
    // through put_items(), which holds it to that limit anyway.)
    absl::StatusOr<QueueConfig> q = (*store)->GetQueue(queue);
    if (q.ok()) {
      limit_name =
          absl::StrCat("queue \"", queue, "\"'s payload limit; --max-payload overrides it");
    }
    if (q.ok() && q->max_payload_bytes != opts->max_payload_bytes) {
      opts->max_payload_bytes = q->max_payload_bytes;
      store = ConnectChecked(*opts);
      if (!store.ok()) return Fail(store.status());
    }
  }
  Producer producer(std::move(*store));

  if (!from_stdin) {
    if (pos.size() == 2) item.payload = pos[1];
    auto r = producer.Enqueue(queue, item);
    if (!r.ok() && OutcomeUnknown(r.status())) {
      return Fail(absl::Status(
          r.status().code(),
          absl::StrCat(r.status().message(),
                       " (the item may or may not have been enqueued: the connection broke while "
                       "the server ran the statement; ",
                       item.dedup_key ? "running the command again is safe with its --dedup-key)"
                                      : "running it again may enqueue it twice; a --dedup-key "
                                        "makes that safe)")));
    }
    if (!r.ok()) {
      return Fail(absl::Status(
          r.status().code(),
          absl::StrReplaceAll(r.status().message(),
                              {{"(--max-payload)", absl::StrCat("(", limit_name, ")")}})));
    }
    if (r->duplicate) {
      fprintf(stderr, "partq: dedup key \"%s\" matches live item %lld; nothing enqueued\n",
              item.dedup_key->c_str(), static_cast<long long>(r->id));
    }
    printf("%lld\n", static_cast<long long>(r->id));
    return 0;
  }
  if (item.dedup_key) {
    return Fail(absl::InvalidArgumentError("--dedup-key cannot be used with --stdin"));
  }
  return EnqueueStdin(producer, queue, item, *chunk, opts->max_payload_bytes, limit_name);
}

// `wait --json`: what the wait found (ItemState), one object; the result
// and an error as JSON strings, bytes that are not UTF-8 as base64. Every
// state has every key but a dead item's attempts and error.
nlohmann::json WaitJson(const ItemState& state) {
  nlohmann::json out = {{"id", state.id}, {"result", nullptr}, {"result_encoding", nullptr}};
  switch (state.kind) {
    case ItemState::Kind::kDead:
      out["state"] = "dead";
      out["attempts"] = state.attempts;
      out["error"] = state.error;
      return out;
    case ItemState::Kind::kCancelled:
      out["state"] = "cancelled";
      return out;
    default:
      out["state"] = "done";
  }
  if (state.result) {
    std::string text;
    out["result_encoding"] = TextOrBase64(*state.result, &text);
    out["result"] = std::move(text);
  }
  return out;
}

int CmdWait(const std::vector<std::string>& argv) {
  auto args = Args::Parse(argv, With(ConnectionFlags(), {"dedup-key", "timeout"}), {"json"});
  if (!args.ok()) return Fail(args.status());
  const auto& pos = args->positional();
  const bool by_key = args->Has("dedup-key");
  if (by_key) {
    if (absl::Status st = ValidateKeyText("--dedup-key", *args->Get("dedup-key")); !st.ok()) {
      return Fail(st);
    }
  }
  if (pos.size() != (by_key ? 1u : 2u)) {
    return Usage("usage: partq wait QUEUE ITEM | partq wait QUEUE --dedup-key K");
  }
  auto timeout =
      args->Duration("timeout", absl::Seconds(30), absl::ZeroDuration(), absl::Hours(24 * 7));
  if (!timeout.ok()) return Fail(timeout.status());
  int64_t id = 0;
  if (!by_key) {
    absl::StatusOr<int64_t> parsed = ParseItemId(pos[1]);
    if (!parsed.ok()) return Fail(parsed.status());
    id = *parsed;
  }
  auto store = ConnectChecked(*args);
  if (!store.ok()) return Fail(store.status());
  // No GetQueue first: a producer's or viewer's role may not read queues,
  // and a worker's reads only its own. The item's state says an unknown
  // queue, or asks the SQL API's item_state(), which checks the grant.
  Producer producer(std::move(*store));
  auto state = by_key ? producer.WaitByDedupKey(pos[0], *args->Get("dedup-key"), *timeout)
                      : producer.Wait(pos[0], id, *timeout);
  // Exit status: 0 done, 3 not finished in time, 4 dead-lettered, 5
  // cancelled (kWait*), else 1 (no such item, errors) or 2 (usage): a script
  // can tell them apart.
  if (absl::IsDeadlineExceeded(state.status())) {
    Fail(state.status());
    return kWaitTimedOut;
  }
  if (!state.ok()) return Fail(state.status());
  if (args->Has("json")) {
    PrintJson(WaitJson(*state).dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    return state->kind == ItemState::Kind::kCancelled ? kWaitCancelled
           : state->kind == ItemState::Kind::kDead    ? kWaitDead
                                                      : 0;
  }
  if (state->kind == ItemState::Kind::kCancelled) {
    fprintf(stderr,
            "partq: item %lld was cancelled (partq cancel, or a cancel of its group); it will not "
            "run\n",
            static_cast<long long>(state->id));
    return kWaitCancelled;
  }
  if (state->kind == ItemState::Kind::kDead) {
    fprintf(stderr, "partq: item %lld was dead-lettered after %d attempt%s: %s\n",
            static_cast<long long>(state->id), state->attempts, state->attempts == 1 ? "" : "s",
            PrintableUtf8(state->error).c_str());
    return kWaitDead;
  }
  if (state->result) {
    // The bytes as they are for a pipe; on a terminal escaped (controls,
    // bidi overrides, bytes that are not UTF-8) and a line of its own.
    if (!isatty(STDOUT_FILENO)) {
      fwrite(state->result->data(), 1, state->result->size(), stdout);
    } else if (!state->result->empty()) {
      const std::string shown = PrintableUtf8Lines(*state->result);
      printf("%s%s", shown.c_str(), shown.back() == '\n' ? "" : "\n");
    }
  }
  return 0;
}

// An item's payload in JSON, from its first bytes (`head`) and its size:
// `payload` (text, or base64 if it is not UTF-8), `payload_encoding` and
// `payload_truncated`; null for a role that may not read payloads (`hidden`).
void AddPayloadHead(const std::string& whole_head, int64_t bytes, bool hidden,
                    nlohmann::json* out) {
  nlohmann::json& item = *out;
  item["payload"] = item["payload_encoding"] = item["payload_truncated"] = nullptr;
  if (hidden) return;
  const bool cut = bytes > static_cast<int64_t>(whole_head.size());
  absl::string_view head = whole_head;
  // A cut inside a UTF-8 character: the text up to it, not base64.
  for (int i = 0; cut && i < 3 && !head.empty() && !IsValidUtf8(head); ++i) {
    head.remove_suffix(1);
  }
  if (!IsValidUtf8(head)) head = whole_head;
  std::string text;
  item["payload_encoding"] = TextOrBase64(head, &text);
  item["payload"] = std::move(text);
  item["payload_truncated"] = cut;
}

namespace {

// `partq item`'s name for where a pending item is (ItemDetail).
const char* PendingState(const ItemDetail& d, absl::Time now) {
  if (d.where_hidden) return "pending";  // all the role may know
  if (d.in_flight) return "in_flight";
  if (!d.run_at) return "held";
  if (*d.run_at > now) return d.state.attempts > 0 ? "retrying" : "delayed";
  return "ready";
}

// `partq item --json`: WaitJson's keys, with a pending item's state and
// where it is.
nlohmann::json ItemJson(const std::string& queue, const ItemDetail& d, absl::Time now) {
  nlohmann::json out = WaitJson(d.state);
  out["queue"] = queue;
  if (d.state.kind != ItemState::Kind::kPending) return out;
  auto time = [](absl::Time t) {
    return absl::FormatTime(absl::RFC3339_full, t, absl::UTCTimeZone());
  };
  out["state"] = PendingState(d, now);
  out["attempts"] = d.state.attempts;
  out["error"] = d.state.error.empty() ? nlohmann::json() : nlohmann::json(d.state.error);
  if (d.where_hidden) return out;
  out["part"] = d.part;
  out["key"] = d.key ? nlohmann::json(*d.key) : nlohmann::json();
  out["group"] = d.group ? nlohmann::json(*d.group) : nlohmann::json();
  out["priority"] = d.priority;
  out["enqueued_at"] = time(d.enqueued_at);
  out["run_at"] = d.run_at ? nlohmann::json(time(*d.run_at)) : nlohmann::json();
  out["payload_bytes"] = d.payload_bytes;
  AddPayloadHead(d.payload_head, d.payload_bytes, /*hidden=*/false, &out);
  return out;
}

// `partq item`'s line for a pending item: what it waits for, and where.
std::string PendingLine(const ItemDetail& d, absl::Time now) {
  const std::string state = PendingState(d, now);
  const std::string tried =
      d.state.attempts == 0 ? "no attempt used" : Count(d.state.attempts, "attempt") + " used";
  if (d.where_hidden) {
    return absl::StrCat("pending (", tried,
                        d.state.error.empty() ? "" : "; last error: ", PrintableUtf8(d.state.error),
                        "); where it is and its payload are shown to the owner of the "
                        "schema's tables only");
  }
  std::string what;
  if (state == "in_flight") {
    what = absl::StrCat("in flight: the worker that owns part ", d.part, " runs its attempt ",
                        d.state.attempts + 1);
  } else if (state == "held") {
    what = absl::StrCat("held until its group ", Quoted(d.group.value_or("")), " starts");
  } else if (state == "ready") {
    what =
        absl::StrCat("ready for ", Seconds(now - *d.run_at), " in part ", d.part, " (", tried, ")");
  } else {
    // "3.874s", "23h59m59.879s": a day's delay read at a glance.
    what = absl::StrCat(state, ", due in ",
                        absl::FormatDuration(absl::Trunc(*d.run_at - now, absl::Milliseconds(1))),
                        " in part ", d.part, " (", tried, ")");
  }
  absl::StrAppend(&what, "; key ", d.key ? Quoted(*d.key) : "none", ", priority ", d.priority);
  if (!d.state.error.empty())
    absl::StrAppend(&what, "; last error: ", PrintableUtf8(d.state.error));
  // One line: its first bytes, control bytes escaped (--json has more).
  constexpr size_t kShown = 120;
  const absl::string_view head = CutAtCharacter(d.payload_head, kShown);
  absl::StrAppend(&what, "; payload (", Count(d.payload_bytes, "byte"), "): ", PrintableUtf8(head),
                  d.payload_bytes > static_cast<int64_t>(head.size()) ? "..." : "");
  return what;
}

}  // namespace

// `partq item QUEUE ID`: one item's state at once, without waiting (River's
// JobGet): where a pending one is and when it runs, a finished one's result
// or error. Exit 0 for any item of the queue, 1 for no such item or an error.
int CmdItem(const std::vector<std::string>& argv) {
  auto args = Args::Parse(argv, ConnectionFlags(), {"json"});
  if (!args.ok()) return Fail(args.status());
  const auto& pos = args->positional();
  if (pos.size() != 2) return Usage("usage: partq item QUEUE ID [--json]");
  absl::StatusOr<int64_t> id = ParseItemId(pos[1]);
  if (!id.ok()) return Fail(id.status());
  auto store = ConnectChecked(*args);
  if (!store.ok()) return Fail(store.status());
  absl::StatusOr<ItemDetail> d = (*store)->DescribeItem(pos[0], *id);
  if (!d.ok()) return Fail(d.status());
  if (d->state.kind == ItemState::Kind::kUnknown) {
    return Fail(
        absl::NotFoundError(absl::StrCat("no such item: item ", *id, " of queue ", pos[0])));
  }
  const absl::Time now = d->db_now;  // the server's clock, not this machine's
  if (args->Has("json")) {
    PrintJson(
        ItemJson(pos[0], *d, now).dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    return 0;
  }
  std::string line;
  switch (d->state.kind) {
    case ItemState::Kind::kDone:
      line = d->state.result ? absl::StrCat("done; result: ", PrintableUtf8(*d->state.result))
                             : "done";
      break;
    case ItemState::Kind::kDead:
      line = absl::StrCat("dead-lettered after ", Count(d->state.attempts, "attempt"), ": ",
                          PrintableUtf8(d->state.error));
      break;
    case ItemState::Kind::kCancelled:
      line = "cancelled (partq cancel, or a cancel of its group); it will not run";
      break;
    default:
      line = PendingLine(*d, now);
  }
  printf("item %lld of queue %s: %s\n", static_cast<long long>(*id), pos[0].c_str(), line.c_str());
  return 0;
}

int CmdCancel(const std::vector<std::string>& argv) {
  auto args = Args::Parse(argv, With(ConnectionFlags(), {"dedup-key"}), {});
  if (!args.ok()) return Fail(args.status());
  const auto& pos = args->positional();
  constexpr const char* kUsage =
      "usage: partq cancel QUEUE ID... | partq cancel QUEUE --dedup-key K";
  const bool by_key = args->Has("dedup-key");
  if (by_key) {
    if (absl::Status st = ValidateKeyText("--dedup-key", *args->Get("dedup-key")); !st.ok()) {
      return Fail(st);
    }
    if (pos.size() != 1) return Usage(kUsage);
  } else if (pos.size() < 2) {
    return Usage(pos.empty() ? kUsage : absl::StrCat("ID is missing (", kUsage, ")"));
  }
  if (absl::Status st = ValidateQueueName(pos[0]); !st.ok()) return Fail(st);
  // Every id is checked before anything is cancelled: bad input changes nothing.
  std::vector<int64_t> ids;
  for (size_t i = 1; i < pos.size(); ++i) {
    absl::StatusOr<int64_t> id = ParseItemId(pos[i]);
    if (!id.ok()) return Fail(id.status());
    ids.push_back(*id);
  }
  auto store = ConnectChecked(*args);
  if (!store.ok()) return Fail(store.status());
  std::vector<CancelOutcome> outcomes;
  if (by_key) {
    auto one = (*store)->CancelByDedupKey(pos[0], *args->Get("dedup-key"));
    if (!one.ok()) return Fail(one.status());
    outcomes.push_back(*one);
  } else {
    auto all = (*store)->CancelItems(pos[0], ids);
    if (!all.ok()) return Fail(all.status());
    outcomes = *std::move(all);
  }
  int status = 0;
  for (const CancelOutcome& o : outcomes) {
    const std::string item =
        by_key && o.id == 0
            ? absl::StrCat("dedup key \"", absl::CHexEscape(*args->Get("dedup-key")), "\"")
            : absl::StrCat("item ", o.id);
    switch (o.kind) {
      case CancelOutcome::Kind::kCancelled:
        printf("%s: cancelled\n", item.c_str());
        break;
      case CancelOutcome::Kind::kAlreadyCancelled:
        printf("%s: already cancelled\n", item.c_str());
        break;
      case CancelOutcome::Kind::kInFlight:
        printf(
            "%s: in flight, not cancelled (a worker has claimed it; it runs, and its ack "
            "wins)\n",
            item.c_str());
        status = std::max(status, kCancelTooLate);
        break;
      case CancelOutcome::Kind::kDone:
        printf("%s: done, not cancelled (it was acknowledged already)\n", item.c_str());
        status = std::max(status, kCancelTooLate);
        break;
      case CancelOutcome::Kind::kDead:
        printf("%s: dead, not cancelled (it was dead-lettered; see partq dead list %s)\n",
               item.c_str(), pos[0].c_str());
        status = std::max(status, kCancelTooLate);
        break;
      case CancelOutcome::Kind::kUnknown:
        printf("%s: unknown, not cancelled (no such item in queue %s)\n", item.c_str(),
               pos[0].c_str());
        status = kCancelUnknown;
        break;
    }
  }
  return status;
}

namespace {

bool SessionExpired(const SessionInfo& s) { return !SessionLive(s.expires_in); }

// `status --json`.
void PrintStatusJson(const QueueStatus& st, const QueueTotals& t) {
  nlohmann::json out;
  out["queue"] = QueueJson(st.config);
  out["totals"] = {{"ready", t.ready},
                   {"delayed", t.delayed},
                   {"held", t.held},
                   {"in_flight", t.in_flight},
                   {"in_flight_unowned", t.in_flight_unowned},
                   {"dead", t.dead},
                   {"cancelled", t.cancelled},
                   {"dead_last_minute", t.dead_last_minute},
                   {"dead_per_second_last_minute", t.dead_last_minute / 60.0},
                   {"unowned_parts", t.unowned_parts},
                   {"live_sessions", t.live_sessions},
                   {"expired_sessions", t.expired_sessions},
                   {"oldest_ready_age_seconds", OldestReadyJson(t.ready, t.oldest_ready_age)}};
  out["sessions"] = nlohmann::json::array();
  for (const auto& s : st.sessions) {
    out["sessions"].push_back(
        {{"id", s.id.value},
         {"instance_id", s.instance_id},
         {"host", s.host},
         {"pid", s.pid},
         {"since_heartbeat_seconds", absl::ToDoubleSeconds(s.since_heartbeat)},
         {"expires_in_seconds", absl::ToDoubleSeconds(s.expires_in)},
         {"expired", SessionExpired(s)},
         {"parts_owned", s.parts_owned},
         {"also_serves", s.also_serves}});
  }
  out["parts"] = nlohmann::json::array();
  for (const auto& p : st.parts) {
    out["parts"].push_back(
        {{"part", p.part},
         {"owner", p.owner ? nlohmann::json(p.owner->value) : nlohmann::json()},
         {"epoch", p.epoch.value},
         {"ready", p.ready},
         {"delayed", p.delayed},
         {"held", p.held},
         {"in_flight", p.in_flight},
         {"dead", p.dead},
         {"dead_last_minute", p.dead_last_minute},
         {"oldest_ready_age_seconds", OldestReadyJson(p.ready, p.oldest_ready_age)}});
  }
  out["throughput"] = console::ThroughputJson(st, st.throughput);
  out["groups"] = {{"held", st.groups.held},
                   {"started", st.groups.started},
                   {"ended", st.groups.ended},
                   {"pending_items", st.groups.pending}};
  if (st.horizon) {
    out["vacuum_horizon"] = {{"holder", st.horizon->holder},
                             {"who", st.horizon->who},
                             {"age_seconds", absl::ToDoubleSeconds(st.horizon->age)},
                             {"age_xids", st.horizon->xid_age}};
  } else {
    out["vacuum_horizon"] = nullptr;
  }
  PrintJson(out.dump(2));
}

// `status`'s lines on the queue as a whole: its settings, items and groups,
// the last minute's rates, and what holds vacuum back.
void PrintStatusSummary(const QueueStatus& st, const QueueTotals& t) {
  const auto& c = st.config;
  printf("queue %s: %s\n", c.name.c_str(), Settings(c).c_str());
  if (c.paused) {
    printf("PAUSED: its workers claim nothing (partq queue resume %s)\n", c.name.c_str());
  }
  printf("items: %lld ready, %lld delayed, %lld in flight%s, %lld dead; oldest ready %s\n",
         static_cast<long long>(t.ready), static_cast<long long>(t.delayed),
         static_cast<long long>(t.in_flight),
         t.in_flight_unowned == 0
             ? ""
             : absl::StrCat(" (", t.in_flight_unowned,
                            " of them claimed by expired sessions: they run again once a live "
                            "worker takes their parts)")
                   .c_str(),
         static_cast<long long>(t.dead), t.ready > 0 ? Seconds(t.oldest_ready_age).c_str() : "-");
  const QueueStatus::GroupCounts& g = st.groups;
  if (g.held + g.started + g.ended > 0) {
    printf(
        "groups: %lld held (not started, %s), %lld started, %lld ended; %s pending in those "
        "not ended (partq group list %s)\n",
        static_cast<long long>(g.held), Count(t.held, "item").c_str(),
        static_cast<long long>(g.started), static_cast<long long>(g.ended),
        Count(g.pending, "item").c_str(), c.name.c_str());
  }
  // The database keeps no count of acks (that would be a write on every
  // ack): the workers count what they finish and their heartbeats carry the
  // counts (QueueStatus::throughput), so the figure is up to one heartbeat
  // behind (console::Rates says over what). Dead items carry the time they
  // died, so their own count is exact (for those still dead).
  const FinishRates r = console::Rates(st);
  const std::string by =
      t.live_sessions > 0 ? absl::StrCat("by the ", Count(t.live_sessions, "live worker"),
                                         ", each over the minute before its last heartbeat (every ",
                                         Seconds(DefaultHeartbeatInterval(c.session_ttl)), ")")
                          : "(no live worker: the rates are what live workers' heartbeats report)";
  printf(
      "last minute: %.2f acked/s, %.2f failed/s (retried), %.2f dead-lettered/s %s; "
      "dead-lettered in it and still dead: %s\n",
      r.acked, r.retried, r.dead, by.c_str(), Count(t.dead_last_minute, "item").c_str());
  // Said only when it matters: a worker's own transactions hold the horizon
  // for milliseconds all the time.
  if (st.horizon &&
      (st.horizon->age >= kHorizonWorthSaying || st.horizon->holder == "replication slot")) {
    printf(
        "vacuum held back for %s (%lld transactions) by %s %s: acked items' rows stay until it "
        "ends\n",
        Seconds(st.horizon->age).c_str(), static_cast<long long>(st.horizon->xid_age),
        st.horizon->holder.c_str(), st.horizon->who.c_str());
  }
}

// `status`'s sessions: how many live and expired, and a row each.
void PrintSessions(const QueueStatus& st, const QueueTotals& t) {
  printf("\n%lld live session(s)", static_cast<long long>(t.live_sessions));
  if (t.expired_sessions > 0) {
    // Only a live member's heartbeat deletes an expired session (and frees
    // its parts): with none running, the parts wait.
    printf(", %lld expired (not deleted yet: a live worker's heartbeat frees their parts)",
           static_cast<long long>(t.expired_sessions));
  }
  if (t.unowned_parts > 0) {
    printf("; %lld of %d parts have no live owner", static_cast<long long>(t.unowned_parts),
           st.config.parts);
  }
  printf(":\n%-36s %-16s %-20s %7s %6s %10s %10s %s\n", "ID", "INSTANCE", "HOST", "PID", "PARTS",
         "HEARTBEAT", "EXPIRES_IN", "ALSO_SERVES");
  for (const auto& s : st.sessions) {
    printf("%-36s %-16s %-20s %7d %6d %10s %10s %s\n", PrintableUtf8(s.id.value).c_str(),
           s.instance_id.empty() ? "-" : PrintableUtf8(s.instance_id).c_str(),
           PrintableUtf8(s.host).c_str(), s.pid, s.parts_owned, Seconds(s.since_heartbeat).c_str(),
           SessionExpired(s) ? "expired" : Seconds(s.expires_in).c_str(),
           s.also_serves.empty() ? "-" : PrintableUtf8(absl::StrJoin(s.also_serves, ",")).c_str());
  }
}

// `status`'s parts, a row each.
void PrintParts(const QueueStatus& st) {
  printf("\n%5s %-36s %8s %8s %8s %9s %6s %10s\n", "PART", "OWNER", "EPOCH", "READY", "DELAYED",
         "IN_FLIGHT", "DEAD", "OLDEST");
  for (const auto& p : st.parts) {
    printf("%5d %-36s %8lld %8lld %8lld %9lld %6lld %10s\n", p.part,
           p.owner ? PrintableUtf8(p.owner->value).c_str() : "(none)",
           static_cast<long long>(p.epoch.value),
           static_cast<long long>(p.ready), static_cast<long long>(p.delayed),
           static_cast<long long>(p.in_flight), static_cast<long long>(p.dead),
           p.ready > 0 ? Seconds(p.oldest_ready_age).c_str() : "-");
  }
}

}  // namespace

int CmdStatus(const std::vector<std::string>& argv) {
  auto args = Args::Parse(argv, ConnectionFlags(), {"json", "parts"});
  if (!args.ok()) return Fail(args.status());
  if (auto u = WrongPositionals(args->positional(), 0, {"QUEUE"},
                                "usage: partq status QUEUE [--parts] [--json]")) {
    return *u;
  }
  auto store = ConnectChecked(*args);
  if (!store.ok()) return Fail(store.status());
  auto st = (*store)->Status(args->positional()[0]);
  if (!st.ok()) return FailReadingTables(st.status(), "status", args->positional()[0]);
  const QueueTotals t = SumUp(*st);
  if (args->Has("json")) {
    PrintStatusJson(*st, t);
    return 0;
  }
  PrintStatusSummary(*st, t);
  PrintSessions(*st, t);
  if (static_cast<int>(st->parts.size()) > kPartsInFull && !args->Has("parts")) {
    PrintPartsSummary(*st);
    return 0;
  }
  PrintParts(*st);
  return 0;
}

int CmdPrune(const std::vector<std::string>& argv) {
  constexpr char kUsage[] = "usage: partq prune QUEUE --older-than AGE [--dead] [--json]";
  auto args = Args::Parse(argv, With(ConnectionFlags(), {"older-than"}), {"dead", "json"});
  if (!args.ok()) return Fail(args.status());
  if (auto u = WrongPositionals(args->positional(), 0, {"QUEUE"}, kUsage)) return *u;
  // No default: a retention is a decision, and a typo should not pick one.
  if (!args->Has("older-than")) {
    return Usage(absl::StrCat("--older-than is required, e.g. 7d or 24h (", kUsage, ")"));
  }
  auto age = args->Duration("older-than", absl::ZeroDuration(), absl::ZeroDuration(),
                            absl::Hours(24 * 365 * 100));
  if (!age.ok()) return Fail(age.status());
  auto store = ConnectChecked(*args);
  if (!store.ok()) return Fail(store.status());
  const std::string& queue = args->positional()[0];
  absl::StatusOr<Pruned> p = (*store)->Prune(queue, *age, args->Has("dead"));
  if (!p.ok()) return Fail(p.status());
  if (args->Has("json")) {
    nlohmann::json out = {{"queue", queue},
                          {"older_than_seconds", absl::ToInt64Seconds(*age)},
                          {"results", p->results},
                          {"cancelled", p->cancelled},
                          {"groups", p->groups}};
    if (args->Has("dead")) out["dead"] = p->dead;
    PrintJson(out.dump(2));
    return 0;
  }
  printf("pruned from %s what finished more than %s ago: %s, %s, %s", queue.c_str(),
         args->Get("older-than")->c_str(), Count(p->results, "result").c_str(),
         Count(p->cancelled, "cancelled record").c_str(), Count(p->groups, "ended group").c_str());
  if (args->Has("dead")) printf(", %s", Count(p->dead, "dead item").c_str());
  printf("\n");
  return 0;
}

namespace {

// `dead list QUEUE`.
int DeadList(const Args& args) {
  const auto& pos = args.positional();
  constexpr char kUsage[] = "usage: partq dead list QUEUE [--limit 20] [--json]";
  if (auto u = WrongPositionals(pos, 1, {"QUEUE"}, kUsage)) return *u;
  if (args.Has("all")) {
    return Usage(absl::StrCat("--all goes with dead requeue and delete (", kUsage, ")"));
  }
  auto limit = args.Int("limit", 20, 1, 100000);
  if (!limit.ok()) return Fail(limit.status());
  auto store = ConnectChecked(args);
  if (!store.ok()) return Fail(store.status());
  auto dead = (*store)->ListDead(pos[1], static_cast<int>(*limit));
  if (!dead.ok()) return FailReadingTables(dead.status(), "dead list", pos[1]);
  if (args.Has("json")) {
    nlohmann::json out = nlohmann::json::array();
    for (const DeadItem& d : *dead) {
      out.push_back(
          {{"id", d.id},
           {"part", d.part},
           {"key", d.key ? nlohmann::json(*d.key) : nlohmann::json()},
           {"dedup_key", d.dedup_key ? nlohmann::json(*d.dedup_key) : nlohmann::json()},
           {"attempts", d.attempts},
           {"enqueued_at",
            absl::FormatTime(absl::RFC3339_full, d.enqueued_at, absl::UTCTimeZone())},
           {"failed_at", absl::FormatTime(absl::RFC3339_full, d.failed_at, absl::UTCTimeZone())},
           {"last_error", d.last_error},
           {"payload_bytes",
            d.payload_hidden ? nlohmann::json() : nlohmann::json(d.payload_bytes)}});
      // Its first kDeadPayloadHead bytes, as the console shows them.
      AddPayloadHead(d.payload_head, d.payload_bytes, d.payload_hidden, &out.back());
    }
    PrintJson(out.dump(2));
    return 0;
  }
  if (dead->empty()) {
    printf("no dead items in %s\n", pos[1].c_str());
    return 0;
  }
  printf("%zu dead item%s of %s, newest first:\n", dead->size(), dead->size() == 1 ? "" : "s",
         pos[1].c_str());
  printf("%12s %5s %8s %-20s %s\n", "ID", "PART", "ATTEMPTS", "FAILED_AT (UTC)", "LAST_ERROR");
  for (const DeadItem& d : *dead) {
    printf("%12lld %5d %8d %-20s %s\n", static_cast<long long>(d.id), d.part, d.attempts,
           absl::FormatTime("%Y-%m-%d %H:%M:%S", d.failed_at, absl::UTCTimeZone()).c_str(),
           // An error is the handler's text: one line, control bytes
           // escaped (quotes and apostrophes left as they are).
           PrintableUtf8(d.last_error).c_str());
  }
  return 0;
}

// At most 10 ids, for a message: "4, 7, 9" or "4, 7, ... (12 ids)".
std::string SomeIds(const std::vector<int64_t>& ids) {
  constexpr size_t kShown = 10;
  std::string out = absl::StrJoin(ids.begin(), ids.begin() + std::min(ids.size(), kShown), ", ");
  if (ids.size() > kShown) absl::StrAppend(&out, ", ... (", ids.size(), " ids)");
  return out;
}

// `dead requeue`'s report: what was requeued, what stayed dead and why,
// and the ids asked for that were neither. Exit 0 all requeued, 3 some
// left dead (a live item holds their dedup key), 1 some ids not dead items
// of the queue (the others were requeued: a script must still see that it
// asked for ids that are not there: a typo, another queue, requeued before).
int ReportRequeued(const std::string& queue, const std::vector<int64_t>& ids, bool all,
                   const Requeued& r) {
  printf("requeued %s", Count(r.requeued, "item").c_str());
  if (r.kept > 0) {
    const std::string kept = r.kept_ids.size() <= 10 ? absl::StrJoin(r.kept_ids, " ") : "ID...";
    printf(
        "; %s left dead (%s): a live item has the same dedup key. Let it finish or cancel it "
        "(partq cancel %s --dedup-key KEY, where `partq dead list %s --json` shows each one's "
        "dedup_key), then requeue again; or delete them: partq dead delete %s %s",
        Count(r.kept, "item").c_str(), SomeIds(r.kept_ids).c_str(), queue.c_str(), queue.c_str(),
        queue.c_str(), kept.c_str());
  }
  printf("\n");
  std::vector<int64_t> missing;
  if (!all) {
    for (int64_t id : ids) {
      if (!std::binary_search(r.requeued_ids.begin(), r.requeued_ids.end(), id) &&
          std::find(r.kept_ids.begin(), r.kept_ids.end(), id) == r.kept_ids.end()) {
        missing.push_back(id);
      }
    }
  }
  if (!missing.empty()) {
    return Fail(absl::NotFoundError(
        absl::StrCat(missing.size(), " of the ", ids.size(), " ids are not dead items of ", queue,
                     ": ", SomeIds(missing), " (`partq dead list ", queue, "` shows them)")));
  }
  return r.kept > 0 ? kDeadRequeueKept : 0;
}

}  // namespace

int CmdDead(const std::vector<std::string>& argv) {
  auto args = Args::Parse(argv, With(ConnectionFlags(), {"limit"}), {"json", "all"});
  if (!args.ok()) return Fail(args.status());
  const auto& pos = args->positional();
  const std::string sub = pos.empty() ? "" : pos[0];
  if (sub == "list") return DeadList(*args);
  if (sub == "requeue" || sub == "delete") {
    const bool all = args->Has("all");
    if (pos.size() < 2 || (all == (pos.size() > 2))) {
      return Usage(absl::StrCat("usage: partq dead ", sub, " QUEUE ID... | partq dead ", sub,
                                " QUEUE --all"));
    }
    std::vector<int64_t> ids;
    for (size_t i = 2; i < pos.size(); ++i) {
      absl::StatusOr<int64_t> id = ParseItemId(pos[i]);
      if (!id.ok()) return Fail(id.status());
      ids.push_back(*id);
    }
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    auto store = ConnectChecked(*args);
    if (!store.ok()) return Fail(store.status());
    if (sub == "delete") {
      auto n = (*store)->DeleteDead(pos[1], ids);
      if (!n.ok()) return Fail(n.status());
      printf("deleted %s\n", Count(n->deleted, "dead item").c_str());
      if (!n->missing_ids.empty()) {
        return Fail(absl::NotFoundError(absl::StrCat(
            n->missing_ids.size(), " of the ", ids.size(), " ids are not dead items of ", pos[1],
            ": ", SomeIds(n->missing_ids), " (`partq dead list ", pos[1], "` shows them)")));
      }
      return 0;
    }
    auto r = (*store)->RequeueDead(pos[1], ids);
    if (!r.ok()) return Fail(r.status());
    return ReportRequeued(pos[1], ids, all, *r);
  }
  if (!sub.empty()) {
    return Usage(absl::StrCat("unknown dead subcommand ", Quoted(sub),
                              ": list QUEUE, requeue QUEUE ID...|--all or delete QUEUE "
                              "ID...|--all"));
  }
  return Usage(
      "dead needs a subcommand: list QUEUE, requeue QUEUE ID...|--all or delete QUEUE ID...|--all");
}

}  // namespace partq::cli
