// `partq group`: queue groups (store.h, "Queue groups") — create with end
// work, start, status, list.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/utf8.h"
#include "cli/common.h"
#include "store/validate.h"

namespace partq::cli {
namespace {

constexpr char kSubcommands[] =
    "create QUEUE ID [--end-queue Q [--end-payload JSON]], start QUEUE ID, status QUEUE ID "
    "[--json], cancel QUEUE ID [--no-end], list QUEUE [--all] [--limit N] [--json]";

nlohmann::json TimeJson(const std::optional<absl::Time>& t) {
  if (!t) return nullptr;
  return absl::FormatTime(absl::RFC3339_full, *t, absl::UTCTimeZone());
}

std::string TimeText(absl::Time t) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", t, absl::UTCTimeZone());
}

// "started", "held" (not started), "ended", as `group list` shows a group.
const char* State(const GroupStatus& g) {
  return g.ended_at ? "ended" : g.started_at ? "started" : "held";
}

nlohmann::json GroupJson(const GroupStatus& g, bool with_live_counts) {
  nlohmann::json j = {{"id", g.id},
                      {"state", State(g)},
                      {"pending", g.pending},
                      {"done", g.done},
                      {"dead", g.dead},
                      {"cancelled", g.cancelled},
                      {"created_at", TimeJson(g.created_at)},
                      {"started_at", TimeJson(g.started_at)},
                      {"ended_at", TimeJson(g.ended_at)},
                      {"end_queue", g.end_queue ? nlohmann::json(*g.end_queue) : nullptr},
                      {"end_item", g.end_item ? nlohmann::json(*g.end_item) : nullptr},
                      {"end_error", g.end_error ? nlohmann::json(*g.end_error) : nullptr}};
  if (with_live_counts) {
    j["held"] = g.held;
    j["in_flight"] = g.in_flight;
  }
  if (g.end_payload) {
    // Stored as JSON (jsonb), so it parses; shown as the value it is.
    j["end_payload"] = nlohmann::json::parse(*g.end_payload, nullptr, /*allow_exceptions=*/false);
  } else {
    j["end_payload"] = nullptr;
  }
  return j;
}

void PrintStatus(const std::string& queue, const GroupStatus& g) {
  printf("group \"%s\" of queue \"%s\": %s\n", PrintableUtf8(g.id).c_str(), queue.c_str(),
         g.ended_at     ? absl::StrCat("ended ", TimeText(*g.ended_at)).c_str()
         : g.started_at ? absl::StrCat("started ", TimeText(*g.started_at)).c_str()
                        : absl::StrCat("not started: its items are held until `partq group start ",
                                       ShellQuote(queue), " ", ShellQuote(g.id), "`")
                              .c_str());
  printf("  pending %lld (held %lld, in flight %lld), done %lld, dead %lld, cancelled %lld\n",
         static_cast<long long>(g.pending), static_cast<long long>(g.held),
         static_cast<long long>(g.in_flight), static_cast<long long>(g.done),
         static_cast<long long>(g.dead), static_cast<long long>(g.cancelled));
  if (!g.end_queue) {
    printf("  no end work\n");
  } else if (g.end_item) {
    printf("  end work: item %lld in queue \"%s\"\n", static_cast<long long>(*g.end_item),
           g.end_queue->c_str());
  } else if (g.end_error) {
    printf("  end work not done: %s\n", PrintableUtf8(*g.end_error).c_str());
  } else {
    printf("  end work: an item into queue \"%s\" when the group ends%s%s\n", g.end_queue->c_str(),
           g.end_payload ? ", with payload " : "",
           g.end_payload ? PrintableUtf8(*g.end_payload).c_str() : "");
  }
}

// `group list QUEUE`.
int GroupList(const Args& args) {
  const auto& pos = args.positional();
  constexpr char kUsage[] = "usage: partq group list QUEUE [--all] [--limit 50] [--json]";
  if (auto u = WrongPositionals(pos, 1, {"QUEUE"}, kUsage)) return *u;
  auto limit = args.Int("limit", 50, 1, 100000);
  if (!limit.ok()) return Fail(limit.status());
  if (absl::Status st = ValidateQueueName(pos[1]); !st.ok()) return Fail(st);
  auto store = ConnectChecked(args);
  if (!store.ok()) return Fail(store.status());
  auto groups = (*store)->ListGroups(pos[1], args.Has("all"), static_cast<int>(*limit));
  if (!groups.ok()) return Fail(groups.status());
  if (args.Has("json")) {
    nlohmann::json out = nlohmann::json::array();
    for (const GroupStatus& g : *groups) out.push_back(GroupJson(g, /*with_live_counts=*/false));
    PrintJson(out.dump(2));
    return 0;
  }
  if (groups->empty()) {
    printf("no %sgroups in %s\n", args.Has("all") ? "" : "open ", pos[1].c_str());
    return 0;
  }
  printf("%-32s %-8s %10s %10s %8s %9s  %s\n", "GROUP", "STATE", "PENDING", "DONE", "DEAD",
         "CANCELLED", "CREATED (UTC)");
  for (const GroupStatus& g : *groups) {
    printf("%-32s %-8s %10lld %10lld %8lld %9lld  %s\n", PrintableUtf8(g.id).c_str(), State(g),
           static_cast<long long>(g.pending), static_cast<long long>(g.done),
           static_cast<long long>(g.dead), static_cast<long long>(g.cancelled),
           absl::FormatTime("%Y-%m-%d %H:%M:%S", g.created_at, absl::UTCTimeZone()).c_str());
  }
  return 0;
}

}  // namespace

int CmdGroup(const std::vector<std::string>& argv) {
  auto args = Args::Parse(argv, With(ConnectionFlags(), {"end-queue", "end-payload", "limit"}),
                          {"json", "all", "no-end", "create"});
  if (!args.ok()) return Fail(args.status());
  const auto& pos = args->positional();
  const std::string sub = pos.empty() ? "" : pos[0];
  if (sub == "list") return GroupList(*args);
  if (sub == "create" || sub == "start" || sub == "status" || sub == "cancel") {
    const std::string usage =
        sub == "create" ? "usage: partq group create QUEUE ID [--end-queue Q [--end-payload JSON]]"
                        : absl::StrCat("usage: partq group ", sub, " QUEUE ID",
                                       sub == "status"   ? " [--json]"
                                       : sub == "cancel" ? " [--no-end]"
                                                         : " [--create] [--json]");
    if (args->Has("no-end") && sub != "cancel") {
      return Usage(absl::StrCat("--no-end goes with group cancel (", usage, ")"));
    }
    if (args->Has("create") && sub != "start") {
      return Usage(absl::StrCat("--create goes with group start (", usage, ")"));
    }
    if (auto u = WrongPositionals(pos, 1, {"QUEUE", "ID"}, usage)) return *u;
    const std::string& queue = pos[1];
    const std::string& id = pos[2];
    if (absl::Status st = ValidateQueueName(queue); !st.ok()) return Fail(st);
    if (absl::Status st = ValidateGroupId(id); !st.ok()) return Fail(st);
    if (sub != "create" && (args->Has("end-queue") || args->Has("end-payload"))) {
      return Usage(
          absl::StrCat("--end-queue and --end-payload go with group create (", usage, ")"));
    }
    GroupSpec spec;
    spec.id = id;
    if (sub == "create") {
      spec.end_queue = args->Get("end-queue");
      spec.end_payload = args->Get("end-payload");
      if (spec.end_queue) {
        if (absl::Status st = ValidateQueueName(*spec.end_queue); !st.ok()) return Fail(st);
      }
      if (spec.end_payload) {
        if (!spec.end_queue) {
          return Usage(absl::StrCat("--end-payload needs --end-queue (", usage, ")"));
        }
        if (!nlohmann::json::accept(*spec.end_payload)) {
          return Fail(absl::InvalidArgumentError(
              "--end-payload must be JSON (it goes into the end item's JSON as \"payload\"); "
              "quote a string: --end-payload '\"text\"'"));
        }
      }
    }
    auto store = ConnectChecked(*args);
    if (!store.ok()) return Fail(store.status());
    if (sub == "create") {
      if (absl::Status st = (*store)->CreateGroup(queue, spec); !st.ok()) return Fail(st);
      if (spec.end_queue) {
        printf("group \"%s\" of queue \"%s\": when it ends, an item goes into \"%s\"\n",
               PrintableUtf8(id).c_str(), queue.c_str(), spec.end_queue->c_str());
      } else {
        printf("group \"%s\" of queue \"%s\" created (no end work)\n", PrintableUtf8(id).c_str(),
               queue.c_str());
      }
      printf("its items are held until `partq group start %s %s`\n", ShellQuote(queue).c_str(),
             ShellQuote(id).c_str());
      return 0;
    }
    if (sub == "start" && !args->Has("create")) {
      // StartGroup creates a group nothing made (and it ends at once, being
      // empty, so its items are refused after): a typo must not do that.
      // (The queue first, so that an unknown one is named as such; a producer
      // may not read it, and group_status() below names it.)
      if (absl::Status st = (*store)->GetQueue(queue).status();
          !st.ok() && !absl::IsPermissionDenied(st)) {
        return Fail(st);
      }
      absl::Status known = (*store)->GetGroup(queue, id).status();
      if (absl::IsNotFound(known)) {
        return Fail(absl::NotFoundError(absl::StrCat(
            "queue \"", queue, "\" has no group \"", PrintableUtf8(id),
            "\": nothing started. Items with --group ", ShellQuote(id), " or `partq group create ",
            ShellQuote(queue), " ", ShellQuote(id),
            "` make it; --create starts it empty (it ends at once, and takes no items after)")));
      }
      if (!known.ok()) return Fail(known);
    }
    absl::StatusOr<GroupStatus> g =
        sub == "start"    ? (*store)->StartGroup(queue, id)
        : sub == "cancel" ? (*store)->CancelGroup(queue, id, !args->Has("no-end"))
                          : (*store)->GetGroup(queue, id);
    if (!g.ok()) return Fail(g.status());
    if (args->Has("json")) {
      PrintJson(GroupJson(*g, /*with_live_counts=*/true).dump(2));
      return 0;
    }
    PrintStatus(queue, *g);
    return 0;
  }
  if (!sub.empty()) {
    return Usage(absl::StrCat("unknown group subcommand ", Quoted(sub), ": ", kSubcommands));
  }
  return Usage(absl::StrCat("group needs a subcommand: ", kSubcommands));
}

}  // namespace partq::cli
