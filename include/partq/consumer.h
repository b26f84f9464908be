// partq for code that processes items: a Consumer joins a queue's group, owns
// its share of the parts and runs a Handler on its worker threads. The
// handler's writes (call.tx) commit in the transaction that acknowledges the
// item, so they happen exactly once.
//
//   auto handler = partq::MakeHandler([](partq::HandlerCall& call) -> absl::Status {
//     return call.tx->Exec("INSERT INTO ...", {call.item->payload}).status();
//   });
//   partq::ConsumerOptions options;  options.queue = "orders";
//   partq::Consumer consumer(partq::PgStoreFactory(pg), options, handler.get());
//   consumer.Start();  ...  consumer.Stop();  // drains, then hands the parts over
//
// A Worker serves several queues from one object, a Consumer each (consumer/worker.h):
//
//   partq::Worker worker(partq::PgStoreFactory(pg), {{emails, &send}, {thumbs, &resize}});
//   worker.Start();  ...  worker.Stop();  // every queue drains at once
//
// ParseHandlerSpec builds the built-in handlers of `partq worker --handler`
// ("record:TABLE", "sleep:MS"...); ConsumerMetrics exports the consumer's and
// its session's metrics to your Prometheus registry (docs/metrics.md).
// CMake: partq::partq (or partq::consumer with partq::pg); pkg-config: partq.
#ifndef PARTQ_INCLUDE_PARTQ_CONSUMER_H_
#define PARTQ_INCLUDE_PARTQ_CONSUMER_H_

#include "consumer/builtin_handlers.h"
#include "consumer/consumer.h"
#include "consumer/handler.h"
#include "consumer/metrics.h"
#include "consumer/worker.h"
#include "pg/pg_store.h"
#include "store/store.h"

#endif  // PARTQ_INCLUDE_PARTQ_CONSUMER_H_
