// What the CUDA scorer's check (indexer_scores_check.cu) and its kernels
// (indexer_scores.cu) share: a call's shape, the shared-memory layout of a block's
// tiles (the check refuses what does not fit), and the ordered refusal codes.
// CUDA source only.
#pragma once

#include <cstdint>

#include "impl/cuda/indexer_scores.hpp"

namespace aether::cuda::score_tiles {

constexpr unsigned long long kNoError = kNoRefusal;

// The first refusal in the model's order, as one ordered code: input (queries,
// weights, keys) in the top bits, then the flat index; a key's position is
// row * (D + 1) + (0 for its E4M3 scale, d + 1 for element d): the model checks a
// row's scale before its elements.
__host__ __device__ constexpr unsigned long long error_code(unsigned input, std::size_t at) {
  return (static_cast<unsigned long long>(input) << 62) | at;
}

struct Shape {
  std::size_t queries, heads, dim, keys;  // T, H, D, L (with a list: its capacity)
  std::size_t row_bytes;                  // key_row_bytes(format, D)
  bool vector_keys, vector_queries;       // 8 elements per load (D % 8 == 0, aligned)
  ScoreList list;                         // ids == nullptr: every stored key in order
};

constexpr int kWarps = 8, kThreads = 32 * kWarps, kTileKeys = 32 * kWarps;

// Padded sizes: heads and dims rounded up to 16 (zero rows and columns add exact
// zeros); shared-memory rows strided D + 8 so fragment loads hit distinct banks.
struct Layout {
  unsigned heads16, dim16, stride;
  __host__ __device__ Layout(const Shape& s)
      : heads16(unsigned((s.heads + 15) / 16 * 16)),
        dim16(unsigned((s.dim + 15) / 16 * 16)),
        stride(dim16 + 8) {}
  __host__ __device__ std::size_t keys_bytes() const { return std::size_t(kTileKeys) * stride * 2; }
  __host__ __device__ std::size_t queries_bytes() const {
    return std::size_t(heads16) * stride * 2;
  }
  // keys, two query tiles (the next one loads while the current one is used), scales,
  // then the two query tiles' weights
  __host__ __device__ std::size_t weights_offset() const {
    return keys_bytes() + 2 * queries_bytes() + 4 * kTileKeys;
  }
  __host__ __device__ std::size_t bytes() const {
    return weights_offset() + 2 * std::size_t(heads16) * 4;
  }
};

// Shape of a call the checks passed; keys: the stored rows (a list's entries index them).
inline Shape shape_of(device_span<const std::uint16_t> queries, std::size_t query_count,
                      std::size_t heads, const DeviceIndexKeys& keys) {
  const std::size_t row_bytes = key_row_bytes(keys.format, keys.dim);
  const auto aligned = [](const void* p, std::uintptr_t n) {
    return reinterpret_cast<std::uintptr_t>(p) % n == 0;
  };
  return Shape{
      query_count,
      heads,
      keys.dim,
      row_bytes ? keys.bytes.size() / row_bytes : 0,
      row_bytes,
      keys.dim % 8 == 0 && aligned(keys.bytes.data(), keys.format == KeyFormat::E4M3 ? 4 : 16),
      keys.dim % 8 == 0 && aligned(queries.data(), 16),
      ScoreList{}};
}

}  // namespace aether::cuda::score_tiles
