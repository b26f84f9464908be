// partq for code that manages queues, what the `partq` command's migrate,
// queue, status and dead commands do, through a Store (store/store.h):
//
//   auto store = partq::ConnectPg(pg);          // StatusOr<std::unique_ptr<Store>>
//   (*store)->Migrate();                        // idempotent, safe from many processes
//   partq::QueueConfig q;  q.name = "orders";  q.parts = 16;
//   (*store)->CreateQueue(q);                   // AlreadyExists when it exists
//   (*store)->ListQueues();  (*store)->Status("orders");  (*store)->Owners("orders");
//   (*store)->ListDead("orders", 20);  (*store)->RequeueDead("orders", {});  // {}: all
//   (*store)->DeleteQueue("orders", partq::QueueContents::kRefuse);
//
// validate.h checks queue, schema and topic names before they reach a store.
// CMake: partq::partq (or partq::pg); pkg-config: partq.
#ifndef PARTQ_INCLUDE_PARTQ_ADMIN_H_
#define PARTQ_INCLUDE_PARTQ_ADMIN_H_

#include "pg/pg_store.h"
#include "store/store.h"
#include "store/types.h"
#include "store/validate.h"

#endif  // PARTQ_INCLUDE_PARTQ_ADMIN_H_
