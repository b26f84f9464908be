#include "bench/baselines.h"

#include <atomic>
#include <pqxx/pqxx>
#include <random>
#include <thread>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace partq::bench {

struct Sql::Impl {
  std::unique_ptr<pqxx::connection> conn;
};

Sql::Sql(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Sql::~Sql() = default;

absl::StatusOr<std::unique_ptr<Sql>> Sql::Open(const std::string& dsn) {
  try {
    auto impl = std::make_unique<Impl>();
    impl->conn = std::make_unique<pqxx::connection>(dsn);
    return std::unique_ptr<Sql>(new Sql(std::move(impl)));
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("bench: connect: ", e.what()));
  }
}

absl::StatusOr<std::vector<std::vector<std::optional<std::string>>>> Sql::Query(
    const std::string& sql) {
  try {
    pqxx::nontransaction tx(*impl_->conn);
    pqxx::result r = tx.exec(sql);
    std::vector<std::vector<std::optional<std::string>>> rows;
    for (const pqxx::row& row : r) {
      std::vector<std::optional<std::string>> out;
      for (const pqxx::field& f : row) {
        out.push_back(f.is_null() ? std::nullopt : std::optional<std::string>(f.c_str()));
      }
      rows.push_back(std::move(out));
    }
    return rows;
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("bench: ", e.what(), " in: ", sql));
  }
}

absl::Status Sql::Exec(const std::string& sql) { return Query(sql).status(); }

absl::StatusOr<std::string> Sql::Scalar(const std::string& sql) {
  auto rows = Query(sql);
  if (!rows.ok()) return rows.status();
  if (rows->empty() || rows->front().empty() || !rows->front()[0]) {
    return absl::InternalError(absl::StrCat("bench: no value from: ", sql));
  }
  return *rows->front()[0];
}

namespace {

std::string S(const std::string& sql, const std::string& schema) {
  return absl::StrReplaceAll(sql, {{"{s}", absl::StrCat("\"", schema, "\"")}});
}

std::string IdArray(const pqxx::result& r) {
  std::string ids = "{";
  for (size_t i = 0; i < r.size(); ++i) absl::StrAppend(&ids, i ? "," : "", r[i][0].c_str());
  return ids + "}";
}

// One baseline session: its own connection, started together with the others.
class Runner {
 public:
  Runner(const std::string& schema, const std::string& system, int batch, int index,
         int sessions, int64_t items)
      : schema_(schema), system_(system), batch_(batch), index_(index), sessions_(sessions),
        items_(items), uuid_(absl::StrFormat("00000000-0000-4000-8000-%012d", index + 1)) {}

  void Prepare(pqxx::connection& c) {
    // Claim a batch under row locks, skipping rows other sessions hold.
    c.prepare("skip_claim", S("SELECT id, payload FROM {s}.bl_jobs ORDER BY id LIMIT $1 "
                              "FOR UPDATE SKIP LOCKED",
                              schema_));
    // The handler's write: one result row per item (as the record handler).
    c.prepare("result", S("INSERT INTO {s}.bl_results (item_id, session_id) "
                          "SELECT unnest($1::bigint[]), $2::uuid",
                          schema_));
    c.prepare("delete", S("DELETE FROM {s}.bl_jobs WHERE id = ANY($1::bigint[])", schema_));
    // The queues-in-SQL classic. `AND status = 0` makes a lost race (the row
    // was taken while we waited for its lock) return nothing instead of
    // taking the row twice; the caller then tries again.
    c.prepare("naive_claim",
              S("UPDATE {s}.bl_jobs SET status = 1 WHERE id = (SELECT id FROM {s}.bl_jobs "
                "WHERE status = 0 ORDER BY id LIMIT 1) AND status = 0 RETURNING id, payload",
                schema_));
    c.prepare("naive_left", S("SELECT EXISTS (SELECT 1 FROM {s}.bl_jobs WHERE status = 0)",
                              schema_));
    // The floor: the same writes, no claim, no locks, one statement.
    c.prepare("floor", S("WITH d AS (DELETE FROM {s}.bl_jobs WHERE id >= $1 AND id < $2 "
                         "RETURNING id) INSERT INTO {s}.bl_results (item_id, session_id) "
                         "SELECT id, $3::uuid FROM d",
                         schema_));
    // The log's floor (issue 47): no item row written either. Read the
    // part's next rows by its dense sequence (here the session's id range:
    // a part of its own), insert their results, move the part's offset row.
    c.prepare("log_floor",
              S("WITH o AS (SELECT off FROM {s}.bl_offsets WHERE part = $1), "
                "b AS (SELECT l.id FROM {s}.bl_log l, o WHERE l.id > o.off "
                "AND l.id <= least(o.off + $2, $3)), "
                "r AS (INSERT INTO {s}.bl_results (item_id, session_id) "
                "SELECT id, $4::uuid FROM b), "
                "u AS (UPDATE {s}.bl_offsets f SET off = (SELECT max(id) FROM b) "
                "WHERE f.part = $1 AND EXISTS (SELECT 1 FROM b)) "
                "SELECT count(*) FROM b",
                schema_));
  }

  void Run(pqxx::connection& c) {
    if (system_ == "log_floor") {
      const int64_t lo = 1 + index_ * items_ / sessions_;
      const int64_t hi = 1 + (index_ + 1) * items_ / sessions_;
      {
        pqxx::nontransaction tx(c);
        tx.exec_params(S("INSERT INTO {s}.bl_offsets (part, off) VALUES ($1, $2)", schema_),
                       index_, lo - 1);
      }
      for (;;) {
        pqxx::nontransaction tx(c);
        if (tx.exec_prepared1("log_floor", index_, batch_, hi - 1, uuid_)[0].as<int64_t>() == 0) {
          return;
        }
      }
    }
    if (system_ == "floor") {
      const int64_t lo = 1 + index_ * items_ / sessions_;
      const int64_t hi = 1 + (index_ + 1) * items_ / sessions_;
      for (int64_t from = lo; from < hi; from += batch_) {
        pqxx::nontransaction tx(c);
        tx.exec_prepared("floor", from, std::min<int64_t>(from + batch_, hi), uuid_);
      }
      return;
    }
    if (system_ == "naive_update") {
      for (;;) {
        std::string ids;
        {
          pqxx::nontransaction tx(c);
          pqxx::result r = tx.exec_prepared("naive_claim");
          if (r.empty()) {
            if (!tx.exec_prepared("naive_left")[0][0].as<bool>()) return;
            continue;
          }
          ids = IdArray(r);
        }
        pqxx::work tx(c);
        tx.exec_prepared("result", ids, uuid_);
        tx.exec_prepared("delete", ids);
        tx.commit();
      }
    }
    const int limit = system_ == "skip_locked_one" ? 1 : batch_;
    for (;;) {
      pqxx::work tx(c);
      pqxx::result r = tx.exec_prepared("skip_claim", limit);
      if (r.empty()) return;
      const std::string ids = IdArray(r);
      tx.exec_prepared("result", ids, uuid_);
      tx.exec_prepared("delete", ids);
      tx.commit();
    }
  }

 private:
  const std::string schema_, system_;
  const int batch_, index_, sessions_;
  const int64_t items_;
  const std::string uuid_;
};

// A LISTEN whose notices only wake await_notification.
class Wakes final : public pqxx::notification_receiver {
 public:
  using pqxx::notification_receiver::notification_receiver;
  void operator()(const std::string&, int) override {}
};

// PickupBaseline's taker: on its own connection, LISTENs on `channel`, then
// takes what each notice announces until `stop`. taken_us[id] is when the
// statement that took job `id` returned.
void TakeOnNotice(const std::string& dsn, const std::string& schema, const std::string& channel,
                  absl::Mutex* mu, bool* listening, const bool* stop,
                  std::vector<int64_t>* taken_us, std::string* error) {
  try {
    pqxx::connection c(dsn);
    Wakes wakes(c, channel);  // LISTENs now
    // As partq's claim commits (fragments/claim_async_commit.sql): the floor
    // of the wake and the round trip, not of a WAL flush.
    pqxx::nontransaction(c).exec("SET synchronous_commit = off");
    c.prepare("take", S("WITH d AS (DELETE FROM {s}.bl_jobs WHERE id = (SELECT id FROM "
                        "{s}.bl_jobs ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id) "
                        "INSERT INTO {s}.bl_results (item_id, session_id) "
                        "SELECT id, '00000000-0000-4000-8000-000000000001' FROM d "
                        "RETURNING item_id",
                        schema));
    {
      absl::MutexLock lock(mu);
      *listening = true;
    }
    for (;;) {
      {
        absl::MutexLock lock(mu);
        if (*stop) return;
      }
      c.await_notification(0, 100000);  // 100 ms: only bounds how late `stop` is seen
      for (;;) {
        pqxx::nontransaction tx(c);
        const pqxx::result r = tx.exec_prepared("take");
        if (r.empty()) break;
        const int64_t now = absl::ToUnixMicros(absl::Now());
        const auto id = r[0][0].as<int64_t>();
        absl::MutexLock lock(mu);
        if (id >= 1 && id < static_cast<int64_t>(taken_us->size())) (*taken_us)[id] = now;
      }
    }
  } catch (const std::exception& e) {
    absl::MutexLock lock(mu);
    *error = e.what();
    *listening = true;  // so that the producer stops waiting
  }
}

}  // namespace

absl::StatusOr<std::vector<double>> PickupBaseline(const std::string& dsn,
                                                   const std::string& schema, int samples) {
  const std::string channel = absl::StrCat(schema, "_pickup");
  absl::Mutex mu;
  bool listening = false, stop = false;
  std::vector<int64_t> taken_us(samples + 1, 0);
  std::string error;
  std::vector<double> ms;
  try {
    pqxx::connection p(dsn);
    pqxx::nontransaction(p).exec(S("TRUNCATE {s}.bl_jobs, {s}.bl_results", schema));
    p.prepare("put", S("WITH i AS (INSERT INTO {s}.bl_jobs (id, payload) VALUES ($1::bigint, "
                       "convert_to($1::bigint::text, 'UTF8'))) SELECT pg_notify($2, '')",
                       schema));
    std::thread taker(TakeOnNotice, dsn, schema, channel, &mu, &listening, &stop, &taken_us,
                      &error);
    auto join = absl::MakeCleanup([&] {
      {
        absl::MutexLock lock(&mu);
        stop = true;
      }
      taker.join();
    });
    {
      absl::MutexLock lock(&mu);
      mu.Await(absl::Condition(&listening));
    }
    std::mt19937 rng(42);
    std::uniform_int_distribution<int> gap(5, 20);
    for (int64_t i = 1; i <= samples; ++i) {
      absl::SleepFor(absl::Milliseconds(gap(rng)));  // idle: nothing in flight
      pqxx::nontransaction(p).exec_prepared("put", i, channel);
      const int64_t put_us = absl::ToUnixMicros(absl::Now());
      absl::MutexLock lock(&mu);
      auto done = [&] { return taken_us[i] != 0 || !error.empty(); };
      if (!mu.AwaitWithTimeout(absl::Condition(&done), absl::Seconds(10)) || !error.empty()) {
        if (error.empty()) error = absl::StrCat("job ", i, " was not taken within 10 s");
        break;
      }
      ms.push_back(std::max<int64_t>(0, taken_us[i] - put_us) / 1000.0);
    }
    std::move(join).Invoke();
    if (error.empty()) {
      const pqxx::row once = pqxx::nontransaction(p).exec1(
          S("SELECT count(*) = count(DISTINCT item_id) AND count(*) = " + std::to_string(samples) +
                " FROM {s}.bl_results",
            schema));
      if (!once[0].as<bool>()) error = "its results rows are not one per job";
    }
  } catch (const std::exception& e) {
    absl::MutexLock lock(&mu);
    if (error.empty()) error = e.what();
  }
  if (!error.empty()) return absl::InternalError(absl::StrCat("bench pick-up floor: ", error));
  return ms;
}

absl::Status CreateBaselineTables(Sql& sql, const std::string& schema) {
  return sql.Exec(S(R"sql(
DROP TABLE IF EXISTS {s}.bl_jobs, {s}.bl_results, {s}.bl_log, {s}.bl_offsets;
CREATE TABLE {s}.bl_log (
  id          bigint PRIMARY KEY,
  payload     bytea NOT NULL,
  enqueued_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE {s}.bl_offsets (
  part        int PRIMARY KEY,
  off         bigint NOT NULL);
CREATE TABLE {s}.bl_jobs (
  id          bigint PRIMARY KEY,
  payload     bytea NOT NULL,
  status      smallint NOT NULL DEFAULT 0,
  enqueued_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE {s}.bl_results (
  item_id     bigint NOT NULL,
  session_id  uuid NOT NULL,
  acked_at    timestamptz NOT NULL DEFAULT now());
)sql",
                    schema));
}

absl::Status LoadBaseline(Sql& sql, const std::string& schema, int64_t items,
                          const std::string& system) {
  if (auto st = sql.Exec(
          S("TRUNCATE {s}.bl_jobs, {s}.bl_results, {s}.bl_log, {s}.bl_offsets", schema));
      !st.ok()) {
    return st;
  }
  // Every system starts right after a checkpoint, so none pays full-page
  // writes the others do not.
  if (auto st = sql.Exec("CHECKPOINT"); !st.ok()) return st;
  return sql.Exec(S(absl::StrCat("INSERT INTO {s}.", system == "log_floor" ? "bl_log" : "bl_jobs",
                                 " (id, payload) SELECT g, "
                                 "convert_to(g::text, 'UTF8') FROM generate_series(1, ",
                                 items, ") g"),
                    schema));
}

absl::StatusOr<double> DrainBaseline(const std::string& dsn, const std::string& schema,
                                     const std::string& system, int sessions, int batch,
                                     int64_t items, const std::function<void(bool)>& mark) {
  absl::Mutex mu;
  int ready = 0;
  bool go = false;
  std::string error;
  std::vector<std::thread> threads;
  for (int i = 0; i < sessions; ++i) {
    threads.emplace_back([&, i] {
      Runner runner(schema, system, batch, i, sessions, items);
      std::unique_ptr<pqxx::connection> c;
      try {
        c = std::make_unique<pqxx::connection>(dsn);
        runner.Prepare(*c);
      } catch (const std::exception& e) {
        absl::MutexLock lock(&mu);
        error = e.what();
      }
      {
        absl::MutexLock lock(&mu);
        ++ready;
        mu.Await(absl::Condition(&go));
        if (c == nullptr) return;
      }
      try {
        runner.Run(*c);
      } catch (const std::exception& e) {
        absl::MutexLock lock(&mu);
        error = e.what();
      }
    });
  }
  absl::Time t0;
  {
    absl::MutexLock lock(&mu);
    auto all = [&]() { return ready == sessions; };
    mu.Await(absl::Condition(&all));
    if (mark) mark(true);  // reading /proc takes a moment: before the clock starts
    t0 = absl::Now();
    go = true;
  }
  for (auto& t : threads) t.join();
  const absl::Time t1 = absl::Now();
  if (mark) mark(false);
  if (!error.empty()) return absl::InternalError(absl::StrCat("bench ", system, ": ", error));
  return absl::ToDoubleSeconds(t1 - t0);
}

}  // namespace partq::bench
