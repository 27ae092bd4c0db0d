// Vocabulary shared by the indexer model and backends (source 003 A.4, 001 §3):
// the refusals of valid-prefix top-k, candidate blocks and prefill chunk sizing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <span>
#include <variant>

#include "api/result.hpp"

namespace aether {

// Chunked prefill never stores logits for more queries than this at once.
inline constexpr std::size_t MAX_PREFILL_CHUNK_ROWS = 8192;

// How index keys are stored, one row per key (source 003 A.5):
//   F32   D floats                                    4 D bytes
//   BF16  D bfloat16 (the high half of a float)       2 D bytes
//   E4M3  D FP8 E4M3 bytes, then one fp32 scale       D + 4 bytes (132 for D = 128)
// A key's value is the decoded element (times the row's scale for E4M3).
enum class KeyFormat { F32, BF16, E4M3 };

struct IndexKeys {
  KeyFormat format = KeyFormat::F32;
  std::span<const std::byte> bytes;  // rows * row_bytes(format, dim)
  std::size_t dim = 0;
};

constexpr std::size_t key_row_bytes(KeyFormat format, std::size_t dim) {
  return format == KeyFormat::F32 ? 4 * dim : format == KeyFormat::BF16 ? 2 * dim : dim + 4;
}

namespace indexer_error {
// scores.size() != rows * width, or an output of the wrong length.
struct ShapeMismatch {
  std::size_t expected, actual;
  friend bool operator==(const ShapeMismatch&, const ShapeMismatch&) = default;
};
// A row's valid end is negative or past the score row's width.
struct EndOutOfRange {
  std::size_t row;
  std::int64_t end;
  std::size_t width;
  friend bool operator==(const EndOutOfRange&, const EndOutOfRange&) = default;
};
// NaN or an infinity inside a valid range: refused, never ranked.
struct NonFiniteScore {
  std::size_t row, index;
  friend bool operator==(const NonFiniteScore&, const NonFiniteScore&) = default;
};
// Candidate block size 0, or a retained block that is not a block of the row.
struct BadCandidateBlock {
  std::size_t block, block_size;
  friend bool operator==(const BadCandidateBlock&, const BadCandidateBlock&) = default;
};
// The memory budget does not hold the logits of eight queries.
struct BudgetTooSmall {
  std::size_t budget_bytes, row_bytes;
  friend bool operator==(const BudgetTooSmall&, const BudgetTooSmall&) = default;
};

// NaN or an infinity among the scorer's inputs (queries, weights, keys), by flat index
// into the input named by `input` (0 queries, 1 weights, 2 keys).
struct NonFiniteInput {
  int input;
  std::size_t index;
  friend bool operator==(const NonFiniteInput&, const NonFiniteInput&) = default;
};

// CUDA scorer only: fp32 keys (its tensor cores take bf16; converting would change
// the inputs), more heads or a wider dimension than one block's shared memory
// holds, or bf16 keys at an odd address.
struct UnsupportedOnDevice {
  KeyFormat format;
  std::size_t heads, dim;
  friend bool operator==(const UnsupportedOnDevice&, const UnsupportedOnDevice&) = default;
};

// CUDA only: the runtime reported an error (cudaError_t value).
struct DeviceFailure {
  int code;
  friend bool operator==(const DeviceFailure&, const DeviceFailure&) = default;
};

using IndexerError =
    std::variant<ShapeMismatch, EndOutOfRange, NonFiniteScore, BadCandidateBlock, BudgetTooSmall,
                 NonFiniteInput, UnsupportedOnDevice, DeviceFailure>;

inline std::ostream& operator<<(std::ostream& os, const IndexerError& e) {
  if (auto* p = std::get_if<ShapeMismatch>(&e))
    return os << "ShapeMismatch{expected=" << p->expected << ", actual=" << p->actual << "}";
  if (auto* p = std::get_if<EndOutOfRange>(&e))
    return os << "EndOutOfRange{row=" << p->row << ", end=" << p->end << ", width=" << p->width
              << "}";
  if (auto* p = std::get_if<NonFiniteScore>(&e))
    return os << "NonFiniteScore{row=" << p->row << ", index=" << p->index << "}";
  if (auto* p = std::get_if<BadCandidateBlock>(&e))
    return os << "BadCandidateBlock{block=" << p->block << ", block_size=" << p->block_size << "}";
  if (auto* p = std::get_if<BudgetTooSmall>(&e))
    return os << "BudgetTooSmall{budget_bytes=" << p->budget_bytes << ", row_bytes=" << p->row_bytes
              << "}";
  if (auto* p = std::get_if<NonFiniteInput>(&e))
    return os << "NonFiniteInput{input=" << p->input << ", index=" << p->index << "}";
  if (auto* p = std::get_if<UnsupportedOnDevice>(&e))
    return os << "UnsupportedOnDevice{format=" << int(p->format) << ", heads=" << p->heads
              << ", dim=" << p->dim << "}";
  return os << "DeviceFailure{code=" << std::get<DeviceFailure>(e).code << "}";
}
}  // namespace indexer_error

using indexer_error::IndexerError;

}  // namespace aether
