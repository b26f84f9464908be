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
#include "consumer/handler.h"
#include "handlers/effects.h"
#include "handlers/utf8.h"

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

// --- UTF-8 ----------------------------------------------------------------

TEST(Utf8, AcceptsWellFormedText) {
  for (const std::string s :
       {std::string(), std::string("plain ascii, longer than eight bytes"),
        std::string("\0nul\0", 5), std::string("\xC2\x80"), std::string("\xDF\xBF"),
        std::string("\xE0\xA0\x80"), std::string("\xED\x9F\xBF"),          // U+D7FF
        std::string("\xEE\x80\x80"), std::string("\xEF\xBF\xBF"),          // U+E000, U+FFFF
        std::string("\xF0\x90\x80\x80"), std::string("\xF4\x8F\xBF\xBF"),  // U+10000, U+10FFFF
        std::string("12345678\xC3\xA9"), std::string("\xE2\x82\xAC after the euro sign")}) {
    EXPECT_TRUE(IsValidUtf8(s)) << absl::CHexEscape(s);
  }
}

TEST(Utf8, RejectsOverlongSurrogatesOutOfRangeAndTruncated) {
  for (const std::string s : {
           std::string("\x80"),              // a continuation byte alone
           std::string("\xC0\xAF"),          // overlong '/'
           std::string("\xC1\xBF"),          // overlong
           std::string("\xE0\x9F\xBF"),      // overlong 3-byte
           std::string("\xF0\x8F\xBF\xBF"),  // overlong 4-byte
           std::string("\xED\xA0\x80"),      // U+D800, a surrogate
           std::string("\xED\xBF\xBF"),      // U+DFFF
           std::string("\xF4\x90\x80\x80"),  // U+110000
           std::string("\xF5\x80\x80\x80"),  // F5..FF never appear
           std::string("\xFF"),              //
           std::string("\xC3"),              // truncated at the end
           std::string("\xE2\x82"),          //
           std::string("abcdefgh\xE2\x82"),  // after the 8-byte fast path
           std::string("\xC3\x28"),          // a second byte that is not a continuation
           std::string("\xE2\x28\xA1"),      //
           std::string("\xF0\x90\x28\xBC"),  //
       }) {
    EXPECT_FALSE(IsValidUtf8(s)) << absl::CHexEscape(s);
  }
}

TEST(PrintableUtf8, EscapesControlCharactersAndBrokenSequencesKeepsTheRest) {
  EXPECT_EQ(PrintableUtf8("plain \"text\" \\ \xC3\xA9\xF0\x9F\x98\x80"),
            "plain \"text\" \\ \xC3\xA9\xF0\x9F\x98\x80");
  EXPECT_EQ(PrintableUtf8(std::string("a\0b\n\x7f", 5)), "a\\x00b\\x0a\\x7f");
  EXPECT_EQ(PrintableUtf8("\xff\xC3(\xE2\x82"), "\\xff\\xc3(\\xe2\\x82");
  EXPECT_EQ(PrintableUtf8("\xED\xA0\x80"), "\\xed\\xa0\\x80");  // a surrogate
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
                 {"queue": "raw", "payload": "AAH/", "payload_encoding": "base64"}],
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

TEST(ParseReplyErrors, BytesThatAreNotUtf8AreNotJsonAndTheMessageStaysUtf8) {
  const absl::Status st = Parse(Reply("{\"id\":17,\"ok\":false,\"error\":\"\xff\xfe\"}")).status();
  EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "ill-formed UTF-8")) << st;
  EXPECT_TRUE(IsValidUtf8(st.message()));
}

TEST(ParseReplyErrors, TopLevel) {
  ExpectError(Parse("[1,2]").status(), "reply: must be a JSON object, not array");
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

TEST(ParseReplyErrors, ResultShape) {
  ExpectError(Parse(Reply("17")).status(), "reply: results[0]: must be an object, not number");
  ExpectError(Parse(Reply(R"({"ok":true})")).status(), "reply: results[0]: \"id\" is missing");
  ExpectError(Parse(Reply(R"({"id":"17","ok":true})")).status(),
              "reply: results[0].id: must be an integer, not string");
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

TEST(OutboxHeadersJson, TextValuesAsTextOthersAsHex) {
  EXPECT_FALSE(OutboxHeadersJson({}).has_value());
  EXPECT_EQ(OutboxHeadersJson({{"a", "x"}, {"b", std::string("\xff\x00", 2)}}),
            R"([{"key":"a","value":"x"},{"key":"b","value_hex":"ff00"}])");
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

TEST(ItemStatus, FailuresCarryTheirHintsAndResultOnlyRefusesEffects) {
  Item item = MakeItem(17, "");
  HandlerCall call;
  call.item = &item;
  ItemReply failed;
  failed.error = "upstream 503";
  failed.retry_in = absl::Seconds(30);
  failed.dead = true;
  absl::Status st = ItemStatus(call, failed, ApplyResultOnly);
  EXPECT_TRUE(absl::IsUnknown(st));
  EXPECT_EQ(st.message(), "upstream 503");
  EXPECT_EQ(RetryInOf(st), absl::Seconds(30));
  EXPECT_TRUE(IsDeadNow(st));

  ItemReply ok;
  ok.ok = true;
  ok.result = "25";
  EXPECT_TRUE(ItemStatus(call, ok, ApplyResultOnly).ok());
  EXPECT_EQ(call.result, "25");

  ok.enqueue.emplace_back();
  call.result.reset();
  st = ItemStatus(call, ok, ApplyResultOnly);
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  EXPECT_FALSE(call.result.has_value());
}

}  // namespace
}  // namespace partq
