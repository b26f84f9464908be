// Rates from the per-minute throughput the sessions' heartbeats report
// (QueueStatus::throughput), for `partq status` and the console.
#ifndef PARTQ_STORE_THROUGHPUT_H_
#define PARTQ_STORE_THROUGHPUT_H_

#include <vector>

#include "absl/time/time.h"
#include "store/types.h"

namespace partq {

// Items finished per second, by outcome.
struct FinishRates {
  double acked = 0;
  double retried = 0;
  double dead = 0;
};

// The rates over the minute before `now` (the database clock of the same
// read): everything reported in the current minute, plus the part of the
// previous minute that lies inside the window, taken as if that minute's
// items had been spread evenly over it (the sliding-window estimate), over
// 60 seconds. Minutes are those of ThroughputMinute (reported by the
// heartbeat, so up to a heartbeat interval late).
FinishRates RatesOverLastMinute(const std::vector<ThroughputMinute>& minutes, absl::Time now);

// Everything the minutes hold, summed.
FinishCounts Total(const std::vector<ThroughputMinute>& minutes);

// The last `n` whole or partial minutes up to `now`, oldest first, with
// zero counts for minutes nobody reported (a chart needs the gaps).
std::vector<ThroughputMinute> LastMinutes(const std::vector<ThroughputMinute>& minutes,
                                          absl::Time now, int n);

}  // namespace partq

#endif  // PARTQ_STORE_THROUGHPUT_H_
