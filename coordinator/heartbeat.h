// When a session heartbeats, and when it must consider itself lost: the two
// timers of Kafka's consumer Heartbeat (heartbeat interval, session timeout),
// on an injected clock. It does no I/O and starts no thread: the session
// thread asks it what is due and tells it what happened.
//
//   next()     the next heartbeat is due at this time. The join counts as the
//              first heartbeat; after a round that heartbeated it moves one
//              interval on; after a failed round, to the retry.
//   AliveAt(t) a heartbeat (or join, or the keepalive that heartbeats during
//              a revoke) sent at t answered that our row is alive: the
//              database saw it no earlier than t, so the TTL counts from t,
//              not from the answer. Alive(): AliveAt(now).
//   Expired()  no heartbeat answered alive was sent within the TTL: the others
//              may have expired the session, so its parts are no longer sure
//              to be ours (the database's clock may differ; the TTL is the
//              session's promise, not a measurement of it).
//
// Not thread-safe: one thread (the session's) uses it.
#ifndef PARTQ_COORDINATOR_HEARTBEAT_H_
#define PARTQ_COORDINATOR_HEARTBEAT_H_

#include "absl/time/time.h"
#include "base/clock.h"

namespace partq {

// The heartbeat interval a session uses unless told otherwise: a third of
// its TTL, the ratio Kafka's consumer asks of heartbeat.interval.ms against
// session.timeout.ms. Two heartbeats may then fail before the session must
// count itself lost, and another member takes a crashed one's parts within
// TTL + TTL/3 of its last heartbeat. (It was a quarter. An idle fleet's
// load on the database is this rate, a one-row write per heartbeat: 200
// idle sessions took 2.8-3.9 % of a core at a third against 3.8-5.4 % at a
// quarter; BENCHMARKS.md, "Idle heartbeats every third of the TTL".)
inline absl::Duration DefaultHeartbeatInterval(absl::Duration ttl) { return ttl / 3; }

class HeartbeatTimer {
 public:
  // `interval` between heartbeats (> 0), `ttl` of the session; `clock` must
  // outlive the timer. The TTL and the first heartbeat count from now.
  // `aligned`: each next heartbeat is due at the last multiple of `interval`
  // (on the clock, since the Unix epoch) no later than an interval after the
  // last, so timers of one interval are due at the same moments (sessions of
  // one process sharing a transaction, heartbeat_hub.h). Never later than
  // unaligned; sometimes sooner.
  HeartbeatTimer(Clock* clock, absl::Duration interval, absl::Duration ttl, bool aligned = false);

  absl::Duration interval() const { return interval_; }
  absl::Time next() const { return next_; }
  // Whether a round that begins at `now` should heartbeat.
  bool Due(absl::Time now) const { return now >= next_; }

  // The round that began at `start` completed with its heartbeat (if it was
  // due): the next one is due an interval after `start`.
  void Sent(absl::Time start) { next_ = After(start); }
  // The round failed; the session retries at `retry`. A heartbeat that was
  // due in it (`heartbeat`) goes with the retry, not at once: a loop that
  // kept its past due time would spin on a database that refuses every call.
  // One not yet due goes with the retry at the latest.
  void Retry(absl::Time retry, bool heartbeat);

  void Alive() { AliveAt(clock_->Now()); }
  void AliveAt(absl::Time t);
  absl::Time last_alive() const { return last_alive_; }
  bool Expired() const { return clock_->Now() - last_alive_ > ttl_; }

 private:
  // An interval after `t`, or the grid point before it (aligned).
  absl::Time After(absl::Time t) const;

  Clock* clock_;
  absl::Duration interval_;
  bool aligned_;
  absl::Duration ttl_;
  absl::Time next_;
  absl::Time last_alive_;
};

}  // namespace partq

#endif  // PARTQ_COORDINATOR_HEARTBEAT_H_
