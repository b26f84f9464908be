// `partq grant`, `partq revoke` and `partq grants`: roles per queue
// (migration 29; the Kafka topics of confined workers, migration 34;
// docs/guide/operations-and-roles.md, "Roles per queue"). Run as the schema's owner: the grants are
// rows of its table `grants`, which the SQL API's authorize() reads.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "base/utf8.h"
#include "cli/args.h"
#include "cli/common.h"
#include "nlohmann/json.hpp"
#include "pg/pg_store.h"

namespace partq::cli {
namespace {

// "a producer", "an operator".
const char* Article(const std::string& kind) { return kind == "operator" ? "an" : "a"; }

// Fail(st), saying whose the command is to run when the role was refused
// a table or the schema: a producer's `partq grant` ended at "permission
// denied for table topic_grants".
int FailAsNotTheOwner(const absl::Status& st, const char* command) {
  return FailNoting(st, absl::StrCat("partq ", command,
                                     " runs as the schema's owner, the role that made it with "
                                     "partq migrate, or a member of it"));
}

// `partq grant|revoke KIND ROLE --queue Q[,Q...]` (or `publish ROLE --topic
// T[,T...]`), parsed into `args`.
int GrantOrRevoke(const Args& args, bool grant) {
  const std::string usage =
      absl::StrCat("usage: partq ", grant ? "grant" : "revoke",
                   " producer|operator|viewer|worker ROLE --queue Q[,Q...], or publish ROLE "
                   "--topic T[,T...]");
  if (auto u = WrongPositionals(args.positional(), 0, {"KIND", "ROLE"}, usage)) return *u;
  const std::string& kind = args.positional()[0];
  const std::string& role = args.positional()[1];
  // A publish grant names Kafka topics, every other kind queues.
  const bool publish = kind == "publish";
  const std::string flag = publish ? "topic" : "queue";
  if (args.Has(publish ? "queue" : "topic")) {
    return Usage(absl::StrCat("--", publish ? "queue" : "topic", " does not go with ", kind, " (",
                              usage, ")"));
  }
  if (!args.Has(flag)) {
    return Usage(
        absl::StrCat("--", flag, " is required: the ", flag, "s the grant is for (", usage, ")"));
  }
  // Queues, or topics.
  const std::vector<std::string> names = absl::StrSplit(*args.Get(flag), ',', absl::SkipEmpty());
  if (names.empty()) return Usage(absl::StrCat("--", flag, " names no ", flag, " (", usage, ")"));
  auto o = ConnectionOptions(args);
  if (!o.ok()) return Fail(o.status());
  const std::string what =
      publish ? absl::StrCat("a publisher to Kafka topic", names.size() == 1 ? " " : "s ",
                             absl::StrJoin(names, ", "), " as a worker")
              : absl::StrCat(Article(kind), " ", kind, " of ", absl::StrJoin(names, ", "));
  if (grant) {
    if (absl::Status st = PgGrant(*o, kind, role, names); !st.ok()) {
      return FailAsNotTheOwner(st, "grant");
    }
    printf("role %s is %s in schema \"%s\"\n", Quoted(role).c_str(), what.c_str(),
           o->schema.c_str());
    return 0;
  }
  auto removed = PgRevoke(*o, kind, role, names);
  if (!removed.ok()) return FailAsNotTheOwner(removed.status(), "revoke");
  if (*removed == 0) {
    // As SQL's REVOKE of a privilege not held: nothing to do, not an error.
    printf("role %s was not %s: nothing to revoke\n", Quoted(role).c_str(), what.c_str());
    return 0;
  }
  printf("role %s is no longer %s (%d grant%s removed)\n", Quoted(role).c_str(), what.c_str(),
         *removed, *removed == 1 ? "" : "s");
  return 0;
}

}  // namespace

int CmdGrant(const std::vector<std::string>& argv) {
  auto args = Args::Parse(argv, With(ConnectionFlags(), {"queue", "topic"}), {});
  if (!args.ok()) return Fail(args.status());
  return GrantOrRevoke(*args, /*grant=*/true);
}

int CmdRevoke(const std::vector<std::string>& argv) {
  auto args = Args::Parse(argv, With(ConnectionFlags(), {"queue", "topic"}), {});
  if (!args.ok()) return Fail(args.status());
  return GrantOrRevoke(*args, /*grant=*/false);
}

int CmdGrants(const std::vector<std::string>& argv) {
  auto args = Args::Parse(argv, With(ConnectionFlags(), {"queue"}), {"json"});
  if (!args.ok()) return Fail(args.status());
  if (auto u =
          WrongPositionals(args->positional(), 0, {}, "usage: partq grants [--queue Q] [--json]")) {
    return *u;
  }
  auto o = ConnectionOptions(*args);
  if (!o.ok()) return Fail(o.status());
  auto all = PgListGrants(*o, args->Get("queue"));
  if (!all.ok()) return FailAsNotTheOwner(all.status(), "grants");
  if (args->Has("json")) {
    nlohmann::json out = nlohmann::json::array();
    for (const QueueGrant& g : *all) {
      out.push_back(
          {{"queue", g.queue.empty() ? nlohmann::json() : nlohmann::json(g.queue)},
           {"topic", g.topic.empty() ? nlohmann::json() : nlohmann::json(g.topic)},
           {"role", g.role},
           {"kind", g.kind},
           {"granted_at", absl::FormatTime(absl::RFC3339_full, g.granted_at, absl::UTCTimeZone())},
           {"role_exists", g.role_exists}});
    }
    PrintJson(out.dump(2));
    return 0;
  }
  if (all->empty()) {
    printf(
        "no grants: only the schema's owner (and roles holding table privileges) use its "
        "queues\n");
    return 0;
  }
  printf("%-24s %-24s %-9s %s\n", "QUEUE", "ROLE", "KIND", "GRANTED");
  for (const QueueGrant& g : *all) {
    const std::string object = g.topic.empty() ? g.queue : absl::StrCat("topic:", g.topic);
    printf("%-24s %-24s %-9s %s%s\n", object.c_str(), Quoted(g.role).c_str(), g.kind.c_str(),
           absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", g.granted_at, absl::UTCTimeZone()).c_str(),
           g.role_exists ? "" : "  (the role no longer exists)");
  }
  return 0;
}

}  // namespace partq::cli
