// The example of docs/guide/cpp.md, compiled with the project so it stays true:
// a producer enqueues orders, a consumer whose handler writes a row in the
// same transaction that acknowledges the item.
//
//   ./build/examples/quickstart "host=127.0.0.1 user=postgres dbname=postgres"
//
// It includes partq's umbrella headers, as a program built against an
// installed partq does (docs/guide/cpp.md).
#include <cstdio>
#include <pqxx/pqxx>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "partq/admin.h"
#include "partq/consumer.h"
#include "partq/producer.h"

int main(int argc, char** argv) {
  partq::PgOptions pg;
  pg.dsn = argc > 1 ? argv[1] : "";

  // Schema and queue (what `partq migrate` and `partq queue create` do).
  auto admin = partq::ConnectPg(pg);
  if (!admin.ok()) return fprintf(stderr, "%s\n", admin.status().ToString().c_str()), 1;
  if (auto st = (*admin)->Migrate(); !st.ok()) return 1;
  partq::QueueConfig queue;
  queue.name = "orders";
  queue.parts = 16;
  (void)(*admin)->CreateQueue(queue);  // AlreadyExists is fine

  // Producer: one item per order; the key keeps a customer's orders on one part.
  partq::Producer producer(std::move(*partq::ConnectPg(pg)));
  for (int i = 0; i < 100; ++i) {
    partq::NewItem item;
    item.payload = absl::StrCat("{\"order\":", i, "}");
    item.key = absl::StrCat("customer-", i % 7);
    if (auto r = producer.Enqueue("orders", item); !r.ok()) return 1;
  }

  // Or inside your own transaction: the item exists exactly when it commits.
  {
    pqxx::connection c(pg.dsn);
    pqxx::work tx(c);
    tx.exec("CREATE TABLE IF NOT EXISTS shipments (item_id bigint PRIMARY KEY, body bytea)");
    partq::NewItem item;
    item.payload = "{\"order\":\"in-tx\"}";
    if (!partq::EnqueueInTx(tx, pg, "orders", item).ok()) return 1;
    tx.commit();
  }

  // Consumer: the handler's writes go into the ack transaction, so they
  // commit exactly once, together with the acknowledgement.
  auto handler = partq::MakeHandler([](partq::HandlerCall& call) -> absl::Status {
    auto rows = call.tx->Exec(
        "INSERT INTO shipments (item_id, body) VALUES ($1, decode($2, 'escape'))",
        {std::to_string(call.item->id), call.item->payload});
    return rows.status();  // an error retries the item with backoff
  });
  partq::ConsumerOptions options;
  options.queue = "orders";
  options.concurrency = 4;
  partq::Consumer consumer(partq::PgStoreFactory(pg), options, handler.get());
  if (auto st = consumer.Start(); !st.ok()) {
    return fprintf(stderr, "%s\n", st.ToString().c_str()), 1;
  }
  while (consumer.stats().acked < 101) absl::SleepFor(absl::Milliseconds(50));
  consumer.Stop();  // drains, then hands the parts over at once
  printf("acked %lld items\n", static_cast<long long>(consumer.stats().acked));
  return 0;
}
