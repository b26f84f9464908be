// partq — a partitioned work queue and consumer-group coordinator on
// PostgreSQL. Thin commands over the libraries; see `partq help`.
#include <cstdio>
#include <string>
#include <vector>

#include "cli/common.h"

namespace {

constexpr char kHelp[] = R"(partq — a partitioned work queue on PostgreSQL

Usage: partq COMMAND [ARGS] [--dsn DSN] [--schema NAME]

Commands:
  migrate                                  create/upgrade the schema (idempotent)
  queue create NAME --parts N [--assignment lexical|sticky] [--ordered]
               [--max-attempts N] [--session-ttl 10s] [--dlq-topic TOPIC]
  queue set NAME --dlq-topic TOPIC|''      dead-lettered items go to TOPIC ('' for none)
  queue list [--json]
  queue delete NAME
  enqueue QUEUE [--key K] [--priority N] [--delay 10s] [--dedup-key K] [PAYLOAD]
  enqueue QUEUE --stdin [--chunk N]        one payload per line, via COPY
  wait QUEUE ITEM|--dedup-key K [--timeout 30s]
  worker QUEUE [--concurrency N] [--batch N] [--handler SPEC] [--instance-id ID]
               [--metrics-addr HOST:PORT] [--poll-only] [--drain-timeout 10s]
  status QUEUE [--json]
  bench [--json] [...]                     throughput/latency with baselines
  demo [--keep]                            the whole story on an embedded database
  bridge ingest --brokers B --topic T --queue Q [--group G] [--instance-id ID]
                [--batch N] [--high-water N] [--low-water N] [--kafka-config k=v,...]
                [--metrics-addr HOST:PORT]   Kafka -> queue, exactly once
  bridge publish --brokers B [--batch N] [--kafka-config k=v,...] [--metrics-addr HOST:PORT]
                                           the outbox -> Kafka (idempotent producer)

Connection: --dsn or $PARTQ_DSN, else libpq's PGHOST/PGPORT/PGUSER/... variables.
Schema: --schema or $PARTQ_SCHEMA (default "partq").
Handlers (chain with commas): noop, sleep:MS, fail:RATE, record:TABLE, crash:PAYLOAD,
  publish:TOPIC.
)";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fputs(kHelp, stderr);
    return 2;
  }
  const std::string cmd = argv[1];
  const std::vector<std::string> rest(argv + 2, argv + argc);
  using namespace partq::cli;
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    fputs(kHelp, stdout);
    return 0;
  }
  if (cmd == "version" || cmd == "--version") {
    puts("partq 0.1.0");
    return 0;
  }
  if (cmd == "migrate") return CmdMigrate(rest);
  if (cmd == "queue") return CmdQueue(rest);
  if (cmd == "enqueue") return CmdEnqueue(rest);
  if (cmd == "wait") return CmdWait(rest);
  if (cmd == "worker") return CmdWorker(rest);
  if (cmd == "status") return CmdStatus(rest);
  if (cmd == "demo") return CmdDemo(rest);
  if (cmd == "bench") return CmdBench(rest);
  if (cmd == "bridge") return CmdBridge(rest);
  return Usage("unknown command \"" + cmd + "\"");
}
