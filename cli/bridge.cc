// partq bridge ingest|publish: the Kafka bridge (bridge/bridge_*.h) until
// SIGTERM/SIGINT.

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "base/log.h"
#include "base/utf8.h"
#include "bridge/bridge_ingest.h"
#include "bridge/bridge_metrics.h"
#include "bridge/bridge_publish.h"
#include "bridge/kafka_config.h"
#include "cli/common.h"
#include "cli/http_server.h"

namespace partq::cli {
namespace {

constexpr char kKafkaSaslPasswordEnv[] = "PARTQ_KAFKA_SASL_PASSWORD";

// --brokers, --topic, --queue: present, and the names well-formed.
absl::Status RequiredFlag(const Args& args, const std::string& flag, const std::string& command,
                          const std::string& what) {
  if (args.GetOr(flag, "").empty()) {
    return absl::InvalidArgumentError(absl::StrCat(command, " needs --", flag, " ", what));
  }
  return absl::OkStatus();
}

absl::Status NoPositional(const Args& args, const std::string& command) {
  if (args.positional().empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(command, " takes no arguments, only flags (got ",
                                                 Quoted(args.positional()[0]), ")"));
}

// The extra librdkafka properties, each key from one place only:
//   --kafka-config-file FILE    key=value lines (bridge/kafka_config.h)
//   --kafka-config "k=v,k=v"   (secret values masked in argv: HidePasswordsInArgv)
//   $PARTQ_KAFKA_SASL_PASSWORD  sasl.password
absl::StatusOr<std::map<std::string, std::string>> KafkaConfig(const Args& args) {
  std::map<std::string, std::string> out;
  std::map<std::string, std::string> source_of;
  auto add = [&](const std::string& key, std::string value,
                 const std::string& source) -> absl::Status {
    const auto [it, inserted] = source_of.emplace(key, source);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat(key, " is set both in ", it->second,
                                                     " and in ", source, ": set it in one place"));
    }
    out[key] = std::move(value);
    return absl::OkStatus();
  };
  if (auto path = args.Get("kafka-config-file")) {
    auto file = ReadKafkaPropertiesFile(*path, "--kafka-config-file");
    if (!file.ok()) return file.status();
    for (auto& [k, v] : *file) {
      if (absl::Status st = add(k, std::move(v), "--kafka-config-file " + *path); !st.ok()) {
        return st;
      }
    }
  }
  if (auto text = args.Get("kafka-config")) {
    for (absl::string_view kv : absl::StrSplit(*text, ',', absl::SkipEmpty())) {
      std::pair<std::string, std::string> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
      if (p.first.empty() || kv.find('=') == absl::string_view::npos) {
        return absl::InvalidArgumentError("--kafka-config needs key=value[,key=value]");
      }
      if (absl::Status st = add(p.first, std::move(p.second), "--kafka-config"); !st.ok()) {
        return st;
      }
    }
  }
  if (const char* password = std::getenv(kKafkaSaslPasswordEnv)) {
    if (absl::Status st = add("sasl.password", password, absl::StrCat("$", kKafkaSaslPasswordEnv));
        !st.ok()) {
      return st;
    }
  }
  return out;
}

// --metrics-addr: /metrics, /healthz (200 while the process runs) and
// /readyz (`ready`: 503 while no Kafka broker is reachable). None without the
// flag.
absl::StatusOr<std::unique_ptr<HttpServer>> ServeMetrics(
    const Args& args, std::shared_ptr<prometheus::Registry> registry,
    std::function<bool(std::string*)> ready) {
  auto addr = args.Get("metrics-addr");
  if (!addr) return std::unique_ptr<HttpServer>();
  return HttpServer::Start(*addr, std::move(registry), std::move(ready));
}

int Ingest(const std::vector<std::string>& argv) {
  auto args = Args::Parse(
      argv,
      With(ConnectionFlags(), {"brokers", "topic", "queue", "group", "instance-id", "batch",
                               "batch-wait", "high-water", "low-water", "metrics-addr",
                               "kafka-config", "kafka-config-file", "log-level"}),
      {"quiet"});
  if (!args.ok()) return Fail(args.status());
  const std::string cmd = "bridge ingest";
  for (const absl::Status& st :
       {RequiredFlag(*args, "brokers", cmd, "HOST:PORT[,HOST:PORT...] (Kafka bootstrap servers)"),
        RequiredFlag(*args, "topic", cmd, "TOPIC (the Kafka topic to ingest)"),
        RequiredFlag(*args, "queue", cmd, "QUEUE (the queue its messages become items of)"),
        NoPositional(*args, cmd)}) {
    if (!st.ok()) return Fail(st);
  }
  BridgeIngestOptions o;
  o.brokers = args->GetOr("brokers", "");
  o.topic = args->GetOr("topic", "");
  o.queue = args->GetOr("queue", "");
  if (absl::Status st = ValidateTopicName(o.topic); !st.ok()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--topic: ", st.message())));
  }
  if (absl::Status st = ValidateQueueName(o.queue); !st.ok()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--queue: ", st.message())));
  }
  o.group = args->GetOr("group", "");
  o.instance_id = args->GetOr("instance-id", "");
  auto batch = args->Int("batch", 1000, 1, 100000);
  auto wait =
      args->Duration("batch-wait", absl::Milliseconds(50), absl::Milliseconds(1), absl::Minutes(1));
  auto high = args->Int("high-water", 100000, 1, int64_t{1} << 40);
  auto low = args->Int("low-water", -1, 0, int64_t{1} << 40);
  auto kconf = KafkaConfig(*args);
  for (const absl::Status& st : {batch.status(), wait.status(), high.status(), low.status(),
                                 kconf.status(), SetLogLevelFlag(*args)}) {
    if (!st.ok()) return Fail(st);
  }
  if (*low > *high) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--low-water (", *low, ") must not be above --high-water (", *high,
                     "): the bridge pauses at the high-water backlog and resumes below the "
                     "low-water one")));
  }
  o.batch_max = static_cast<int>(*batch);
  o.batch_wait = *wait;
  o.high_water = *high;
  o.low_water = *low >= 0 ? *low : *high / 2;
  o.kafka_config = *kconf;
  auto pg = ConnectionOptions(*args);
  if (!pg.ok()) return Fail(pg.status());
  pg->application_name = "partq bridge ingest";
  if (auto store = ConnectChecked(*pg); !store.ok()) return Fail(store.status());
  auto registry = std::make_shared<prometheus::Registry>();
  BridgeMetrics metrics(*registry);
  InstallStopSignals();  // first: stop (publish: drain); second: exit at once
  BridgeIngest bridge(PgBridgeStoreFactory(*pg), o, &metrics);
  // Served before the bridge joins its consumer group: a bad --metrics-addr
  // then stops nothing that started (and /readyz says not ready until then).
  auto http =
      ServeMetrics(*args, registry, [&bridge](std::string* why) { return bridge.Ready(why); });
  if (!http.ok()) return Fail(http.status());
  if (absl::Status st = bridge.Start(); !st.ok()) return Fail(st);
  const bool quiet = args->Has("quiet");
  if (!quiet) {
    LogLine(LogLevel::kInfo,
            absl::StrCat("bridge ingesting ", o.topic, " into queue \"", o.queue, "\""));
  }
  while (StopSignals() == 0 && bridge.status().ok()) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  // Stop finishes the batch in hand and leaves the consumer group; a
  // database call or a group leave that hangs (brokers gone) is cut short.
  StopWithin([&] { bridge.Stop(); }, kIngestStopLimit, "bridge still stopping",
             "(an uncommitted batch is read again from the stored offsets on the next start)");
  const BridgeIngestStats s = bridge.stats();
  if (!quiet) {
    LogLine(LogLevel::kInfo, absl::StrCat("bridge stopped: ", s.messages, " messages in ",
                                          s.batches, " transactions"));
  }
  if (!bridge.status().ok()) return Fail(bridge.status());
  return 0;
}

int Publish(const std::vector<std::string>& argv) {
  auto args =
      Args::Parse(argv,
                  With(ConnectionFlags(), {"brokers", "batch", "drain-timeout", "metrics-addr",
                                           "kafka-config", "kafka-config-file", "log-level"}),
                  {"quiet"});
  if (!args.ok()) return Fail(args.status());
  const std::string cmd = "bridge publish";
  for (const absl::Status& st :
       {RequiredFlag(*args, "brokers", cmd, "HOST:PORT[,HOST:PORT...] (Kafka bootstrap servers)"),
        NoPositional(*args, cmd)}) {
    if (!st.ok()) return Fail(st);
  }
  BridgePublishOptions o;
  o.brokers = args->GetOr("brokers", "");
  auto batch = args->Int("batch", 500, 1, 100000);
  auto drain =
      args->Duration("drain-timeout", absl::Seconds(10), absl::ZeroDuration(), absl::Hours(1));
  auto kconf = KafkaConfig(*args);
  for (const absl::Status& st :
       {batch.status(), drain.status(), kconf.status(), SetLogLevelFlag(*args)}) {
    if (!st.ok()) return Fail(st);
  }
  o.batch = static_cast<int>(*batch);
  o.drain_timeout = *drain;
  o.kafka_config = *kconf;
  auto pg = ConnectionOptions(*args);
  if (!pg.ok()) return Fail(pg.status());
  pg->application_name = "partq bridge publish";
  if (auto store = ConnectChecked(*pg); !store.ok()) return Fail(store.status());
  auto registry = std::make_shared<prometheus::Registry>();
  BridgeMetrics metrics(*registry);
  InstallStopSignals();  // first: stop (publish: drain); second: exit at once
  BridgePublish bridge(PgBridgeStoreFactory(*pg), o, &metrics);
  auto http =
      ServeMetrics(*args, registry, [&bridge](std::string* why) { return bridge.Ready(why); });
  if (!http.ok()) return Fail(http.status());
  if (absl::Status st = bridge.Start(); !st.ok()) return Fail(st);
  const bool quiet = args->Has("quiet");
  if (!quiet) LogLine(LogLevel::kInfo, absl::StrCat("bridge publishing the outbox to ", o.brokers));
  while (StopSignals() == 0) absl::SleepFor(absl::Milliseconds(20));
  // Stop waits for the round in hand at most --drain-timeout; the grace
  // covers a database call or the producer's close that hangs past it.
  StopWithin([&] { bridge.Stop(); }, o.drain_timeout + kStopGrace, "bridge still stopping",
             "(undelivered rows stay in the outbox and go on the next start)");
  const BridgePublishStats s = bridge.stats();
  if (s.left_in_outbox > 0) {
    // Said even with --quiet: the stop did not finish its work.
    LogLine(LogLevel::kWarning,
            absl::StrCat("bridge stopped after the ", absl::FormatDuration(o.drain_timeout),
                         " drain timeout with ", s.left_in_outbox,
                         " outbox row(s) not confirmed delivered; they stay in the outbox and "
                         "are sent on the next start (Kafka may get some twice: the idempotent "
                         "producer drops duplicates only within one producer session)"));
    return 1;
  }
  if (!quiet) {
    LogLine(LogLevel::kInfo, absl::StrCat("bridge stopped: ", s.delivered, " rows delivered"));
  }
  return 0;
}

}  // namespace

int CmdBridge(const std::vector<std::string>& argv) {
  if (argv.empty()) return Usage("usage: partq bridge ingest|publish [options]");
  const std::vector<std::string> rest(argv.begin() + 1, argv.end());
  if (argv[0] == "ingest") return Ingest(rest);
  if (argv[0] == "publish") return Publish(rest);
  return Usage("usage: partq bridge ingest|publish [options]");
}

}  // namespace partq::cli
