// Cost of the handler protocol's codec per batch, on both sides of a
// transport: what partq does (EncodeRequest, ParseReply) and what the
// bench's echo peer does (EchoReply), for the small payloads of `partq bench`.
// The exec and http drains spend this much CPU per batch besides the
// transport itself (BENCHMARKS.md, "Handlers across transports").
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/handler_peers.h"
#include "benchmark/benchmark.h"
#include "handlers/protocol.h"

namespace partq {
namespace {

struct Batch {
  std::vector<Item> items;
  std::vector<const Item*> ptrs;
  std::vector<int64_t> ids;
  BatchRequest request;
};

Batch MakeBatch(int n) {
  Batch b;
  b.items.resize(n);
  for (int i = 0; i < n; ++i) {
    b.items[i].id = 1000000 + i;
    b.items[i].part = i % 16;
    b.items[i].attempts = 1;
    b.items[i].payload = absl::StrCat(i);
    b.items[i].enqueued_at = absl::Now();
    b.items[i].run_at = b.items[i].enqueued_at;
  }
  for (const Item& item : b.items) {
    b.ptrs.push_back(&item);
    b.ids.push_back(item.id);
  }
  b.request.batch_id = "0123456789abcdef-1";
  b.request.queue = "bench";
  b.request.max_attempts = 5;
  b.request.now = absl::Now();
  b.request.deadline = b.request.now + absl::Seconds(30);
  return b;
}

void BM_EncodeRequest(benchmark::State& state) {
  const Batch b = MakeBatch(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(EncodeRequest(b.request, b.ptrs));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_EncodeRequest)->Arg(1)->Arg(10)->Arg(100);

void BM_EchoReply(benchmark::State& state) {
  const Batch b = MakeBatch(static_cast<int>(state.range(0)));
  const std::string request = EncodeRequest(b.request, b.ptrs);
  for (auto _ : state) benchmark::DoNotOptimize(bench::EchoReply(request));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_EchoReply)->Arg(1)->Arg(10)->Arg(100);

void BM_ParseReply(benchmark::State& state) {
  const Batch b = MakeBatch(static_cast<int>(state.range(0)));
  const std::string reply = *bench::EchoReply(EncodeRequest(b.request, b.ptrs));
  for (auto _ : state) {
    auto replies = ParseReply(reply, b.request.batch_id, b.ids);
    if (!replies.ok()) state.SkipWithError(std::string(replies.status().message()).c_str());
    benchmark::DoNotOptimize(replies);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_ParseReply)->Arg(1)->Arg(10)->Arg(100);

}  // namespace
}  // namespace partq
