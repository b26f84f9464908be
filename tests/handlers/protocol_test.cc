// The handler protocol's codec (handlers/protocol.h): every rule of
// docs/handler-protocol.md, "What is an error in a reply", has a test here.
#include "handlers/protocol.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/utf8.h"
#include "consumer/handler.h"
#include "handlers/effects.h"
#include "store/headers_json.h"
#include "store/mem_store.h"

namespace partq {
namespace {

using json = nlohmann::json;

const std::vector<int64_t> kIds = {17, 18, 19};

// A reply to batch "b1" with these results.
std::string Reply(const std::string& results) {
  return absl::StrCat(R"({"version":1,"batch":"b1","results":[)", results, "]}");
}
// Results for 18 and 19, so that a test's result for 17 completes the batch.
const char kOthers[] = R"({"id":18,"ok":true},{"id":19,"ok":true})";

absl::StatusOr<std::vector<ItemReply>> Parse(const std::string& reply,
                                             const ReplyLimits& limits = {}) {
  return ParseReply(reply, "b1", kIds, limits);
}
// The error of a reply whose result for item 17 is `result17`.
absl::Status ErrorOf17(const std::string& result17, const ReplyLimits& limits = {}) {
  return Parse(Reply(absl::StrCat(result17, ",", kOthers)), limits).status();
}

// --- requests -------------------------------------------------------------

Item MakeItem(int64_t id, std::string payload) {
  Item item;
  item.id = id;
  item.part = 3;
  item.key = "customer-7";
  item.priority = -2;
  item.attempts = 2;
  item.payload = std::move(payload);
  item.enqueued_at = absl::FromUnixMillis(1767225599000);
  return item;
}

TEST(EncodeRequest, OneLineWithEveryFieldTextPayloadsAsTextAndBytesAsBase64) {
  Item text = MakeItem(17, "{\"n\": 5}\nsecond line");
  Item bytes = MakeItem(18, std::string("\x00\x01\xff", 3));
  bytes.key.reset();
  bytes.dedup_key = "d-18";
  bytes.group = "g-1";
  BatchRequest r;
  r.batch_id = "b1";
  r.queue = "orders";
  r.max_attempts = 25;
  r.now = absl::FromUnixMillis(1767225600000);
  r.deadline = r.now + absl::Seconds(30);
  const Item* items[] = {&text, &bytes};
  const std::string line = EncodeRequest(r, items);
  EXPECT_EQ(line.find('\n'), std::string::npos);  // JSON Lines: newlines are escaped
  EXPECT_TRUE(absl::StartsWith(line, R"({"version":1,"batch":"b1","deadline_ms":)")) << line;

  const json j = json::parse(line);
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["batch"], "b1");
  EXPECT_EQ(j["deadline_ms"], 1767225630000);
  EXPECT_EQ(j["timeout_ms"], 30000);
  ASSERT_EQ(j["items"].size(), 2u);
  const json& a = j["items"][0];
  EXPECT_EQ(a["id"], 17);
  EXPECT_EQ(a["queue"], "orders");
  EXPECT_EQ(a["part"], 3);
  EXPECT_EQ(a["key"], "customer-7");
  EXPECT_TRUE(a["dedup_key"].is_null());
  EXPECT_EQ(a["priority"], -2);
  EXPECT_EQ(a["attempt"], 2);
  EXPECT_EQ(a["max_attempts"], 25);
  EXPECT_EQ(a["enqueued_at_ms"], 1767225599000);
  EXPECT_EQ(a["payload"], "{\"n\": 5}\nsecond line");
  EXPECT_EQ(a["payload_encoding"], "utf8");
  const json& b = j["items"][1];
  EXPECT_TRUE(b["key"].is_null());
  EXPECT_EQ(b["dedup_key"], "d-18");
  EXPECT_EQ(b["group"], "g-1");
  EXPECT_TRUE(a["group"].is_null());
  EXPECT_EQ(b["payload_encoding"], "base64");
  std::string decoded;
  ASSERT_TRUE(absl::Base64Unescape(b["payload"].get<std::string>(), &decoded));
  EXPECT_EQ(decoded, std::string("\x00\x01\xff", 3));
}

TEST(EncodeRequest, TimeoutIsNeverNegativeAndAKeyThatIsNotUtf8IsReplaced) {
  Item item = MakeItem(1, "");
  item.key = "bad\xff";
  BatchRequest r;
  r.batch_id = "b";
  r.now = absl::FromUnixMillis(2000);
  r.deadline = absl::FromUnixMillis(1000);
  const Item* items[] = {&item};
  const json j = json::parse(EncodeRequest(r, items));
  EXPECT_EQ(j["timeout_ms"], 0);
  EXPECT_EQ(j["items"][0]["key"], "bad\xEF\xBF\xBD");  // U+FFFD
  EXPECT_EQ(j["items"][0]["payload"], "");
  EXPECT_EQ(j["items"][0]["payload_encoding"], "utf8");
}

// --- replies: what is right ------------------------------------------------

TEST(ParseReply, ResultsInAnyOrderWithEffectsAlignedToTheBatch) {
  const std::string reply = Reply(R"(
    {"id": 19, "ok": false, "error": "upstream 503", "retry_in": 1.5},
    {"id": 17, "ok": true, "result": "25",
     "enqueue": [{"queue": "squares", "payload": "{\"n\":25}", "key": "customer-7",
                  "dedup_key": "sq-17", "delay": 2, "priority": -5},
                 {"queue": "raw", "payload": "AAH/", "payload_encoding": "base64",
                  "group": "raw-1"}],
     "publish": [{"topic": "orders.done", "key": "AQI=", "key_encoding": "base64",
                  "payload": "done", "headers": [{"key": "source", "value": "py"},
                  {"key": "bin", "value": "/w==", "value_encoding": "base64"}]}]},
    {"id": 18, "ok": false, "error": "poison", "dead": true})");
  auto r = Parse(reply);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 3u);

  const ItemReply& a = (*r)[0];
  EXPECT_EQ(a.id, 17);
  EXPECT_TRUE(a.ok);
  EXPECT_EQ(a.result, "25");
  ASSERT_EQ(a.enqueue.size(), 2u);
  EXPECT_EQ(a.enqueue[0].queue, "squares");
  EXPECT_EQ(a.enqueue[0].item.payload, "{\"n\":25}");
  EXPECT_EQ(a.enqueue[0].item.key, "customer-7");
  EXPECT_EQ(a.enqueue[0].item.dedup_key, "sq-17");
  EXPECT_EQ(a.enqueue[0].item.delay, absl::Seconds(2));
  EXPECT_EQ(a.enqueue[0].item.priority, -5);
  EXPECT_EQ(a.enqueue[1].item.payload, std::string("\x00\x01\xff", 3));
  EXPECT_FALSE(a.enqueue[1].item.key.has_value());
  EXPECT_FALSE(a.enqueue[0].item.group.has_value());
  EXPECT_EQ(a.enqueue[1].item.group, "raw-1");
  EXPECT_EQ(a.enqueue[1].item.delay, absl::ZeroDuration());
  ASSERT_EQ(a.publish.size(), 1u);
  EXPECT_EQ(a.publish[0].topic, "orders.done");
  EXPECT_EQ(a.publish[0].key, std::string("\x01\x02"));
  EXPECT_EQ(a.publish[0].payload, "done");
  ASSERT_EQ(a.publish[0].headers.size(), 2u);
  EXPECT_EQ(a.publish[0].headers[0], (std::pair<std::string, std::string>("source", "py")));
  EXPECT_EQ(a.publish[0].headers[1], (std::pair<std::string, std::string>("bin", "\xff")));

  const ItemReply& b = (*r)[1];
  EXPECT_EQ(b.id, 18);
  EXPECT_FALSE(b.ok);
  EXPECT_EQ(b.error, "poison");
  EXPECT_TRUE(b.dead);
  EXPECT_FALSE(b.retry_in.has_value());

  const ItemReply& c = (*r)[2];
  EXPECT_EQ(c.error, "upstream 503");
  EXPECT_EQ(c.retry_in, absl::Milliseconds(1500));
  EXPECT_FALSE(c.dead);
}

TEST(ParseReply, NullIsAbsentAndTheOtherOutcomesFieldsMayBeNull) {
  // As a Python dict with every key, None where unused, serializes.
  auto r = Parse(Reply(R"(
    {"id": 17, "ok": true, "result": null, "result_encoding": null, "enqueue": null,
     "publish": null, "error": null, "retry_in": null, "dead": null},
    {"id": 18, "ok": false, "error": "", "retry_in": null, "dead": null, "result": null,
     "enqueue": null, "publish": null},
    {"id": 19, "ok": true, "enqueue": [{"queue": "q", "payload": "", "key": null,
     "dedup_key": null, "delay": null, "priority": null}]})"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE((*r)[0].result.has_value());
  EXPECT_EQ((*r)[1].error, "");
  EXPECT_FALSE((*r)[1].dead);
  EXPECT_EQ((*r)[2].enqueue[0].item.priority, 0);
}

TEST(ParseReply, BinaryResultAndTrailingNewlineOrCrLf) {
  const std::string one =
      R"({"version":1,"batch":"b1","results":[{"id":5,"ok":true,"result":"/wA=",)"
      R"("result_encoding":"base64"}]})";
  for (const std::string& line : {one, one + "\n", one + "\r\n"}) {
    auto r = ParseReply(line, "b1", std::vector<int64_t>{5});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ((*r)[0].result, std::string("\xff\x00", 2));
  }
}

TEST(ParseReply, Base64PaddingIsOptional) {
  auto r = Parse(Reply(
      absl::StrCat(R"({"id":17,"ok":true,"result":"aGk","result_encoding":"base64"},)", kOthers)));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].result, "hi");
}

// --- replies: what is an error ---------------------------------------------

void ExpectError(const absl::Status& st, absl::string_view message,
                 absl::StatusCode code = absl::StatusCode::kInvalidArgument) {
  EXPECT_EQ(st.code(), code) << st;
  EXPECT_EQ(st.message(), message);
  EXPECT_TRUE(IsValidUtf8(st.message())) << "the message may reach a text column";
  EXPECT_EQ(st.message().find('\0'), absl::string_view::npos);
}

TEST(ParseReplyErrors, NotJson) {
  for (const std::string line : {"", "garbage", "{\"version\":1", "\n", "{} {}"}) {
    const absl::Status st = Parse(line).status();
    EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
    EXPECT_TRUE(absl::StartsWith(st.message(), "reply: not valid JSON: ")) << st;
  }
}

// What the handler sent is quoted: escaped, its first 200 bytes, its size.
TEST(ParseReplyErrors, NotJsonQuotesWhatTheHandlerSent) {
  absl::Status st = Parse("hello, this is not JSON").status();
  EXPECT_TRUE(
      absl::EndsWith(st.message(), "; the handler sent \"hello, this is not JSON\" (23 bytes)"))
      << st;
  const std::string banner = "Loading model\tv2\x01\xff" + std::string(300, 'x');
  st = Parse(banner).status();
  EXPECT_TRUE(absl::StrContains(st.message(),
                                absl::StrCat("; the handler sent \"Loading model\\x09v2\\x01\\xff",
                                             std::string(182, 'x'), "\"... (318 bytes)")))
      << st;
  EXPECT_TRUE(IsValidUtf8(st.message()));
}

TEST(ParseReplyErrors, BytesThatAreNotUtf8AreNotJsonAndTheMessageStaysUtf8) {
  const absl::Status st = Parse(Reply("{\"id\":17,\"ok\":false,\"error\":\"\xff\xfe\"}")).status();
  EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "ill-formed UTF-8")) << st;
  EXPECT_TRUE(IsValidUtf8(st.message()));
}

TEST(ParseReplyErrors, TopLevel) {
  ExpectError(Parse("[1,2]").status(),
              "reply: must be a JSON object, not array; the handler sent \"[1,2]\" (5 bytes)");
  ExpectError(Parse(R"({"batch":"b1","results":[]})").status(), "reply: \"version\" is missing");
  ExpectError(Parse(R"({"version":2,"batch":"b1","results":[]})").status(),
              "reply: version 2 is not supported (this partq speaks version 1)");
  ExpectError(Parse(R"({"version":"1","batch":"b1","results":[]})").status(),
              "reply: version: must be an integer, not string");
  ExpectError(Parse(R"({"version":1.0,"batch":"b1","results":[]})").status(),
              "reply: version: must be an integer, not number");
  ExpectError(Parse(R"({"version":1,"results":[]})").status(), "reply: \"batch\" is missing");
  ExpectError(Parse(R"({"version":1,"batch":"b0","results":[]})").status(),
              "reply: batch \"b0\" is not the batch sent (\"b1\")");
  ExpectError(Parse(R"({"version":1,"batch":"b1"})").status(), "reply: \"results\" is missing");
  ExpectError(Parse(R"({"version":1,"batch":"b1","results":{}})").status(),
              "reply: results: must be an array, not object");
  ExpectError(Parse(R"({"version":1,"batch":"b1","results":[],"extra":0})").status(),
              "reply: unknown field \"extra\"");
}

TEST(ParseReplyErrors, UnknownDuplicateAndMissingIds) {
  ExpectError(
      Parse(Reply(absl::StrCat(kOthers, R"(,{"id":17,"ok":true},{"id":20,"ok":true})"))).status(),
      "reply: results[3]: lists item 20, which was not in the batch");
  ExpectError(Parse(Reply(R"({"id":18446744073709551615,"ok":true})")).status(),
              "reply: results[0]: lists item 18446744073709551615, which was not in the batch");
  ExpectError(Parse(Reply(absl::StrCat(R"({"id":18,"ok":true},)", kOthers))).status(),
              "reply: results[1]: item 18 is answered twice (also in results[0])");
  ExpectError(Parse(Reply(kOthers)).status(),
              "reply: no result for item 17 (2 of 3 items answered)");
  ExpectError(Parse(Reply("")).status(), "reply: no result for item 17 (0 of 3 items answered)");
}

// An id written as the string of its digits (Perl's JSON::PP writes a
// number it once used as a string that way) is the id.
TEST(ParseReply, AnIdAsAStringOfItsDigitsIsTaken) {
  auto r = Parse(Reply(
      R"({"id":"17","ok":true,"result":"x"},{"id":"18","ok":true},{"id":19,"ok":false,"error":"e"})"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].id, 17);
  EXPECT_EQ((*r)[0].result, "x");
  EXPECT_TRUE((*r)[1].ok);
  EXPECT_FALSE((*r)[2].ok);
  // Still one result per item: "17" and 17 are the same item.
  ExpectError(
      Parse(Reply(absl::StrCat(R"({"id":"17","ok":true},{"id":17,"ok":true},)", kOthers))).status(),
      "reply: results[1]: item 17 is answered twice (also in results[0])");
}

TEST(ParseReplyErrors, ResultShape) {
  ExpectError(Parse(Reply("17")).status(), "reply: results[0]: must be an object, not number");
  ExpectError(Parse(Reply(R"({"ok":true})")).status(), "reply: results[0]: \"id\" is missing");
  for (const char* id : {R"("017")", R"("+17")", R"("17.0")", R"(" 17")", R"("-17")", R"("")",
                         R"("99999999999999999999")"}) {
    ExpectError(Parse(Reply(absl::StrCat(R"({"id":)", id, R"(,"ok":true})"))).status(),
                "reply: results[0].id: must be an integer, not string");
  }
  ExpectError(Parse(Reply(R"({"id":17.0,"ok":true})")).status(),
              "reply: results[0].id: must be an integer, not number");
  ExpectError(ErrorOf17(R"({"id":17})"), "reply: results[0] (item 17): \"ok\" is missing");
  ExpectError(ErrorOf17(R"({"id":17,"ok":1})"),
              "reply: results[0] (item 17).ok: must be true or false, not number");
  ExpectError(ErrorOf17(R"({"id":17,"ok":true,"reslt":"x"})"),
              "reply: results[0] (item 17): unknown field \"reslt\"");
  ExpectError(ErrorOf17(R"({"id":17,"ok":true,"error":"x"})"),
              "reply: results[0] (item 17): \"error\" is only for a failure (\"ok\": false)");
  ExpectError(ErrorOf17(R"({"id":17,"ok":true,"retry_in":1})"),
              "reply: results[0] (item 17): \"retry_in\" is only for a failure (\"ok\": false)");
  ExpectError(ErrorOf17(R"({"id":17,"ok":false,"error":"x","enqueue":[]})"),
              "reply: results[0] (item 17): \"enqueue\" is only for a success (\"ok\": true)");
}

TEST(ParseReplyErrors, Failures) {
  ExpectError(ErrorOf17(R"({"id":17,"ok":false})"),
              "reply: results[0] (item 17): \"error\" is missing");
  ExpectError(ErrorOf17(R"({"id":17,"ok":false,"error":42})"),
              "reply: results[0] (item 17).error: must be a string, not number");
  ExpectError(ErrorOf17(R"({"id":17,"ok":false,"error":"a\u0000b"})"),
              "reply: results[0] (item 17).error: must not contain U+0000");
  ExpectError(ErrorOf17(R"({"id":17,"ok":false,"error":"x","retry_in":-1})"),
              "reply: results[0] (item 17).retry_in: must be 0 or more seconds");
  ExpectError(ErrorOf17(R"({"id":17,"ok":false,"error":"x","retry_in":"30s"})"),
              "reply: results[0] (item 17).retry_in: must be a number of seconds, not string");
  ExpectError(ErrorOf17(R"({"id":17,"ok":false,"error":"x","retry_in":31536001})"),
              "reply: results[0] (item 17).retry_in: must be at most 8760h");
  ExpectError(ErrorOf17(R"({"id":17,"ok":false,"error":"x","dead":"yes"})"),
              "reply: results[0] (item 17).dead: must be true or false, not string");
}

TEST(ParseReplyErrors, Encodings) {
  ExpectError(ErrorOf17(R"({"id":17,"ok":true,"result":"x","result_encoding":"hex"})"),
              "reply: results[0] (item 17).result_encoding: unknown encoding \"hex\" (use "
              "\"utf8\" or \"base64\")");
  ExpectError(ErrorOf17(R"({"id":17,"ok":true,"result_encoding":"base64"})"),
              "reply: results[0] (item 17): \"result_encoding\" without \"result\"");
  ExpectError(ErrorOf17(R"({"id":17,"ok":true,"result":"aGk=\n","result_encoding":"base64"})"),
              "reply: results[0] (item 17).result: invalid base64: \"\\x0a\" at offset 4");
  ExpectError(ErrorOf17(R"({"id":17,"ok":true,"result":"a","result_encoding":"base64"})"),
              "reply: results[0] (item 17).result: invalid base64");
  ExpectError(ErrorOf17(R"({"id":17,"ok":true,"result":"-_8=","result_encoding":"base64"})"),
              "reply: results[0] (item 17).result: invalid base64: \"-\" at offset 0");
  ExpectError(ErrorOf17(R"({"id":17,"ok":true,"result":"aGk==","result_encoding":"base64"})"),
              "reply: results[0] (item 17).result: invalid base64");
}

TEST(ParseReplyErrors, Enqueue) {
  const auto enqueue = [](const std::string& e) {
    return ErrorOf17(absl::StrCat(R"({"id":17,"ok":true,"enqueue":[)", e, "]}"));
  };
  ExpectError(ErrorOf17(R"({"id":17,"ok":true,"enqueue":{}})"),
              "reply: results[0] (item 17).enqueue: must be an array, not object");
  ExpectError(enqueue(R"("q")"),
              "reply: results[0] (item 17).enqueue[0]: must be an object, not string");
  ExpectError(enqueue(R"({"payload":""})"),
              "reply: results[0] (item 17).enqueue[0]: \"queue\" is missing");
  ExpectError(enqueue(R"({"queue":"","payload":""})"),
              "reply: results[0] (item 17).enqueue[0].queue: must not be empty");
  ExpectError(enqueue(R"({"queue":"q"})"),
              "reply: results[0] (item 17).enqueue[0]: \"payload\" is missing");
  ExpectError(enqueue(R"({"queue":"q","payload":"","key":"a\u0000"})"),
              "reply: results[0] (item 17).enqueue[0].key: must not contain U+0000");
  ExpectError(enqueue(R"({"queue":"q","payload":"","priority":40000})"),
              "reply: results[0] (item 17).enqueue[0].priority: must be from -32768 to 32767");
  ExpectError(enqueue(R"({"queue":"q","payload":"","priority":1.5})"),
              "reply: results[0] (item 17).enqueue[0].priority: must be an integer, not number");
  ExpectError(enqueue(R"({"queue":"q","payload":"","delay":-0.1})"),
              "reply: results[0] (item 17).enqueue[0].delay: must be 0 or more seconds");
  ExpectError(enqueue(R"({"queue":"q","payload":"","topic":"t"})"),
              "reply: results[0] (item 17).enqueue[0]: unknown field \"topic\"");
}

TEST(ParseReplyErrors, Publish) {
  const auto publish = [](const std::string& p) {
    return ErrorOf17(absl::StrCat(R"({"id":17,"ok":true,"publish":[)", p, "]}"));
  };
  ExpectError(publish(R"({"payload":""})"),
              "reply: results[0] (item 17).publish[0]: \"topic\" is missing");
  ExpectError(publish(R"({"topic":"t"})"),
              "reply: results[0] (item 17).publish[0]: \"payload\" is missing");
  ExpectError(publish(R"({"topic":"t","payload":"","headers":{}})"),
              "reply: results[0] (item 17).publish[0].headers: must be an array, not object");
  ExpectError(publish(R"({"topic":"t","payload":"","headers":[{"key":"k"}]})"),
              "reply: results[0] (item 17).publish[0].headers[0]: \"value\" is missing");
  ExpectError(publish(R"({"topic":"t","payload":"","headers":[{"key":"","value":""}]})"),
              "reply: results[0] (item 17).publish[0].headers[0].key: must not be empty");
  ExpectError(publish(R"({"topic":"t","payload":"","key":"x","key_encoding":"base64"})"),
              "reply: results[0] (item 17).publish[0].key: invalid base64");
}

TEST(ParseReplyErrors, Limits) {
  ReplyLimits limits;
  limits.max_reply_bytes = 64;
  const std::string reply = Reply(absl::StrCat(R"({"id":17,"ok":true},)", kOthers));
  ExpectError(Parse(reply, limits).status(),
              absl::StrCat("reply: ", reply.size(), " bytes, over the limit of 64"),
              absl::StatusCode::kResourceExhausted);
  limits.max_reply_bytes = reply.size();
  EXPECT_TRUE(Parse(reply + "\n", limits).ok());  // the '\n' does not count

  limits = ReplyLimits();
  limits.max_effects_per_item = 2;
  ExpectError(ErrorOf17(R"({"id":17,"ok":true,"enqueue":[{"queue":"q","payload":""},)"
                        R"({"queue":"q","payload":""}],"publish":[{"topic":"t","payload":""}]})",
                        limits),
              "reply: results[0] (item 17): 3 effects (enqueue and publish), over the limit "
              "of 2 per item",
              absl::StatusCode::kResourceExhausted);
  limits.max_headers_per_message = 1;
  ExpectError(ErrorOf17(R"({"id":17,"ok":true,"publish":[{"topic":"t","payload":"","headers":)"
                        R"([{"key":"a","value":""},{"key":"b","value":""}]}]})",
                        limits),
              "reply: results[0] (item 17).publish[0]: 2 headers, over the limit of 1",
              absl::StatusCode::kResourceExhausted);
}

TEST(ParseReplyErrors, NestingAndRepeatedFields) {
  const std::string deep = std::string(20, '[') + std::string(20, ']');
  ExpectError(ErrorOf17(absl::StrCat(R"({"id":17,"ok":true,"result":)", deep, "}")),
              "reply: objects and arrays nest deeper than 16 levels");
  // A deeply nested value must not exhaust the stack either.
  EXPECT_TRUE(absl::IsInvalidArgument(
      Parse(std::string(1 << 20, '[') + std::string(1 << 20, ']')).status()));
  ExpectError(ErrorOf17(R"({"id":17,"ok":true,"ok":false})"),
              "reply: field \"ok\" appears twice in one object");
  ExpectError(Parse(R"({"version":1,"version":1,"batch":"b1","results":[]})").status(),
              "reply: field \"version\" appears twice in one object");
}

// The examples of docs/handler-protocol.md stay true: its request has the
// fields EncodeRequest writes, and its reply parses.
std::vector<std::string> JsonBlocksOfTheDoc() {
  std::ifstream in(PROTOCOL_DOC);
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> blocks;
  for (size_t at = 0; (at = doc.find("```json\n", at)) != std::string::npos;) {
    at += 8;
    const size_t end = doc.find("```", at);
    blocks.push_back(doc.substr(at, end - at));
    at = end;
  }
  return blocks;
}

std::set<std::string> Keys(const json& j) {
  std::set<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.insert(it.key());
  return keys;
}

TEST(ProtocolDoc, ExamplesMatchTheCodec) {
  const std::vector<std::string> blocks = JsonBlocksOfTheDoc();
  ASSERT_EQ(blocks.size(), 2u) << "the request and the reply";

  Item item = MakeItem(1, "x");
  BatchRequest r;
  r.batch_id = "b";
  const Item* items[] = {&item};
  const json ours = json::parse(EncodeRequest(r, items));
  const json doc = json::parse(blocks[0]);
  EXPECT_EQ(Keys(doc), Keys(ours));
  for (const json& i : doc["items"]) EXPECT_EQ(Keys(i), Keys(ours["items"][0]));

  auto reply = ParseReply(blocks[1], doc["batch"].get<std::string>(), std::vector<int64_t>{17, 18});
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ((*reply)[0].result, "25");
  EXPECT_EQ((*reply)[1].retry_in, absl::Seconds(30));
}

TEST(HeadersJson, TextValuesAsTextOthersAsHexNullAsNull) {
  EXPECT_FALSE(HeadersJson({}).has_value());
  EXPECT_EQ(HeadersJson({{"a", "x"}, {"b", std::string("\xff\x00", 2)}, {"c", std::nullopt}}),
            R"([{"key":"a","value":"x"},{"key":"b","value_hex":"ff00"},{"key":"c","value":null}])");
  // A key JSON cannot carry: no headers rather than a broken array.
  EXPECT_FALSE(HeadersJson({{"\xff", "x"}}).has_value());
}

// --- effects and failure hints ------------------------------------------------

TEST(FailureHints, TravelWithTheStatus) {
  absl::Status st = RetryIn(absl::UnknownError("slow down"), absl::Milliseconds(1500));
  EXPECT_EQ(RetryInOf(st), absl::Milliseconds(1500));
  EXPECT_FALSE(IsDeadNow(st));
  const absl::Status copy = DeadNow(st);
  EXPECT_TRUE(IsDeadNow(copy));
  EXPECT_EQ(RetryInOf(copy), absl::Milliseconds(1500));
  EXPECT_EQ(copy.message(), "slow down");
  EXPECT_FALSE(RetryInOf(absl::UnknownError("x")).has_value());
  EXPECT_FALSE(IsDeadNow(DeadNow(absl::OkStatus())));  // OK carries nothing
}

TEST(ItemStatus, FailuresCarryTheirHints) {
  Item item = MakeItem(17, "");
  HandlerCall call;
  call.item = &item;
  ItemReply failed;
  failed.error = "upstream 503";
  failed.retry_in = absl::Seconds(30);
  failed.dead = true;
  absl::Status st = ItemStatus(call, failed, ApplyEffects);
  EXPECT_TRUE(absl::IsUnknown(st));
  EXPECT_EQ(st.message(), "upstream 503");
  EXPECT_EQ(RetryInOf(st), absl::Seconds(30));
  EXPECT_TRUE(IsDeadNow(st));
}

// ApplyEffects through a real transaction (MemStore's: its Tx enqueues and
// publishes, and undoes both on a rollback, as PostgreSQL does).
class ApplyEffectsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"orders", "next"}) {
      QueueConfig q;
      q.name = name;
      q.parts = 4;
      ASSERT_TRUE(store_->CreateQueue(q).ok());
    }
    item_ = MakeItem(17, "payload");
    call_.item = &item_;
  }
  // Runs ApplyEffects for `reply` in a transaction that commits when it
  // succeeds (and rolls back when it fails); returns its status.
  absl::Status Apply(const ItemReply& reply) {
    absl::Status applied;
    FinishRequest req;
    req.queue = "orders";
    auto done = store_->Finish(
        req, [&](Tx& tx, absl::Span<const Item>) -> absl::StatusOr<std::vector<Outcome>> {
          call_.tx = &tx;
          applied = ApplyEffects(call_, reply);
          if (!applied.ok()) return applied;
          return std::vector<Outcome>{};
        });
    EXPECT_EQ(done.ok(), applied.ok()) << done.status();
    return applied;
  }
  int64_t Ready(const std::string& queue) {
    auto st = store_->Status(queue);
    EXPECT_TRUE(st.ok()) << st.status();
    int64_t n = 0;
    for (const PartStatus& p : st->parts) n += p.ready;
    return n;
  }
  MemDatabase db_;
  std::unique_ptr<Store> store_ = db_.Connect();
  Item item_;
  HandlerCall call_;
};

TEST_F(ApplyEffectsTest, EnqueuesPublishesAndSetsTheResult) {
  ItemReply ok;
  ok.ok = true;
  ok.result = "25";
  EnqueueEffect e;
  e.queue = "next";
  e.item.payload = "follow-up";
  e.item.key = "customer-7";
  ok.enqueue = {e, e};
  ok.enqueue[1].item.dedup_key = "once";
  PublishEffect p;
  p.topic = "orders.done";
  p.key = "customer-7";
  p.payload = std::string("\x00bytes", 6);
  p.headers = {{"trace", "abc"}};
  ok.publish = {p};
  ASSERT_TRUE(Apply(ok).ok());
  EXPECT_EQ(call_.result, "25");
  EXPECT_EQ(Ready("next"), 2);
  const std::vector<OutboxEvent> out = db_.Outbox();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].topic, "orders.done");
  EXPECT_EQ(out[0].key, "customer-7");
  EXPECT_EQ(out[0].payload, p.payload);
  EXPECT_EQ(out[0].headers_json,
            R"([{"key":"trace","value":"abc"},{"key":"partq.item.id","value":"17"}])");
}

// A bad effect fails the item, names itself, and nothing of the item's
// effects commits (the earlier ones roll back with it).
TEST_F(ApplyEffectsTest, ABadEffectFailsTheItemAndNothingOfItCommits) {
  ItemReply ok;
  ok.ok = true;
  ok.result = "25";
  ok.publish.push_back({"orders.done", std::nullopt, "m", {}});
  ok.enqueue.push_back({"next", NewItem{"a"}});
  ok.enqueue.push_back({"nosuch", NewItem{"b"}});
  absl::Status st = Apply(ok);
  EXPECT_TRUE(absl::IsNotFound(st)) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "effect enqueue[1] into \"nosuch\"")) << st;
  EXPECT_EQ(Ready("next"), 0);
  EXPECT_TRUE(db_.Outbox().empty());

  ItemReply bad_topic;
  bad_topic.ok = true;
  bad_topic.publish.push_back({"no spaces", std::nullopt, "m", {}});
  st = Apply(bad_topic);
  EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "effect publish[0] to \"no spaces\"")) << st;
}

}  // namespace
}  // namespace partq
