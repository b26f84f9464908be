// A worker of several queues in one process (issue 52), as River's Client with its Queues
// map, Oban's queues list or a Kafka consumer subscribed to several topics: one Consumer per
// queue, each with its own options, handler, session, parts and threads (every guarantee of a
// single-queue Consumer holds per queue), started and stopped together. `partq worker A B`
// runs one (cli/worker.cc).
//
//   std::vector<WorkerQueue> queues = {{emails_options, &emails_handler},
//                                      {thumbs_options, &thumbs_handler}};
//   Worker worker(PgStoreFactory(pg), std::move(queues));
//   if (absl::Status st = worker.Start(); !st.ok()) ...;
//   ...
//   worker.Stop();  // every queue drains at once, each within its drain_timeout
//
// The queues share what can be shared without one holding another back (docs/architecture.md,
// "Threads of a worker"): one heartbeat transaction, one LISTEN connection, a pool of claim
// connections, one connection for the part-0 jobs, and a sweep that stands in for every idle
// queue's own polls (ConsumerOptions::swept_poll_interval).
// Start (but see there), Stop and Abandon keep the rules of base/service.h. All methods are
// thread-safe.
#ifndef PARTQ_CONSUMER_WORKER_H_
#define PARTQ_CONSUMER_WORKER_H_

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "base/service.h"
#include "consumer/consumer.h"
#include "store/store.h"

namespace partq {

class ConsumerMetrics;

// One queue of a Worker: its options (options.queue names it), its handler and its metrics
// (may be null); the handler and the metrics must outlive the worker.
struct WorkerQueue {
  ConsumerOptions options;
  Handler* handler = nullptr;
  ConsumerMetrics* metrics = nullptr;
};

class Worker {
 public:
  Worker(StoreFactory factory, std::vector<WorkerQueue> queues);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Starts every queue's consumer, in order. InvalidArgument, starting none, when there is
  // no queue, a queue is named twice or has no handler; when a consumer fails to start, the
  // ones started are stopped and its error is returned naming its queue. Unlike the rule of
  // base/service.h, a Start that failed so leaves the worker stopped (a stopped Consumer
  // does not start again): make a new Worker to try again.
  absl::Status Start();
  // Stops every consumer at once (Consumer::Stop: each drains within its drain_timeout).
  void Stop();
  // Consumer::Abandon of each: like a crash, for tests.
  void Abandon();

  // Whether every session joined and finished a rebalance round (a worker's /readyz);
  // otherwise false with `why` naming the first queue that has not.
  bool Ready(std::string* why) const;
  // OK while every queue's session lasts; else the first ended session's status (its queue
  // was deleted), with the queue named, and `queue` set to it when not null.
  absl::Status Ended(std::string* queue = nullptr) const;

  // The consumers, one per queue in the order given (none when the queues are invalid: see
  // Start). Made by the constructor, so reading them needs no lock.
  const std::vector<std::unique_ptr<Consumer>>& consumers() const { return consumers_; }

 private:
  static absl::Status CheckQueues(const std::vector<WorkerQueue>& queues);
  void StartSweep();
  void StopSweep();
  void SweepLoop(const std::vector<Consumer*>& swept);

  const absl::Status invalid_;  // CheckQueues' verdict, returned by Start
  const std::shared_ptr<StorePool> pool_;  // the claimers' and the sweep's (several queues)
  const std::vector<std::unique_ptr<Consumer>> consumers_;
  StartStop lifecycle_;
  absl::Mutex sweep_mu_;
  bool sweep_stop_ ABSL_GUARDED_BY(sweep_mu_) = false;
  std::thread sweeper_;
};

}  // namespace partq

#endif  // PARTQ_CONSUMER_WORKER_H_
