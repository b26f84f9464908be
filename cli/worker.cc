// partq worker: a consumer session per queue named, in this process, until
// SIGTERM/SIGINT.

#include "consumer/worker.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "base/log.h"
#include "base/secret_file.h"
#include "base/utf8.h"
#include "cli/common.h"
#include "cli/console_flags.h"
#include "cli/http_server.h"
#include "consumer/consumer.h"
#include "consumer/metrics.h"
#include "handlers/handler_spec.h"

namespace partq::cli {
namespace {

// The http handler's Authorization value, from --handler-auth-file (its first
// line) or $PARTQ_HANDLER_AUTH: credentials kept out of the command line,
// which anyone on the machine can read (/proc/PID/cmdline, ps). Empty: none.
absl::StatusOr<std::string> HandlerAuthorization(const Args& args) {
  if (auto file = args.Get("handler-auth-file")) {
    absl::StatusOr<std::string> content = ReadSecretFile(*file, "--handler-auth-file");
    if (!content.ok()) return content.status();
    std::string line = content->substr(0, content->find('\n'));
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--handler-auth-file: ", *file,
                                                     " has an empty first line (expected e.g. "
                                                     "\"Bearer TOKEN\")"));
    }
    return line;
  }
  const char* env = std::getenv("PARTQ_HANDLER_AUTH");
  return std::string(env != nullptr ? env : "");
}

// --handler-env NAME[,NAME...]: the PG*/PARTQ_* variables an exec child
// gets all the same (ExecOptions::pass_env).
absl::StatusOr<std::vector<std::string>> HandlerEnv(const Args& args) {
  std::vector<std::string> names;
  for (absl::string_view name :
       absl::StrSplit(args.GetOr("handler-env", ""), ',', absl::SkipEmpty())) {
    const bool valid = !absl::ascii_isdigit(name[0]) &&
                       std::all_of(name.begin(), name.end(),
                                   [](char c) { return absl::ascii_isalnum(c) || c == '_'; });
    if (!valid) {
      return absl::InvalidArgumentError(
          absl::StrCat("--handler-env: ", Quoted(name), " is not an environment variable name"));
    }
    names.emplace_back(name);
  }
  return names;
}

// The consumer's options from the command line (all but what the connection
// options decide); InvalidArgument naming the flag that is wrong.
absl::StatusOr<ConsumerOptions> WorkerOptions(const Args& args) {
  ConsumerOptions o;
  auto concurrency = args.Int("concurrency", 4, 1, 1024);
  auto batch = args.Int("batch", 100, 1, 10000);
  // 0 (none) or 1 KiB .. 1 GiB: a claim always takes its first item, whatever its size.
  auto claim_bytes = args.Int("claim-bytes", 0, 0, int64_t{1} << 30);
  auto drain =
      args.Duration("drain-timeout", absl::Seconds(10), absl::ZeroDuration(), absl::Hours(1));
  auto htimeout =
      args.Duration("handler-timeout", absl::Minutes(5), absl::Milliseconds(1), absl::Hours(24));
  auto poll =
      args.Duration("poll-interval", absl::Seconds(1), absl::Milliseconds(10), absl::Minutes(10));
  auto idle_poll = args.Duration("idle-poll-interval", absl::Seconds(60), absl::Milliseconds(10),
                                 absl::Hours(1));
  auto rbase = args.Duration("retry-base", absl::Seconds(1), absl::ZeroDuration(), absl::Hours(1));
  auto rmax =
      args.Duration("retry-max", absl::Minutes(10), absl::ZeroDuration(), absl::Hours(24 * 7));
  auto vacuum =
      args.Duration("vacuum-interval", absl::Seconds(10), absl::ZeroDuration(), absl::Hours(24));
  for (const absl::Status& st :
       {concurrency.status(), batch.status(), claim_bytes.status(), drain.status(),
        htimeout.status(), poll.status(), idle_poll.status(), rbase.status(), rmax.status(),
        vacuum.status()}) {
    if (!st.ok()) return st;
  }
  if (*vacuum > absl::ZeroDuration() && *vacuum < absl::Seconds(1)) {
    // Each round is a catalog query on the database: a millisecond interval
    // would make the owner of part 0 ask hundreds of times a second.
    return absl::InvalidArgumentError(absl::StrCat(
        "--vacuum-interval must be 0 (off) or at least 1s, not ", absl::FormatDuration(*vacuum)));
  }
  if (*claim_bytes > 0 && *claim_bytes < 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("--claim-bytes must be 0 (no bound) or at least 1024, not ", *claim_bytes));
  }
  if (*rbase > *rmax) {
    return absl::InvalidArgumentError(absl::StrCat("--retry-base (", absl::FormatDuration(*rbase),
                                                   ") must not exceed --retry-max (",
                                                   absl::FormatDuration(*rmax), ")"));
  }
  o.concurrency = static_cast<int>(*concurrency);
  o.batch = static_cast<int>(*batch);
  o.claim_bytes = *claim_bytes;
  o.drain_timeout = *drain;
  o.handler_timeout = *htimeout;
  o.poll_interval = *poll;
  o.idle_poll_interval = std::max(*idle_poll, *poll);
  o.vacuum_interval = *vacuum;
  o.backoff.base = *rbase;
  o.backoff.max = *rmax;
  o.instance_id = args.GetOr("instance-id", "");
  o.poll_only = args.Has("poll-only");
  o.leave_on_stop = args.Has("leave-on-stop");
  if (o.instance_id.size() > 200) {
    return absl::InvalidArgumentError("--instance-id is longer than 200 characters");
  }
  if (o.leave_on_stop && o.instance_id.empty()) {
    return absl::InvalidArgumentError(
        "--leave-on-stop is for static members (--instance-id): a worker without one always "
        "leaves when it stops");
  }
  return o;
}

// The queue as the store has it, read once before the worker starts: fails
// fast on a bad DSN, a missing schema or an unknown queue.
absl::StatusOr<QueueConfig> CheckedQueue(const PgOptions& pg, const std::string& queue) {
  auto store = ConnectChecked(pg);
  if (!store.ok()) return store.status();
  return (*store)->GetQueue(queue);
}

// Handler `spec` (--handler, or the queue's own) for `queue`, with the --handler-* flags;
// exec and http handlers report to `registry`.
absl::StatusOr<std::unique_ptr<Handler>> WorkerHandler(const Args& args, const QueueConfig& queue,
                                                       const std::string& spec,
                                                       prometheus::Registry* registry) {
  HandlerSpecOptions ho;
  ho.queue = queue;
  ho.registry = registry;
  ho.ca_file = args.GetOr("handler-ca", "");
  auto auth = HandlerAuthorization(args);
  if (!auth.ok()) return auth.status();
  ho.http_authorization = *auth;
  if (args.Has("handler-auth-file") && !absl::StartsWith(spec, "http")) {
    return absl::InvalidArgumentError("--handler-auth-file goes with an http: handler");
  }
  auto pass_env = HandlerEnv(args);
  if (!pass_env.ok()) return pass_env.status();
  ho.exec_pass_env = *pass_env;
  ho.exec_pass_all_env = args.Has("handler-env-all");
  if ((args.Has("handler-env") || ho.exec_pass_all_env) && !absl::StartsWith(spec, "exec:")) {
    return absl::InvalidArgumentError(
        "--handler-env and --handler-env-all go with an exec: handler");
  }
  return MakeHandler(spec, ho);
}

// --metrics-addr ADDR: /metrics from `registry`, and a readiness check on
// the worker's sessions: ready once each joined and finished a rebalance round
// (it then owns its parts or waits for their hand-off, or, with more workers
// than parts, is a spare: still ready, so a rollout is not blocked on it).
absl::StatusOr<std::unique_ptr<HttpServer>> StartMetricsServer(
    const std::string& addr, const std::shared_ptr<prometheus::Registry>& registry,
    const Worker& worker) {
  return HttpServer::Start(addr, registry,
                           [&worker](std::string* why) { return worker.Ready(why); });
}

// --console-listen ADDR: the web console in this process, on its own port (a
// pod can serve it), into `console`. The exit status when it cannot start or
// its flags come without --console-listen; nullopt otherwise.
std::optional<int> ServeWorkerConsole(const Args& args, const PgOptions& pg,
                                      std::optional<ServedConsole>* console) {
  if (args.Has("console-listen")) {
    auto flags = ParseConsoleFlags(args, "console-", "");
    if (!flags.ok()) return Fail(flags.status());
    auto served = ServeConsole(*flags, pg);
    if (!served.ok()) return Fail(served.status());
    *console = std::move(*served);
  } else if (args.Has("console-read-only") || args.Has("console-token-file") ||
             args.Has("console-allowed-host")) {
    return Usage(
        "--console-read-only, --console-token-file and --console-allowed-host go with "
        "--console-listen ADDR");
  }
  return std::nullopt;
}

// The line a stopped consumer of `queue` prints.
void PrintStopped(const Consumer& consumer, bool several) {
  const ConsumerStats s = consumer.stats();
  // Throttled items (429/503, a handler not reachable) were sent back
  // without using an attempt: not failures, so apart from the retried.
  LogLine(LogLevel::kInfo,
          absl::StrFormat("worker stopped%s: %d acked, %d retried, %d throttled (back without "
                          "using an attempt), %d dead-lettered, %d fenced",
                          several ? absl::StrCat(" on queue \"", consumer.queue(), "\"") : "",
                          s.acked, s.retried - s.throttled, s.throttled, s.dead, s.fenced));
}

// Starts the worker and runs it until a stop signal or the end of a session
// (its queue deleted), then stops every queue at once; the exit status.
int RunUntilStopped(Worker& worker, const ConsumerOptions& o, bool quiet) {
  const auto& consumers = worker.consumers();
  const bool several = consumers.size() > 1;
  if (absl::Status st = worker.Start(); !st.ok()) return Fail(st);
  if (!quiet) {
    for (const auto& consumer : consumers) {
      const ConsumerOptions& co = consumer->options();
      LogLine(LogLevel::kInfo,
              absl::StrFormat("worker session %s joined queue \"%s\" (%d thread%s, batch %d)",
                              consumer->session().id().value, consumer->queue(), co.concurrency,
                              co.concurrency == 1 ? "" : "s", co.batch));
    }
  }
  std::string deleted;
  while (StopSignals() == 0 && worker.Ended(&deleted).ok()) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  if (!quiet && deleted.empty()) {
    if (o.instance_id.empty() || o.leave_on_stop) {
      LogLine(LogLevel::kInfo, "draining and leaving...");
    } else {
      LogLine(LogLevel::kInfo,
              absl::StrCat("draining; the parts of instance \"", o.instance_id,
                           "\" stay reserved for its restart until the session TTL "
                           "(--leave-on-stop hands them over at once)"));
    }
  }
  // Stop waits for the handlers that are running. After the drain timeout
  // their parts are given up (released, or for a static member kept for its
  // restart, which moves them to a new epoch: either way their acks cannot
  // commit once someone holds them again), but a handler that runs on (sleeps,
  // hangs) would hold the process for as long, past what --drain-timeout
  // promised. The queues drain side by side, so several take no longer than one.
  StopWithin([&] { worker.Stop(); }, o.drain_timeout + kStopGrace, "handlers still running",
             "without them (their items were released and run again elsewhere)");
  if (!quiet) {
    for (const auto& consumer : consumers) PrintStopped(*consumer, several);
  }
  if (!deleted.empty()) {
    // The queue was deleted under us (partq queue delete): nothing to work
    // on. (The store's own message would suggest creating the queue, as for
    // a name never created; the session's log line above carries it.)
    return Fail(absl::NotFoundError(
        absl::StrCat("queue \"", deleted,
                     "\" was deleted while this worker ran (partq queue delete); nothing is "
                     "left to work on",
                     several ? "; the other queues were drained and left" : "")));
  }
  return 0;
}

// A queue of `partq worker` and what it runs with: the command's flags, or
// its own from --queue NAME:KEY=VALUE,...
struct QueueSpec {
  std::string name;
  ConsumerOptions options;
  std::string handler;
};

// --queue NAME:KEY=VALUE[,KEY=VALUE...] onto `q`: concurrency, batch and
// handler-timeout, and handler last (its value is the rest, commas and all).
// `flag` says in errors where the settings came from.
absl::Status ApplyQueueSettings(absl::string_view settings, const std::string& flag, QueueSpec& q) {
  while (!settings.empty()) {
    if (absl::ConsumePrefix(&settings, "handler=")) {
      if (settings.empty()) return absl::InvalidArgumentError(flag + ": handler= is empty");
      q.handler = std::string(settings);
      return absl::OkStatus();
    }
    const size_t comma = settings.find(',');
    const absl::string_view item = settings.substr(0, comma);
    settings = comma == absl::string_view::npos ? "" : settings.substr(comma + 1);
    const size_t eq = item.find('=');
    const absl::string_view key = item.substr(0, eq);
    const std::string value(eq == absl::string_view::npos ? "" : item.substr(eq + 1));
    if (eq != absl::string_view::npos && key == "handler-timeout") {
      // The bounds of the command's --handler-timeout.
      auto d = ParseDurationFlag(value);
      if (!d.ok() || *d < absl::Milliseconds(1) || *d > absl::Hours(24)) {
        return absl::InvalidArgumentError(absl::StrCat(
            flag, ": handler-timeout must be a duration from 1ms to 24h, not ", Quoted(value)));
      }
      q.options.handler_timeout = *d;
      continue;
    }
    if (eq == absl::string_view::npos || (key != "concurrency" && key != "batch")) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": ", Quoted(item),
                       " is not one of concurrency=N, batch=N, handler-timeout=DURATION or "
                       "handler=SPEC (last)"));
    }
    // The bounds of the command's --concurrency and --batch.
    const int64_t max = key == "concurrency" ? 1024 : 10000;
    int64_t n = 0;
    if (!absl::SimpleAtoi(value, &n) || n < 1 || n > max) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": ", key, " must be between 1 and ", max, ", not ", Quoted(value)));
    }
    (key == "concurrency" ? q.options.concurrency : q.options.batch) = static_cast<int>(n);
  }
  return absl::OkStatus();
}

// A queue's NAME[:SETTINGS] as --queue gives it, and where it was given:
// "--queue NAME", or "FILE:LINE" of --queues-file.
struct QueueEntry {
  std::string spec;
  std::string origin;
};

// --queues-file FILE: a --queue entry per line, for a worker of many queues
// (a ConfigMap in Kubernetes); blank lines and lines starting with # are
// skipped, and each line's surrounding blanks.
absl::StatusOr<std::vector<QueueEntry>> QueuesFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat("--queues-file: cannot read ", Quoted(path)));
  }
  std::vector<QueueEntry> entries;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const absl::string_view spec = absl::StripAsciiWhitespace(line);
    if (spec.empty() || spec[0] == '#') continue;
    entries.push_back({std::string(spec), absl::StrCat(path, ":", n)});
  }
  if (in.bad()) {
    return absl::InvalidArgumentError(absl::StrCat("--queues-file: cannot read ", Quoted(path)));
  }
  if (entries.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--queues-file: ", Quoted(path),
                                                   " names no queue (one NAME[:SETTINGS] a line)"));
  }
  return entries;
}

// The --queue entries of the command line, then those of --queues-file.
absl::StatusOr<std::vector<QueueEntry>> QueueEntries(const Args& args) {
  std::vector<QueueEntry> entries;
  for (const std::string& spec : args.GetAll("queue")) {
    entries.push_back({spec, absl::StrCat("--queue ", spec.substr(0, spec.find(':')))});
  }
  if (auto path = args.Get("queues-file")) {
    auto more = QueuesFile(*path);
    if (!more.ok()) return more.status();
    entries.insert(entries.end(), more->begin(), more->end());
  }
  return entries;
}

// The queues of `partq worker QUEUE... [--queue NAME:SETTINGS]... [--queues-file F]`:
// valid names, each once, with the command's flags (`base`) unless an entry
// sets its own. A queue given only by an entry is served too.
absl::StatusOr<std::vector<QueueSpec>> WorkerQueues(const Args& args, const ConsumerOptions& base) {
  std::vector<QueueSpec> queues;
  auto add = [&](const std::string& name) -> absl::Status {
    if (absl::Status st = ValidateQueueName(name); !st.ok()) return st;
    for (const auto& q : queues) {
      if (q.name == name) {
        return absl::InvalidArgumentError(absl::StrCat(
            "queue ", Quoted(name), " is named twice: one worker has one session per queue"));
      }
    }
    QueueSpec q{name, base, args.GetOr("handler", "noop")};
    q.options.queue = name;
    queues.push_back(std::move(q));
    return absl::OkStatus();
  };
  for (const std::string& name : args.positional()) {
    if (absl::Status st = add(name); !st.ok()) return st;
  }
  auto entries = QueueEntries(args);
  if (!entries.ok()) return entries.status();
  std::set<std::string> configured;
  for (const QueueEntry& e : *entries) {
    const size_t colon = e.spec.find(':');
    const std::string name = e.spec.substr(0, colon);
    if (!configured.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat(e.origin, ": queue ", Quoted(name),
                                                     " is given twice: put its settings in one"));
    }
    auto it = std::find_if(queues.begin(), queues.end(),
                           [&](const QueueSpec& q) { return q.name == name; });
    if (it == queues.end()) {
      if (absl::Status st = add(name); !st.ok()) {
        return absl::Status(st.code(), absl::StrCat(e.origin, ": ", st.message()));
      }
      it = queues.end() - 1;
    }
    if (colon != std::string::npos) {
      const std::string flag = absl::StartsWith(e.origin, "--queue ")
                                   ? e.origin
                                   : absl::StrCat(e.origin, ": queue ", name);
      if (absl::Status st =
              ApplyQueueSettings(absl::string_view(e.spec).substr(colon + 1), flag, *it);
          !st.ok()) {
        return st;
      }
    }
  }
  return queues;
}

}  // namespace

int CmdWorker(const std::vector<std::string>& argv) {
  auto args =
      Args::Parse(argv,
                  With(ConnectionFlags(), {"concurrency",
                                           "batch",
                                           "claim-bytes",
                                           "handler",
                                           "instance-id",
                                           "metrics-addr",
                                           "drain-timeout",
                                           "handler-timeout",
                                           "poll-interval",
                                           "idle-poll-interval",
                                           "retry-base",
                                           "retry-max",
                                           "log-level",
                                           "handler-ca",
                                           "handler-auth-file",
                                           "handler-env",
                                           "console-listen",
                                           "console-token-file",
                                           "console-allowed-host",
                                           "vacuum-interval",
                                           "queue",
                                           "queues-file"}),
                  {"poll-only", "quiet", "leave-on-stop", "console-read-only", "handler-env-all"});
  if (!args.ok()) return Fail(args.status());
  if (args->positional().empty() && !args->Has("queue") && !args->Has("queues-file")) {
    return Usage(
        "QUEUE is missing (usage: partq worker QUEUE [QUEUE...] [options], or --queue "
        "NAME:SETTINGS or --queues-file FILE)");
  }
  auto options = WorkerOptions(*args);
  if (!options.ok()) return Fail(options.status());
  ConsumerOptions& o = *options;
  auto queues = WorkerQueues(*args, o);
  if (!queues.ok()) return Fail(queues.status());
  if (absl::Status st = SetLogLevelFlag(*args); !st.ok()) return Fail(st);
  auto pg = ConnectionOptions(*args);
  if (!pg.ok()) return Fail(pg.status());
  pg->application_name = "partq worker";
  auto registry = std::make_shared<prometheus::Registry>();
  // Per queue: its handler (exec children and http clients of its own), its
  // metrics (labelled with the queue) and its consumer.
  std::vector<std::unique_ptr<Handler>> handlers;
  std::vector<std::unique_ptr<ConsumerMetrics>> metrics;
  std::vector<WorkerQueue> served;
  std::vector<std::string> unhandled;  // queues with the noop handler by default
  for (QueueSpec& q : *queues) {
    // LISTEN cannot work through a transaction pooler: --pool-mode transaction implies
    // --poll-only.
    q.options.poll_only = q.options.poll_only || pg->transaction_pooler;
    auto queue = CheckedQueue(*pg, q.name);
    // A producer's or operator's role is told which grant a worker needs.
    if (!queue.ok()) return FailReadingTables(queue.status(), "worker", q.name, "worker");
    // A forgotten --handler would acknowledge the whole queue unseen: said
    // once every queue is known (an unknown one's error comes alone).
    if (!args->Has("handler") && q.handler == "noop") unhandled.push_back(q.name);
    auto handler = WorkerHandler(*args, *queue, q.handler, registry.get());
    if (!handler.ok()) return Fail(handler.status());
    handlers.push_back(std::move(*handler));
    metrics.push_back(std::make_unique<ConsumerMetrics>(*registry, q.name));
    served.push_back({q.options, handlers.back().get(), metrics.back().get()});
  }
  for (const std::string& name : unhandled) {
    LogLine(LogLevel::kWarning,
            absl::StrCat("queue ", Quoted(name),
                         ": no --handler, so its items are acknowledged without running "
                         "anything (the noop handler); pass --handler noop to mean it"));
  }
  // A role that may create in the schema is not confined by its grants:
  // said at every start (partq grant refuses such a schema).
  if (auto creators = PgSchemaCreators(*pg); creators.ok() && !creators->empty()) {
    LogLine(LogLevel::kWarning, SchemaCreatorsProblem(pg->schema, *creators));
  }
  Worker worker(PgStoreFactory(*pg), std::move(served));
  InstallStopSignals();  // first: drain and leave; second: exit at once

  std::unique_ptr<HttpServer> http;
  if (auto addr = args->Get("metrics-addr")) {
    auto server = StartMetricsServer(*addr, registry, worker);
    if (!server.ok()) return Fail(server.status());
    http = std::move(*server);
  }
  std::optional<ServedConsole> console;
  if (auto status = ServeWorkerConsole(*args, *pg, &console)) return *status;
  return RunUntilStopped(worker, o, args->Has("quiet"));
}

}  // namespace partq::cli
