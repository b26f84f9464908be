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

// The part of a keyless item, spread evenly by its id. Requires parts >= 1.
int PartForId(int64_t id, int parts);

}  // namespace partq

#endif  // PARTQ_PARTITIONER_PART_H_
