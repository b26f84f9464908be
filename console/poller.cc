#include "console/poller.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "coordinator/queue_collector.h"

namespace partq::console {
namespace {

// Parts whose owner differs between two reads of one queue, grouped by
// (from, to) so that a worker's death is one line, not 2048.
std::vector<Handoff> Diff(const std::vector<std::optional<SessionId>>& before,
                          const std::vector<std::optional<SessionId>>& after, absl::Time at) {
  std::map<std::pair<std::string, std::string>, Handoff> by_pair;
  const size_t n = std::min(before.size(), after.size());
  for (size_t p = 0; p < n; ++p) {
    if (before[p] == after[p]) continue;
    auto key = std::make_pair(before[p] ? before[p]->value : "", after[p] ? after[p]->value : "");
    Handoff& h = by_pair[key];
    h.at = at;
    h.from = before[p];
    h.to = after[p];
    h.parts.push_back(static_cast<int>(p));
  }
  std::vector<Handoff> out;
  for (auto& [key, h] : by_pair) out.push_back(std::move(h));
  return out;
}

}  // namespace

Poller::Poller(StoreFactory factory, PollerOptions options)
    : factory_(std::move(factory)), options_(options) {}

Poller::~Poller() { Stop(); }

void Poller::Start() {
  if (!lifecycle_.BeginStart("console poller").ok()) return;
  owners_thread_ = std::thread([this] { Run(Lane::kOwners); });
  status_thread_ = std::thread([this] { Run(Lane::kStatus); });
  lifecycle_.EndStart(true);
}

void Poller::Stop() {
  if (!lifecycle_.BeginStop()) return;
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  if (owners_thread_.joinable()) owners_thread_.join();
  if (status_thread_.joinable()) status_thread_.join();
  lifecycle_.EndStop();
}

void Poller::Poke() {
  absl::MutexLock l(&mu_);
  poked_owners_ = poked_status_ = true;
}

void Poller::Run(Lane lane) {
  const bool owners = lane == Lane::kOwners;
  const absl::Duration interval = owners ? options_.owners_interval : options_.status_interval;
  Clock* clock = options_.clock;
  while (true) {
    const absl::Time start = clock->Now();
    const absl::Status st = owners ? PollOwnersOnce() : PollStatusOnce();
    const absl::Time end = clock->Now();
    // A failed round is not spaced by its (timeout-long) duration: the
    // interval alone, as the collector does.
    const absl::Duration spaced = st.ok() ? (end - start) * options_.spacing : absl::ZeroDuration();
    absl::MutexLock l(&mu_);
    bool& poked = owners ? poked_owners_ : poked_status_;
    // First the spacing, which a poke does not shorten.
    clock->AwaitWithDeadline(mu_, absl::Condition(&stopping_), end + spaced);
    auto wake = [this, &poked] {
      mu_.AssertHeld();
      return stopping_ || poked;
    };
    clock->AwaitWithDeadline(mu_, absl::Condition(&wake), end + std::max(interval, spaced));
    if (stopping_) return;
    poked = false;
  }
}

absl::Status Poller::Connect(std::unique_ptr<Store>& store) {
  if (store) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<Store>> s = factory_();
  if (!s.ok()) return s.status();
  store = std::move(*s);
  return absl::OkStatus();
}

absl::Status Poller::Failed(std::unique_ptr<Store>& store, std::string PollerState::*error,
                            const absl::Status& st) {
  store.reset();  // a new connection next round
  absl::MutexLock l(&mu_);
  state_.*error = std::string(st.message());
  return st;
}

absl::Status Poller::PollOwnersOnce() {
  absl::MutexLock sl(&owners_store_mu_);
  auto fail = [&](const absl::Status& st) {
    return Failed(owners_store_, &PollerState::owners_error, st);
  };
  if (absl::Status st = Connect(owners_store_); !st.ok()) return fail(st);
  absl::StatusOr<std::vector<QueueConfig>> queues = owners_store_->ListQueues();
  if (!queues.ok()) return fail(queues.status());
  std::map<std::string, QueueOwners> read;
  for (const QueueConfig& q : *queues) {
    absl::StatusOr<QueueOwners> o = owners_store_->Owners(q.name);
    if (absl::IsNotFound(o.status())) continue;  // deleted since the list
    if (!o.ok()) return fail(o.status());
    read.emplace(q.name, std::move(*o));
  }
  const absl::Time now = options_.clock->Now();
  absl::MutexLock l(&mu_);
  std::map<std::string, QueueState> next;
  for (const QueueConfig& q : *queues) {
    auto r = read.find(q.name);
    if (r == read.end()) continue;
    QueueState& s = next[q.name];
    auto old = state_.queues.find(q.name);
    if (old != state_.queues.end()) s = std::move(old->second);
    s.config = q;
    for (const QueueOwners::Session& ses : r->second.sessions) {
      state_.labels[ses.id.value] = absl::StrCat(ses.host, ":", ses.pid);
    }
    if (s.owners_at != absl::Time() && s.group.owners.size() == r->second.owners.size()) {
      for (Handoff& h : Diff(s.group.owners, r->second.owners, now))
        s.handoffs.push_back(std::move(h));
    }
    while (!s.handoffs.empty() && s.handoffs.front().at < now - options_.handoff_window) {
      s.handoffs.pop_front();
    }
    s.group = std::move(r->second);
    s.owners_at = now;
  }
  state_.queues = std::move(next);
  // Labels only of sessions something still names.
  std::set<std::string> named;
  for (const auto& [name, q] : state_.queues) {
    for (const auto& ses : q.group.sessions) named.insert(ses.id.value);
    for (const Handoff& h : q.handoffs) {
      if (h.from) named.insert(h.from->value);
      if (h.to) named.insert(h.to->value);
    }
    if (q.status) {
      for (const SessionInfo& si : q.status->sessions) named.insert(si.id.value);
    }
  }
  for (auto it = state_.labels.begin(); it != state_.labels.end();) {
    it = named.count(it->first) ? std::next(it) : state_.labels.erase(it);
  }
  state_.owners_error.clear();
  state_.owners_at = now;
  return absl::OkStatus();
}

absl::Status Poller::PollStatusOnce() {
  absl::MutexLock sl(&status_store_mu_);
  auto fail = [&](const absl::Status& st) {
    return Failed(status_store_, &PollerState::status_error, st);
  };
  if (absl::Status st = Connect(status_store_); !st.ok()) return fail(st);
  // The queues the owners lane knows; before its first round, the list.
  std::vector<std::string> names;
  {
    absl::MutexLock l(&mu_);
    for (const auto& [name, q] : state_.queues) names.push_back(name);
  }
  if (names.empty()) {
    absl::StatusOr<std::vector<QueueConfig>> queues = status_store_->ListQueues();
    if (!queues.ok()) return fail(queues.status());
    for (const QueueConfig& q : *queues) names.push_back(q.name);
  }
  for (const std::string& name : names) {
    const absl::Time start = options_.clock->Now();
    absl::StatusOr<QueueStatus> st = status_store_->Status(name);
    if (absl::IsNotFound(st.status())) continue;
    if (!st.ok()) return fail(st.status());
    const absl::Time now = options_.clock->Now();
    const QueueTotals t = SumUp(*st);
    absl::MutexLock l(&mu_);
    QueueState& s = state_.queues[name];
    if (s.config.name.empty()) s.config = st->config;
    for (const SessionInfo& si : st->sessions) {
      state_.labels[si.id.value] = absl::StrCat(si.host, ":", si.pid);
    }
    s.status = *std::move(st);
    s.status_at = now;
    s.status_took = now - start;
    s.samples.push_back({now, t.ready + t.delayed + t.in_flight});
    while (!s.samples.empty() && s.samples.front().at < now - options_.rate_window) {
      s.samples.pop_front();
    }
  }
  absl::MutexLock l(&mu_);
  state_.status_error.clear();
  state_.status_at = options_.clock->Now();
  return absl::OkStatus();
}

PollerState Poller::Snapshot() const {
  absl::MutexLock l(&mu_);
  return state_;
}

std::optional<QueueState> Poller::SnapshotQueue(const std::string& queue,
                                                std::map<std::string, std::string>* labels) const {
  absl::MutexLock l(&mu_);
  auto it = state_.queues.find(queue);
  if (it == state_.queues.end()) return std::nullopt;
  if (labels) *labels = state_.labels;
  return it->second;
}

namespace {
// The samples of the last `window`: [first, last].
std::optional<std::pair<const Sample*, const Sample*>> Span(const std::deque<Sample>& samples,
                                                            absl::Duration window) {
  if (samples.size() < 2) return std::nullopt;
  const Sample& last = samples.back();
  const Sample* first = nullptr;
  for (const Sample& s : samples) {
    if (s.at >= last.at - window) {
      first = &s;
      break;
    }
  }
  if (first == nullptr || first == &last || first->at == last.at) return std::nullopt;
  return std::make_pair(first, &last);
}
}  // namespace

std::optional<double> BacklogRate(const std::deque<Sample>& samples, absl::Duration window) {
  auto span = Span(samples, window);
  if (!span) return std::nullopt;
  return (span->second->backlog - span->first->backlog) /
         absl::ToDoubleSeconds(span->second->at - span->first->at);
}

}  // namespace partq::console
