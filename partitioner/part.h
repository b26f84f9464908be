// Which part an item belongs to. Pure functions, no I/O.
#ifndef PARTQ_PARTITIONER_PART_H_
#define PARTQ_PARTITIONER_PART_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace partq {

// Kafka's murmur2 (the Java client's Utils.murmur2, seed 0x9747b28c) of `data`.
uint32_t Murmur2(absl::string_view data);

// The part of a keyed item: Kafka's default partitioner,
// toPositive(murmur2(key)) % parts, so a key lands on the same part number as
// on a Kafka topic with `parts` partitions. Requires parts >= 1.
int PartForKey(absl::string_view key, int parts);

// Consecutive ids that share a keyless item's part: ids in one aligned run
// (id / kKeylessRun) go to the same part, and runs spread evenly over the
// parts. As Kafka's sticky partitioner fills one partition a batch, a small
// enqueue wakes one or two sessions instead of every session with a claim
// each (at 5,000 items/s over 4 sessions, p99 3.0-3.6 -> 2.0-2.9 ms:
// docs/benchmarks-history.md, "Keyless items in runs of 32"). Migration 42's
// part_for_id() is the same function in SQL.
inline constexpr int kKeylessRun = 32;

// The part of a keyless item: its id's run (kKeylessRun), spread evenly.
// Requires parts >= 1.
int PartForId(int64_t id, int parts);

}  // namespace partq

#endif  // PARTQ_PARTITIONER_PART_H_
