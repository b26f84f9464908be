#include "console/console.h"

#include <arpa/inet.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/log.h"
#include "base/utf8.h"
#include "console/assets.h"
#include "console/auth.h"
#include "console/escape.h"
#include "coordinator/heartbeat.h"
#include "coordinator/queue_collector.h"
#include "store/throughput.h"
#include "store/validate.h"

namespace partq::console {
namespace {

using nlohmann::json;

// Pages may run this server's scripts and styles only: a payload that
// somehow reached the DOM as markup could still not run a script (no inline
// scripts, no event handler attributes), nor could the page be framed.
constexpr char kCsp[] =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

HttpResponse Secured(HttpResponse r) {
  for (const auto& h : SecurityHeaders()) r.headers.push_back(h);
  return r;
}

std::string Header(const HttpRequest& request, const std::string& name) {
  auto it = request.headers.find(name);
  return it == request.headers.end() ? "" : it->second;
}

// Whether the client reached us over TLS, or a proxy in front says it did.
// (A client that says so itself over plain HTTP gets a Secure cookie its
// browser will not send back: it harms only itself.)
bool OverTls(const HttpRequest& request) {
  if (request.tls) return true;
  // The first proxy's word (a header may list several, comma-separated).
  auto first = [&](const char* name) {
    const std::string value = Header(request, name);
    return absl::AsciiStrToLower(
        absl::StripAsciiWhitespace(absl::string_view(value).substr(0, value.find(','))));
  };
  if (first("x-forwarded-proto") == "https") return true;
  for (absl::string_view pair : absl::StrSplit(first("forwarded"), ';')) {
    if (absl::StripAsciiWhitespace(pair) == "proto=https") return true;
  }
  return false;
}

std::string CookieAttributes(const HttpRequest& request) {
  return OverTls(request) ? "; Path=/; HttpOnly; SameSite=Strict; Secure"
                          : "; Path=/; HttpOnly; SameSite=Strict";
}

// A throttled address's answer: `answer` (an error or the login page) as a 429
// that says how long to wait, in its text and in Retry-After.
HttpResponse TooManyGuesses(absl::Duration wait,
                            const std::function<HttpResponse(int, const std::string&)>& answer) {
  const std::string seconds =
      absl::StrCat(absl::ToInt64Seconds(absl::Ceil(wait, absl::Seconds(1))));
  HttpResponse r = answer(
      429, absl::StrCat("too many wrong tokens from your address: try again in ", seconds, " s"));
  r.headers.emplace_back("Retry-After", seconds);
  return r;
}

HttpResponse Json(int code, const json& j) {
  HttpResponse r;
  r.code = code;
  r.content_type = "application/json";
  // Strings are made printable before they get here; replace keeps a stray
  // invalid byte from throwing.
  r.body = j.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

HttpResponse Error(int code, const std::string& message) {
  return Json(code, json{{"error", message}});
}

std::string Text(absl::string_view s) { return PrintableUtf8(s); }

// Minutes of throughput the queue page charts (the database keeps an hour).
constexpr int kThroughputMinutes = 30;

json Opt(const std::optional<std::string>& s) { return s ? json(Text(*s)) : json(); }

// The other queues a session's process serves (a worker of several queues).
json AlsoServes(const SessionInfo& s) {
  json also = json::array();
  for (const std::string& q : s.also_serves) also.push_back(Text(q));
  return also;
}

std::string Utc(absl::Time t) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S", t, absl::UTCTimeZone());
}

double Secs(absl::Duration d) { return absl::ToDoubleSeconds(d); }

std::string Cookie(const HttpRequest& request, absl::string_view name) {
  auto it = request.headers.find("cookie");
  if (it == request.headers.end()) return "";
  for (absl::string_view c : absl::StrSplit(it->second, ';')) {
    c = absl::StripAsciiWhitespace(c);
    if (absl::ConsumePrefix(&c, name) && absl::ConsumePrefix(&c, "=")) return std::string(c);
  }
  return "";
}

// PayloadRuns as [["t", text] | ["x", "\\xNN..."] | ["m", "… (N bytes)"], ...].
json RunsJson(absl::string_view head, int64_t total) {
  json out = json::array();
  for (const PreviewRun& r : PayloadRuns(head, total)) {
    out.push_back({r.kind == PreviewRun::kText    ? "t"
                   : r.kind == PreviewRun::kBytes ? "x"
                                                  : "m",
                   r.text});
  }
  return out;
}

// A payload's "payload" (its preview) and "payload_runs" (RunsJson) in
// `item`, from its first bytes `head` of `total`; a payload the console's
// role may not read (a viewer's, migration 35) as hidden.
void SetPayload(json* item, absl::string_view head, int64_t total, bool hidden) {
  if (hidden) {
    (*item)["payload"] = nullptr;
    (*item)["payload_runs"] =
        json::array({json::array({"m", "(hidden: this console's role may not read payloads)"})});
    return;
  }
  (*item)["payload"] = PayloadPreview(head, total);
  (*item)["payload_runs"] = RunsJson(head, total);
}

// The host of a Host header: without the port, brackets of an IPv6 address
// or a trailing dot, in lowercase.
std::string HostOfHeader(absl::string_view h) {
  h = absl::StripAsciiWhitespace(h);
  if (absl::StartsWith(h, "[")) {
    const size_t end = h.find(']');
    h = end == absl::string_view::npos ? h.substr(1) : h.substr(1, end - 1);
  } else if (const size_t colon = h.rfind(':');
             colon != absl::string_view::npos && h.find(':') == colon) {
    h = h.substr(0, colon);
  }
  absl::ConsumeSuffix(&h, ".");
  return absl::AsciiStrToLower(h);
}

bool IsIpAddress(const std::string& host) {
  in_addr v4{};
  in6_addr v6{};
  return inet_pton(AF_INET, host.c_str(), &v4) == 1 || inet_pton(AF_INET6, host.c_str(), &v6) == 1;
}

}  // namespace

const std::vector<std::pair<std::string, std::string>>& SecurityHeaders() {
  static const auto* headers = new std::vector<std::pair<std::string, std::string>>{
      {"Content-Security-Policy", kCsp},
      {"X-Content-Type-Options", "nosniff"},
      {"X-Frame-Options", "DENY"},
      // Not no-referrer: with it a browser sends "Origin: null" on the login
      // form's POST, which the origin check must refuse.
      {"Referrer-Policy", "same-origin"},
      {"Cache-Control", "no-store"},
  };
  return *headers;
}

std::string PartRanges(const std::vector<int>& parts) {
  std::vector<int> p = parts;
  std::sort(p.begin(), p.end());
  std::string out;
  for (size_t i = 0; i < p.size();) {
    size_t j = i;
    while (j + 1 < p.size() && p[j + 1] == p[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    absl::StrAppend(&out, p[i]);
    if (j > i) absl::StrAppend(&out, "-", p[j]);
    i = j + 1;
  }
  return out;
}

Console::Console(StoreFactory factory, ConsoleOptions options)
    : options_(std::move(options)),
      factory_(std::move(factory)),
      csrf_(RandomToken()),
      poller_(factory_, options_.poller) {}

Console::~Console() { Stop(); }

void Console::Start() { poller_.Start(); }
void Console::Stop() { poller_.Stop(); }

bool Console::Bearer(const HttpRequest& request) const {
  const std::string auth = Header(request, "authorization");
  return options_.token && absl::StartsWith(auth, "Bearer ") &&
         SameSecret(auth.substr(7), *options_.token);
}

bool Console::Authenticated(const HttpRequest& request) const {
  if (!options_.token) return true;
  if (Bearer(request)) return true;
  const std::string cookie = Cookie(request, kCookie);
  if (cookie.empty()) return false;
  const absl::Time now = options_.poller.clock->Now();
  absl::MutexLock l(&sessions_mu_);
  // Compared to each in constant time, not looked up: a map lookup's
  // comparisons stop at the first differing byte. Expired ones go on the way.
  bool found = false;
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    Session& s = it->second;
    if (now - s.used >= options_.session_idle || now - s.created >= options_.session_max) {
      it = sessions_.erase(it);
      continue;
    }
    if (SameSecret(cookie, it->first)) {
      s.used = now;
      found = true;
    }
    ++it;
  }
  return found;
}

Console::Guess Console::CountGuess(const std::string& addr, absl::Time now, bool right) {
  absl::MutexLock l(&sessions_mu_);
  // Addresses silent for an hour are forgotten (looked for once a minute); a
  // bound on what guesses from many addresses can make this process keep.
  if (now - failures_swept_ >= absl::Minutes(1)) {
    for (auto it = login_failures_.begin(); it != login_failures_.end();) {
      it = now - it->second.last > absl::Hours(1) ? login_failures_.erase(it) : std::next(it);
    }
    failures_swept_ = now;
  }
  auto known = login_failures_.find(addr);
  // An address that must wait is not even heard: checked and counted under
  // one lock, so guesses sent at once cannot all pass the check.
  if (known != login_failures_.end() && known->second.wait_until > now) {
    return {false, known->second.wait_until - now};
  }
  if (right) {
    if (known != login_failures_.end()) login_failures_.erase(known);
    return {true, absl::ZeroDuration()};
  }
  if (known == login_failures_.end() && login_failures_.size() >= 10000) {
    login_failures_.erase(std::min_element(
        login_failures_.begin(), login_failures_.end(),
        [](const auto& a, const auto& b) { return a.second.last < b.second.last; }));
  }
  Failures& f = login_failures_[addr];
  ++f.count;
  f.last = now;
  const int over = f.count - options_.login_free_failures;
  absl::Duration wait = absl::ZeroDuration();
  if (over > 0) {
    wait = std::min(options_.login_max_wait, absl::Seconds(1) * (int64_t{1} << std::min(over - 1, 30)));
    f.wait_until = now + wait;
  }
  // One line a minute at most: 23,173 wrong guesses were as many lines.
  if (const LogLimiter::Verdict v = failure_log_.Admit(0); v.log) {
    PARTQ_LOG(Warning) << "console: " << v.dropped.lines + 1
                       << (v.dropped.lines == 0 ? " login" : " logins")
                       << " with a wrong token refused since the last such line (the last from "
                       << Text(addr) << ", " << f.count << " in a row from there; past "
                       << options_.login_free_failures
                       << " an address waits, twice as long after each)";
  }
  return {false, wait};
}

std::optional<std::string> Console::ForgeryCheck(const HttpRequest& request,
                                                 const std::string& form_csrf,
                                                 bool csrf_needed) const {
  const std::string site = Header(request, "sec-fetch-site");
  if (!site.empty() && site != "same-origin") {
    return absl::StrCat("refused: sent by another site (Sec-Fetch-Site: ", Text(site), ")");
  }
  const std::string origin = Header(request, "origin");
  if (!origin.empty()) {
    const std::string host = Header(request, "host");
    if (origin != absl::StrCat("http://", host) && origin != absl::StrCat("https://", host)) {
      return absl::StrCat("refused: Origin ", Text(origin), " is not this console (", Text(host),
                          ")");
    }
  }
  if (!csrf_needed) return std::nullopt;
  const std::string csrf = form_csrf.empty() ? Header(request, "x-csrf-token") : form_csrf;
  if (!SameSecret(csrf, csrf_)) return "refused: missing or wrong CSRF token (reload the page)";
  return std::nullopt;
}

bool Console::HostAllowed(const HttpRequest& request) const {
  if (options_.token && options_.allowed_hosts.empty()) return true;
  const auto header = request.headers.find("host");
  // Browsers always send one; a client without is no rebinding page.
  if (header == request.headers.end()) return true;
  const std::string host = HostOfHeader(header->second);
  for (const std::string& h : options_.allowed_hosts) {
    if (host == HostOfHeader(h)) return true;  // both lowercase
  }
  const std::string listen = absl::AsciiStrToLower(options_.listen_host);
  const bool everywhere = listen.empty() || listen == "0.0.0.0" || listen == "*";
  if (host == listen || (everywhere && IsIpAddress(host))) return true;
  // A browser sends localhost, 127.0.0.1 or [::1] for loopback; no DNS
  // answer makes any of them another site's.
  return (everywhere || IsLoopbackHost(listen)) && IsLoopbackHost(host);
}

HttpResponse Console::Handle(const HttpRequest& request) {
  if (!HostAllowed(request)) {
    std::vector<std::string> names = options_.allowed_hosts;
    if (!options_.listen_host.empty()) names.insert(names.begin(), options_.listen_host);
    HttpResponse r;
    r.code = 421;
    r.body = absl::StrCat(
        "partq console: refused: Host \"", Text(request.headers.at("host")),
        "\" is not a name of this console (", absl::StrJoin(names, ", "),
        ", localhost). A page of another site pointing its name here (DNS rebinding) sends such "
        "a Host; if it is yours, start the console with --allowed-host NAME (a worker: "
        "--console-allowed-host NAME).\n");
    return Secured(std::move(r));
  }
  const std::string& path = request.path;
  const bool get = request.method == "GET" || request.method == "HEAD";
  const bool post = request.method == "POST";
  if (!get && !post) return Secured(Error(405, "only GET and POST"));
  if (get && path == "/app.js") {
    HttpResponse r;
    r.content_type = "text/javascript; charset=utf-8";
    r.body = assets::kAppJs;
    return Secured(std::move(r));
  }
  if (get && path == "/app.css") {
    HttpResponse r;
    r.content_type = "text/css; charset=utf-8";
    r.body = assets::kAppCss;
    return Secured(std::move(r));
  }
  if (path == "/login") {
    if (get) return Secured(LoginPage(200, ""));
    return Secured(Login(request));
  }
  if (post && path == "/logout") return Secured(Logout(request));
  // A wrong bearer token is a guess like a wrong login, throttled alike.
  if (options_.token && absl::StartsWith(Header(request, "authorization"), "Bearer ")) {
    const Guess g = CountGuess(request.remote_addr, options_.poller.clock->Now(), Bearer(request));
    if (g.wait > absl::ZeroDuration()) return Secured(TooManyGuesses(g.wait, Error));
    if (!g.right) return Secured(Error(401, "wrong token"));
  }
  const bool authed = Authenticated(request);
  if (get && (path == "/" || path == "/index.html")) {
    if (!authed) return Secured(LoginPage(200, ""));
    return Secured(Page());
  }
  if (!authed) return Secured(Error(401, "log in first: this console needs its token"));
  const std::map<std::string, std::string> query = ParseForm(request.query);
  auto arg = [&](const char* name) {
    auto it = query.find(name);
    return it == query.end() ? std::string() : it->second;
  };
  if (get && path == "/api/queues") return Secured(Queues());
  if (get && path == "/api/queue") return Secured(Queue(arg("name")));
  if (get && path == "/api/dead") return Secured(Dead(arg("name")));
  if (get && path == "/api/schedules") return Secured(Schedules(arg("name")));
  if (get && path == "/api/groups") return Secured(Groups(arg("name")));
  if (post && absl::StartsWith(path, "/api/")) return Secured(Action(request));
  return Secured(Error(404, "no such page"));
}

HttpResponse Console::Page() const {
  HttpResponse r;
  r.content_type = "text/html; charset=utf-8";
  const char* mode = options_.read_only ? "read-only" : !options_.token ? "no-token" : "actions";
  r.body = absl::StrReplaceAll(assets::kIndexHtml, {{"%CSRF%", csrf_}, {"%MODE%", mode}});
  return r;
}

HttpResponse Console::LoginPage(int code, const std::string& message) const {
  HttpResponse r;
  r.code = code;
  r.content_type = "text/html; charset=utf-8";
  r.body = absl::StrReplaceAll(assets::kLoginHtml,
                               {{"%CSRF%", csrf_}, {"%MESSAGE%", HtmlEscape(message)}});
  return r;
}

HttpResponse Console::Login(const HttpRequest& request) {
  if (!options_.token) {
    HttpResponse r;
    r.code = 303;
    r.headers.emplace_back("Location", "/");
    return r;
  }
  const std::map<std::string, std::string> form = ParseForm(request.body);
  auto csrf = form.find("csrf");
  if (auto why = ForgeryCheck(request, csrf == form.end() ? "" : csrf->second)) {
    return LoginPage(403, *why);
  }
  const absl::Time now = options_.poller.clock->Now();
  auto token = form.find("token");
  const bool right =
      token != form.end() &&
      SameSecret(std::string(absl::StripAsciiWhitespace(token->second)), *options_.token);
  const Guess g = CountGuess(request.remote_addr, now, right);
  if (g.wait > absl::ZeroDuration()) {
    return TooManyGuesses(
        g.wait, [this](int code, const std::string& message) { return LoginPage(code, message); });
  }
  if (!g.right) return LoginPage(401, "wrong token");
  const std::string session = RandomToken();
  {
    absl::MutexLock l(&sessions_mu_);
    // A bound on what logins can make this process keep: the least recently
    // used login has to log in again.
    if (sessions_.size() >= 1000) {
      sessions_.erase(std::min_element(
          sessions_.begin(), sessions_.end(),
          [](const auto& a, const auto& b) { return a.second.used < b.second.used; }));
    }
    sessions_[session] = {now, now};
  }
  HttpResponse r;
  r.code = 303;
  r.headers.emplace_back("Location", "/");
  r.headers.emplace_back(
      "Set-Cookie", absl::StrCat(kCookie, "=", session, CookieAttributes(request), "; Max-Age=",
                                 absl::ToInt64Seconds(options_.session_max)));
  return r;
}

HttpResponse Console::Logout(const HttpRequest& request) {
  if (auto why = ForgeryCheck(request, ParseForm(request.body)["csrf"])) return Error(403, *why);
  {
    absl::MutexLock l(&sessions_mu_);
    sessions_.erase(Cookie(request, kCookie));
  }
  HttpResponse r;
  r.code = 303;
  r.headers.emplace_back("Location", "/");
  r.headers.emplace_back("Set-Cookie",
                         absl::StrCat(kCookie, "=", CookieAttributes(request), "; Max-Age=0"));
  return r;
}

HttpResponse Console::Queues() const {
  const PollerState s = poller_.Snapshot();
  Clock* clock = options_.poller.clock;
  const absl::Time now = clock->Now();
  json queues = json::array();
  for (const auto& [name, q] : s.queues) {
    // Liveness as `partq status` counts it (SumUp), at this moment: a
    // session that expired since the read counts as expired.
    const OwnerTotals o = SumUp(q.group, now - q.owners_at);
    json j = {{"name", name},
              {"parts", q.config.parts},
              {"paused", q.config.paused},
              {"sessions", o.live_sessions},
              {"expired_sessions", o.expired_sessions}};
    j["unowned_parts"] = q.group.owners.empty() ? json() : json(o.unowned_parts);
    if (q.status) {
      const QueueTotals t = SumUp(*q.status, now - q.status_at);
      j["ready"] = t.ready;
      j["delayed"] = t.delayed;
      j["held"] = t.held;
      j["in_flight"] = t.in_flight;
      j["in_flight_unowned"] = t.in_flight_unowned;
      const QueueStatus::GroupCounts& g = q.status->groups;
      j["groups"] = {{"held", g.held}, {"started", g.started}, {"ended", g.ended}};
      j["dead"] = t.dead;
      j["oldest_ready_seconds"] = Secs(t.oldest_ready_age);
      j["status_age_seconds"] = Secs(now - q.status_at);
      j["status_took_seconds"] = Secs(q.status_took);
      // Dead items carry the time they died: the database's count is exact
      // where the console's samples would miss what died and was requeued
      // between two reads.
      j["dead_per_second_1m"] = t.dead_last_minute / 60.0;
      // What the workers' heartbeats reported finished (store/throughput.h):
      // acks are counted nowhere else.
      const FinishRates r = Rates(*q.status);
      j["acked_per_second_1m"] = r.acked;
      j["failed_per_second_1m"] = r.retried;
      j["dead_lettered_per_second_1m"] = r.dead;
    }
    auto rate = [](std::optional<double> r) { return r ? json(*r) : json(); };
    j["backlog_per_second_1m"] = rate(BacklogRate(q.samples, absl::Minutes(1)));
    j["backlog_per_second_5m"] = rate(BacklogRate(q.samples, absl::Minutes(5)));
    queues.push_back(std::move(j));
  }
  return Json(200, json{{"queues", std::move(queues)},
                        {"actions", actions()},
                        {"owners_error", Text(s.owners_error)},
                        {"status_error", Text(s.status_error)}});
}

HttpResponse Console::Queue(const std::string& name) const {
  if (!ValidateQueueName(name).ok()) return Error(400, "not a queue name");
  std::map<std::string, std::string> labels;
  std::optional<QueueState> q = poller_.SnapshotQueue(name, &labels);
  if (!q) return Error(404, "no such queue (yet: the console reads the queues every second)");
  const absl::Time now = options_.poller.clock->Now();
  // Sessions: those of the owners lane (read every second), live or
  // expired as SessionLive says now, with the instance id the last status
  // read gave; then any owner not among them (none from one snapshot, but a
  // store may differ).
  const absl::Duration since_owners = now - q->owners_at;
  std::map<std::string, const SessionInfo*> info;
  if (q->status) {
    for (const SessionInfo& si : q->status->sessions) info[si.id.value] = &si;
  }
  std::map<std::string, int> index;
  std::map<std::string, int> owned;
  for (const auto& o : q->group.owners) {
    if (o) ++owned[o->value];
  }
  json sessions = json::array();
  auto add = [&](const std::string& id, const std::string& host, int pid,
                 const QueueOwners::Session* ses) {
    index[id] = static_cast<int>(sessions.size());
    const bool alive = ses != nullptr && SessionLive(ses->expires_in, since_owners);
    json s = {{"id", id},       {"host", Text(host)}, {"pid", pid},
              {"parts", owned[id]}, {"expired", !alive}};
    if (ses != nullptr) {
      s["heartbeat_seconds"] = Secs(ses->since_heartbeat + since_owners);
      s["expires_in_seconds"] = Secs(ses->expires_in - since_owners);
    }
    auto it = info.find(id);
    if (it != info.end()) {
      s["instance"] = Text(it->second->instance_id);
      s["also_serves"] = AlsoServes(*it->second);
    }
    sessions.push_back(std::move(s));
  };
  for (const auto& ses : q->group.sessions) add(ses.id.value, ses.host, ses.pid, &ses);
  for (const auto& [id, n] : owned) {
    if (!index.count(id)) {
      auto l = labels.find(id);
      add(id, l == labels.end() ? "?" : l->second.substr(0, l->second.rfind(':')), 0, nullptr);
    }
  }
  json owner = json::array();
  for (const auto& o : q->group.owners) owner.push_back(o ? index[o->value] : -1);
  const OwnerTotals ot = SumUp(q->group, since_owners);
  json ready = json::array(), oldest = json::array();
  if (q->status) {
    for (const PartStatus& p : q->status->parts) {
      ready.push_back(p.ready);
      oldest.push_back(Secs(p.oldest_ready_age));
    }
  }
  auto label = [&](const std::optional<SessionId>& id) -> json {
    if (!id) return json();
    auto it = labels.find(id->value);
    return Text(it == labels.end() ? id->value : it->second);
  };
  json handoffs = json::array();
  for (auto it = q->handoffs.rbegin(); it != q->handoffs.rend() && handoffs.size() < 200; ++it) {
    handoffs.push_back({{"seconds_ago", Secs(now - it->at)},
                        {"from", label(it->from)},
                        {"to", label(it->to)},
                        {"count", it->parts.size()},
                        {"parts", PartRanges(it->parts)}});
  }
  json j = {{"name", name},
            {"parts", q->config.parts},
            {"paused", q->config.paused},
            {"assignment", q->config.assignment == AssignmentKind::kSticky ? "sticky" : "lexical"},
            {"max_attempts", q->config.max_attempts},
            {"ordered", q->config.ordered},
            {"sessions", std::move(sessions)},
            {"live_sessions", ot.live_sessions},
            {"unowned_parts", ot.unowned_parts},
            {"owner", std::move(owner)},
            {"ready", std::move(ready)},
            {"oldest_ready_seconds", std::move(oldest)},
            {"handoffs", std::move(handoffs)},
            {"handoffs_total", q->handoffs.size()},
            {"owners_age_seconds", Secs(now - q->owners_at)},
            {"actions", actions()}};
  if (q->status) {
    j["status_age_seconds"] = Secs(now - q->status_at);
    const QueueTotals t = SumUp(*q->status, now - q->status_at);
    j["totals"] = {{"ready", t.ready},
                   {"delayed", t.delayed},
                   {"in_flight", t.in_flight},
                   {"in_flight_unowned", t.in_flight_unowned},
                   {"dead", t.dead},
                   {"oldest_ready_seconds", Secs(t.oldest_ready_age)}};
    // The chart's minutes: the last 30, those without a report as zeros.
    const absl::Time db_now = q->status->db_now;
    j["throughput"] =
        ThroughputJson(*q->status, LastMinutes(q->status->throughput, db_now, kThroughputMinutes));
  }
  return Json(200, j);
}

HttpResponse Console::OnDemand(const std::string& name, const std::string& what,
                               const std::function<absl::StatusOr<json>(Store&)>& read) {
  if (!ValidateQueueName(name).ok()) return Error(400, "not a queue name");
  const absl::Time now = options_.poller.clock->Now();
  const std::string key = absl::StrCat(what, "/", name);
  absl::MutexLock l(&store_mu_);
  auto cached = dead_cache_.find(key);
  if (cached != dead_cache_.end() && now - cached->second.at < options_.dead_cache) {
    HttpResponse r;
    r.content_type = "application/json";
    r.body = cached->second.json;
    return r;
  }
  if (!store_) {
    absl::StatusOr<std::unique_ptr<Store>> s = factory_();
    if (!s.ok()) return Error(503, Text(s.status().message()));
    store_ = std::move(*s);
  }
  absl::StatusOr<json> j = read(*store_);
  if (!j.ok()) {
    const absl::Status& st = j.status();
    // An answer, not a broken connection: a queue this role may not read
    // (the SQL API's refusal, list_groups()) is 403 and keeps the store.
    const bool answered =
        absl::IsNotFound(st) || absl::IsUnimplemented(st) || absl::IsPermissionDenied(st);
    if (!answered) store_.reset();
    return Error(absl::IsNotFound(st)           ? 404
                 : absl::IsUnimplemented(st)    ? 501
                 : absl::IsPermissionDenied(st) ? 403
                                                : 503,
                 Text(st.message()));
  }
  (*j)["name"] = name;
  (*j)["actions"] = actions();
  HttpResponse r = Json(200, *j);
  dead_cache_[key] = {now, r.body};
  return r;
}

HttpResponse Console::Dead(const std::string& name) {
  return OnDemand(name, "dead", [&](Store& store) -> absl::StatusOr<json> {
    absl::StatusOr<std::vector<DeadItem>> dead = store.ListDead(name, options_.dead_limit);
    if (!dead.ok()) return dead.status();
    json items = json::array();
    for (const DeadItem& d : *dead) {
      json item = {{"id", d.id},
                   {"part", d.part},
                   {"key", Opt(d.key)},
                   {"dedup_key", Opt(d.dedup_key)},
                   {"attempts", d.attempts},
                   {"enqueued_at", Utc(d.enqueued_at)},
                   {"failed_at", Utc(d.failed_at)},
                   {"error", Text(d.last_error)},
                   {"payload_bytes", d.payload_hidden ? json() : json(d.payload_bytes)}};
      SetPayload(&item, d.payload_head, d.payload_bytes, d.payload_hidden);
      items.push_back(std::move(item));
    }
    return json{{"limit", options_.dead_limit}, {"items", std::move(items)}};
  });
}

HttpResponse Console::Schedules(const std::string& name) {
  return OnDemand(name, "schedules", [&](Store& store) -> absl::StatusOr<json> {
    absl::StatusOr<std::vector<Schedule>> list = store.ListSchedules(name);
    if (!list.ok()) return list.status();
    json items = json::array();
    for (const Schedule& s : *list) {
      items.push_back(
          {{"name", Text(s.spec.name)},
           {"cadence", s.spec.cron.empty()
                           ? absl::StrCat("every ", absl::FormatDuration(s.spec.every))
                           : Text(absl::StrCat("cron ", s.spec.cron))},
           {"time_zone", Text(s.spec.time_zone.empty() ? "UTC" : s.spec.time_zone)},
           {"next_tick", s.next_tick ? json(Utc(*s.next_tick)) : json()},
           {"last_tick", s.last_tick ? json(Utc(*s.last_tick)) : json()},
           {"fired", s.fired},
           {"missed", s.missed},
           {"catch_up", s.spec.catch_up ? absl::FormatDuration(*s.spec.catch_up)
                                        : std::string("default (TTL, heartbeat, period)")},
           {"error", Text(s.error)}});
      SetPayload(&items.back(), absl::string_view(s.spec.payload).substr(0, 256),
                 static_cast<int64_t>(s.spec.payload.size()), s.payload_hidden);
    }
    return json{{"schedules", std::move(items)}};
  });
}

HttpResponse Console::Groups(const std::string& name) {
  return OnDemand(name, "groups", [&](Store& store) -> absl::StatusOr<json> {
    absl::StatusOr<std::vector<GroupStatus>> list =
        store.ListGroups(name, /*include_ended=*/true, options_.dead_limit);
    if (!list.ok()) return list.status();
    json items = json::array();
    auto when = [](const std::optional<absl::Time>& t) { return t ? json(Utc(*t)) : json(); };
    for (const GroupStatus& g : *list) {
      items.push_back({{"id", Text(g.id)},
                       {"pending", g.pending},
                       {"done", g.done},
                       {"dead", g.dead},
                       {"cancelled", g.cancelled},
                       {"created_at", Utc(g.created_at)},
                       {"started_at", when(g.started_at)},
                       {"ended_at", when(g.ended_at)},
                       {"end_queue", Opt(g.end_queue)},
                       {"end_error", Opt(g.end_error)}});
    }
    return json{{"limit", options_.dead_limit}, {"groups", std::move(items)}};
  });
}

HttpResponse Console::Action(const HttpRequest& request) {
  if (options_.read_only) return Error(403, "this console is read-only (--read-only)");
  if (!options_.token) {
    return Error(403, "actions need a token: start the console with --token-file FILE");
  }
  // A request that carries the token itself needs no CSRF token: a browser
  // sends an Authorization header only where a page's own script sets it,
  // and a page of another site cannot (not without a CORS preflight, which
  // this server never grants). The CSRF token guards the cookie, which a
  // browser attaches to any site's request.
  if (auto why = ForgeryCheck(request, "", /*csrf_needed=*/!Bearer(request))) {
    return Error(403, *why);
  }
  // A form cannot send this type across sites without a preflight.
  if (!absl::StartsWith(Header(request, "content-type"), "application/json")) {
    return Error(415, "actions take application/json");
  }
  json body = json::parse(request.body, nullptr, /*allow_exceptions=*/false);
  if (!body.is_object() || !body.contains("queue") || !body["queue"].is_string()) {
    return Error(400, "the body must be a JSON object with \"queue\"");
  }
  const std::string queue = body["queue"].get<std::string>();
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return Error(400, Text(st.message()));
  std::vector<int64_t> ids;
  const bool all = body.value("all", false) == true;
  if (body.contains("ids")) {
    if (!body["ids"].is_array()) return Error(400, "\"ids\" must be an array of item ids");
    for (const json& id : body["ids"]) {
      if (!id.is_number_integer() || id.get<int64_t>() <= 0) {
        return Error(400, "\"ids\" must be an array of item ids");
      }
      ids.push_back(id.get<int64_t>());
    }
  }
  const std::string& path = request.path;
  const bool dead_action = path == "/api/dead/requeue" || path == "/api/dead/delete";
  if (dead_action && ids.empty() != all) {
    return Error(400, "give \"ids\" or \"all\": true (not both)");
  }
  absl::MutexLock l(&store_mu_);
  if (!store_) {
    absl::StatusOr<std::unique_ptr<Store>> s = factory_();
    if (!s.ok()) return Error(503, Text(s.status().message()));
    store_ = std::move(*s);
  }
  json result;
  absl::Status st;
  if (path == "/api/pause" || path == "/api/resume") {
    st = store_->SetPaused(queue, path == "/api/pause");
    result = {{"paused", path == "/api/pause"}};
  } else if (path == "/api/dead/requeue") {
    absl::StatusOr<Requeued> r = store_->RequeueDead(queue, ids);
    st = r.status();
    if (r.ok()) result = {{"requeued", r->requeued}, {"kept", r->kept}};
  } else if (path == "/api/dead/delete") {
    absl::StatusOr<DeadDeleted> n = store_->DeleteDead(queue, ids);
    st = n.status();
    if (n.ok()) result = {{"deleted", n->deleted}};
  } else if (path == "/api/schedule/delete") {
    if (!body.contains("schedule") || !body["schedule"].is_string()) {
      return Error(400, "the body must name the \"schedule\"");
    }
    const std::string name = body["schedule"].get<std::string>();
    // Names are unique per schema, not per queue: the page asked for one of
    // this queue's, so a name of another queue's schedule is not deleted.
    absl::StatusOr<std::vector<Schedule>> list = store_->ListSchedules(queue);
    st = list.status();
    if (st.ok()) {
      const bool ours = std::any_of(list->begin(), list->end(),
                                    [&](const Schedule& s) { return s.spec.name == name; });
      st = ours ? store_->DeleteSchedule(name)
                : absl::NotFoundError(absl::StrCat("queue ", queue, " has no schedule ", name));
    }
    if (st.ok()) result = {{"deleted", Text(name)}};
  } else {
    return Error(404, "no such action");
  }
  if (!st.ok()) {
    if (absl::IsUnavailable(st)) store_.reset();
    return Error(absl::IsNotFound(st)          ? 404
                 : absl::IsInvalidArgument(st) ? 400
                                               : 503,
                 Text(st.message()));
  }
  std::string what = all ? "all" : absl::StrCat(ids.size(), " ids");
  if (path == "/api/schedule/delete")
    what = absl::StrCat("schedule ", Text(body["schedule"].get<std::string>()));
  PARTQ_LOG(Info) << "console: " << path << " on queue " << queue << " (" << what << ")";
  for (const char* page : {"dead", "schedules", "groups"}) {
    dead_cache_.erase(absl::StrCat(page, "/", queue));
  }
  poller_.Poke();
  return Json(200, result);
}

FinishRates Rates(const QueueStatus& status) {
  return RecentRates(status, DefaultHeartbeatInterval(status.config.session_ttl));
}

json ThroughputJson(const QueueStatus& status, const std::vector<ThroughputMinute>& minutes) {
  const FinishRates r = Rates(status);
  json out = json::array();
  for (const ThroughputMinute& m : minutes) {
    out.push_back({{"minute", absl::FormatTime(absl::RFC3339_sec, m.minute, absl::UTCTimeZone())},
                   {"acked", m.counts.acked},
                   {"retried", m.counts.retried},
                   {"dead", m.counts.dead}});
  }
  return {{"acked_per_second", r.acked},
          {"failed_per_second", r.retried},
          {"dead_lettered_per_second", r.dead},
          {"window_seconds", 60},
          {"minutes", std::move(out)}};
}

}  // namespace partq::console
