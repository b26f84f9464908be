// The web console (issue 25): a few pages and their JSON endpoints over the
// Store API, served by any HTTP server that hands requests to Handle (the
// partq binary's libmicrohttpd server: cli/http_server.h).
//
// What it reads: the Poller's cached state (poller.h) for queues, parts,
// sessions and hand-offs — one poller per process, whatever the number of
// tabs — and, on demand, Store::ListDead for the dead items page (cached a
// few seconds, so tabs share it too), Store::ListSchedules and
// Store::ListGroups likewise. What it writes, as actions: pause and resume a
// queue (Store::SetPaused), requeue and delete dead items
// (Store::RequeueDead, Store::DeleteDead), delete a schedule
// (Store::DeleteSchedule).
//
// Security:
//   - With a token (ConsoleOptions::token) every page and endpoint but the
//     login form and the static assets needs it: a cookie the login form
//     sets, or `Authorization: Bearer TOKEN`.
//   - Actions are POSTs and need the token always: without one the console
//     is read-only (and so is it with read_only, which refuses every action).
//   - Every POST (the login form too) is refused when its Origin is not
//     this host or Sec-Fetch-Site says another site sent it, and carries the
//     process's CSRF token (X-CSRF-Token header, or the csrf form field;
//     the page has it in <meta name="partq-csrf">) unless it carries the
//     token as `Authorization: Bearer` (scripts): a browser attaches the
//     cookie to any site's request, but no other site's page can set that
//     header.
//   - Logins: wrong tokens are throttled per client address (a wait that
//     doubles with each one past a few, answered 429) and logged at most once
//     a minute; a login's cookie expires on the server (idle, and absolute:
//     ConsoleOptions) and is Secure when the request came over TLS or a proxy
//     says it did (X-Forwarded-Proto or Forwarded: https).
//   - Every response carries SecurityHeaders(): a Content-Security-Policy
//     that allows only this server's scripts, no framing, no sniffing, no
//     caching; user data reaches the browser as JSON and is set as text.
//   - DNS rebinding: a page of another site can point its own name at this
//     address and so read what the console answers to its origin. Without a
//     token (loopback only), or with `allowed_hosts`, a request whose Host
//     is not a name of this console is refused (421): the listen host, and
//     on loopback localhost and the loopback addresses, on every interface
//     any IP address (a rebinding needs a name), and `allowed_hosts`. With a
//     token and no list any name is answered: such a page has no token.
//
// Thread-safety: Handle may be called from many threads at once.
#ifndef PARTQ_CONSOLE_CONSOLE_H_
#define PARTQ_CONSOLE_CONSOLE_H_

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/log_limiter.h"
#include "console/poller.h"
#include "store/store.h"
#include "store/throughput.h"

namespace partq::console {

struct HttpRequest {
  std::string method;                          // GET, POST, ...
  std::string path;                            // without the query string
  std::string query;                           // raw, after '?'
  std::map<std::string, std::string> headers;  // names in lowercase
  std::string body;
  std::string remote_addr;  // the client's address (a proxy's, behind one)
  bool tls = false;         // it came over TLS
};

struct HttpResponse {
  int code = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

struct ConsoleOptions {
  bool read_only = false;
  std::optional<std::string> token;
  // The names the console answers to (HostAllowed): the listen address's
  // host ("" or 0.0.0.0: every interface), and `allowed_hosts` besides.
  std::string listen_host;
  std::vector<std::string> allowed_hosts;
  PollerOptions poller;
  int dead_limit = 100;  // dead items a page lists
  absl::Duration dead_cache = absl::Seconds(2);
  // A login's cookie stops working after this long without a request (an
  // open page asks every second), and this long after the login at most.
  absl::Duration session_idle = absl::Minutes(30);
  absl::Duration session_max = absl::Hours(12);
  // Wrong tokens a client address may send before it must wait: a second
  // after the next, then twice as long after each one more, up to
  // `login_max_wait`. An address is forgotten an hour after its last try.
  int login_free_failures = 5;
  absl::Duration login_max_wait = absl::Minutes(15);
};

// The security headers every response of the console carries (its pages,
// its JSON, its errors, and the HTTP server's own error pages).
const std::vector<std::pair<std::string, std::string>>& SecurityHeaders();

class Console {
 public:
  static constexpr size_t kMaxBody = 64 * 1024;
  static constexpr char kCookie[] = "partq_console";

  Console(StoreFactory factory, ConsoleOptions options);
  ~Console();

  // Starts and stops the poller (base/service.h rules).
  void Start();
  void Stop();

  HttpResponse Handle(const HttpRequest& request);

  Poller& poller() { return poller_; }
  const std::string& csrf_token() const { return csrf_; }
  // Whether actions can be allowed at all (a token and not read-only).
  bool actions() const { return !options_.read_only && options_.token.has_value(); }

 private:
  // Whether the request's Host header names this console (see above).
  bool HostAllowed(const HttpRequest& request) const;
  bool Authenticated(const HttpRequest& request) const;
  // Whether it carries the token as `Authorization: Bearer`.
  bool Bearer(const HttpRequest& request) const;
  // OK, or why a POST is refused (403): Origin, Sec-Fetch-Site, and the CSRF
  // token when `csrf_needed`.
  std::optional<std::string> ForgeryCheck(const HttpRequest& request,
                                          const std::string& form_csrf,
                                          bool csrf_needed = true) const;
  HttpResponse Page() const;
  HttpResponse LoginPage(int code, const std::string& message) const;
  HttpResponse Login(const HttpRequest& request);
  HttpResponse Logout(const HttpRequest& request);
  HttpResponse Queues() const;
  HttpResponse Queue(const std::string& name) const;
  // A page read from the store on demand (dead items, schedules, groups of
  // queue `name`), cached `dead_cache` per page and queue so tabs share it.
  HttpResponse OnDemand(const std::string& name, const std::string& what,
                        const std::function<absl::StatusOr<nlohmann::json>(Store&)>& read);
  HttpResponse Dead(const std::string& name);
  HttpResponse Schedules(const std::string& name);
  HttpResponse Groups(const std::string& name);
  HttpResponse Action(const HttpRequest& request);

  const ConsoleOptions options_;
  const StoreFactory factory_;
  const std::string csrf_;
  Poller poller_;

  // A token from `addr` at `now`, `right` or not: refused while the address
  // must wait (`wait`); else a right one clears its count, a wrong one counts,
  // sets its next wait and is logged (at most once a minute).
  struct Guess {
    bool right = false;
    absl::Duration wait;  // zero: heard
  };
  Guess CountGuess(const std::string& addr, absl::Time now, bool right);

  mutable absl::Mutex sessions_mu_;
  struct Session {
    absl::Time created, used;
  };
  // By cookie value; Authenticated refreshes `used` and drops expired ones.
  mutable std::map<std::string, Session> sessions_ ABSL_GUARDED_BY(sessions_mu_);
  struct Failures {
    int count = 0;
    absl::Time last, wait_until;
  };
  std::map<std::string, Failures> login_failures_ ABSL_GUARDED_BY(sessions_mu_);  // by address
  absl::Time failures_swept_ ABSL_GUARDED_BY(sessions_mu_) = absl::InfinitePast();
  // The warning of wrong tokens: a line a minute, with the count of the rest.
  LogLimiter failure_log_{1, INT64_MAX, absl::Minutes(1), options_.poller.clock};

  // Dead item lists and actions, on their own connection.
  absl::Mutex store_mu_;
  std::unique_ptr<Store> store_ ABSL_GUARDED_BY(store_mu_);
  struct DeadCache {
    absl::Time at;
    std::string json;
  };
  // By "page/queue" (OnDemand).
  std::map<std::string, DeadCache> dead_cache_ ABSL_GUARDED_BY(store_mu_);
};

// The queue's recent rates as `partq status` and the console show them:
// RecentRates (store/throughput.h) over the minute before each live
// session's last heartbeat, with the workers' heartbeat interval (a third of
// the queue's TTL).
FinishRates Rates(const QueueStatus& status);

// The queue's throughput as `partq status --json` and the queue page give it:
// Rates and the per-minute counts (RFC 3339 UTC minutes, oldest first) of
// `minutes` (the status's, or a part of them).
nlohmann::json ThroughputJson(const QueueStatus& status,
                              const std::vector<ThroughputMinute>& minutes);

// Parts as ranges: {0,1,2,5} -> "0-2, 5".
std::string PartRanges(const std::vector<int>& parts);

}  // namespace partq::console

#endif  // PARTQ_CONSOLE_CONSOLE_H_
