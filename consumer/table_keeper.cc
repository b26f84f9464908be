#include "consumer/table_keeper.h"

#include <utility>
#include <vector>

#include "base/log.h"
#include "consumer/metrics.h"

namespace partq {

TableKeeper::TableKeeper(std::shared_ptr<SharedStore> store, TableKeeperOptions options,
                         std::function<bool()> is_keeper, ConsumerMetrics* metrics)
    : store_(std::move(store)),
      options_(std::move(options)),
      clock_(options_.clock),
      is_keeper_(std::move(is_keeper)),
      metrics_(metrics) {}

TableKeeper::~TableKeeper() { Stop(); }

void TableKeeper::Start() {
  if (!lifecycle_.BeginStart("table keeper").ok()) return;
  if (options_.interval > absl::ZeroDuration()) {
    thread_ = std::thread([this] { Run(); });
  }
  lifecycle_.EndStart(true);
}

void TableKeeper::Stop() {
  if (!lifecycle_.BeginStop()) return;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  {
    absl::MutexLock lock(&store_->mu);
    store_->NotNeededLocked(this);
  }
  lifecycle_.EndStop();
}

int64_t TableKeeper::vacuums() const {
  absl::MutexLock lock(&mu_);
  return vacuums_;
}

void TableKeeper::Run() {
  for (;;) {
    const absl::Time next = RunOnce();
    absl::MutexLock lock(&mu_);
    auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
    clock_->AwaitWithDeadline(mu_, absl::Condition(&woken), next);
    if (stopping_) return;
  }
}

absl::Time TableKeeper::RunOnce() {
  if (!is_keeper_()) {
    // Part 0 went elsewhere: so does the connection, once the collector and
    // firer that share it (ours, and other queues' in the process) need it
    // no longer either.
    absl::MutexLock lock(&store_->mu);
    store_->NotNeededLocked(this);
    return clock_->Now() + options_.interval;
  }
  absl::StatusOr<std::vector<TableVacuum>> r;
  {
    absl::MutexLock lock(&store_->mu);
    if (absl::Status st = store_->EnsureLocked(this); !st.ok()) {
      r = st;
    } else {
      r = store_->store->VacuumQueueTables();
      if (!r.ok() && absl::IsUnavailable(r.status())) store_->store.reset();
    }
  }
  if (!r.ok()) {
    if (absl::IsUnimplemented(r.status())) return absl::InfiniteFuture();
    PARTQ_LOG(Warning) << "vacuuming the tables of queue " << options_.queue << ": " << r.status();
    if (metrics_ != nullptr) metrics_->VacuumError();
    return clock_->Now() + options_.interval;
  }
  for (const TableVacuum& v : *r) {
    switch (v.outcome) {
      case TableVacuum::Outcome::kVacuumed: {
        absl::MutexLock lock(&mu_);
        ++vacuums_;
      }
        if (metrics_ != nullptr) metrics_->Vacuumed(v.table, v.took);
        PARTQ_LOG(Debug) << "vacuumed " << v.table << " (" << v.dead_rows << " dead rows) in "
                         << absl::FormatDuration(v.took);
        for (const TableVacuum::Rebuild& b : v.rebuilt) {
          if (metrics_ != nullptr) metrics_->IndexRebuilt(b.index);
          PARTQ_LOG(Info) << "rebuilt index " << b.index << " of " << v.table << ", bloated "
                          << "(by a held snapshot, or a backlog since drained): "
                          << b.bytes_before / 1024 << " KiB -> " << b.bytes_after / 1024
                          << " KiB in " << absl::FormatDuration(b.took);
        }
        if (!v.rebuild_error.ok()) {
          PARTQ_LOG(Warning) << "rebuilding the bloated indexes of " << v.table << ": "
                             << v.rebuild_error;
        }
        ReportShrink(v);
        break;
      case TableVacuum::Outcome::kDenied:
        PARTQ_LOG(Warning) << "the table " << v.table << " has " << v.dead_rows
                           << " dead rows, but this role may not vacuum it (it owns neither the "
                              "table nor the database): autovacuum alone keeps the queue's "
                              "tables now, once per autovacuum_naptime. Make this role their "
                              "owner (or a member of the owner's role) and restart the workers "
                              "to have them vacuumed sooner (README, \"Running it hard\")";
        return absl::InfiniteFuture();
      case TableVacuum::Outcome::kBusy:         // autovacuum or another keeper has it
      case TableVacuum::Outcome::kHorizonHeld:  // partq_vacuum_horizon_age_seconds says why
        break;
    }
  }
  return clock_->Now() + options_.interval;
}

void TableKeeper::ReportShrink(const TableVacuum& v) {
  if (!v.shrink_error.ok()) {
    PARTQ_LOG(Warning) << "handing back the empty pages of " << v.table << ": " << v.shrink_error;
  }
  if (!v.shrunk.has_value()) return;
  const int64_t returned = v.shrunk->bytes_before - v.shrunk->bytes_after;
  if (metrics_ != nullptr && returned > 0) metrics_->TableShrunk(v.table, returned);
  PARTQ_LOG(Info) << "vacuumed " << v.table << " again to hand back its empty last pages, "
                  << "bloated (by a held snapshot, or a backlog since drained): "
                  << v.shrunk->bytes_before / 1024 << " KiB -> " << v.shrunk->bytes_after / 1024
                  << " KiB in " << absl::FormatDuration(v.shrunk->took);
}

}  // namespace partq
