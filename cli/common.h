// Shared pieces of the `partq` commands: connection flags, error reporting.
#ifndef PARTQ_CLI_COMMON_H_
#define PARTQ_CLI_COMMON_H_

#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "cli/args.h"
#include "pg/pg_store.h"
#include "store/store.h"

namespace partq::cli {

// Flags every command that talks to the database accepts.
inline const std::set<std::string>& ConnectionFlags() {
  static const std::set<std::string> flags = {"dsn", "schema", "max-payload", "pool-mode"};
  return flags;
}
std::set<std::string> With(std::set<std::string> a, const std::set<std::string>& b);

// --dsn, else $PARTQ_DSN, else libpq's PG* variables; --schema, else
// $PARTQ_SCHEMA, else "partq"; --pool-mode, else $PARTQ_POOL_MODE, else none
// (`transaction` sets PgOptions::transaction_pooler).
absl::StatusOr<PgOptions> ConnectionOptions(const Args& args);
absl::StatusOr<std::unique_ptr<Store>> Connect(const Args& args);
// Connect, then Store::CheckSchema: a missing, older or newer schema is
// refused before the command reads or writes anything. Every command but
// `migrate` connects this way.
absl::StatusOr<std::unique_ptr<Store>> ConnectChecked(const PgOptions& options);
absl::StatusOr<std::unique_ptr<Store>> ConnectChecked(const Args& args);

// Prints "partq: error: ..." and returns the exit code for `st` (2 for usage
// errors, 1 otherwise).
// --log-level debug|info|warning|error|off, if given; InvalidArgument otherwise.
absl::Status SetLogLevelFlag(const Args& args);

int Fail(const absl::Status& st);
// Fail(st), with `note` after its message when the role was refused
// (PermissionDenied): who may run the command, which the server's
// "permission denied for table ..." does not say.
int FailNoting(const absl::Status& st, absl::string_view note);
// Fail(st) for `partq COMMAND` that reads partq's tables (status, queue
// list, dead list; worker, with `grant` "worker"): a role refused one
// ("permission denied for table queues", a producer's or an operator's) is
// told who may run it: the schema's owner, or a role granted `grant` on
// `queue` ("Q" when none).
int FailReadingTables(const absl::Status& st, absl::string_view command,
                      absl::string_view queue = "Q", absl::string_view grant = "viewer");

// Prints JSON text (`json.dump(2)`) and a newline on stdout, with the
// characters that would change how a terminal shows it (bidi overrides, C1
// controls: IsInvisibleControl) as \uXXXX escapes: the same JSON.
void PrintJson(const std::string& dump);
int Usage(const std::string& message);

// `word` as one word of a POSIX shell command line, for the commands partq
// prints to run next: as it is when it is made of letters, digits and
// @%+=:,./_- only; else in single quotes (a ' inside as '\''); with control
// bytes (a newline, an escape) as $'...' with \xNN, which bash, zsh and ksh
// read back byte for byte.
std::string ShellQuote(absl::string_view word);
// Checks the positional arguments after the first `skip` (the subcommand)
// against `names` (e.g. {"QUEUE"}): a usage error naming the missing one or
// the extra ones, with `usage`; nullopt when they fit.
std::optional<int> WrongPositionals(const std::vector<std::string>& positional, size_t skip,
                                    const std::vector<std::string>& names,
                                    const std::string& usage);

// How long past its --drain-timeout a stopping worker or bridge waits for its
// threads: enough to leave the group and close connections.
inline constexpr absl::Duration kStopGrace = absl::Seconds(3);
// How long a stopping `bridge ingest` (no drain timeout: it finishes the
// batch in hand) waits for its threads.
inline constexpr absl::Duration kIngestStopLimit = absl::Seconds(10);
// Runs `stop` on a thread of its own and waits for it at most `limit`. Past
// that it prints "partq: WHAT 13s after the stop began; exiting CONSEQUENCE"
// and exits the process with status 1: threads still running (a handler that
// sleeps, a hung call) cannot be joined, and the database rolls back what
// their connections had open.
void StopWithin(const std::function<void()>& stop, absl::Duration limit, const std::string& what,
                const std::string& consequence);

// SIGTERM and SIGINT: the first is counted (StopSignals() > 0: stop
// gracefully), a second exits at once with status 130.
void InstallStopSignals();
int StopSignals();

// Writes x's over every password in the value of each --dsn (`--dsn V` and
// `--dsn=V`) in argv, in place (MaskDsnPasswords), and over the values of
// secret properties (IsSecretKafkaProperty) in each --kafka-config, and over
// the password of every URL's userinfo and the values of its query string in
// any argument (an http: handler's "http://svc:PASSWORD@host/h?token=T"):
// the command line that `ps` and
// /proc/PID/cmdline show. Call it once the
// arguments are copied. A secret is visible from exec until this runs;
// PARTQ_DSN, PGPASSWORD or a PGPASSFILE, and --kafka-config-file or
// PARTQ_KAFKA_SASL_PASSWORD, keep it out of the command line altogether.
void HidePasswordsInArgv(int argc, char** argv);

// The running binary's path (/proc/self/exe), or "" where it cannot be read.
std::string SelfPath();
// `name` in the running binary's directory (`partq-bench` beside `partq`), or
// `name` alone where that directory cannot be read (then found on PATH).
std::string SiblingPath(const std::string& name);

// Help text (help.cc): `partq help`; `partq COMMAND --help` (nullopt for an
// unknown command); the bench's options. WantsHelp: --help or -h among the
// arguments, before a "--" (after it they are positional: a payload).
std::string MainHelp();
std::optional<std::string> CommandHelp(const std::string& command);
const char* BenchUsage();
bool WantsHelp(const std::vector<std::string>& argv);

int CmdMigrate(const std::vector<std::string>& argv);
int CmdQueue(const std::vector<std::string>& argv);
int CmdEnqueue(const std::vector<std::string>& argv);
int CmdWait(const std::vector<std::string>& argv);
int CmdItem(const std::vector<std::string>& argv);
int CmdCancel(const std::vector<std::string>& argv);
int CmdWorker(const std::vector<std::string>& argv);
int CmdStatus(const std::vector<std::string>& argv);
int CmdDead(const std::vector<std::string>& argv);
int CmdPrune(const std::vector<std::string>& argv);
int CmdGrant(const std::vector<std::string>& argv);
int CmdRevoke(const std::vector<std::string>& argv);
int CmdGrants(const std::vector<std::string>& argv);
int CmdGroup(const std::vector<std::string>& argv);
int CmdSchedule(const std::vector<std::string>& argv);
int CmdDemo(const std::vector<std::string>& argv);
int CmdBench(const std::vector<std::string>& argv);
// `partq bench-peer exec|http`: a handler peer of `partq bench` (not in the help).
int CmdBenchPeer(const std::vector<std::string>& argv);
// `partq bench` and `partq bench-peer`: both are commands of the `partq-bench`
// binary (bench/bench_main.cc; the demo's build leaves it out), which this runs
// in the place of the current process from beside `partq`; a clear error where
// it is not there.
int ExecBench(const std::string& command, const std::vector<std::string>& argv);
int CmdBridge(const std::vector<std::string>& argv);
int CmdConsole(const std::vector<std::string>& argv);

}  // namespace partq::cli

#endif  // PARTQ_CLI_COMMON_H_
