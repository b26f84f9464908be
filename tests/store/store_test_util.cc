#include "tests/store/store_test_util.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "partitioner/part.h"

namespace partq::store_testing {

NewItem Payload(std::string payload) {
  NewItem item;
  item.payload = std::move(payload);
  return item;
}

NewItem Keyed(std::string key, std::string payload) {
  NewItem item;
  item.key = std::move(key);
  item.payload = std::move(payload);
  return item;
}

std::string KeyInPart(int part, int parts, int nth) {
  for (int i = 0;; ++i) {
    std::string key = absl::StrCat("k", i);
    if (PartForKey(key, parts) == part && nth-- == 0) return key;
  }
}

std::vector<int64_t> Ids(const std::vector<Item>& items) {
  std::vector<int64_t> ids;
  for (const Item& i : items) ids.push_back(i.id);
  return ids;
}

FinishBody AckAll() {
  return [](Tx&, absl::Span<const Item> items) -> absl::StatusOr<std::vector<Outcome>> {
    std::vector<Outcome> out;
    for (const Item& i : items) out.push_back(Outcome{i.id, i.part});
    return out;
  };
}

FinishBody AckWithResults(std::function<std::optional<std::string>(const Item&)> result_of) {
  return [result_of](Tx&, absl::Span<const Item> items) -> absl::StatusOr<std::vector<Outcome>> {
    std::vector<Outcome> out;
    for (const Item& i : items) {
      Outcome o;
      o.id = i.id;
      o.part = i.part;
      o.result = result_of(i);
      out.push_back(o);
    }
    return out;
  };
}

FinishBody OutcomesOf(std::function<Outcome::Kind(const Item&)> kind_of) {
  return [kind_of](Tx&, absl::Span<const Item> items) -> absl::StatusOr<std::vector<Outcome>> {
    std::vector<Outcome> out;
    for (const Item& i : items) {
      Outcome o{i.id, i.part, kind_of(i)};
      if (o.kind != Outcome::Kind::kAck) o.error = "failed";
      o.retry_delay = absl::Hours(1);
      out.push_back(o);
    }
    return out;
  };
}

void MakeQueue(Store& store, const std::string& name, int parts, absl::Duration ttl, bool ordered,
               int max_attempts) {
  QueueConfig c;
  c.name = name;
  c.parts = parts;
  c.session_ttl = ttl;
  c.ordered = ordered;
  c.max_attempts = max_attempts;
  EXPECT_OK(store.CreateQueue(c));
}

Member JoinWith(Store& store, const std::string& queue, std::vector<int> parts,
                const std::string& instance) {
  Member m;
  JoinRequest req;
  req.queue = queue;
  req.instance_id = instance;
  req.host = "test";
  req.pid = 1;
  absl::StatusOr<JoinResult> j = store.Join(req);
  EXPECT_TRUE(j.ok()) << j.status();
  if (!j.ok()) return m;
  m.join = *j;
  if (parts == kAllParts) {
    absl::StatusOr<QueueConfig> q = store.GetQueue(queue);
    EXPECT_TRUE(q.ok()) << q.status();
    parts.clear();
    for (int p = 0; q.ok() && p < q->parts; ++p) parts.push_back(p);
  }
  absl::StatusOr<std::vector<OwnedPart>> got = store.AcquireParts(queue, j->id, parts);
  EXPECT_TRUE(got.ok()) << got.status();
  if (got.ok()) m.parts = *got;
  return m;
}

ClaimRequest ClaimAll(const std::string& queue, const Member& m, int limit,
                      const std::vector<Item>& in_flight) {
  ClaimRequest req;
  req.queue = queue;
  req.session = m.join.id;
  const int n = std::min<int>(limit, static_cast<int>(m.parts.size()));
  for (int i = 0; i < n; ++i) {
    req.parts.push_back({m.parts[i].part, m.parts[i].epoch, std::nullopt, limit / n});
  }
  for (const Item& i : in_flight) req.in_flight.emplace_back(i.part, i.id);
  return req;
}

FinishRequest FinishOf(const std::string& queue, const Member& m, const std::vector<Item>& items) {
  FinishRequest req;
  req.queue = queue;
  req.session = m.join.id;
  req.parts = m.parts;
  req.items = items;
  return req;
}

WorkOfEveryKind MakeWorkOfEveryKind(Store& store, const std::string& queue) {
  WorkOfEveryKind out;
  MakeQueue(store, queue, 1);
  for (const char* p : {"acked", "dies", "flies", "ready 1", "ready 2"}) {
    EXPECT_OK(store.Enqueue(queue, Payload(p)));
  }
  NewItem later = Payload("later");
  later.delay = absl::Hours(1);
  EXPECT_OK(store.Enqueue(queue, later));
  out.member = JoinWith(store, queue, kAllParts);
  absl::StatusOr<std::vector<Item>> claimed = store.Claim(ClaimAll(queue, out.member, 3));
  EXPECT_TRUE(claimed.ok()) << claimed.status();
  if (!claimed.ok() || claimed->size() != 3u) {
    ADD_FAILURE() << "claimed " << (claimed.ok() ? claimed->size() : 0) << " items, not 3";
    return out;
  }
  out.acked = (*claimed)[0].id;
  out.dead = (*claimed)[1].id;
  out.flying = (*claimed)[2];
  FinishBody ack_and_kill =
      [](Tx&, absl::Span<const Item> items) -> absl::StatusOr<std::vector<Outcome>> {
    Outcome acked{items[0].id, items[0].part};
    acked.result = "done";
    Outcome dead{items[1].id, items[1].part, Outcome::Kind::kDead};
    dead.error = "boom";
    return std::vector<Outcome>{acked, dead};
  };
  absl::StatusOr<FinishResult> r =
      store.Finish(FinishOf(queue, out.member, {(*claimed)[0], (*claimed)[1]}), ack_and_kill);
  EXPECT_TRUE(r.ok()) << r.status();
  return out;
}

}  // namespace partq::store_testing
