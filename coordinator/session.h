// One member of a queue's consumer group: joins, heartbeats, expires dead
// members, rebalances its parts and leaves (docs/architecture.md,
// Protocols).
//
// A Session runs one background thread with its own Store connection, and
// (when the store supports LISTEN) a second one that waits for the queue's
// notices: group notices wake the rebalancer at once, item notices are passed
// to the ItemsCallback. Both use the one connection where the store can share
// it (Store::ListenHere: the session thread's calls interrupt the wait and
// go first, so a heartbeat never waits behind it); elsewhere the listener
// has a connection of its own. Part changes are reported to a PartListener, like a
// Kafka ConsumerRebalanceListener:
//   OnRevoke(parts)  before the session gives parts up: stop claiming in them
//                    and finish in-flight items. The parts are released (and
//                    unfinished claims refunded) only after it returns, so a
//                    part is never owned by two sessions.
//   OnAssign(parts)  after parts were acquired, with their epochs.
//   OnLost(parts)    the session lost parts without revoking them (it expired,
//                    was fenced by a static re-join, the database says it no
//                    longer owns them, or its lease lapsed: see below). Acks
//                    under those epochs will fail.
// Listener callbacks run one at a time: on the session thread, except the
// OnLost of a lapsed lease, which comes from the session's lease thread (while
// an OnRevoke of other parts may still be draining on the session thread).
//
// The lease: the others may expire the session once its TTL has passed since
// the database last saw it, and the database saw it no earlier than the send
// time of its last heartbeat that answered alive (or of its join). So once
// the TTL has passed since that send time, the session counts its owned parts
// lost (OnLost) without waiting for a heartbeat under way to answer: a
// heartbeat that hangs past the TTL cannot leave a part believed by two
// sessions. Parts acquired while the lease has lapsed are not reported either.
// A later heartbeat that answers alive renews the lease, and the parts the
// group still lists as ours are assigned again (at the same epochs); one that
// answers "gone" makes the session re-join.
//
// Inside, a round is: heartbeat (HeartbeatTimer, heartbeat.h, says when one is
// due and when the session must count itself lost), then rebalance as
// reconcile -> plan -> apply (rebalance.h holds the pure steps); every part the
// session knows has a state in a PartTable (part_table.h) changed by one
// checked transition, and every loss of parts goes through one function.
// All time (reads, sleeps, timed waits) comes from SessionOptions::clock.
//
// Lifecycle (base/service.h): Start() joins and returns once the first join
// succeeded; Stop() revokes every part, leaves and joins the threads. Stop is
// safe before Start and twice, and a stopped session does not start again;
// both go through the checked state transition (the rules of base/service.h,
// kept by the session's own states).
// On a ManualClock, Start's retries and a Stop whose leave must be retried
// wait for the clock to move (a test starts such a session on a thread).
// Thread-safe: owned(), state() and the waiting helpers may be called from
// any thread.
#ifndef PARTQ_COORDINATOR_SESSION_H_
#define PARTQ_COORDINATOR_SESSION_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "coordinator/heartbeat.h"
#include "coordinator/heartbeat_hub.h"
#include "coordinator/notice_hub.h"
#include "coordinator/part_table.h"
#include "coordinator/session_metrics.h"
#include "store/store.h"
#include "store/types.h"

namespace partq {

class PartListener {
 public:
  virtual ~PartListener() = default;
  virtual void OnRevoke(const std::vector<OwnedPart>& parts) = 0;
  virtual void OnAssign(const std::vector<OwnedPart>& parts) = 0;
  virtual void OnLost(const std::vector<OwnedPart>& parts) = 0;
};

struct SessionOptions {
  std::string queue;
  std::string instance_id;  // non-empty: static membership
  // A static member's Stop() drains its parts but does not leave: its session
  // and parts stay reserved until its TTL, so a restart with the same
  // instance id takes them back at once and nobody else's parts move (Kafka's
  // KIP-345). True: it leaves like a dynamic member (a scale-down for good).
  bool leave_on_stop = false;
  std::string host;  // reported in `partq status`; default: hostname
  // Heartbeat period; zero: DefaultHeartbeatInterval of the queue's TTL
  // (a third).
  absl::Duration heartbeat_interval = absl::ZeroDuration();
  // While waiting for a part another member must release first, re-read the
  // group this often (a group notice usually comes sooner).
  absl::Duration handoff_poll = absl::Milliseconds(250);
  // Without LISTEN (or with poll_only), re-read the group this often.
  absl::Duration group_poll = absl::Seconds(1);
  bool poll_only = false;  // no LISTEN connection (PgBouncer transaction pooling)
  // Group notices wake the session at most this often (a burst of joins and
  // hand-offs is folded into one read of the group).
  absl::Duration min_tick_gap = absl::Milliseconds(50);
  // Backoff between reconnect attempts when the database is unreachable.
  absl::Duration retry_backoff = absl::Milliseconds(200);
  // Heartbeat through this hub, in one transaction with the other sessions
  // of the process (heartbeat_hub.h), on a grid of the interval; null: on
  // the session's own connection. Must outlive the session.
  HeartbeatHub* hub = nullptr;
  // Wait for notices on this hub's connection, which the process's other
  // sessions share (notice_hub.h); null: on the session's connection (or one
  // of its own). With both hubs, a session holds no connection between
  // rounds. Must outlive the session.
  NoticeHub* notices = nullptr;
  // Where the session reports parts, rebalances and heartbeats; null: nowhere.
  // Must outlive the session.
  SessionMetrics* metrics = nullptr;
  Clock* clock = Clock::Real();  // time, sleeps and deadline waits; must outlive the session
};

class Session {
 public:
  enum class State { kIdle, kJoining, kActive, kLost, kLeaving, kStopped };
  static const char* StateName(State s);

  // An item notice: the part (-1: any part) and the lowest key added there
  // (nullopt: not said, anything may have come anywhere; Notice::from).
  using ItemsCallback = std::function<void(int part, std::optional<ItemKey> from)>;

  // `listener` must outlive the session.
  Session(StoreFactory factory, SessionOptions options, PartListener* listener);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Joins (retrying while the database is unavailable, up to `timeout`) and
  // starts the background threads. Errors: NotFound for an unknown queue,
  // FailedPrecondition for a missing schema, the last error on timeout.
  // FailedPrecondition too once started or stopped: a session starts once.
  absl::Status Start(absl::Duration timeout = absl::Seconds(30));
  // Graceful leave: revoke all parts (the listener drains), delete the session
  // so the others take the parts at once, stop the threads. A static member
  // (unless leave_on_stop) drains the same way but keeps its session and
  // parts until its TTL (Store::ReleaseClaims) for its next incarnation.
  void Stop();
  // Leaves without revoking or deleting anything: the session simply stops
  // heartbeating, as if the process died (tests and crash simulation).
  // owned() still lists what it held.
  void Abandon();

  // Called for every item notice (from the listener thread).
  void SetItemsCallback(ItemsCallback cb);
  // Called for every notice of the queue, whatever its kind, before the
  // session acts on it, and with kGroup when a new listener starts (notices
  // may have been missed); from the listener thread. The queue's part-0 jobs
  // use it to wake when something changed (Consumer).
  using NoticeCallback = std::function<void(Notice::Kind)>;
  void SetNoticeCallback(NoticeCallback cb);
  // Called when the queue's paused flag changes, as a join or a group view
  // reads it (a join on a paused queue counts as a change, and comes before
  // the kept parts reach the listener); from the thread that joined or the
  // session thread. Set before Start.
  using PausedCallback = std::function<void(bool paused)>;
  void SetPausedCallback(PausedCallback cb);
  // The queue is paused, as of the last group view (Store::SetPaused).
  bool paused() const;
  // A listener is open now: item notices arrive (none with poll_only, a
  // store without LISTEN, or while the listener reconnects; a new one makes
  // every part be read from its head).
  bool listening() const { return listening_now_.load(); }
  // Called when the queue's rate limit changes (Store::SetRate; nullopt:
  // none), as a join or a group view reads it, with the queue's part count;
  // a join on a limited queue counts as a change and comes before the kept
  // parts reach the listener. From the thread that joined or the session
  // thread. Set before Start.
  using RateCallback = std::function<void(std::optional<double> per_second, int parts)>;
  void SetRateCallback(RateCallback cb);
  // What the session's consumer has finished so far (totals since it
  // started, never decreasing). Each heartbeat of the session thread carries
  // the difference to what the last successful one carried, and a leaving
  // session sends what is left before it leaves (Store::Heartbeat's
  // `finished`: the queue's throughput in `partq status`). Called on the
  // session thread without the session's lock held. Set before Start; none:
  // the session reports nothing.
  using FinishedCallback = std::function<FinishCounts()>;
  void SetFinishedCallback(FinishedCallback cb);
  // Wakes the rebalancer now (e.g. after a group notice from elsewhere).
  void Poke();

  State state() const;
  // Why the session stopped by itself, or OK: NotFound when its queue was
  // deleted while it ran (a re-join found no queue). Nothing retries then;
  // the owner should stop and report it.
  absl::Status ended() const;
  SessionId id() const;
  // The queue's settings as read at Start; its part count may have grown
  // since (queue_parts()).
  const QueueConfig& queue_config() const { return config_; }
  // The queue's part count as of the last group view: it grows while the
  // session runs (Store::GrowParts), and the next rebalance plans with it.
  int queue_parts() const;
  std::vector<OwnedPart> owned() const;
  // The epoch at which this session owns `part` now, if it does.
  std::optional<Epoch> EpochOf(int part) const;
  // Rebalance rounds completed so far (for tests waiting on progress).
  int64_t rounds() const;
  // Rounds that planned (the rest found the group as a plan that had nothing
  // to do left it, and skipped planning). For tests.
  int64_t plans() const;
  // Waits until the session's parts equal its target in the last view it read
  // and no hand-off is pending; false on timeout (on the session's clock).
  bool WaitStable(absl::Duration timeout) const;

 private:
  // How parts go without a revoke: some of them (the view no longer lists
  // them as ours), or the whole session (expired, fenced or its queue gone:
  // it must re-join).
  enum class Loss { kParts, kSession };

  void Run();
  // Waits for the next round: its time, the heartbeat's, or a poke (folded
  // with others into one round per min_tick_gap). False when stopping.
  bool AwaitRound(absl::Time next_round, absl::Time last_round);
  // After a failed round: decides whether the session is lost, and when the
  // next round and heartbeat come.
  void RoundFailed(const absl::Status& st, bool heartbeat, absl::Time* next_round);
  // The graceful end of Run (unless abandoned): revoke, leave, stopped.
  void Leave();
  // Before a leave: one heartbeat with what was finished since the last one.
  void ReportLastFinished();
  // The finished callback's totals (zero without one).
  FinishCounts Finished() const;
  // The listener thread: waits on the session's connection (the listener
  // EnsureStore made) or, where the store cannot share it, on its own.
  void ListenLoop();
  void ListenOnOwnConnection();
  // What a notice asks for: a group read, or the items callback.
  void Dispatch(const std::vector<Notice>& notices);
  // Notices may have been missed (a new listener): read the group, and
  // every part from its head.
  void ListenerRestarted();
  std::atomic<bool> listening_now_{false};
  // Connects store_ (and, unless poll_only, listens on it) if it is not.
  absl::Status EnsureStore();
  // Whether store_ is closed after a round that left the session stable: it
  // heartbeats through a hub and does not listen on store_.
  bool ClosesBetweenRounds() const;
  absl::Status Join();
  // From kLost: joining, then active again, or lost again on failure.
  absl::Status Rejoin();
  // One heartbeat (or group read) and the rebalance that follows.
  absl::Status Tick(bool heartbeat);
  // Reconcile, plan, apply (coordinator/rebalance.h). `unchanged`: the
  // store said nobody changed the group since our last whole view.
  absl::Status Rebalance(const GroupView& view, bool unchanged);
  // The group to plan with: the last whole view read, which `view` replaces
  // if whole, changes if a delta, and leaves as it is if unchanged
  // (Store::HeartbeatSince); the queue row's fields are `view`'s either way.
  const GroupView& Remember(GroupView&& view);
  // Tells the paused callback when the view's paused flag differs from ours.
  void NotePaused(bool paused);
  // Apply: revoke and release `parts` (those we hold); handed back to the
  // listener if the release fails.
  absl::Status Release(const std::vector<int>& parts);
  // Apply: acquire the free parts `parts`; returns those acquired.
  absl::StatusOr<std::vector<OwnedPart>> Acquire(const std::vector<int>& parts);
  // `parts` are ours now: table, then listener.
  void Assign(const std::vector<OwnedPart>& parts);
  // The one path for losing parts: table, log, metrics, state, listener.
  void Lose(const std::vector<OwnedPart>& parts, Loss loss, const char* why);
  void LoseLocked(const std::vector<OwnedPart>& parts, Loss loss, const char* why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(listener_mu_);
  // The database answered alive to a heartbeat (or join) sent at `sent`: the
  // lease runs until `sent` + TTL. Session thread only.
  void Renewed(absl::Time sent);
  // Whether the lease ran out (TTL since the send time of the last renewal).
  bool LapsedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The lease thread: at the lease's end, counts the owned parts lost.
  void LeaseLoop();
  // Hand-off metric: when each part the plan wants was first wanted.
  void TrackHandOffs(const std::vector<int>& wanted);
  // listener_->OnRevoke(parts), heartbeating meanwhile from a helper thread.
  void RevokeKeepingAlive(const std::vector<OwnedPart>& parts);
  void SetState(State next);
  void SetStateLocked(State next) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const StoreFactory factory_;
  const SessionOptions options_;
  Clock* const clock_;
  PartListener* const listener_;
  SessionMetrics& metrics_;
  QueueConfig config_;
  std::unique_ptr<Store> store_;  // session thread only (and Start/Stop before/after it)
  // Where notices are waited for: unknown until the first connection says.
  enum class Listening { kUnknown, kOnSession, kOwn };

  // Held around OnAssign and OnLost (never OnRevoke, which may drain for
  // long), so the lease thread's OnLost and the session thread's OnAssign
  // come one at a time and in the order of the lease. Taken before mu_.
  absl::Mutex listener_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kIdle;
  SessionId id_ ABSL_GUARDED_BY(mu_);
  int64_t incarnation_ ABSL_GUARDED_BY(mu_) = 0;
  PartTable parts_ ABSL_GUARDED_BY(mu_);
  bool stable_ ABSL_GUARDED_BY(mu_) = false;
  bool poked_ ABSL_GUARDED_BY(mu_) = false;
  // A rebalance round (Tick) is under way on the session thread.
  bool in_round_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool abandon_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status ended_ ABSL_GUARDED_BY(mu_);
  int64_t rounds_ ABSL_GUARDED_BY(mu_) = 0;
  bool revoked_ ABSL_GUARDED_BY(mu_) = false;  // OnRevoke returned: the keepalive stops
  Listening listening_ ABSL_GUARDED_BY(mu_) = Listening::kUnknown;
  // kOnSession: the listener on store_'s connection (a Wait on it fails once
  // that store is gone, and EnsureStore makes the next), and how many
  // EnsureStore has made.
  std::shared_ptr<Listener> session_listener_ ABSL_GUARDED_BY(mu_);
  int64_t listeners_made_ ABSL_GUARDED_BY(mu_) = 0;
  ItemsCallback items_cb_ ABSL_GUARDED_BY(mu_);
  NoticeCallback notice_cb_ ABSL_GUARDED_BY(mu_);
  PausedCallback paused_cb_ ABSL_GUARDED_BY(mu_);
  bool paused_ ABSL_GUARDED_BY(mu_) = false;
  RateCallback rate_cb_ ABSL_GUARDED_BY(mu_);
  FinishedCallback finished_cb_ ABSL_GUARDED_BY(mu_);
  std::optional<double> rate_ ABSL_GUARDED_BY(mu_);
  void NoteRate(std::optional<double> rate);
  // Takes a grown part count from a group view (0, or no more than we know:
  // nothing to do); the rate callback hears it when a limit is set, since a
  // part's share of the limit shrinks with it.
  void NoteParts(int parts);
  int queue_parts_ ABSL_GUARDED_BY(mu_) = 0;
  // Send time of the last heartbeat (or join, or keepalive) answered alive.
  absl::Time lease_start_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();

  // Session thread only (made by Start before the thread runs).
  std::optional<HeartbeatTimer> heartbeat_;
  // The last whole group view read, and its generation: a heartbeat or group
  // read passes it and gets members and owners only when they changed.
  // kNoGeneration after a join (the session id changed, and with it what
  // the view says is ours).
  int64_t known_generation_ = kNoGeneration;  // session thread only
  GroupView last_view_;                       // session thread only
  // Parts the last plan wants us to acquire, and since when (hand-off metric).
  std::map<int, absl::Time> wanted_since_;  // session thread only
  // What the last round planned with when it found nothing to do (nothing
  // to reconcile, release, acquire or wait for): the part count and the
  // parts we held. A round over an unchanged group, with the same count and
  // the same parts held, would plan the same nothing, so it is skipped: a
  // plan costs O(parts) and every idle member would make one per heartbeat.
  struct Settled {
    int parts = 0;
    std::vector<OwnedPart> held;
  };
  std::optional<Settled> settled_;  // session thread only
  int64_t plans_ ABSL_GUARDED_BY(mu_) = 0;
  // The finished callback's totals as of the last heartbeat that carried them.
  FinishCounts reported_;  // session thread only
  std::thread thread_;
  std::thread listen_thread_;
  std::thread lease_thread_;
};

}  // namespace partq

#endif  // PARTQ_COORDINATOR_SESSION_H_
