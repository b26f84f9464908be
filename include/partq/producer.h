// partq for code that enqueues items and waits for them.
//
//   partq::PgOptions pg;  pg.dsn = "host=... dbname=...";
//   partq::Producer producer(std::move(*partq::ConnectPg(pg)));
//   partq::NewItem item;  item.payload = "...";  item.key = "customer-7";
//   auto r = producer.Enqueue("orders", item);          // or EnqueueBatch (COPY)
//   auto state = producer.Wait("orders", r->id, absl::Seconds(30));
//
// Inside your own libpqxx transaction, EnqueueInTx(tx, pg, queue, item) makes
// the item exist exactly when that transaction commits (include <pqxx/pqxx>
// and link libpqxx yourself: partq's headers do not). ProducerMetrics counts
// what a Producer enqueued in your Prometheus registry.
// CMake: partq::partq (or partq::producer with partq::pg); pkg-config: partq.
#ifndef PARTQ_INCLUDE_PARTQ_PRODUCER_H_
#define PARTQ_INCLUDE_PARTQ_PRODUCER_H_

#include "pg/pg_store.h"
#include "producer/metrics.h"
#include "producer/producer.h"
#include "store/types.h"

#endif  // PARTQ_INCLUDE_PARTQ_PRODUCER_H_
