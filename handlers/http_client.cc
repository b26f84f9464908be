#include "handlers/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

#ifndef PARTQ_VERSION
#error "PARTQ_VERSION must be defined by the build"
#endif

namespace partq {

namespace {

// curl_global_init is not thread-safe and must run before any other libcurl
// call; a function-local static runs it exactly once, whichever worker
// thread creates the first client. curl_global_cleanup is never called: the
// clients of a process live until it exits.
CURLcode GlobalInit() {
  static const CURLcode code = curl_global_init(CURL_GLOBAL_DEFAULT);
  return code;
}

std::string Mib(size_t bytes) {
  if (bytes % (size_t{1} << 20) == 0) return absl::StrCat(bytes >> 20, " MiB");
  if (bytes % 1024 == 0) return absl::StrCat(bytes / 1024, " KiB");
  return absl::StrCat(bytes, " bytes");
}

std::string FormatSeconds(absl::Duration d) {
  return absl::StrFormat("%.1f s", absl::ToDoubleSeconds(d));
}

// The first `limit` bytes of `body`, C-escaped and quoted, with its size:
// safe to put in a log line or an item's last error whatever the server sent.
std::string Preview(absl::string_view body, size_t limit) {
  std::string out = absl::StrCat("\"", absl::CHexEscape(body.substr(0, limit)), "\"");
  if (body.size() > limit) absl::StrAppend(&out, "...");
  absl::StrAppend(&out, " (", body.size(), " bytes)");
  return out;
}

bool IsToken(absl::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (absl::ascii_isalnum(c)) continue;
    if (absl::string_view("!#$%&'*+-.^_`|~").find(c) == absl::string_view::npos) return false;
  }
  return true;
}

bool ReservedHeader(absl::string_view name) {
  for (absl::string_view r : {"Content-Type", "Accept", "User-Agent", "Expect", "Idempotency-Key",
                              "Host", "Content-Length", "Transfer-Encoding", "Connection"}) {
    if (absl::EqualsIgnoreCase(name, r)) return true;
  }
  return false;
}

bool ReadableFile(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  std::fclose(f);
  return true;
}

bool IsTlsError(CURLcode code) {
  switch (code) {
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_SSL_SHUTDOWN_FAILED:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CLIENTCERT:
      return true;
    default:
      return false;
  }
}

// RedactUrl of `url` (resolved against `base` when given: a redirect's
// Location may be relative), and the URL's scheme (lower case) into *scheme.
std::string RedactedUrl(absl::string_view url, std::string* scheme,
                        absl::string_view base = absl::string_view()) {
  CURLU* u = curl_url();
  if (u == nullptr) return "";
  std::string out;
  const bool based =
      base.empty() || curl_url_set(u, CURLUPART_URL, std::string(base).c_str(), 0) == CURLUE_OK;
  // CURLU_NON_SUPPORT_SCHEME: an ftp:// or other URL given by mistake is
  // parsed too, so its user info is found (and left out) like any other.
  if (based && curl_url_set(u, CURLUPART_URL, std::string(url).c_str(), CURLU_NON_SUPPORT_SCHEME) ==
                   CURLUE_OK) {
    curl_url_set(u, CURLUPART_USER, nullptr, 0);
    curl_url_set(u, CURLUPART_PASSWORD, nullptr, 0);
    curl_url_set(u, CURLUPART_OPTIONS, nullptr, 0);
    curl_url_set(u, CURLUPART_QUERY, nullptr, 0);
    curl_url_set(u, CURLUPART_FRAGMENT, nullptr, 0);
    char* part = nullptr;
    if (curl_url_get(u, CURLUPART_URL, &part, 0) == CURLUE_OK) {
      out = part;
      curl_free(part);
    }
    if (curl_url_get(u, CURLUPART_SCHEME, &part, 0) == CURLUE_OK) {
      *scheme = absl::AsciiStrToLower(part);
      curl_free(part);
    }
  }
  curl_url_cleanup(u);
  return out;
}

// What happened to a connection that broke, in words: libcurl's own ("Empty
// reply from server") name its symptom, not the event. `answered`: the
// status line `status_text` had come, then `body_bytes` of the body (of
// `declared`, when the server declared its length).
std::string ConnectionBroke(CURLcode code, bool answered, const std::string& status_text,
                            size_t body_bytes, int64_t declared) {
  const std::string got = absl::StrCat(
      body_bytes, declared >= 0 ? absl::StrCat(" of ", declared) : std::string(), " body bytes");
  switch (code) {
    case CURLE_GOT_NOTHING:
      return "the handler's server closed the connection before answering (it may have "
             "crashed or been stopped)";
    case CURLE_SEND_ERROR:
      return "the connection broke while the request was being sent (the handler's server "
             "closed or reset it)";
    case CURLE_COULDNT_CONNECT:
      return "the request went out on a kept-alive connection that broke before an answer "
             "came, and a new connection was refused (the handler's server may have crashed "
             "or been stopped)";
    case CURLE_PARTIAL_FILE:
      return absl::StrCat("the handler's server closed the connection in the middle of its ",
                          status_text, " answer, after ", got);
    case CURLE_RECV_ERROR:
      return answered ? absl::StrCat("the connection broke in the middle of the ", status_text,
                                     " answer, after ", got)
                      : "the connection broke before the handler's server answered (it reset "
                        "or closed the connection: it may have crashed or been stopped)";
    default:
      return answered ? absl::StrCat("the connection failed after ", status_text, " began")
                      : "the connection failed before an answer came";
  }
}

std::string HeaderValue(CURL* curl, const char* name) {
  curl_header* h = nullptr;
  if (curl_easy_header(curl, name, 0, CURLH_HEADER, -1, &h) != CURLHE_OK || h == nullptr) {
    return "";
  }
  return std::string(absl::StripAsciiWhitespace(h->value));
}

// One call's progress, written by libcurl's callbacks.
struct Transfer {
  const HttpClientOptions* options = nullptr;
  const std::atomic<bool>* cancel = nullptr;
  CURL* curl = nullptr;
  std::string body;
  int64_t header_bytes = 0;
  bool connected = false;        // a connection was made or reused and the request went out
  bool answered = false;         // the status line of a final (non-1xx) response arrived
  int status = 0;                // of the last status line
  std::string reason;            // its reason phrase
  int64_t declared_length = -1;  // Content-Length, when the server sent one
  absl::Time window_start;       // the low-speed window
  int64_t window_bytes = 0;      // bytes received when it started
  int64_t slow_bytes = -1;       // set when the low-speed rule stopped the call...
  absl::Duration slow_window;    // ... with what came in over how long
  bool too_large = false;
  bool cancelled = false;

  int64_t Received() const { return header_bytes + static_cast<int64_t>(body.size()); }

  // Forgets the last call (keeping the body's buffer) for one that
  // `cancel_flag` may stop.
  void Begin(const std::atomic<bool>* cancel_flag) {
    cancel = cancel_flag;
    body.clear();
    header_bytes = 0;
    connected = false;
    answered = false;
    status = 0;
    reason.clear();
    declared_length = -1;
    window_bytes = 0;
    slow_bytes = -1;
    too_large = false;
    cancelled = false;
  }
};

}  // namespace

bool UrlHasCredentials(absl::string_view url) {
  CURLU* u = curl_url();
  if (u == nullptr) return false;
  bool found = false;
  if (curl_url_set(u, CURLUPART_URL, std::string(url).c_str(), CURLU_NON_SUPPORT_SCHEME) ==
      CURLUE_OK) {
    for (CURLUPart part : {CURLUPART_USER, CURLUPART_PASSWORD}) {
      char* value = nullptr;
      if (curl_url_get(u, part, &value, 0) == CURLUE_OK) {
        found = true;
        curl_free(value);
      }
    }
  }
  curl_url_cleanup(u);
  return found;
}

std::string RedactUrl(absl::string_view url) {
  std::string scheme;
  return RedactedUrl(url, &scheme);
}

absl::Status CheckHttpUrl(absl::string_view url) {
  // What the message shows of it: never its user info, query or fragment;
  // nothing when libcurl cannot parse it (then it cannot tell them apart).
  const std::string redacted = RedactUrl(url);
  const std::string shown =
      redacted.empty() ? std::string("(not shown)") : absl::CHexEscape(redacted.substr(0, 200));
  CURLU* u = curl_url();
  if (u == nullptr) return absl::ResourceExhaustedError("cannot allocate a URL handle");
  const CURLUcode rc = curl_url_set(u, CURLUPART_URL, std::string(url).c_str(), 0);
  std::string scheme;
  char* part = nullptr;
  if (rc == CURLUE_OK && curl_url_get(u, CURLUPART_SCHEME, &part, 0) == CURLUE_OK) {
    scheme = absl::AsciiStrToLower(part);
    curl_free(part);
  }
  curl_url_cleanup(u);
  if (rc != CURLUE_OK) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a usable URL: \"", shown, "\": ", curl_url_strerror(rc)));
  }
  if (scheme != "http" && scheme != "https") {
    return absl::InvalidArgumentError(absl::StrCat("not an http or https URL: \"", shown, "\""));
  }
  return absl::OkStatus();
}

bool HasLineBreakOrNul(absl::string_view s) {
  return s.find_first_of(absl::string_view("\r\n\0", 3)) != absl::string_view::npos;
}

absl::string_view HttpFailureName(HttpFailure failure) {
  switch (failure) {
    case HttpFailure::kNone:
      return "none";
    case HttpFailure::kInvalidRequest:
      return "invalid_request";
    case HttpFailure::kConnect:
      return "connect";
    case HttpFailure::kTls:
      return "tls";
    case HttpFailure::kTimeout:
      return "timeout";
    case HttpFailure::kTooSlow:
      return "too_slow";
    case HttpFailure::kCancelled:
      return "cancelled";
    case HttpFailure::kTransport:
      return "transport";
    case HttpFailure::kTooLarge:
      return "too_large";
    case HttpFailure::kRedirect:
      return "redirect";
    case HttpFailure::kClientError:
      return "client_error";
    case HttpFailure::kServerError:
      return "server_error";
    case HttpFailure::kNotJson:
      return "not_json";
    case HttpFailure::kEmptyBody:
      return "empty_body";
  }
  return "unknown";
}

absl::string_view HttpUserAgent() { return "partq/" PARTQ_VERSION; }

std::optional<absl::Duration> ParseRetryAfter(absl::string_view value, absl::Time now) {
  value = absl::StripAsciiWhitespace(value);
  if (value.empty()) return std::nullopt;
  if (std::all_of(value.begin(), value.end(), [](char c) { return absl::ascii_isdigit(c); })) {
    int64_t seconds = 0;
    if (!absl::SimpleAtoi(value, &seconds)) return std::nullopt;  // beyond int64
    return absl::Seconds(seconds);
  }
  // An HTTP-date (IMF-fixdate, or the obsolete RFC 850 and asctime forms,
  // which RFC 9110 still asks recipients to accept): curl_getdate reads all
  // three. It also reads looser forms; a server that sends one gets it read.
  const time_t t = curl_getdate(std::string(value).c_str(), nullptr);
  if (t == -1) return std::nullopt;
  return std::max(absl::FromTimeT(t) - now, absl::ZeroDuration());
}

bool IsJsonContentType(absl::string_view content_type) {
  absl::string_view media = content_type.substr(0, content_type.find(';'));
  media = absl::StripAsciiWhitespace(media);
  if (absl::EqualsIgnoreCase(media, "application/json")) return true;
  return absl::StartsWithIgnoreCase(media, "application/") &&
         absl::EndsWithIgnoreCase(media, "+json");
}

namespace {

size_t OnBody(char* data, size_t size, size_t n, void* userdata) {
  auto* t = static_cast<Transfer*>(userdata);
  const size_t bytes = size * n;
  if (t->body.size() + bytes > t->options->max_response_bytes) {
    t->too_large = true;
    return 0;  // not the size given: libcurl ends the transfer (CURLE_WRITE_ERROR)
  }
  t->body.append(data, bytes);
  return bytes;
}

size_t OnHeader(char* data, size_t size, size_t n, void* userdata) {
  auto* t = static_cast<Transfer*>(userdata);
  const size_t bytes = size * n;
  t->header_bytes += static_cast<int64_t>(bytes);
  absl::string_view line(data, bytes);
  if (absl::StartsWith(line, "HTTP/")) {
    // "HTTP/1.1 200 OK": interim 1xx responses (100 Continue, 103 Early
    // Hints) are not the answer; the server may still be working after them.
    absl::string_view rest = line.substr(std::min(line.find(' '), line.size()));
    rest = absl::StripLeadingAsciiWhitespace(rest);
    int code = 0;
    if (!absl::SimpleAtoi(rest.substr(0, 3), &code)) code = 0;
    t->status = code;
    t->reason =
        std::string(absl::StripAsciiWhitespace(rest.substr(std::min<size_t>(3, rest.size()))));
    if (code >= 200 && !t->answered) {
      t->answered = true;
      t->window_start = absl::Now();
      t->window_bytes = t->Received();
    }
    t->declared_length = -1;
  } else if (t->answered && (line == "\r\n" || line == "\n")) {
    // End of the headers: refuse a declared body over the limit before any
    // of it arrives, and make room for one under it.
    curl_off_t length = -1;
    if (curl_easy_getinfo(t->curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length) == CURLE_OK &&
        length >= 0) {
      t->declared_length = length;
      if (static_cast<uint64_t>(length) > t->options->max_response_bytes) {
        t->too_large = true;
        return 0;
      }
      t->body.reserve(static_cast<size_t>(length));
    }
  }
  return bytes;
}

// Called once a connection is made or reused, before the request is sent.
int OnConnected(void* userdata, char*, char*, int, int) {
  static_cast<Transfer*>(userdata)->connected = true;
  return CURL_PREREQFUNC_OK;
}

// Called by libcurl while a transfer runs: often while bytes move, about
// once a second while none do.
int OnProgress(void* userdata, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(userdata);
  if (t->cancel != nullptr && t->cancel->load(std::memory_order_relaxed)) {
    t->cancelled = true;
    return 1;  // CURLE_ABORTED_BY_CALLBACK
  }
  // libcurl's own low-speed limit (CURLOPT_LOW_SPEED_*) also counts the
  // time before the server answers, which is the handler's run time and may
  // be long; this rule starts with the status line. Consecutive windows
  // rather than a sliding one: a check costs two numbers.
  const HttpClientOptions& o = *t->options;
  if (t->answered && o.low_speed_bytes_per_second > 0) {
    const absl::Time now = absl::Now();
    const absl::Duration elapsed = now - t->window_start;
    if (elapsed >= o.low_speed_window) {
      const int64_t got = t->Received() - t->window_bytes;
      if (got < o.low_speed_bytes_per_second * absl::ToDoubleSeconds(elapsed)) {
        t->slow_bytes = got;
        t->slow_window = elapsed;
        return 1;
      }
      t->window_start = now;
      t->window_bytes = t->Received();
    }
  }
  return 0;
}

// Why a call failed (HttpResult::failure) and what to say about it (error).
struct Failure {
  HttpFailure failure;
  std::string error;
};

// Why a request cannot be sent (its URL, whose RedactedUrl is `where` and
// `scheme`, or one of its headers); nullopt when it can.
std::optional<std::string> InvalidRequest(absl::string_view url, const std::string& where,
                                          const std::string& scheme,
                                          const HttpRequestHeaders& headers) {
  if (where.empty() || (scheme != "http" && scheme != "https")) {
    absl::Status bad = CheckHttpUrl(url);
    return bad.ok() ? absl::StrCat("not a usable URL: \"",
                                   absl::CHexEscape(where.empty() ? "(not shown)" : where), "\"")
                    : std::string(bad.message());
  }
  if (!headers.idempotency_key.empty() && HasLineBreakOrNul(headers.idempotency_key)) {
    return "the Idempotency-Key contains a line break or NUL character";
  }
  for (const auto& [name, value] : headers.extra) {
    if (!IsToken(name)) {
      return absl::StrCat("not a valid header name: \"", absl::CHexEscape(name), "\"");
    }
    if (ReservedHeader(name)) {
      return absl::StrCat("the ", name, " header is set by partq and cannot be given");
    }
    if (HasLineBreakOrNul(value)) {
      return absl::StrCat("the value of header ", name, " contains a line break or NUL character");
    }
  }
  return std::nullopt;
}

// The request's headers as libcurl takes them; *ok turns false if one could
// not be added (out of memory).
curl_slist* HeaderList(const HttpRequestHeaders& headers, bool* ok) {
  curl_slist* list = nullptr;
  auto add = [&list, ok](const std::string& line) {
    curl_slist* next = curl_slist_append(list, line.c_str());
    if (next == nullptr) {
      *ok = false;
    } else {
      list = next;
    }
  };
  add("Content-Type: application/json");
  add("Accept: application/json");
  add("Expect:");  // no 100-continue round trip before a large body
  if (!headers.idempotency_key.empty()) add("Idempotency-Key: " + headers.idempotency_key);
  for (const auto& [name, value] : headers.extra) {
    // "Name;" is libcurl's spelling of a header with an empty value.
    add(value.empty() ? absl::StrCat(name, ";") : absl::StrCat(name, ": ", value));
  }
  return list;
}

// Sends the request on `c` and waits for the answer (OUT_OF_MEMORY without
// sending when the header list is incomplete). `list` stays the caller's.
CURLcode Perform(CURL* c, const std::string& url, curl_slist* list, bool list_ok,
                 absl::string_view body, long timeout_ms) {
  CURLcode code = CURLE_OUT_OF_MEMORY;
  static constexpr char kEmpty[] = "";
  if (list_ok && curl_easy_setopt(c, CURLOPT_URL, url.c_str()) == CURLE_OK &&
      curl_easy_setopt(c, CURLOPT_HTTPHEADER, list) == CURLE_OK &&
      curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size())) ==
          CURLE_OK &&
      curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.empty() ? kEmpty : body.data()) == CURLE_OK &&
      curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms) == CURLE_OK) {
    code = curl_easy_perform(c);
  }
  // The handle must not point at this call's memory once it returns.
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, nullptr);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, nullptr);
  return code;
}

// The status of the answer, if one came (`answered`), and its content type
// and Retry-After, into *result; `end` is when the call ended.
void ReadAnswerHeaders(CURL* c, bool answered, absl::Time end, HttpResult* result) {
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  result->status = answered ? static_cast<int>(status) : 0;
  if (result->status == 0) return;
  char* type = nullptr;
  if (curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &type) == CURLE_OK && type != nullptr) {
    result->content_type = type;
  }
  if (std::string retry = HeaderValue(c, "Retry-After"); !retry.empty()) {
    // An HTTP-date counts from the server's own Date when it sent one, so
    // clock skew between the two machines does not stretch the delay.
    absl::Time now = end;
    if (std::string date = HeaderValue(c, "Date"); !date.empty()) {
      if (time_t d = curl_getdate(date.c_str(), nullptr); d != -1) now = absl::FromTimeT(d);
    }
    result->retry_after = ParseRetryAfter(retry, now);
  }
}

// A call the callbacks stopped: cancelled, too slow or too large (after
// `body_bytes` of the body had come); nullopt for any other.
std::optional<Failure> StoppedFailure(const Transfer& t, const HttpClientOptions& options,
                                      const std::string& where, const std::string& took,
                                      const std::string& status_text, size_t body_bytes) {
  if (t.cancelled) {
    return Failure{HttpFailure::kCancelled,
                   absl::StrCat("POST ", where, ": cancelled after ", took)};
  }
  if (t.slow_bytes >= 0) {
    return Failure{
        HttpFailure::kTooSlow,
        absl::StrCat("POST ", where, ": ", status_text, " came too slowly: ", t.slow_bytes,
                     " bytes in ", FormatSeconds(t.slow_window), ", under the minimum of ",
                     options.low_speed_bytes_per_second, " bytes/s (", body_bytes,
                     t.declared_length >= 0 ? absl::StrCat(" of ", t.declared_length) : "",
                     " body bytes received)")};
  }
  if (t.too_large) {
    return Failure{HttpFailure::kTooLarge,
                   absl::StrCat("POST ", where, ": ", status_text, " with a body over the ",
                                Mib(options.max_response_bytes), " limit",
                                t.declared_length >= 0
                                    ? absl::StrCat(" (Content-Length ", t.declared_length, ")")
                                    : std::string())};
  }
  return std::nullopt;
}

// A call that ran out of time (CURLE_OPERATION_TIMEDOUT): connecting,
// waiting for the answer, or receiving it (`body_bytes` of its body).
Failure TimeoutFailure(const Transfer& t, const std::string& where, const std::string& took,
                       const std::string& detail, const std::string& status_text,
                       size_t body_bytes) {
  if (!t.connected) {
    return {HttpFailure::kConnect,
            absl::StrCat("POST ", where, ": could not connect within ", took, ": ", detail)};
  }
  if (!t.answered) {
    return {HttpFailure::kTimeout,
            absl::StrCat("POST ", where, ": no response before the deadline (", took,
                         "): the server took the request but did not answer")};
  }
  return {
      HttpFailure::kTimeout,
      absl::StrCat("POST ", where, ": ", status_text,
                   " began but did not finish before the deadline (", took, "): ", body_bytes,
                   t.declared_length >= 0 ? absl::StrCat(" of ", t.declared_length) : std::string(),
                   " body bytes received")};
}

// Any other libcurl error `code`: the host name, the address, the URL, TLS
// or a connection that broke (after `body_bytes` of the body).
Failure CurlFailure(CURLcode code, const Transfer& t, const HttpClientOptions& options,
                    const std::string& where, const std::string& scheme, const std::string& detail,
                    const std::string& status_text, size_t body_bytes) {
  switch (code) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
      return {HttpFailure::kConnect,
              absl::StrCat("POST ", where, ": cannot resolve the host name: ", detail)};
    case CURLE_COULDNT_CONNECT:
      // A kept-alive connection took the request and then broke, and
      // libcurl's fresh connect was refused: the request went out (the
      // server may have run it), so it is no "nothing was sent". Said so,
      // the batch fails as for any broken connection, and a server that a
      // poison item kills uses up that item's attempts.
      if (t.connected) break;
      return {HttpFailure::kConnect,
              absl::StrCat("POST ", where,
                           ": cannot connect (refused or unreachable; is the handler "
                           "serving on that address?): ",
                           detail)};
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
      return {HttpFailure::kInvalidRequest, absl::StrCat("POST ", where, ": bad URL: ", detail)};
    default:
      break;
  }
  if (IsTlsError(code)) {
    std::string hint;
    if (code == CURLE_PEER_FAILED_VERIFICATION) {
      hint = options.ca_file.empty()
                 ? " (a server certificate from a private CA needs that CA's bundle: "
                   "HttpClientOptions::ca_file)"
                 : absl::StrCat(" (verified with the CA file ", options.ca_file, ")");
    }
    return {HttpFailure::kTls, absl::StrCat("POST ", where, ": TLS failed: ", detail, hint)};
  }
  if (scheme == "https" && !t.answered && (code == CURLE_RECV_ERROR || code == CURLE_SEND_ERROR) &&
      absl::StrContains(detail, "SSL") && absl::StrContains(detail, "alert")) {
    // TLS 1.3 servers check a client certificate after the handshake, so
    // their refusal arrives as an alert on the first read.
    return {HttpFailure::kTls,
            absl::StrCat("POST ", where, ": TLS failed: the server ended the session: ", detail,
                         options.client_cert_file.empty()
                             ? " (does it require a client certificate? "
                               "HttpClientOptions::client_cert_file)"
                             : absl::StrCat(" (does it trust the client certificate ",
                                            options.client_cert_file, "?)"))};
  }
  return {HttpFailure::kTransport, absl::StrCat("POST ", where, ": ",
                                                ConnectionBroke(code, t.answered, status_text,
                                                                body_bytes, t.declared_length),
                                                " (libcurl: ", detail, ")")};
}

// Why a whole answer other than 429 and 503 is no reply: its status, or for
// a 2xx its body; nullopt for a 2xx JSON reply. `url`: the request's, to
// resolve a redirect's Location against.
std::optional<Failure> AnswerFailure(const HttpResult& result, CURL* c, const std::string& url,
                                     const HttpClientOptions& options, const std::string& where,
                                     const std::string& status_text) {
  const int s = result.status;
  if (s >= 200 && s <= 299) {
    if (result.body.empty()) {
      return Failure{HttpFailure::kEmptyBody,
                     absl::StrCat("POST ", where, ": ", status_text,
                                  " with an empty body; a JSON reply was expected")};
    }
    if (!IsJsonContentType(result.content_type)) {
      return Failure{
          HttpFailure::kNotJson,
          absl::StrCat("POST ", where, ": ", status_text, " with content type ",
                       result.content_type.empty()
                           ? std::string("(none)")
                           : absl::StrCat("\"", absl::CHexEscape(result.content_type), "\""),
                       ", not JSON; body ", Preview(result.body, options.preview_bytes))};
    }
    return std::nullopt;
  }
  if (s >= 300 && s <= 399) {
    // The Location, resolved against the request's URL, as RedactUrl shows
    // URLs: a redirect to a URL with credentials in it must not leak them.
    const std::string location = HeaderValue(c, "Location");
    std::string location_scheme;
    const std::string shown_location = RedactedUrl(location, &location_scheme, url);
    return Failure{HttpFailure::kRedirect,
                   absl::StrCat("POST ", where, ": ", status_text, " redirects to ",
                                location.empty() ? std::string("(no Location)")
                                : shown_location.empty()
                                    ? std::string("a Location partq cannot parse")
                                    : absl::StrCat("\"", absl::CHexEscape(shown_location), "\""),
                                "; redirects are not followed: use the final URL")};
  }
  const std::string with_body =
      result.body.empty() ? std::string(", empty body")
                          : absl::StrCat(", body ", Preview(result.body, options.preview_bytes));
  if (s >= 400 && s <= 499) {
    return Failure{HttpFailure::kClientError,
                   absl::StrCat("POST ", where, ": ", status_text, with_body)};
  }
  return Failure{HttpFailure::kServerError,
                 absl::StrCat("POST ", where, ": ", status_text, with_body)};
}

}  // namespace

struct HttpClient::State {
  CURL* curl = nullptr;
  char error[CURL_ERROR_SIZE] = {};
  Transfer transfer;
  ~State() {
    if (curl != nullptr) curl_easy_cleanup(curl);
  }
};

absl::StatusOr<std::unique_ptr<HttpClient>> HttpClient::Create(HttpClientOptions options) {
  if (options.max_response_bytes == 0) {
    return absl::InvalidArgumentError("http client: max_response_bytes must be positive");
  }
  if (options.connect_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("http client: connect_timeout must be positive");
  }
  if (options.low_speed_bytes_per_second < 0 ||
      (options.low_speed_bytes_per_second > 0 &&
       options.low_speed_window <= absl::ZeroDuration())) {
    return absl::InvalidArgumentError(
        "http client: the low-speed limit needs bytes per second >= 0 and a positive window");
  }
  for (const auto& [what, path] :
       {std::pair<const char*, const std::string*>{"CA file", &options.ca_file},
        {"client certificate", &options.client_cert_file},
        {"client key", &options.client_key_file}}) {
    if (!path->empty() && !ReadableFile(*path)) {
      return absl::InvalidArgumentError(
          absl::StrCat("http client: cannot read the ", what, " ", *path));
    }
  }
  if (!options.client_key_file.empty() && options.client_cert_file.empty()) {
    return absl::InvalidArgumentError(
        "http client: a client key needs its client certificate (client_cert_file)");
  }
  if (CURLcode code = GlobalInit(); code != CURLE_OK) {
    return absl::InternalError(
        absl::StrCat("http client: libcurl initialisation failed: ", curl_easy_strerror(code)));
  }
  auto state = std::make_unique<State>();
  state->curl = curl_easy_init();
  if (state->curl == nullptr) return absl::InternalError("http client: curl_easy_init failed");
  CURL* c = state->curl;
  state->transfer.curl = c;
  // Options that hold for every call; Post sets the per-call ones. A failed
  // setopt here is a libcurl built without a feature we rely on.
  CURLcode code = CURLE_OK;
  auto set = [&code](CURLcode r) {
    if (code == CURLE_OK) code = r;
  };
  set(curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L));  // threads: no SIGALRM for DNS timeouts
  set(curl_easy_setopt(c, CURLOPT_ERRORBUFFER, state->error));
  set(curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https"));
  set(curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L));
  // One request at a time per client: HTTP/2's multiplexing would buy
  // nothing, and 1.1 keeps what reaches a sidecar simple to reason about.
  set(curl_easy_setopt(c, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1)));
  set(curl_easy_setopt(c, CURLOPT_PROXY, ""));  // not from http_proxy & co
  set(curl_easy_setopt(c, CURLOPT_USERAGENT, "partq/" PARTQ_VERSION));
  set(curl_easy_setopt(c, CURLOPT_POST, 1L));
  set(curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                       static_cast<long>(absl::ToInt64Milliseconds(options.connect_timeout))));
  set(curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, OnBody));
  set(curl_easy_setopt(c, CURLOPT_WRITEDATA, &state->transfer));
  set(curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, OnHeader));
  set(curl_easy_setopt(c, CURLOPT_HEADERDATA, &state->transfer));
  set(curl_easy_setopt(c, CURLOPT_PREREQFUNCTION, OnConnected));
  set(curl_easy_setopt(c, CURLOPT_PREREQDATA, &state->transfer));
  set(curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L));
  set(curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, OnProgress));
  set(curl_easy_setopt(c, CURLOPT_XFERINFODATA, &state->transfer));
  set(curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, options.insecure ? 0L : 1L));
  set(curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, options.insecure ? 0L : 2L));
  if (!options.ca_file.empty()) set(curl_easy_setopt(c, CURLOPT_CAINFO, options.ca_file.c_str()));
  if (!options.client_cert_file.empty()) {
    set(curl_easy_setopt(c, CURLOPT_SSLCERT, options.client_cert_file.c_str()));
    set(curl_easy_setopt(c, CURLOPT_SSLKEY,
                         options.client_key_file.empty() ? options.client_cert_file.c_str()
                                                         : options.client_key_file.c_str()));
  }
  if (code != CURLE_OK) {
    return absl::InternalError(
        absl::StrCat("http client: libcurl refused an option: ", curl_easy_strerror(code)));
  }
  return std::unique_ptr<HttpClient>(new HttpClient(std::move(options), std::move(state)));
}

HttpClient::HttpClient(HttpClientOptions options, std::unique_ptr<State> state)
    : options_(std::move(options)), state_(std::move(state)) {
  // The callbacks read the options through the transfer; point it at ours
  // (Create's copy moved here).
  state_->transfer.options = &options_;
}

HttpClient::~HttpClient() = default;

HttpResult HttpClient::Post(absl::string_view url, absl::string_view body,
                            const HttpRequestHeaders& headers, absl::Time deadline,
                            const std::atomic<bool>* cancel) {
  HttpResult result;
  auto fail = [&result](Failure f) {
    result.outcome = HttpOutcome::kFailed;
    result.failure = f.failure;
    result.error = std::move(f.error);
    return std::move(result);
  };

  // One parse of the URL per request; CheckHttpUrl parses it again only to
  // say what is wrong with it.
  std::string scheme;
  const std::string where = RedactedUrl(url, &scheme);
  if (std::optional<std::string> why = InvalidRequest(url, where, scheme, headers)) {
    return fail({HttpFailure::kInvalidRequest, *std::move(why)});
  }
  const absl::Time start = absl::Now();
  long timeout_ms = 0;  // none
  if (deadline != absl::InfiniteFuture()) {
    if (deadline <= start) {
      return fail({HttpFailure::kTimeout,
                   absl::StrCat("POST ", where, ": the deadline had passed before the request")});
    }
    // Rounded up: a deadline 0.4 ms away is still a deadline, not "none".
    timeout_ms = static_cast<long>(std::max<int64_t>(
        1, absl::ToInt64Milliseconds(absl::Ceil(deadline - start, absl::Milliseconds(1)))));
  }

  bool list_ok = true;
  curl_slist* list = HeaderList(headers, &list_ok);
  CURL* c = state_->curl;
  Transfer& t = state_->transfer;
  t.Begin(cancel);
  state_->error[0] = '\0';
  const std::string url_copy(url);
  const CURLcode code = Perform(c, url_copy, list, list_ok, body, timeout_ms);
  curl_slist_free_all(list);
  t.cancel = nullptr;
  const absl::Time end = absl::Now();

  ReadAnswerHeaders(c, t.answered, end, &result);
  const std::string detail =
      state_->error[0] != '\0' ? std::string(state_->error) : std::string(curl_easy_strerror(code));
  const std::string took = FormatSeconds(end - start);
  const std::string status_text = t.reason.empty()
                                      ? absl::StrCat("HTTP ", result.status)
                                      : absl::StrCat("HTTP ", result.status, " ", t.reason);

  if (code != CURLE_OK) {
    const size_t body_bytes = t.body.size();
    std::string().swap(t.body);  // a partial body is no answer; do not keep it either
    if (std::optional<Failure> stopped =
            StoppedFailure(t, options_, where, took, status_text, body_bytes)) {
      return fail(*std::move(stopped));
    }
    if (code == CURLE_OPERATION_TIMEDOUT) {
      return fail(TimeoutFailure(t, where, took, detail, status_text, body_bytes));
    }
    return fail(CurlFailure(code, t, options_, where, scheme, detail, status_text, body_bytes));
  }

  result.body = std::move(t.body);
  if (result.status == 429 || result.status == 503) {
    result.outcome = HttpOutcome::kThrottled;
    result.error =
        absl::StrCat("POST ", where, ": ", status_text,
                     result.retry_after
                         ? absl::StrCat(", retry after ", absl::FormatDuration(*result.retry_after))
                         : std::string(", no Retry-After"));
    return result;
  }
  if (std::optional<Failure> bad =
          AnswerFailure(result, c, url_copy, options_, where, status_text)) {
    return fail(*std::move(bad));
  }
  result.outcome = HttpOutcome::kOk;
  return result;
}

}  // namespace partq
