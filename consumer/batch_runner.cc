#include "consumer/batch_runner.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "consumer/metrics.h"

namespace partq {
namespace {

// Returned by the body to make Finish roll back so the batch can run again
// with one savepoint per item (or a lone item's failure be recorded).
absl::Status IsolateSignal() { return absl::AbortedError("partq: isolating a failed item"); }

// Returned by the body when the consumer stops and its drain timeout
// passed: Finish rolls back and the batch's items go back unfinished.
constexpr char kStopUrl[] = "type.partq.dev/consumer.stopping";
absl::Status StopSignal() {
  absl::Status st = absl::AbortedError(
      "partq is stopping and its drain timeout (--drain-timeout) passed: the batch goes back to "
      "the queue unfinished, without using an attempt");
  st.SetPayload(kStopUrl, absl::Cord("1"));
  return st;
}

}  // namespace

void BatchRunner::StopBy(absl::Time deadline) {
  stop_deadline_ns_.store(absl::ToUnixNanos(deadline));
}

void BatchRunner::CancelCalls() { cancelled_.store(true); }

bool BatchRunner::IsStopSignal(const absl::Status& status) {
  return status.GetPayload(kStopUrl).has_value();
}

absl::Time BatchRunner::CallDeadline(absl::Time start) const {
  const int64_t stop = stop_deadline_ns_.load();
  const absl::Time end = start + handler_timeout_;
  return stop == INT64_MAX ? end : std::min(end, absl::FromUnixNanos(stop));
}

bool BatchRunner::Stopped() const {
  const int64_t stop = stop_deadline_ns_.load();
  return cancelled_.load() || (stop != INT64_MAX && clock_->Now() >= absl::FromUnixNanos(stop));
}

BatchRunner::BatchRunner(Handler* handler, FailurePolicy failures, absl::Duration handler_timeout,
                         Clock* clock, ConsumerMetrics* metrics)
    : handler_(handler),
      failures_(failures),
      handler_timeout_(handler_timeout),
      clock_(clock),
      metrics_(metrics) {}

absl::Status BatchRunner::RunAlone(HandlerCall& call) {
  const absl::Time t0 = clock_->Now();
  call.deadline = CallDeadline(t0);
  absl::Status st = CallHandle(*handler_, call);
  const absl::Time t1 = clock_->Now();
  if (metrics_ != nullptr) metrics_->HandlerCall(t1 - t0);
  // A final handler keeps its deadline itself, and an ok status of its
  // stands: it wrote the item's effects already (Handler::StatusesAreFinal).
  if (st.ok() && t1 > call.deadline && !handler_->StatusesAreFinal()) {
    st = absl::DeadlineExceededError(
        absl::StrCat("handler timed out after ", absl::FormatDuration(t1 - t0),
                     " (--handler-timeout is ", absl::FormatDuration(handler_timeout_), ")"));
  }
  return st;
}

absl::StatusOr<std::vector<Outcome>> BatchRunner::Run(Tx& tx, absl::Span<const Item> items,
                                                      const SessionId& session, absl::BitGenRef gen,
                                                      Batch& batch, bool* need_isolation) {
  const bool isolate = batch.isolate;
  batch.failures.clear();  // of an earlier run, rolled back
  if (Stopped()) return StopSignal();
  std::vector<Outcome> outcomes(items.size());
  std::vector<HandlerCall> calls(items.size());
  std::vector<HandlerCall*> run;
  std::vector<size_t> run_index;
  const absl::Time start = clock_->Now();
  const absl::Time deadline = CallDeadline(start);
  for (size_t i = 0; i < items.size(); ++i) {
    const Item& item = items[i];
    if (std::optional<Outcome> dead = failures_.CrashLoop(item)) {
      batch.failures.push_back({*dead, item.attempts, FailureKind::kCrash});
      outcomes[i] = *std::move(dead);
      continue;
    }
    calls[i].item = &item;
    calls[i].tx = &tx;
    calls[i].session = &session;
    calls[i].deadline = deadline;
    calls[i].cancel = &cancelled_;
    run.push_back(&calls[i]);
    run_index.push_back(i);
  }
  if (handler_->StatusesAreFinal() && !isolate) {
    switch (RunFinal(items, calls, run, run_index, gen, batch, &outcomes)) {
      case FinalRun::kDone:
        return outcomes;
      case FinalRun::kStopped:
        return StopSignal();
      case FinalRun::kBroken:
        // It broke its promise (threw, or gave some statuses but not all):
        // what it wrote cannot be trusted, so roll back and isolate.
        *need_isolation = true;
        return IsolateSignal();
    }
  }
  // A lone item runs without a savepoint (two round trips fewer). If it
  // fails, the transaction rolls back, its writes with it, and the rerun
  // records the failure without running the handler again: its failure is
  // its own, unlike an item of a batch whose transaction another item broke.
  if (items.size() == 1 && batch.items.size() == 1 && run.size() == 1) {
    const size_t i = run_index[0];
    if (batch.failed_alone && batch.failed_alone->first == items[i].id) {
      outcomes[i] = Failed(items[i], batch.failed_alone->second, gen, batch);
      return outcomes;
    }
    if (!isolate) {
      const absl::Status st = RunAlone(calls[i]);
      if (Stopped()) return StopSignal();
      if (st.ok()) {
        Ack(items[i], calls[i], &outcomes[i]);
        return outcomes;
      }
      batch.failed_alone.emplace(items[i].id, st);
      *need_isolation = true;
      return IsolateSignal();
    }
  }
  if (!isolate) {
    absl::Status st =
        RunAttempt(items, calls, run, run_index, deadline, batch, need_isolation, &outcomes);
    if (!st.ok()) return st;
    return outcomes;
  }
  if (absl::Status st = Isolate(tx, items, calls, run, run_index, gen, batch, &outcomes);
      !st.ok()) {
    return st;
  }
  return outcomes;
}

absl::Status BatchRunner::RunAttempt(absl::Span<const Item> items, std::vector<HandlerCall>& calls,
                                     const std::vector<HandlerCall*>& run,
                                     const std::vector<size_t>& run_index, absl::Time deadline,
                                     Batch& batch, bool* need_isolation,
                                     std::vector<Outcome>* outcomes) {
  std::vector<absl::Status> statuses;
  const absl::Time t0 = clock_->Now();
  try {
    handler_->HandleBatch(absl::MakeConstSpan(run), &statuses);
  } catch (...) {
    if (Stopped()) return StopSignal();
    *need_isolation = true;
    return IsolateSignal();
  }
  if (Stopped()) return StopSignal();
  const absl::Time t1 = clock_->Now();
  if (metrics_ != nullptr) metrics_->HandlerCall(t1 - t0);
  batch.item_cost = (t1 - t0) / static_cast<int64_t>(run.size());
  const bool told = statuses.size() == run.size() && t1 <= deadline;
  bool all_ok = told;
  for (const auto& st : statuses) all_ok = all_ok && st.ok();
  if (!all_ok) {
    batch.blamed.clear();
    batch.throttled.clear();
    for (size_t k = 0; told && k < run.size(); ++k) {
      if (statuses[k].ok()) continue;
      const int64_t id = items[run_index[k]].id;
      if (IsThrottled(statuses[k])) {
        batch.throttled.emplace_back(id, statuses[k]);
      } else {
        batch.blamed.push_back(id);
      }
    }
    *need_isolation = true;
    return IsolateSignal();
  }
  for (size_t i : run_index) Ack(items[i], calls[i], &(*outcomes)[i]);
  return absl::OkStatus();
}

absl::Status BatchRunner::Isolate(Tx& tx, absl::Span<const Item> items,
                                  std::vector<HandlerCall>& calls,
                                  const std::vector<HandlerCall*>& run,
                                  const std::vector<size_t>& run_index, absl::BitGenRef gen,
                                  Batch& batch, std::vector<Outcome>* outcomes) {
  // The items the batch attempt did not blame may run again together under a
  // savepoint: with a bad item among cheap ones (a batch INSERT), a batch
  // then costs a savepoint or two instead of two round trips per item. A
  // group that fails again sheds the items it blames now and may try again
  // (a flaky downstream fails others each time), up to kGroupRounds. Each
  // round runs only if it is expected to cost less than running its items
  // alone (GroupRoundPays): a failed round runs every item of it once more,
  // which for slow handlers, or when reruns fail often, costs more than the
  // round trips it could save. Blamed items, and whatever remains, run alone
  // after the group.
  //
  // Savepoints whose writes this transaction keeps until its commit (a group
  // that succeeded, items alone that succeeded) are counted: PostgreSQL keeps
  // the ids of 64 subtransactions per session in shared memory; past that,
  // every other session's visibility checks of rows this transaction wrote go
  // through pg_subtrans until it ends. So after kMaxKeptSavepoints (room left
  // for the handler's own) the items still to run alone are left (kLeave)
  // for another transaction, which the consumer runs right after this one
  // commits.
  //
  // Items the batch attempt reported throttled are not run again: their
  // retries are recorded (with the attempt given back) and the rest go on.
  int kept_savepoints = 0;
  batch.left.clear();
  std::vector<size_t> alone;  // positions in `run`
  std::vector<size_t> group;
  std::vector<bool> unblamed(run.size(), false);
  {
    const absl::flat_hash_set<int64_t> blamed(batch.blamed.begin(), batch.blamed.end());
    const absl::flat_hash_map<int64_t, absl::Status> throttled(batch.throttled.begin(),
                                                               batch.throttled.end());
    // The batch attempt told which items failed (else every item runs alone).
    const bool told = !blamed.empty() || !throttled.empty();
    for (size_t k = 0; k < run.size(); ++k) {
      const size_t i = run_index[k];
      if (auto t = throttled.find(items[i].id); t != throttled.end()) {
        (*outcomes)[i] = Failed(items[i], t->second, gen, batch);
        continue;
      }
      unblamed[k] = told && blamed.count(items[i].id) == 0;
      (unblamed[k] ? group : alone).push_back(k);
    }
  }
  if (absl::Status st = RunGroupRounds(tx, items, run, run_index, gen, batch, outcomes, group,
                                       alone, &kept_savepoints);
      !st.ok()) {
    return st;
  }
  alone.insert(alone.end(), group.begin(), group.end());
  std::sort(alone.begin(), alone.end());
  return RunEachAlone(tx, items, calls, run_index, alone, unblamed, kept_savepoints, gen, batch,
                      outcomes);
}

absl::Status BatchRunner::RunGroupRounds(Tx& tx, absl::Span<const Item> items,
                                         const std::vector<HandlerCall*>& run,
                                         const std::vector<size_t>& run_index, absl::BitGenRef gen,
                                         Batch& batch, std::vector<Outcome>* outcomes,
                                         std::vector<size_t>& group, std::vector<size_t>& alone,
                                         int* kept_savepoints) {
  absl::Duration item_cost = batch.item_cost;
  for (int round = 0; group.size() >= 2 && round < kGroupRounds; ++round) {
    const absl::Time s0 = clock_->Now();
    if (absl::Status sp = tx.Savepoint("partq_group"); !sp.ok()) return sp;
    const absl::Duration savepoint_cost = 2 * (clock_->Now() - s0);  // with its RELEASE
    if (!GroupRoundPays(RerunFailureRate(), group.size(), item_cost, savepoint_cost)) break;
    std::vector<HandlerCall*> calls_of_group;
    const absl::Time t0 = clock_->Now();
    for (size_t k : group) {
      run[k]->deadline = CallDeadline(t0);
      calls_of_group.push_back(run[k]);
    }
    std::vector<absl::Status> statuses;
    bool told = true;
    try {
      handler_->HandleBatch(absl::MakeConstSpan(calls_of_group), &statuses);
    } catch (...) {
      told = false;
    }
    if (Stopped()) return StopSignal();
    const absl::Time t1 = clock_->Now();
    if (metrics_ != nullptr) metrics_->HandlerCall(t1 - t0);
    item_cost = (t1 - t0) / static_cast<int64_t>(group.size());
    told = told && statuses.size() == group.size() && t1 <= CallDeadline(t0);
    const bool ok = told && std::all_of(statuses.begin(), statuses.end(),
                                        [](const absl::Status& st) { return st.ok(); });
    if (ok) {
      if (absl::Status r = tx.ReleaseSavepoint("partq_group"); !r.ok()) return r;
      NoteRerun(group.size(), 0);
      ++*kept_savepoints;
      for (size_t k : group) {
        const size_t i = run_index[k];
        Ack(items[i], *run[k], &(*outcomes)[i]);
      }
      group.clear();
      break;
    }
    if (absl::Status r = tx.RollbackToSavepoint("partq_group"); !r.ok()) return r;
    for (size_t k : group) run[k]->result.reset();
    if (!told) break;  // it cannot say which: all of them alone
    std::vector<size_t> still;
    for (size_t j = 0; j < group.size(); ++j) {
      if (statuses[j].ok()) {
        still.push_back(group[j]);
      } else if (IsThrottled(statuses[j])) {
        // It did nothing (and the rollback took nothing of it): recorded
        // now, not run alone.
        const size_t i = run_index[group[j]];
        (*outcomes)[i] = Failed(items[i], statuses[j], gen, batch);
      } else {
        alone.push_back(group[j]);
      }
    }
    NoteRerun(group.size(), group.size() - still.size());
    group = std::move(still);
  }
  return absl::OkStatus();
}

absl::Status BatchRunner::RunEachAlone(Tx& tx, absl::Span<const Item> items,
                                       std::vector<HandlerCall>& calls,
                                       const std::vector<size_t>& run_index,
                                       const std::vector<size_t>& alone,
                                       const std::vector<bool>& unblamed, int kept_savepoints,
                                       absl::BitGenRef gen, Batch& batch,
                                       std::vector<Outcome>* outcomes) {
  // Each item alone runs under the savepoint partq_item, and one round trip
  // between two items moves it on: after a success, "RELEASE SAVEPOINT;
  // SAVEPOINT" (the item's writes stay, the next item gets a savepoint of
  // its own; one is open at a time); after a failure, the ROLLBACK TO that
  // undid its writes leaves the savepoint in place, clean. The last one is
  // left to the commit.
  bool open = false;   // partq_item is established
  bool holds = false;  // and holds an acked item's writes
  for (size_t k : alone) {
    const size_t i = run_index[k];
    if (kept_savepoints >= kMaxKeptSavepoints) {
      (*outcomes)[i].id = items[i].id;
      (*outcomes)[i].part = items[i].part;
      (*outcomes)[i].kind = Outcome::Kind::kLeave;
      batch.left.push_back(items[i].id);
      continue;
    }
    if (!open || holds) {
      absl::Status sp = open ? tx.RenewSavepoint("partq_item") : tx.Savepoint("partq_item");
      if (!sp.ok()) return sp;
      open = true;
      holds = false;
    }
    const absl::Status st = RunAlone(calls[i]);
    if (Stopped()) return StopSignal();
    if (unblamed[k]) NoteRerun(1, st.ok() ? 0 : 1);
    if (st.ok()) {
      holds = true;
      ++kept_savepoints;
      Ack(items[i], calls[i], &(*outcomes)[i]);
    } else {
      if (absl::Status r = tx.RollbackToSavepoint("partq_item"); !r.ok()) return r;
      (*outcomes)[i] = Failed(items[i], st, gen, batch);
    }
  }
  return absl::OkStatus();
}

Outcome BatchRunner::Failed(const Item& item, const absl::Status& failure, absl::BitGenRef gen,
                            Batch& batch) const {
  Outcome o = failures_.Failed(item, failure, gen);
  batch.failures.push_back({o, item.attempts, FailureKindOf(failure)});
  return o;
}

void BatchRunner::Ack(const Item& item, HandlerCall& call, Outcome* outcome) {
  outcome->id = item.id;
  outcome->part = item.part;
  outcome->kind = Outcome::Kind::kAck;
  outcome->result = std::move(call.result);
}

BatchRunner::FinalRun BatchRunner::RunFinal(absl::Span<const Item> items,
                                            std::vector<HandlerCall>& calls,
                                            const std::vector<HandlerCall*>& run,
                                            const std::vector<size_t>& run_index,
                                            absl::BitGenRef gen, Batch& batch,
                                            std::vector<Outcome>* outcomes) {
  std::vector<absl::Status> statuses;
  if (run.size() == 1) {
    statuses.push_back(RunAlone(*run[0]));
  } else if (!run.empty()) {
    const absl::Time t0 = clock_->Now();
    try {
      handler_->HandleBatch(absl::MakeConstSpan(run), &statuses);
    } catch (...) {
      return Stopped() ? FinalRun::kStopped : FinalRun::kBroken;
    }
    if (metrics_ != nullptr) metrics_->HandlerCall(clock_->Now() - t0);
    if (statuses.empty()) {
      // A failure without blame, which left nothing in the transaction:
      // each item alone, here, to find the one that causes it.
      for (HandlerCall* call : run) {
        if (Stopped()) return FinalRun::kStopped;
        statuses.push_back(RunAlone(*call));
      }
    } else if (statuses.size() != run.size()) {
      return FinalRun::kBroken;
    }
  }
  // A call cut short by the stop failed for it, not for its items.
  if (Stopped()) return FinalRun::kStopped;
  for (size_t k = 0; k < run.size(); ++k) {
    const size_t i = run_index[k];
    if (statuses[k].ok()) {
      Ack(items[i], calls[i], &(*outcomes)[i]);
    } else {
      (*outcomes)[i] = Failed(items[i], statuses[k], gen, batch);
    }
  }
  return FinalRun::kDone;
}

void BatchRunner::NoteRerun(size_t runs, size_t failed) {
  // Counts that decay by item, not by call (a group round is many items, a
  // run alone one): the last hundred or so reruns weigh.
  const double decay = std::pow(0.99, static_cast<double>(runs));
  absl::MutexLock lock(&mu_);
  rerun_runs_ = rerun_runs_ * decay + static_cast<double>(runs);
  rerun_failed_ = rerun_failed_ * decay + static_cast<double>(failed);
}

double BatchRunner::RerunFailureRate() const {
  absl::MutexLock lock(&mu_);
  return rerun_runs_ > 0 ? rerun_failed_ / rerun_runs_ : 0;
}

bool BatchRunner::GroupRoundPays(double rerun_failure_rate, size_t items, absl::Duration item_cost,
                                 absl::Duration savepoint_cost) {
  const double g = static_cast<double>(items);
  const double item = absl::ToDoubleMicroseconds(item_cost);
  const double sp = absl::ToDoubleMicroseconds(savepoint_cost);
  const double success = std::pow(1 - rerun_failure_rate, g);
  // The round costs g items and a savepoint; if it succeeds it saves running
  // the g items alone, each with its savepoint. (If it fails, they run alone
  // anyway.) With reruns that never fail it pays for any g >= 2.
  return g * item + sp < success * g * (item + sp);
}

}  // namespace partq
