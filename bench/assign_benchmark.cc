// Cost of the pure partitioner calls a session makes on every rebalance tick
// (assignment and plan) and on every enqueue (part of a key).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "partitioner/assign.h"
#include "partitioner/part.h"

namespace partq {
namespace {

std::vector<std::string> SortedIds(int n) {
  std::mt19937 rng(42);
  std::vector<std::string> ids;
  while (static_cast<int>(ids.size()) < n) {
    // uuid-shaped, like real session ids.
    char buf[40];
    std::snprintf(buf, sizeof(buf), "%08x-%04x-%04x-%04x-%08x%04x", static_cast<unsigned>(rng()),
                  static_cast<unsigned>(rng() & 0xffff), static_cast<unsigned>(rng() & 0xffff),
                  static_cast<unsigned>(rng() & 0xffff), static_cast<unsigned>(rng()),
                  static_cast<unsigned>(rng() & 0xffff));
    ids.emplace_back(buf);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

std::vector<std::optional<std::string>> ToIds(const std::vector<std::string>& members,
                                              const Assignment& owner) {
  std::vector<std::optional<std::string>> ids(owner.size());
  for (size_t p = 0; p < owner.size(); ++p) {
    if (owner[p] >= 0) ids[p] = members[owner[p]];
  }
  return ids;
}

// The state right after a join: S-1 members balanced by sticky, then one more
// member (an id in the middle) arrives.
struct JoinState {
  std::vector<std::string> members;
  std::vector<std::optional<std::string>> current;
};

JoinState AfterOneJoin(int parts, int sessions) {
  JoinState state;
  state.members = SortedIds(sessions);
  std::vector<std::string> before = state.members;
  before.erase(before.begin() + before.size() / 2);
  state.current =
      ToIds(before, StickyAssign(before, std::vector<std::optional<std::string>>(parts), parts));
  return state;
}

void BM_LexicalAssign(benchmark::State& state) {
  const int parts = static_cast<int>(state.range(0));
  const std::vector<std::string> members = SortedIds(static_cast<int>(state.range(1)));
  for (auto _ : state) benchmark::DoNotOptimize(LexicalAssign(members, parts));
}
BENCHMARK(BM_LexicalAssign)->Args({64, 8})->Args({1024, 50})->Args({4096, 500});

void BM_StickyAssignAfterJoin(benchmark::State& state) {
  const JoinState s =
      AfterOneJoin(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  for (auto _ : state) {
    benchmark::DoNotOptimize(StickyAssign(s.members, s.current, static_cast<int>(state.range(0))));
  }
}
BENCHMARK(BM_StickyAssignAfterJoin)->Args({64, 8})->Args({1024, 50})->Args({4096, 500});

void BM_PlanMovesAfterJoin(benchmark::State& state) {
  const int parts = static_cast<int>(state.range(0));
  const JoinState s = AfterOneJoin(parts, static_cast<int>(state.range(1)));
  const Assignment target = StickyAssign(s.members, s.current, parts);
  for (auto _ : state) benchmark::DoNotOptimize(PlanMoves(s.members, s.current, target));
}
BENCHMARK(BM_PlanMovesAfterJoin)->Args({64, 8})->Args({1024, 50})->Args({4096, 500});

void BM_PartForKey(benchmark::State& state) {
  const std::string key(static_cast<size_t>(state.range(0)), 'k');
  for (auto _ : state) benchmark::DoNotOptimize(PartForKey(key, 4096));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_PartForKey)->Arg(8)->Arg(36)->Arg(256);

void BM_PartForId(benchmark::State& state) {
  int64_t id = 0;
  for (auto _ : state) benchmark::DoNotOptimize(PartForId(++id, 4096));
}
BENCHMARK(BM_PartForId);

}  // namespace
}  // namespace partq
