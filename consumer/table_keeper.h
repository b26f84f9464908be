// Vacuums the queue's tables from one worker of the queue at a time: the one
// whose session owns part 0, as the queue collector and the schedule firer
// do (coordinator/queue_collector.h, schedule_firer.h).
//
// Every item is a row inserted and deleted, so a queue at tens of thousands
// of items a second leaves as many dead rows a second in `items` and its
// indexes. Migration 10 gives the table an autovacuum threshold of 10,000
// dead rows, but autovacuum's launcher visits a database only once per
// `autovacuum_naptime` (1 min by default), a server setting partq cannot
// make: at 30k items/s the table then held a minute's dead rows, every claim
// that read a part from its head walked them, and consumption stalled for
// 30-90 s at a time (issue 27's soak; BENCHMARKS.md, "Churn at 30k items/s").
// The keeper asks every `interval` (10 s) whether a queue table has passed
// its threshold and vacuums it then (Store::VacuumQueueTables): what
// autovacuum would do by the table's own settings, without the naptime. At
// the same rate and default naptime, the half hour with the keeper kept the
// table at 60 MB and no backlog over 2,124 items, against 287 MB and 1.4M
// without it (BENCHMARKS.md, "The table keeper").
//
// After a vacuum it also rebuilds, online (REINDEX CONCURRENTLY), the
// table's indexes that are many times the size their entries need (those
// of its live rows and of the rows that die between two vacuums): a btree
// never gives pages back, so an index that grew to hold a held snapshot's
// dead entries (157 MB after a minute at 20k items/s, against 17 MB before)
// stayed that size (Store::VacuumQueueTables, TableVacuum::rebuilt; issue 47).
// A rebuild holds the keeper's connection, and with it the collector and
// the firer that share it, for its length: at most 20 s a statement, and 5 s
// a wait for a lock or an older snapshot, past which it gives up until the
// next vacuum.
//
// And it hands back the empty last pages of a table many times the size
// its rows need (a vacuum again, with TRUNCATE: migration 23 keeps vacuum
// from truncating as it goes, since the exclusive lock it takes stops every
// claim): the heap a held snapshot grew stayed at its peak too
// (TableVacuum::shrunk). That vacuum tries for the lock without waiting in
// line, for up to 5 s (PostgreSQL's VACUUM_TRUNCATE_LOCK_TIMEOUT), holding
// the keeper's connection meanwhile; holding the lock, it gives it up within
// 20 ms of a claim or an ack waiting while it checks which pages at the end
// are empty (VACUUM_TRUNCATE_LOCK_CHECK_INTERVAL), and cutting the file
// holds it a moment more. It frees only pages at the table's end, so a table
// whose end is still written shrinks at a later round; one that gave back
// little is tried again after a minute. A hot standby replays that lock and
// cancels its own queries of the table that wait on it past
// max_standby_streaming_delay. Neither this nor a rebuild is judged at the
// keeper's first vacuum of a table after it connects (one count of dead rows
// alone can be far below what a busy queue kills between two vacuums), nor
// by a role that may vacuum the tables but not read them (one that owns
// only the database): both sample the tables' rows.
//
// Cost: one catalog query every `interval` while this worker owns part 0,
// and the vacuums (a fraction of a second each when they keep pace). It
// takes turns on one connection with the collector and the firer
// (store/shared_store.h): a schedule's tick can wait for a vacuum. A role
// that may not vacuum the tables (it owns neither them nor the database)
// gets one warning, and the keeper stops; autovacuum alone keeps them then.
// A store without tables (MemStore) ends the keeper's rounds quietly.
//
// Lifecycle (base/service.h): Start() starts one thread; Stop() joins it;
// safe before Start and twice. RunOnce and the counts are thread-safe.
#ifndef PARTQ_CONSUMER_TABLE_KEEPER_H_
#define PARTQ_CONSUMER_TABLE_KEEPER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "base/service.h"
#include "store/shared_store.h"
#include "store/store.h"

namespace partq {

class ConsumerMetrics;

struct TableKeeperOptions {
  std::string queue;  // for the log and the metrics
  // Look this often; zero or less: never (the keeper does not start).
  absl::Duration interval = absl::Seconds(10);
  // Reads, and waits between rounds; must outlive the keeper.
  Clock* clock = Clock::Real();
};

class TableKeeper {
 public:
  // `is_keeper` is asked before every round (does this worker own part 0?);
  // `metrics` may be null, else it must outlive the keeper.
  TableKeeper(std::shared_ptr<SharedStore> store, TableKeeperOptions options,
              std::function<bool()> is_keeper, ConsumerMetrics* metrics = nullptr);
  ~TableKeeper();
  TableKeeper(const TableKeeper&) = delete;
  TableKeeper& operator=(const TableKeeper&) = delete;

  void Start();
  void Stop();

  // One round: vacuums what is due if this worker is the keeper. Returns
  // when the next round is due, on the options' clock (InfiniteFuture:
  // never again).
  absl::Time RunOnce();

  // Tables this keeper vacuumed so far.
  int64_t vacuums() const;

 private:
  void Run();
  // Says what a vacuum's shrink did (TableVacuum::shrunk, shrink_error).
  void ReportShrink(const TableVacuum& v);

  const std::shared_ptr<SharedStore> store_;
  const TableKeeperOptions options_;
  Clock* const clock_;
  const std::function<bool()> is_keeper_;
  ConsumerMetrics* const metrics_;

  mutable absl::Mutex mu_;
  StartStop lifecycle_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t vacuums_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace partq

#endif  // PARTQ_CONSUMER_TABLE_KEEPER_H_
