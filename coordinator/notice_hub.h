// One LISTEN connection for all the sessions of a process that serves several
// queues (consumer/worker.h; issue 52): a worker of 50 queues listened on 50
// connections, now on one.
//
// The hub's thread listens for every queue it was given (Store::ListenMany)
// and hands each notice to the listeners of its queue (Listen): a Listener
// like any other to the session (SessionOptions::notices), which waits on it
// as it would on a connection of its own. When the hub's connection breaks,
// every listener's next Wait fails (Unavailable), as a broken connection's
// would: the session then makes a new one (which may take until the hub has
// connected again; Listen is Unavailable meanwhile) and, as after any new
// listener, reads its group and every part from its head, since notices may
// have been missed. The thread starts with the first Listen and stops with
// the hub.
//
// Thread-safe. The hub must outlive its listeners' Waits.
#ifndef PARTQ_COORDINATOR_NOTICE_HUB_H_
#define PARTQ_COORDINATOR_NOTICE_HUB_H_

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "store/store.h"

namespace partq {

class NoticeHub {
 public:
  NoticeHub(StoreFactory factory, std::vector<std::string> queues,
            absl::Duration retry_backoff = absl::Milliseconds(200));
  ~NoticeHub();
  NoticeHub(const NoticeHub&) = delete;
  NoticeHub& operator=(const NoticeHub&) = delete;

  // A listener of `queue`'s notices from now on. InvalidArgument for a queue
  // the hub was not given; Unavailable while the hub is not connected (it
  // keeps trying every retry_backoff).
  absl::StatusOr<std::unique_ptr<Listener>> Listen(const std::string& queue);

  // Connections the hub has made so far (for tests).
  int64_t connections() const;

 private:
  struct State;
  class HubListener;
  void Run();

  const StoreFactory factory_;
  const std::vector<std::string> queues_;
  const absl::Duration retry_backoff_;
  const std::shared_ptr<State> state_;
  absl::Mutex start_mu_;
  std::thread thread_ ABSL_GUARDED_BY(start_mu_);
};

}  // namespace partq

#endif  // PARTQ_COORDINATOR_NOTICE_HUB_H_
