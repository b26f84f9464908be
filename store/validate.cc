// Names and settings that reach SQL, checked before any store sees them.
#include "store/validate.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/utf8.h"

namespace partq {

namespace {

// 1..max_len characters of [A-Za-z0-9._-] (queue and Kafka topic names);
// `bad(why)` makes the error.
template <typename Bad>
absl::Status CheckNameChars(absl::string_view name, size_t max_len, const Bad& bad) {
  if (name.empty()) return bad("it is empty");
  if (name.size() > max_len) return bad(absl::StrCat("it is ", name.size(), " characters long"));
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') {
      return bad(absl::StrCat("'", absl::CHexEscape(absl::string_view(&c, 1)), "' is not allowed"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateQueueName(absl::string_view name) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid queue name ", Quoted(name), ": ", why,
                     " (use 1-63 letters, digits, '_', '.' or '-', starting with a letter "
                     "or digit)"));
  };
  if (absl::Status st = CheckNameChars(name, 63, bad); !st.ok()) return st;
  if (!absl::ascii_isalnum(static_cast<unsigned char>(name[0]))) {
    return bad("it must start with a letter or digit");
  }
  return absl::OkStatus();
}

absl::Status ValidateSchemaName(absl::string_view name) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid schema name ", Quoted(name), ": ", why,
                     " (use 1-63 lowercase letters, digits or '_', not starting with a digit)"));
  };
  if (name.empty()) return bad("it is empty");
  if (name.size() > 63) return bad(absl::StrCat("it is ", name.size(), " characters long"));
  if (absl::ascii_isdigit(static_cast<unsigned char>(name[0]))) {
    return bad("it must not start with a digit");
  }
  for (char c : name) {
    if (!(absl::ascii_islower(static_cast<unsigned char>(c)) ||
          absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '_')) {
      return bad(absl::StrCat("'", absl::CHexEscape(absl::string_view(&c, 1)), "' is not allowed"));
    }
  }
  // PostgreSQL reserves the pg_ prefix for system schemas (pg_catalog,
  // pg_toast, ...); information_schema is its other one, which a user can
  // create tables in.
  if (absl::StartsWith(name, "pg_")) return bad("the pg_ prefix is reserved by PostgreSQL");
  if (name == "information_schema") return bad("it is one of PostgreSQL's system schemas");
  return absl::OkStatus();
}

absl::Status ValidateTopicName(absl::string_view name) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid Kafka topic name ", Quoted(name), ": ", why,
                     " (use 1-249 letters, digits, '.', '_' or '-'; not \".\" or \"..\")"));
  };
  if (absl::Status st = CheckNameChars(name, 249, bad); !st.ok()) return st;
  if (name == "." || name == "..") return bad("Kafka reserves it");
  return absl::OkStatus();
}

absl::Status ValidateQueueConfig(const QueueConfig& config) {
  if (absl::Status st = ValidateQueueName(config.name); !st.ok()) return st;
  if (config.parts < 1 || config.parts > 4096) {
    return absl::InvalidArgumentError(absl::StrCat("queue \"", config.name, "\": parts is ",
                                                   config.parts, "; it must be 1..4096"));
  }
  if (config.max_attempts < 1 || config.max_attempts > 1000) {
    return absl::InvalidArgumentError(absl::StrCat("queue \"", config.name, "\": max attempts is ",
                                                   config.max_attempts, "; it must be 1..1000"));
  }
  if (config.session_ttl < absl::Milliseconds(100) || config.session_ttl > absl::Hours(24)) {
    return absl::InvalidArgumentError(absl::StrCat("queue \"", config.name, "\": session TTL is ",
                                                   absl::FormatDuration(config.session_ttl),
                                                   "; it must be 100ms..24h"));
  }
  if (config.dlq_topic) {
    if (absl::Status st = ValidateTopicName(*config.dlq_topic); !st.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("queue \"", config.name, "\": dead-letter topic: ", st.message()));
    }
  }
  if (absl::Status st = ValidateRate(config.rate); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("queue \"", config.name, "\": ", st.message()));
  }
  if (absl::Status st = ValidateKeyConcurrency(config.key_concurrency); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("queue \"", config.name, "\": ", st.message()));
  }
  if (absl::Status st =
          ValidateKeyConcurrencyFor(config.name, config.ordered, config.key_concurrency);
      !st.ok()) {
    return st;
  }
  if (absl::Status st = ValidateMaxPayload(config.max_payload_bytes); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("queue \"", config.name, "\": ", st.message()));
  }
  return absl::OkStatus();
}

absl::Status ValidateMaxPayload(int64_t bytes) {
  if (bytes >= 1 && bytes <= kMaxMaxPayloadBytes) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("the payload limit must be 1..",
                                                 kMaxMaxPayloadBytes, " bytes (got ", bytes, ")"));
}

absl::Status ValidateKeyText(absl::string_view what, absl::string_view key) {
  if (IsValidUtf8(key)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, " ", Quoted(key), " is not valid UTF-8 (keys are text)"));
}

absl::Status ValidateNewItem(const NewItem& item, int64_t max_payload_bytes) {
  if (static_cast<int64_t>(item.payload.size()) > max_payload_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("payload is ", item.payload.size(),
                                                   " bytes; the limit is ", max_payload_bytes,
                                                   " (--max-payload)"));
  }
  if (item.priority < -32768 || item.priority > 32767) {
    return absl::InvalidArgumentError(
        absl::StrCat("priority ", item.priority, " is out of range -32768..32767"));
  }
  if (item.key && item.key->size() > kMaxKeyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("key is ", item.key->size(), " bytes; the limit is ", kMaxKeyBytes));
  }
  if (item.dedup_key && item.dedup_key->size() > kMaxKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat("dedup key is ", item.dedup_key->size(),
                                                   " bytes; the limit is ", kMaxKeyBytes));
  }
  // Text parameters end at a NUL byte, so such a key would be stored cut
  // short while its part came from the whole key.
  if ((item.key && item.key->find('\0') != std::string::npos) ||
      (item.dedup_key && item.dedup_key->find('\0') != std::string::npos)) {
    return absl::InvalidArgumentError("keys and dedup keys may not contain NUL bytes");
  }
  // Keys are text: the server refuses bytes that are not UTF-8 with a
  // message about an unnamed portal parameter.
  if (absl::Status st = ValidateKeyText("key", item.key.value_or("")); !st.ok()) return st;
  if (absl::Status st = ValidateKeyText("dedup key", item.dedup_key.value_or("")); !st.ok()) {
    return st;
  }
  // As the SQL API's check_dedup_keys() (migration 40): an item enqueued
  // first under a group's end key would be taken for its end item.
  if (item.dedup_key && absl::StartsWith(*item.dedup_key, "partq.")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dedup key \"", absl::CHexEscape(*item.dedup_key),
        "\": dedup keys that start with \"partq.\" are partq's own (a group's end item)"));
  }
  if (item.delay > absl::Hours(24 * 3650)) {
    return absl::InvalidArgumentError(
        absl::StrCat("delay ", absl::FormatDuration(item.delay), " is longer than 10 years"));
  }
  if (item.group) {
    if (absl::Status st = ValidateGroupId(*item.group); !st.ok()) return st;
    if (item.delay > absl::ZeroDuration()) {
      return absl::InvalidArgumentError(
          absl::StrCat("an item of a group runs when its group starts; it cannot have a delay "
                       "(group ",
                       Quoted(*item.group), ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateRate(std::optional<double> per_second) {
  if (per_second && !(*per_second > 0 && *per_second <= 1e6)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a rate must be more than 0 and at most 1000000 items a second, not ", *per_second));
  }
  return absl::OkStatus();
}

absl::Status ValidateGrowth(absl::string_view queue, int current, int parts) {
  if (parts < 1 || parts > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("queue \"", queue, "\": parts is ", parts, "; it must be 1..4096"));
  }
  // The examples name the counts it can grow to, so the operator need not
  // work them out.
  auto multiples = [&] {
    std::vector<std::string> m;
    for (int k = 2; m.size() < 3 && current * k <= 4096; ++k)
      m.push_back(absl::StrCat(current * k));
    return m.empty() ? std::string("none: 4096 is the most")
                     : absl::StrCat(absl::StrJoin(m, ", "), ", ...");
  };
  if (parts < current) {
    return absl::InvalidArgumentError(absl::StrCat(
        "queue \"", queue, "\" has ", current, " parts and cannot shrink to ", parts,
        ": a queue's parts only grow, to a multiple of ", current, " (", multiples(), ")"));
  }
  if (parts % current != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("queue \"", queue, "\" has ", current, " parts: ", parts,
                     " is not a multiple of ", current, "; parts grow to a multiple (", multiples(),
                     "), so each part splits and every key keeps its order"));
  }
  return absl::OkStatus();
}

absl::StatusOr<FairBy> ParseFairBy(absl::string_view text) {
  if (text == "key") return FairBy::kKey;
  if (text == "none") return FairBy::kNone;
  return absl::InvalidArgumentError(
      absl::StrCat("fair share can be by \"key\" or \"none\", not ", Quoted(text)));
}

const char* FairByName(FairBy fair_by) { return fair_by == FairBy::kKey ? "key" : "none"; }

absl::Status ValidateKeyConcurrency(int n) {
  if (n < 0 || n > kMaxKeyConcurrency) {
    return absl::InvalidArgumentError(
        absl::StrCat("key concurrency must be 1..", kMaxKeyConcurrency, " (or none), not ", n));
  }
  return absl::OkStatus();
}

absl::Status ValidateKeyConcurrencyFor(absl::string_view queue, bool ordered, int n) {
  if (!ordered || n == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("queue \"", queue,
                   "\" is ordered: it already runs one item of a key at a time, in enqueue "
                   "order, so a key concurrency of ",
                   n,
                   " would not apply; key concurrency is for a queue that "
                   "is not ordered"));
}

absl::StatusOr<int> ParseKeyConcurrency(absl::string_view text) {
  if (text == "none") return 0;
  int n = 0;
  // 0 is refused rather than read as none: a bound of 0 would run nothing.
  if (!absl::SimpleAtoi(text, &n) || n < 1 || n > kMaxKeyConcurrency) {
    return absl::InvalidArgumentError(absl::StrCat("key concurrency must be a number 1..",
                                                   kMaxKeyConcurrency, " or \"none\", not ",
                                                   Quoted(text)));
  }
  return n;
}

std::string KeyConcurrencyText(int n) { return n > 0 ? absl::StrCat(n) : "none"; }

absl::Status ValidateItemIds(const std::vector<int64_t>& ids) {
  for (int64_t id : ids) {
    if (id < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("item id ", id, " is not an item id (ids start at 1)"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateGroupId(absl::string_view id) {
  if (id.empty() || id.size() > kMaxGroupIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat("invalid group id ", Quoted(id), " (use 1-",
                                                   kMaxGroupIdBytes, " bytes of text)"));
  }
  if (id.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError("a group id may not contain NUL bytes");
  }
  return ValidateKeyText("group id", id);
}

absl::StatusOr<Timing> ValidateSchedule(const ScheduleSpec& spec, int64_t max_payload_bytes) {
  auto bad_name = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid schedule name ", Quoted(spec.name), ": ", why,
                     " (use 1-63 letters, digits, '_', '.' or '-', starting with a letter "
                     "or digit)"));
  };
  if (absl::Status st = CheckNameChars(spec.name, 63, bad_name); !st.ok()) return st;
  if (!absl::ascii_isalnum(static_cast<unsigned char>(spec.name[0]))) {
    return bad_name("it must start with a letter or digit");
  }
  if (absl::Status st = ValidateQueueName(spec.queue); !st.ok()) return st;
  const bool every = spec.every != absl::ZeroDuration();
  if (every == !spec.cron.empty()) {
    return absl::InvalidArgumentError(
        every ? "give either --every or --cron, not both"
              : "a schedule needs --every DURATION or --cron 'MIN HOUR DOM MON DOW'");
  }
  absl::StatusOr<Timing> timing;
  if (every) {
    if (!spec.time_zone.empty()) {
      return absl::InvalidArgumentError(
          "--tz applies to --cron only (an --every interval ticks on multiples of it since the "
          "Unix epoch, the same in every time zone)");
    }
    timing = Timing::Every(spec.every);
  } else {
    timing = Timing::Cron(spec.cron, spec.time_zone);
  }
  if (!timing.ok()) return timing.status();
  if (spec.catch_up &&
      (*spec.catch_up < absl::ZeroDuration() || *spec.catch_up > absl::Hours(366 * 24))) {
    return absl::InvalidArgumentError(
        absl::StrCat("--catch-up ", absl::FormatDuration(*spec.catch_up),
                     ": the window must be from 0s (fire only the latest missed tick) to 366 "
                     "days"));
  }
  // Every tick's item has a dedup key of the same length.
  if (absl::Status st = ValidateNewItem(ScheduledItem(spec, absl::UnixEpoch()), max_payload_bytes);
      !st.ok()) {
    return st;
  }
  return timing;
}

absl::Duration CatchUpOf(const ScheduleSpec& spec, const Timing& timing, absl::Duration session_ttl,
                         absl::Time due) {
  if (spec.catch_up) return *spec.catch_up;
  const absl::Duration period = timing.PeriodAt(due);
  return DefaultCatchUp(session_ttl, session_ttl / 3,
                        period == absl::InfiniteDuration() ? absl::ZeroDuration() : period);
}

std::string ScheduleDedupKey(absl::string_view name, absl::Time tick) {
  return absl::StrCat("schedule:", name, ":", FormatTick(tick));
}

NewItem ScheduledItem(const ScheduleSpec& spec, absl::Time tick) {
  NewItem item;
  item.payload = spec.payload;
  item.key = spec.key;
  item.priority = spec.priority;
  item.dedup_key = ScheduleDedupKey(spec.name, tick);
  return item;
}

}  // namespace partq
