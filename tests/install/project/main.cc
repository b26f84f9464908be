// A program outside partq's source tree, built by tests/install/check_install.sh
// against an installed partq (once through find_package, once through
// pkg-config) and run against PostgreSQL:
//
//   install_project DSN SCHEMA    exit 0: every item was processed exactly once
//
// It migrates the (fresh) SCHEMA, creates a queue, enqueues items with a
// Producer, consumes them with a Consumer whose handler writes a row in the
// ack transaction, waits for each item's result, counts the rows and deletes
// the emptied queue: the three umbrella headers, each used for its purpose.
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "partq/admin.h"
#include "partq/consumer.h"
#include "partq/producer.h"

namespace {

constexpr int kItems = 50;
constexpr char kQueue[] = "orders";

int Fail(const std::string& what) {
  fprintf(stderr, "install_project: FAIL: %s\n", what.c_str());
  return 1;
}
int Fail(const std::string& what, const absl::Status& status) {
  return Fail(absl::StrCat(what, ": ", status.ToString()));
}

// Writes one row per item in the transaction that acknowledges it.
class ShipHandler : public partq::Handler {
 public:
  absl::Status Setup(partq::Tx& tx) override {
    return tx
        .Exec(absl::StrCat("CREATE TABLE IF NOT EXISTS ", tx.schema(),
                           ".shipments (item_id bigint NOT NULL, body text NOT NULL)"))
        .status();
  }
  absl::Status Handle(partq::HandlerCall& call) override {
    call.result = absl::StrCat("shipped ", call.item->payload);
    return call.tx
        ->Exec(absl::StrCat("INSERT INTO ", call.tx->schema(),
                            ".shipments (item_id, body) VALUES ($1, $2)"),
               {std::to_string(call.item->id), call.item->payload})
        .status();
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s DSN SCHEMA\n", argv[0]);
    return 2;
  }
  partq::PgOptions pg;
  pg.dsn = argv[1];
  pg.schema = argv[2];

  // partq/admin.h: the schema and the queue.
  auto admin = partq::ConnectPg(pg);
  if (!admin.ok()) return Fail("connect", admin.status());
  if (auto st = (*admin)->Migrate(); !st.ok()) return Fail("migrate", st);
  partq::QueueConfig queue;
  queue.name = kQueue;
  queue.parts = 4;
  if (auto st = (*admin)->CreateQueue(queue); !st.ok()) return Fail("create queue", st);

  // partq/producer.h: enqueue.
  auto producer_store = partq::ConnectPg(pg);
  if (!producer_store.ok()) return Fail("connect", producer_store.status());
  partq::Producer producer(std::move(*producer_store));
  std::vector<std::pair<int64_t, std::string>> items;  // id, payload
  for (int i = 0; i < kItems; ++i) {
    partq::NewItem item;
    item.payload = absl::StrCat("order-", i);
    item.key = absl::StrCat("customer-", i % 7);
    auto r = producer.Enqueue(kQueue, item);
    if (!r.ok()) return Fail("enqueue", r.status());
    items.emplace_back(r->id, item.payload);
  }

  // partq/consumer.h: consume; the producer waits for each item's result.
  ShipHandler handler;
  partq::ConsumerOptions options;
  options.queue = kQueue;
  options.concurrency = 2;
  partq::Consumer consumer(partq::PgStoreFactory(pg), options, &handler);
  if (auto st = consumer.Start(); !st.ok()) return Fail("start consumer", st);
  for (const auto& [id, payload] : items) {
    // Generous: a loaded machine is slow, not wrong.
    auto state = producer.Wait(kQueue, id, absl::Minutes(5));
    if (!state.ok()) return Fail(absl::StrCat("wait for item ", id), state.status());
    if (state->kind != partq::ItemState::Kind::kDone ||
        state->result != absl::StrCat("shipped ", payload)) {
      return Fail(absl::StrCat("item ", id, " is not done with its result (attempts ",
                               state->attempts, ", error '", state->error, "')"));
    }
  }
  consumer.Stop();

  // Exactly once: one row per item, no item twice, nothing left, nothing dead.
  auto proof = partq::ReadRecordProof(pg, "shipments");
  if (!proof.ok()) return Fail("count rows", proof.status());
  if (proof->rows != kItems || proof->distinct_items != kItems) {
    return Fail(absl::StrCat(proof->rows, " rows for ", proof->distinct_items, " items, expected ",
                             kItems, " each"));
  }
  if (consumer.stats().acked != kItems) {
    return Fail(absl::StrCat("the consumer acked ", consumer.stats().acked, ", expected ", kItems));
  }
  auto dead = (*admin)->ListDead(kQueue, 10);
  if (!dead.ok()) return Fail("list dead items", dead.status());
  if (!dead->empty()) return Fail(absl::StrCat(dead->size(), " dead items"));
  // Refused while the queue holds any item: succeeding proves it is empty.
  auto deleted = (*admin)->DeleteQueue(kQueue, partq::QueueContents::kRefuse);
  if (!deleted.ok()) return Fail("delete the drained queue", deleted.status());

  printf("install_project: %d items processed exactly once\n", kItems);
  return 0;
}
