// The HTTP transport under the `http:URL` handler: POSTs a request body to a
// URL with libcurl and classifies the answer, without knowing what the body
// means (the JSON contract is handlers/protocol.h's).
//
// Outcomes (HttpResult::outcome):
//   kOk         a 2xx response with a JSON content type (application/json or
//               any application/*+json) and a non-empty body.
//   kThrottled  429 or 503; retry_after holds the server's Retry-After
//               (seconds or an HTTP-date) when it sent one.
//   kFailed     anything else; failure says which case and error says it in
//               words, naming the URL (without user info, query or fragment)
//               and, for unexpected bodies, an escaped preview of the first
//               HttpClientOptions::preview_bytes.
//
// Limits (HttpClientOptions, defaults in brackets):
//   - The whole call, from connecting to the last byte of the response, ends
//     at the caller's deadline (kTimeout).
//   - Connecting (name resolution, TCP, TLS handshake) gives up after
//     connect_timeout [10 s] (kConnect).
//   - Once the status line of the response has arrived, the rest must come at
//     low_speed_bytes_per_second [1024] or faster, measured over windows of
//     low_speed_window [5 s]: a server that trickles its answer fails
//     (kTooSlow) 5 to 6 s after it began answering, and a transfer that stalls
//     midway within 11 s, however far the deadline is. The time a server
//     takes before it answers is bounded only by the deadline (a handler may
//     think for minutes). A server that streams its replies slowly on purpose
//     must buffer them or get a lower limit.
//   - A response body over max_response_bytes [16 MiB] fails (kTooLarge) as
//     soon as its Content-Length or the bytes received pass the limit; it is
//     never buffered whole.
//
// Every request carries Content-Type and Accept application/json, User-Agent
// partq/VERSION, the caller's Idempotency-Key and no `Expect: 100-continue`
// (the body goes at once). Redirects are never followed (a 3xx fails, naming
// its Location); proxy environment variables (http_proxy...) are ignored:
// the usual target is a sidecar on localhost. TLS verifies the server's
// certificate chain and host name unless `insecure` is set (for tests only).
//
// Connections: one HttpClient keeps one libcurl easy handle, whose
// connection cache keeps the connection alive between calls (HTTP/1.1
// keep-alive), so a worker thread that calls the same sidecar reuses one TCP
// connection. A complete answer of any status keeps the connection; a call
// cut short (deadline, cancel, too slow, too large, broken) closes it, and
// either way the client is ready for the next call. libcurl resends a
// request on a fresh connection when a kept-alive one turns out closed
// before any byte of an answer; the Idempotency-Key lets the server see that
// (the handler contract requires it anyway: items can run more than once).
//
// Threading: not thread-safe. Use one HttpClient per thread (a worker thread
// keeps its own); different clients may run at the same time. libcurl runs
// without signals (CURLOPT_NOSIGNAL) and its global state is initialised
// once, by the first Create, thread-safely.
#ifndef PARTQ_HANDLERS_HTTP_CLIENT_H_
#define PARTQ_HANDLERS_HTTP_CLIENT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace partq {

struct HttpClientOptions {
  // A response body larger than this fails the call (kTooLarge).
  size_t max_response_bytes = size_t{16} << 20;
  // Name resolution, TCP connect and TLS handshake; the deadline cuts it shorter.
  absl::Duration connect_timeout = absl::Seconds(10);
  // The minimum speed of a response once it has begun, over each window
  // (see the top of this file). 0 bytes per second turns the rule off.
  int64_t low_speed_bytes_per_second = 1024;
  absl::Duration low_speed_window = absl::Seconds(5);
  // How much of an unexpected body an error message shows (escaped).
  size_t preview_bytes = 200;

  // TLS (https URLs). ca_file: a PEM bundle to verify servers with instead of
  // the system's (a private CA). client_cert_file/client_key_file: a PEM
  // certificate to present (mutual TLS), its key in client_key_file or in
  // the same file. insecure: accept any certificate for any host. FOR TESTS
  // ONLY: anyone on the path can then read and change the traffic.
  std::string ca_file;
  std::string client_cert_file;
  std::string client_key_file;
  bool insecure = false;
};

enum class HttpOutcome {
  kOk,         // 2xx, JSON, non-empty: the body is the answer
  kThrottled,  // 429 or 503: try again later (retry_after if the server said when)
  kFailed,     // see failure and error
};

// Why a call failed; kNone unless the outcome is kFailed.
enum class HttpFailure {
  kNone,
  kInvalidRequest,  // not an http(s) URL, a malformed URL, a bad header
  kConnect,         // name not resolved, connection refused or unreachable, connect timeout
  kTls,             // handshake or certificate verification failed
  kTimeout,         // the deadline passed (or had passed before the call)
  kTooSlow,         // the response came slower than the low-speed limit
  kCancelled,       // the caller's cancel flag was set
  kTransport,       // the connection broke: reset, empty reply, truncated body...
  kTooLarge,        // the body exceeded max_response_bytes
  kRedirect,        // 3xx (never followed)
  kClientError,     // 4xx other than 429
  kServerError,     // 5xx other than 503, or a status outside 200..599
  kNotJson,         // 2xx without a JSON content type
  kEmptyBody,       // 2xx with an empty body
};

// A stable lower-case name ("too_slow"), for logs and metric labels.
absl::string_view HttpFailureName(HttpFailure failure);

// Whether a header value would break the request (a line break or NUL).
bool HasLineBreakOrNul(absl::string_view s);

// `url` for a message: scheme, host, port and path only (libcurl's URL API
// parses it), so credentials in its user info or a token in its query never
// reach a log line, an item's last error or a page. Empty when libcurl cannot
// parse it.
std::string RedactUrl(absl::string_view url);

// Whether `url` carries a user name or password (its user info).
bool UrlHasCredentials(absl::string_view url);

// OK if `url` is an http:// or https:// URL libcurl can use; else
// InvalidArgument saying what is wrong with it (libcurl's words: no host,
// a port out of range...), so a worker can refuse it at start.
absl::Status CheckHttpUrl(absl::string_view url);

struct HttpResult {
  HttpOutcome outcome = HttpOutcome::kFailed;
  HttpFailure failure = HttpFailure::kNone;
  int status = 0;            // of the final response; 0 when none arrived
  std::string body;          // the response body, whatever the status; empty after kTooLarge
  std::string content_type;  // as the server sent it; empty when it sent none
  // Retry-After of the response, as a delay from when it was received (an
  // HTTP-date counts from the response's Date header when present, else from
  // this machine's clock); never negative; not capped.
  std::optional<absl::Duration> retry_after;
  std::string error;  // kFailed and kThrottled: what happened, in one line

  bool ok() const { return outcome == HttpOutcome::kOk; }
};

struct HttpRequestHeaders {
  // Sent as Idempotency-Key when not empty: the same key for every attempt
  // of the same request, so the server can recognise a resend.
  std::string idempotency_key;
  // More headers (Authorization...). Names must be HTTP tokens and values
  // free of CR, LF and NUL; the headers this client sets itself
  // (Content-Type, Accept, User-Agent, Expect, Idempotency-Key, Host,
  // Content-Length, Transfer-Encoding, Connection) cannot be given here.
  std::vector<std::pair<std::string, std::string>> extra;
};

class HttpClient {
 public:
  // InvalidArgument for unusable options (a limit <= 0, an unreadable
  // ca_file or certificate, a key without a certificate); Internal if
  // libcurl cannot be initialised.
  static absl::StatusOr<std::unique_ptr<HttpClient>> Create(HttpClientOptions options = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // POSTs `body` to `url` (http or https) and waits for the answer until
  // `deadline` (absl::InfiniteFuture(): no limit but the low-speed rule once
  // the server answers). `cancel`, when given, may be set by another thread:
  // the call then ends within about a second as kCancelled. Never throws;
  // every problem is in the result.
  HttpResult Post(absl::string_view url, absl::string_view body, const HttpRequestHeaders& headers,
                  absl::Time deadline, const std::atomic<bool>* cancel = nullptr);

  const HttpClientOptions& options() const { return options_; }

 private:
  struct State;
  HttpClient(HttpClientOptions options, std::unique_ptr<State> state);

  HttpClientOptions options_;
  std::unique_ptr<State> state_;
};

// Parses a Retry-After value: delay-seconds ("120") or an HTTP-date ("Fri, 31
// Dec 1999 23:59:59 GMT", counted from `now`; a date in the past is zero).
// nullopt for anything else.
std::optional<absl::Duration> ParseRetryAfter(absl::string_view value, absl::Time now);

// Whether a Content-Type value names JSON: application/json or
// application/*+json, any case, parameters ignored.
bool IsJsonContentType(absl::string_view content_type);

// The User-Agent every request carries: "partq/" and the project version.
absl::string_view HttpUserAgent();

}  // namespace partq

#endif  // PARTQ_HANDLERS_HTTP_CLIENT_H_
