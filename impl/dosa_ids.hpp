// The check every DoSA backend makes of the key ids it is handed (seeds, recent
// keys): the first id outside [0, count) or equal to an earlier one, the model's
// BadSeed. Host code, shared by impl/cpu and impl/cuda.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace aether::impl {

// The index of the first id of `ids` outside [0, count) or repeated, or ids.size()
// when there is none. Strictly ascending ids inside the keys pass without marks.
// Otherwise a bit a key, in the calling thread's buffer, which is cleared after use
// at the bits set and nowhere else: a fresh zeroed byte a key cost every call its
// pages (128 KiB at L 131072).
inline std::size_t first_bad_id(std::span<const std::int32_t> ids, std::size_t count) {
  const auto inside = [&](std::int32_t id) { return id >= 0 && std::size_t(id) < count; };
  std::size_t i = 0;
  while (i < ids.size() && inside(ids[i]) && (i == 0 || ids[i - 1] < ids[i])) ++i;
  if (i == ids.size()) return i;
  thread_local std::vector<std::uint64_t> seen;
  if (seen.size() < (count + 63) / 64) seen.resize((count + 63) / 64, 0);
  const auto bit = [](std::int32_t id) { return std::uint64_t(1) << (std::uint32_t(id) % 64); };
  for (i = 0; i < ids.size(); ++i) {
    const std::int32_t id = ids[i];
    if (!inside(id) || (seen[std::size_t(id) / 64] & bit(id)) != 0) break;
    seen[std::size_t(id) / 64] |= bit(id);
  }
  for (std::size_t j = 0; j < i; ++j) seen[std::size_t(ids[j]) / 64] &= ~bit(ids[j]);
  return i;
}

}  // namespace aether::impl
