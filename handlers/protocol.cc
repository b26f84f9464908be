#include "handlers/protocol.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/utf8.h"

namespace partq {
namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

constexpr char kUtf8[] = "utf8";
constexpr char kBase64[] = "base64";

// Puts bytes as text when they are UTF-8, else as base64, with the marker.
void PutBytes(ordered_json& obj, const char* field, const char* encoding_field,
              const std::string& bytes) {
  std::string text;
  const char* encoding = TextOrBase64(bytes, &text);
  obj[field] = std::move(text);
  obj[encoding_field] = encoding;
}

ordered_json OptionalText(const std::optional<std::string>& s) {
  return s ? ordered_json(*s) : ordered_json(nullptr);
}

// Text that came from the handler, made safe to put in an error message: the
// message may end up in a text column (an item's last error), which takes
// neither NUL nor bytes that are not UTF-8.
std::string Quote(absl::string_view s) {
  constexpr size_t kMax = 80;
  std::string out = absl::StrCat("\"", PrintableUtf8(s.substr(0, kMax)), "\"");
  if (s.size() > kMax) out += "...";
  return out;
}

// What the handler sent, for a message about the whole reply: its first
// bytes, escaped, and its size.
constexpr size_t kQuotedReplyBytes = 200;
std::string QuoteReply(absl::string_view reply) {
  if (reply.size() > kQuotedReplyBytes) return Quoted(reply, kQuotedReplyBytes);  // says its size
  return absl::StrCat(Quoted(reply, kQuotedReplyBytes), " (", reply.size(),
                      reply.size() == 1 ? " byte)" : " bytes)");
}

// A violation of the protocol at `path` ("results[2] (item 17).enqueue[0]").
absl::Status Bad(absl::string_view path, absl::string_view what) {
  return absl::InvalidArgumentError(path.empty() ? absl::StrCat("reply: ", what)
                                                 : absl::StrCat("reply: ", path, ": ", what));
}
absl::Status TooMuch(absl::string_view path, absl::string_view what) {
  return absl::ResourceExhaustedError(absl::StrCat("reply: ", path, ": ", what));
}

std::string Join(absl::string_view path, absl::string_view field) {
  return path.empty() ? std::string(field) : absl::StrCat(path, ".", field);
}

// A field that is present and not null (null counts as absent throughout).
const json* Field(const json& obj, const char* name) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

absl::Status WrongType(absl::string_view path, const char* want, const json& got) {
  return Bad(path, absl::StrCat("must be ", want, ", not ", got.type_name()));
}

// Every field of `obj` is one of `allowed`.
absl::Status KnownFields(const json& obj, std::initializer_list<absl::string_view> allowed,
                         absl::string_view path) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (std::find(allowed.begin(), allowed.end(), it.key()) == allowed.end()) {
      return Bad(path, absl::StrCat("unknown field ", Quote(it.key())));
    }
  }
  return absl::OkStatus();
}

absl::Status NoNul(const std::string& s, absl::string_view path) {
  if (s.find('\0') != std::string::npos) return Bad(path, "must not contain U+0000");
  return absl::OkStatus();
}

// A text field: a string without U+0000 (it goes to a text column).
absl::StatusOr<std::optional<std::string>> Text(const json& obj, const char* name,
                                                absl::string_view path, bool required,
                                                bool non_empty = false) {
  const std::string at = Join(path, name);
  const json* f = Field(obj, name);
  if (f == nullptr) {
    if (required) return Bad(path, absl::StrCat("\"", name, "\" is missing"));
    return std::optional<std::string>();
  }
  if (!f->is_string()) return WrongType(at, "a string", *f);
  std::string s = f->get<std::string>();
  if (absl::Status st = NoNul(s, at); !st.ok()) return st;
  if (non_empty && s.empty()) return Bad(at, "must not be empty");
  return std::optional<std::string>(std::move(s));
}

// A bytes field with its encoding marker ("utf8", the default, or "base64").
absl::StatusOr<std::optional<std::string>> Bytes(const json& obj, const char* name,
                                                 const char* encoding_name, absl::string_view path,
                                                 bool required) {
  const std::string at = Join(path, name);
  const json* f = Field(obj, name);
  const json* enc = Field(obj, encoding_name);
  if (f == nullptr) {
    if (required) return Bad(path, absl::StrCat("\"", name, "\" is missing"));
    if (enc != nullptr) {
      return Bad(path, absl::StrCat("\"", encoding_name, "\" without \"", name, "\""));
    }
    return std::optional<std::string>();
  }
  if (!f->is_string()) return WrongType(at, "a string", *f);
  bool base64 = false;
  if (enc != nullptr) {
    const std::string enc_at = Join(path, encoding_name);
    if (!enc->is_string()) return WrongType(enc_at, "a string", *enc);
    const std::string& e = enc->get_ref<const std::string&>();
    if (e == kBase64) {
      base64 = true;
    } else if (e != kUtf8) {
      return Bad(enc_at,
                 absl::StrCat("unknown encoding ", Quote(e), " (use \"utf8\" or \"base64\")"));
    }
  }
  const std::string& s = f->get_ref<const std::string&>();
  if (!base64) return std::optional<std::string>(s);
  // The standard alphabet (RFC 4648 section 4), '=' padding optional; no
  // whitespace, which absl::Base64Unescape would skip.
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = s[i];
    if (!(absl::ascii_isalnum(c) || c == '+' || c == '/' || c == '=')) {
      return Bad(at, absl::StrCat("invalid base64: ", Quote(std::string(1, c)), " at offset ", i));
    }
  }
  std::string out;
  if (!absl::Base64Unescape(s, &out)) return Bad(at, "invalid base64");
  return std::optional<std::string>(std::move(out));
}

// Seconds as a JSON number: finite, 0..max.
absl::StatusOr<std::optional<absl::Duration>> Seconds(const json& obj, const char* name,
                                                      absl::string_view path, absl::Duration max) {
  const std::string at = Join(path, name);
  const json* f = Field(obj, name);
  if (f == nullptr) return std::optional<absl::Duration>();
  if (!f->is_number()) return WrongType(at, "a number of seconds", *f);
  const double s = f->get<double>();
  if (!std::isfinite(s) || s < 0) return Bad(at, "must be 0 or more seconds");
  if (s > absl::ToDoubleSeconds(max)) {
    return Bad(at, absl::StrCat("must be at most ", absl::FormatDuration(max)));
  }
  return std::optional<absl::Duration>(absl::Seconds(s));
}

absl::StatusOr<std::optional<bool>> Bool(const json& obj, const char* name,
                                         absl::string_view path) {
  const json* f = Field(obj, name);
  if (f == nullptr) return std::optional<bool>();
  if (!f->is_boolean()) return WrongType(Join(path, name), "true or false", *f);
  return std::optional<bool>(f->get<bool>());
}

absl::StatusOr<const json*> Array(const json& obj, const char* name, absl::string_view path) {
  const json* f = Field(obj, name);
  if (f != nullptr && !f->is_array()) return WrongType(Join(path, name), "an array", *f);
  return f;
}

// Stops the parse at an object or array nested deeper than kMaxReplyDepth and
// at a field given twice in one object (JSON parsers differ on which one wins,
// so a reply that has one means different things to different readers).
struct GuardError {
  std::string message;
};
class ParseGuard {
 public:
  bool operator()(int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        Deeper(depth);
        keys_.emplace_back();
        break;
      case json::parse_event_t::array_start:
        Deeper(depth);
        break;
      case json::parse_event_t::key:
        if (!keys_.back().insert(parsed.get<std::string>()).second) {
          throw GuardError{absl::StrCat("field ", Quote(parsed.get<std::string>()),
                                        " appears twice in one object")};
        }
        break;
      case json::parse_event_t::object_end:
        keys_.pop_back();
        break;
      default:
        break;
    }
    return true;
  }

 private:
  static void Deeper(int depth) {
    if (depth >= kMaxReplyDepth) {
      throw GuardError{
          absl::StrCat("objects and arrays nest deeper than ", kMaxReplyDepth, " levels")};
    }
  }
  std::vector<absl::flat_hash_set<std::string>> keys_;
};

class ReplyParser {
 public:
  explicit ReplyParser(const ReplyLimits& limits) : limits_(limits) {}

  absl::Status ParseOk(const json& r, const std::string& path, ItemReply* out) {
    if (absl::Status st = KnownFields(r,
                                      {"id", "ok", "result", "result_encoding", "enqueue",
                                       "publish", "error", "retry_in", "dead"},
                                      path);
        !st.ok()) {
      return st;
    }
    for (const char* f : {"error", "retry_in", "dead"}) {
      if (Field(r, f) != nullptr) {
        return Bad(path, absl::StrCat("\"", f, "\" is only for a failure (\"ok\": false)"));
      }
    }
    auto result = Bytes(r, "result", "result_encoding", path, false);
    if (!result.ok()) return result.status();
    out->result = std::move(*result);

    auto enqueue = Array(r, "enqueue", path);
    if (!enqueue.ok()) return enqueue.status();
    auto publish = Array(r, "publish", path);
    if (!publish.ok()) return publish.status();
    const size_t effects =
        (*enqueue ? (*enqueue)->size() : 0) + (*publish ? (*publish)->size() : 0);
    if (effects > limits_.max_effects_per_item) {
      return TooMuch(path,
                     absl::StrCat(effects, " effects (enqueue and publish), over the limit of ",
                                  limits_.max_effects_per_item, " per item"));
    }
    if (*enqueue) {
      for (size_t k = 0; k < (*enqueue)->size(); ++k) {
        const std::string at = absl::StrCat(path, ".enqueue[", k, "]");
        auto e = ParseEnqueue((**enqueue)[k], at);
        if (!e.ok()) return e.status();
        out->enqueue.push_back(std::move(*e));
      }
    }
    if (*publish) {
      for (size_t k = 0; k < (*publish)->size(); ++k) {
        const std::string at = absl::StrCat(path, ".publish[", k, "]");
        auto p = ParsePublish((**publish)[k], at);
        if (!p.ok()) return p.status();
        out->publish.push_back(std::move(*p));
      }
    }
    return absl::OkStatus();
  }

  absl::Status ParseFailure(const json& r, const std::string& path, ItemReply* out) {
    if (absl::Status st = KnownFields(r,
                                      {"id", "ok", "error", "retry_in", "dead", "result",
                                       "result_encoding", "enqueue", "publish"},
                                      path);
        !st.ok()) {
      return st;
    }
    for (const char* f : {"result", "result_encoding", "enqueue", "publish"}) {
      if (Field(r, f) != nullptr) {
        return Bad(path, absl::StrCat("\"", f, "\" is only for a success (\"ok\": true)"));
      }
    }
    auto error = Text(r, "error", path, /*required=*/true);
    if (!error.ok()) return error.status();
    out->error = std::move(**error);
    auto retry_in = Seconds(r, "retry_in", path, limits_.max_delay);
    if (!retry_in.ok()) return retry_in.status();
    out->retry_in = *retry_in;
    auto dead = Bool(r, "dead", path);
    if (!dead.ok()) return dead.status();
    out->dead = dead->value_or(false);
    return absl::OkStatus();
  }

 private:
  absl::StatusOr<EnqueueEffect> ParseEnqueue(const json& e, const std::string& path) {
    if (!e.is_object()) return WrongType(path, "an object", e);
    if (absl::Status st = KnownFields(
            e,
            {"queue", "payload", "payload_encoding", "key", "dedup_key", "group", "delay",
             "priority"},
            path);
        !st.ok()) {
      return st;
    }
    EnqueueEffect out;
    auto queue = Text(e, "queue", path, /*required=*/true, /*non_empty=*/true);
    if (!queue.ok()) return queue.status();
    out.queue = std::move(**queue);
    auto payload = Bytes(e, "payload", "payload_encoding", path, /*required=*/true);
    if (!payload.ok()) return payload.status();
    out.item.payload = std::move(**payload);
    auto key = Text(e, "key", path, false);
    if (!key.ok()) return key.status();
    out.item.key = std::move(*key);
    auto dedup_key = Text(e, "dedup_key", path, false);
    if (!dedup_key.ok()) return dedup_key.status();
    out.item.dedup_key = std::move(*dedup_key);
    auto group = Text(e, "group", path, false);
    if (!group.ok()) return group.status();
    out.item.group = std::move(*group);
    auto delay = Seconds(e, "delay", path, limits_.max_delay);
    if (!delay.ok()) return delay.status();
    out.item.delay = delay->value_or(absl::ZeroDuration());
    if (const json* p = Field(e, "priority")) {
      const std::string at = Join(path, "priority");
      if (!p->is_number_integer()) return WrongType(at, "an integer", *p);
      // The column is a smallint.
      if (p->is_number_unsigned() ? p->get<uint64_t>() > 32767
                                  : (p->get<int64_t>() < -32768 || p->get<int64_t>() > 32767)) {
        return Bad(at, "must be from -32768 to 32767");
      }
      out.item.priority = static_cast<int>(p->get<int64_t>());
    }
    return out;
  }

  absl::StatusOr<PublishEffect> ParsePublish(const json& p, const std::string& path) {
    if (!p.is_object()) return WrongType(path, "an object", p);
    if (absl::Status st = KnownFields(
            p, {"topic", "key", "key_encoding", "payload", "payload_encoding", "headers"}, path);
        !st.ok()) {
      return st;
    }
    PublishEffect out;
    auto topic = Text(p, "topic", path, /*required=*/true, /*non_empty=*/true);
    if (!topic.ok()) return topic.status();
    out.topic = std::move(**topic);
    auto key = Bytes(p, "key", "key_encoding", path, false);
    if (!key.ok()) return key.status();
    out.key = std::move(*key);
    auto payload = Bytes(p, "payload", "payload_encoding", path, /*required=*/true);
    if (!payload.ok()) return payload.status();
    out.payload = std::move(**payload);
    auto headers = Array(p, "headers", path);
    if (!headers.ok()) return headers.status();
    if (*headers) {
      if ((*headers)->size() > limits_.max_headers_per_message) {
        return TooMuch(path, absl::StrCat((*headers)->size(), " headers, over the limit of ",
                                          limits_.max_headers_per_message));
      }
      for (size_t k = 0; k < (*headers)->size(); ++k) {
        const std::string at = absl::StrCat(path, ".headers[", k, "]");
        const json& h = (**headers)[k];
        if (!h.is_object()) return WrongType(at, "an object", h);
        if (absl::Status st = KnownFields(h, {"key", "value", "value_encoding"}, at); !st.ok()) {
          return st;
        }
        auto hk = Text(h, "key", at, /*required=*/true, /*non_empty=*/true);
        if (!hk.ok()) return hk.status();
        auto hv = Bytes(h, "value", "value_encoding", at, /*required=*/true);
        if (!hv.ok()) return hv.status();
        out.headers.emplace_back(std::move(**hk), std::move(**hv));
      }
    }
    return out;
  }

  const ReplyLimits& limits_;
};

// `reply` parsed under ParseGuard; InvalidArgument saying what is wrong
// with a reply that is not JSON.
absl::StatusOr<json> ParseJson(absl::string_view reply) {
  try {
    ParseGuard guard;
    return json::parse(reply.begin(), reply.end(), std::ref(guard));
  } catch (const GuardError& e) {
    return Bad("", e.message);
  } catch (const json::exception& e) {
    // "[json.exception.parse_error.101] parse error at ..." without its tag;
    // the text quotes what was read, which need not be UTF-8.
    absl::string_view what = e.what();
    if (const size_t tag = what.find("] "); tag != absl::string_view::npos) {
      what.remove_prefix(tag + 2);
    }
    return Bad("", absl::StrCat("not valid JSON: ", PrintableUtf8(what), "; the handler sent ",
                                QuoteReply(reply)));
  }
}

// The "results" array of the reply `doc` (parsed from `reply`), once the
// rest of it is checked: an object of known fields, version 1, the batch
// `batch_id`.
absl::StatusOr<const json*> Results(const json& doc, absl::string_view batch_id,
                                    absl::string_view reply) {
  if (!doc.is_object()) {
    return Bad("", absl::StrCat("must be a JSON object, not ", doc.type_name(),
                                "; the handler sent ", QuoteReply(reply)));
  }
  if (absl::Status st = KnownFields(doc, {"version", "batch", "results"}, ""); !st.ok()) {
    return st;
  }
  const json* version = Field(doc, "version");
  if (version == nullptr) return Bad("", "\"version\" is missing");
  if (!version->is_number_integer()) return WrongType("version", "an integer", *version);
  const bool v1 = version->is_number_unsigned()
                      ? version->get<uint64_t>() == kHandlerProtocolVersion
                      : version->get<int64_t>() == kHandlerProtocolVersion;
  if (!v1) {
    return Bad("", absl::StrCat("version ", version->dump(),
                                " is not supported (this partq speaks version ",
                                kHandlerProtocolVersion, ")"));
  }
  const json* batch = Field(doc, "batch");
  if (batch == nullptr) return Bad("", "\"batch\" is missing");
  if (!batch->is_string()) return WrongType("batch", "a string", *batch);
  if (batch->get_ref<const std::string&>() != batch_id) {
    return Bad("", absl::StrCat("batch ", Quote(batch->get_ref<const std::string&>()),
                                " is not the batch sent (", Quote(batch_id), ")"));
  }
  const json* results = Field(doc, "results");
  if (results == nullptr) return Bad("", "\"results\" is missing");
  if (!results->is_array()) return WrongType("results", "an array", *results);
  return results;
}

// Which item of the batch the result `r` (at `path`) answers: its position
// in `index` (id -> position).
absl::StatusOr<size_t> ResultPosition(const json& r, const std::string& path,
                                      const absl::flat_hash_map<int64_t, size_t>& index) {
  if (!r.is_object()) return WrongType(path, "an object", r);
  const json* id = Field(r, "id");
  if (id == nullptr) return Bad(path, "\"id\" is missing");
  // An id as a string of its decimal digits is taken too: some JSON
  // libraries (Perl's JSON::PP) write a number once used as a string as a
  // string. Only its canonical form ("17", not "017", "+17" or "17.0").
  int64_t as_text = 0;
  const bool text_id = id->is_string() &&
                       absl::SimpleAtoi(id->get_ref<const std::string&>(), &as_text) &&
                       as_text >= 0 && absl::StrCat(as_text) == id->get_ref<const std::string&>();
  if (!id->is_number_integer() && !text_id) {
    return WrongType(Join(path, "id"), "an integer", *id);
  }
  const bool fits =
      text_id || !id->is_number_unsigned() ||
      id->get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  auto it = !fits ? index.end() : index.find(text_id ? as_text : id->get<int64_t>());
  if (it == index.end()) {
    return Bad(path, absl::StrCat("lists item ", id->dump(), ", which was not in the batch"));
  }
  return it->second;
}

}  // namespace

std::string EncodeRequest(const BatchRequest& request, absl::Span<const Item* const> items) {
  ordered_json r;
  r["version"] = kHandlerProtocolVersion;
  r["batch"] = request.batch_id;
  r["deadline_ms"] = absl::ToUnixMillis(request.deadline);
  r["timeout_ms"] = std::max<int64_t>(0, absl::ToInt64Milliseconds(request.deadline - request.now));
  ordered_json list = ordered_json::array();
  for (const Item* item : items) {
    ordered_json i;
    i["id"] = item->id;
    i["queue"] = request.queue;
    i["part"] = item->part;
    i["key"] = OptionalText(item->key);
    i["dedup_key"] = OptionalText(item->dedup_key);
    i["group"] = OptionalText(item->group);
    i["priority"] = item->priority;
    i["attempt"] = item->attempts;
    i["max_attempts"] = request.max_attempts;
    i["enqueued_at_ms"] = absl::ToUnixMillis(item->enqueued_at);
    PutBytes(i, "payload", "payload_encoding", item->payload);
    list.push_back(std::move(i));
  }
  r["items"] = std::move(list);
  // The payloads are UTF-8 or base64 by now; `replace` only matters for a key
  // that is not UTF-8. dump() escapes control characters, so no '\n' is left.
  return r.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

absl::StatusOr<std::vector<ItemReply>> ParseReply(absl::string_view reply,
                                                  absl::string_view batch_id,
                                                  absl::Span<const int64_t> ids,
                                                  const ReplyLimits& limits) {
  if (!reply.empty() && reply.back() == '\n') reply.remove_suffix(1);
  if (reply.size() > limits.max_reply_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "reply: ", reply.size(), " bytes, over the limit of ", limits.max_reply_bytes));
  }
  absl::StatusOr<json> doc = ParseJson(reply);
  if (!doc.ok()) return doc.status();
  absl::StatusOr<const json*> checked = Results(*doc, batch_id, reply);
  if (!checked.ok()) return checked.status();
  const json& results = **checked;

  absl::flat_hash_map<int64_t, size_t> index;  // id -> position in ids
  for (size_t i = 0; i < ids.size(); ++i) index.emplace(ids[i], i);
  std::vector<ItemReply> out(ids.size());
  std::vector<int64_t> seen_at(ids.size(), -1);  // the result that answered it
  ReplyParser parser(limits);
  for (size_t k = 0; k < results.size(); ++k) {
    const json& r = results[k];
    std::string path = absl::StrCat("results[", k, "]");
    absl::StatusOr<size_t> position = ResultPosition(r, path, index);
    if (!position.ok()) return position.status();
    const size_t i = *position;
    if (seen_at[i] >= 0) {
      return Bad(path, absl::StrCat("item ", ids[i], " is answered twice (also in results[",
                                    seen_at[i], "])"));
    }
    seen_at[i] = static_cast<int64_t>(k);
    absl::StrAppend(&path, " (item ", ids[i], ")");
    const json* ok = Field(r, "ok");
    if (ok == nullptr) return Bad(path, "\"ok\" is missing");
    if (!ok->is_boolean()) return WrongType(Join(path, "ok"), "true or false", *ok);
    ItemReply& item = out[i];
    item.id = ids[i];
    item.ok = ok->get<bool>();
    absl::Status st =
        item.ok ? parser.ParseOk(r, path, &item) : parser.ParseFailure(r, path, &item);
    if (!st.ok()) return st;
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    if (seen_at[i] < 0) {
      return Bad("", absl::StrCat("no result for item ", ids[i], " (", results.size(), " of ",
                                  ids.size(), " items answered)"));
    }
  }
  return out;
}

}  // namespace partq
