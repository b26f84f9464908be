#include "partitioner/part.h"

#include <cassert>
#include <cstddef>
#include <cstdint>

namespace partq {

uint32_t Murmur2(absl::string_view data) {
  // Java computes this on `int` with wrap-around; unsigned 32-bit arithmetic
  // gives the same bits without signed overflow. Bytes are read unsigned,
  // which is what Java's `data[i] & 0xff` does to its signed bytes, and the
  // 4-byte blocks are little-endian whatever the host's byte order.
  constexpr uint32_t kSeed = 0x9747b28c;
  constexpr uint32_t kM = 0x5bd1e995;
  constexpr int kR = 24;

  const auto* bytes = reinterpret_cast<const unsigned char*>(data.data());
  const size_t length = data.size();
  // Java's `seed ^ length` uses an int length: keys are far below 2^31 bytes.
  uint32_t h = kSeed ^ static_cast<uint32_t>(length);

  const size_t blocks_end = length & ~size_t{3};
  for (size_t i = 0; i < blocks_end; i += 4) {
    uint32_t k = uint32_t{bytes[i]} | (uint32_t{bytes[i + 1]} << 8) |
                 (uint32_t{bytes[i + 2]} << 16) | (uint32_t{bytes[i + 3]} << 24);
    k *= kM;
    k ^= k >> kR;
    k *= kM;
    h *= kM;
    h ^= k;
  }

  switch (length & 3) {
    case 3:
      h ^= uint32_t{bytes[blocks_end + 2]} << 16;
      [[fallthrough]];
    case 2:
      h ^= uint32_t{bytes[blocks_end + 1]} << 8;
      [[fallthrough]];
    case 1:
      h ^= uint32_t{bytes[blocks_end]};
      h *= kM;
      break;
    default:
      break;
  }

  h ^= h >> 13;
  h *= kM;
  h ^= h >> 15;
  return h;
}

int PartForKey(absl::string_view key, int parts) {
  assert(parts >= 1);
  // Kafka's toPositive clears the sign bit (it does not negate), so
  // Integer.MIN_VALUE maps to 0 rather than overflowing.
  const uint32_t positive = Murmur2(key) & 0x7fffffffu;
  return static_cast<int>(positive % static_cast<uint32_t>(parts));
}

int PartForId(int64_t id, int parts) {
  assert(parts >= 1);
  // A bare run % parts is even for a dense sequence but inherits any stride in
  // how ids are handed out (sequence caches, batches sized a multiple of P).
  // The splitmix64 finalizer spreads every input bit over the output first.
  // Working on the unsigned bits keeps negative ids defined and non-negative
  // (the shift is a logical one).
  static_assert(kKeylessRun == 32, "part_for_id() in migration 42 shifts by 5");
  uint64_t x = static_cast<uint64_t>(id) >> 5;
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9u;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebu;
  x ^= x >> 31;
  return static_cast<int>(x % static_cast<uint64_t>(parts));
}

}  // namespace partq
