// Rates from the per-minute throughput the sessions' heartbeats report
// (QueueStatus::throughput, SessionInfo::throughput), for `partq status` and
// the console.
#ifndef PARTQ_STORE_THROUGHPUT_H_
#define PARTQ_STORE_THROUGHPUT_H_

#include <vector>

#include "absl/time/time.h"
#include "store/store.h"
#include "store/types.h"

namespace partq {

// Items finished per second, by outcome.
struct FinishRates {
  double acked = 0;
  double retried = 0;
  double dead = 0;
};

// How the heartbeats' counts (the `throughput` rows, QueueStatus) turn into
// rates. A session's heartbeat at time t adds what its worker finished since
// its previous heartbeat (t - interval; the session's start for the first)
// to its row of t's minute, so a row holds whole heartbeats' worth: it covers
// from the heartbeat before the minute's first one to the minute's last. A
// session heartbeats every `interval` (the workers' default: a third of the
// queue's TTL, coordinator/heartbeat.h), so with its last heartbeat's time
// the heartbeats' times are known, and what each row covers.
//
// RecentRates: for each live session (SessionLive), what it finished over
// the `window` before its last heartbeat (or since it started, if later, but
// never less than an interval),
// from the rows that cover that window (a row partly inside counts for the
// share of its span inside, as if its items were spread evenly over it),
// over the window's length; summed over the live sessions. So at a steady
// rate it is that rate (whatever the interval, and however the minutes fall),
// it lags by up to one heartbeat, and sessions that expired or left count for
// nothing (no live worker: 0). When the work stops it falls, to 0 once the
// window has left the minute the work stopped in (whose row is spread over
// all of that minute's heartbeats): within two windows and a heartbeat. Uses SessionInfo::throughput, since_heartbeat, since_start
// and the status's db_now.
FinishRates RecentRates(const QueueStatus& status, absl::Duration interval,
                        absl::Duration window = absl::Minutes(1));

// Everything the minutes hold, summed.
FinishCounts Total(const std::vector<ThroughputMinute>& minutes);

// The last `n` whole or partial minutes up to `now`, oldest first, with
// zero counts for minutes nobody reported (a chart needs the gaps).
std::vector<ThroughputMinute> LastMinutes(const std::vector<ThroughputMinute>& minutes,
                                          absl::Time now, int n);

}  // namespace partq

#endif  // PARTQ_STORE_THROUGHPUT_H_
