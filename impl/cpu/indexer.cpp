#include "impl/cpu/indexer.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "impl/cpu/parallel.hpp"

namespace aether::cpu {

namespace {
namespace ie = indexer_error;

// Order-preserving key of a finite float: larger score, larger key; -0 reads as +0
// so that equal scores tie and fall to the lower index, as the total order says.
// Without a branch: on a row of mixed signs a branch on the sign mispredicts at
// every other key (a Gaussian row's passes ran 6x slower).
inline std::uint32_t order_key(float f) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t key = bits ^ (std::uint32_t(std::int32_t(bits) >> 31) | 0x80000000u);
  return key + (key == 0x7fffffffu);  // -0's key, one below +0's
}

// First non-finite entry of a valid range, if any.
std::optional<std::size_t> first_non_finite(const float* row, std::size_t n) {
  for (std::size_t j = 0; j < n; ++j)
    if (!std::isfinite(row[j])) return j;
  return std::nullopt;
}

// The k-th largest key of `keys(j)`, j < n (1 <= k <= n), by three radix passes of
// 11, 11 and 10 bits, most significant first; also how many keys exceed it. The
// first pass reads every key; the keys sharing its chosen digit are then copied
// out (without a branch, so that a plateau of equal keys costs no mispredictions)
// and each later pass reads only the keys left by the one before. Long rows count
// into four interleaved histograms: a run of equal digits would otherwise wait on
// its own increments, one store after another.
template <class KeyOf>
std::pair<std::uint32_t, std::size_t> kth_largest(std::size_t n, std::size_t k, KeyOf key_of) {
  constexpr int kShifts[3] = {21, 10, 0}, kBits[3] = {11, 11, 10};
  constexpr std::size_t kInterleavedFrom = 16384;
  thread_local std::vector<std::uint32_t> kept;  // the keys matching the digits chosen so far
  if (kept.size() < n) kept.resize(n);
  const std::size_t copies = n >= kInterleavedFrom ? 4 : 1;
  std::array<std::array<std::uint32_t, 2048>, 4> hist;
  std::uint32_t prefix = 0;  // digits chosen so far
  std::size_t rank = k;      // rank of the target among keys matching prefix
  std::size_t count = n;     // keys matching prefix, in kept after the first pass
  // One pass over key_at(i), i < count: its digit chosen, and (but the last) the
  // keys that share it kept.
  const auto pass = [&](int p, auto key_at) {
    const std::uint32_t digit_mask = (1u << kBits[p]) - 1;
    const auto digit = [&](std::uint32_t key) { return (key >> kShifts[p]) & digit_mask; };
    for (std::size_t c = 0; c < copies; ++c) std::fill_n(hist[c].begin(), digit_mask + 1, 0u);
    std::size_t i = 0;
    if (copies == 4)
      for (; i + 4 <= count; i += 4)
        for (std::size_t c = 0; c < 4; ++c) ++hist[c][digit(key_at(i + c))];
    for (; i < count; ++i) ++hist[0][digit(key_at(i))];
    std::uint32_t d = digit_mask;
    for (;; --d) {
      std::size_t in_bin = 0;
      for (std::size_t c = 0; c < copies; ++c) in_bin += hist[c][d];
      if (in_bin >= rank) break;
      rank -= in_bin;
    }
    prefix |= d << kShifts[p];
    if (p == 2) return;
    std::size_t left = 0;  // in place: a key is written at or before where it was read
    for (i = 0; i < count; ++i) {
      const std::uint32_t key = key_at(i);
      kept[left] = key;
      left += digit(key) == d;
    }
    count = left;
  };
  pass(0, key_of);
  for (int p = 1; p < 3; ++p) pass(p, [&](std::size_t i) { return kept[i]; });
  return {prefix, k - rank};
}

// Best min(k, n) of row[0, n) in the total order, ascending, -1 padded to k.
void select_row(const float* row, std::size_t n, std::size_t k, std::int32_t* out) {
  std::size_t written = 0;
  if (n <= k) {
    for (; written < n; ++written) out[written] = std::int32_t(written);
  } else if (k > 0) {
    const auto [threshold, above] =
        kth_largest(n, k, [&](std::size_t j) { return order_key(row[j]); });
    // Equal keys taken lowest index first. `ties` is tested before the key: once it is
    // spent the test is always false, where a row half of whose keys equal the
    // threshold would mispredict the key's test at every other key.
    std::size_t ties = k - above;
    for (std::size_t j = 0; j < n && written < k; ++j) {
      const std::uint32_t key = order_key(row[j]);
      if (key > threshold || (ties > 0 && key == threshold)) {
        ties -= key == threshold;
        out[written++] = std::int32_t(j);
      }
    }
  }
  std::fill(out + written, out + k, -1);
}
}  // namespace

Status<IndexerError> valid_prefix_topk(std::span<const float> scores, std::size_t width,
                                       std::span<const std::int32_t> ends, std::size_t k,
                                       std::span<std::int32_t> out) {
  const std::size_t rows = ends.size();
  if (scores.size() != rows * width) return ie::ShapeMismatch{rows * width, scores.size()};
  for (std::size_t r = 0; r < rows; ++r)
    if (ends[r] < 0 || std::size_t(ends[r]) > width) return ie::EndOutOfRange{r, ends[r], width};
  for (std::size_t r = 0; r < rows; ++r)
    if (auto j = first_non_finite(scores.data() + r * width, std::size_t(ends[r])))
      return ie::NonFiniteScore{r, *j};
  if (out.size() != rows * k) return ie::ShapeMismatch{rows * k, out.size()};
  for_each_row(rows, width, [&](std::size_t r) {
    select_row(scores.data() + r * width, std::size_t(ends[r]), k, out.data() + r * k);
  });
  return Ok{};
}

Status<IndexerError> add_prefill_offset(std::span<const std::int32_t> rows, std::int32_t offset,
                                        std::span<std::int32_t> out) {
  if (out.size() != rows.size()) return ie::ShapeMismatch{rows.size(), out.size()};
  for (std::size_t i = 0; i < rows.size(); ++i) out[i] = rows[i] == -1 ? -1 : rows[i] + offset;
  return Ok{};
}

Status<IndexerError> candidate_block_scores(std::span<const float> row, std::size_t end,
                                            std::size_t block_size, std::span<float> out) {
  if (block_size == 0) return ie::BadCandidateBlock{0, 0};
  if (end > row.size()) return ie::EndOutOfRange{0, std::int64_t(end), row.size()};
  if (auto j = first_non_finite(row.data(), end)) return ie::NonFiniteScore{0, *j};
  const std::size_t blocks = (end + block_size - 1) / block_size;
  if (out.size() != blocks) return ie::ShapeMismatch{blocks, out.size()};
  for (std::size_t b = 0; b < blocks; ++b) {
    float best = row[b * block_size];
    for (std::size_t j = b * block_size + 1; j < std::min((b + 1) * block_size, end); ++j)
      best = std::max(best, row[j]);
    out[b] = best;
  }
  return Ok{};
}

Status<IndexerError> candidate_topk(std::span<const float> row, std::size_t end,
                                    std::span<const std::int32_t> retained_blocks,
                                    std::size_t block_size, std::size_t k,
                                    std::span<std::int32_t> out) {
  if (block_size == 0) return ie::BadCandidateBlock{0, 0};
  if (end > row.size()) return ie::EndOutOfRange{0, std::int64_t(end), row.size()};
  const std::size_t blocks = (end + block_size - 1) / block_size;
  std::vector<bool> seen(blocks, false);
  for (std::int32_t b : retained_blocks) {
    if (b < 0 || std::size_t(b) >= blocks || seen[std::size_t(b)])
      return ie::BadCandidateBlock{std::size_t(std::max(b, 0)), block_size};
    seen[std::size_t(b)] = true;
  }
  // Compact the candidates in ascending logical order, so compact order is logical order.
  std::vector<float> compact;
  std::vector<std::int32_t> logical;
  for (std::size_t b = 0; b < blocks; ++b)
    if (seen[b])
      for (std::size_t j = b * block_size; j < std::min((b + 1) * block_size, end); ++j) {
        compact.push_back(row[j]);
        logical.push_back(std::int32_t(j));
      }
  // The model checks candidates in the caller's block order: report the same entry.
  for (std::int32_t b : retained_blocks)
    for (std::size_t j = std::size_t(b) * block_size;
         j < std::min((std::size_t(b) + 1) * block_size, end); ++j)
      if (!std::isfinite(row[j])) return ie::NonFiniteScore{0, j};
  if (out.size() != k) return ie::ShapeMismatch{k, out.size()};
  select_row(compact.data(), compact.size(), k, out.data());
  for (std::int32_t& c : out.first(std::min(k, compact.size()))) c = logical[std::size_t(c)];
  return Ok{};
}

Status<IndexerError> restore_candidate_indices(std::span<const std::int32_t> compact,
                                               std::span<const std::int32_t> retained_blocks,
                                               std::size_t block_size,
                                               std::span<std::int32_t> out) {
  if (block_size == 0) return ie::BadCandidateBlock{0, 0};
  for (std::int32_t c : compact)
    if (c != -1 && (c < 0 || std::size_t(c) / block_size >= retained_blocks.size()))
      return ie::BadCandidateBlock{c < 0 ? 0 : std::size_t(c) / block_size, block_size};
  if (out.size() != compact.size()) return ie::ShapeMismatch{compact.size(), out.size()};
  for (std::size_t i = 0; i < compact.size(); ++i) {
    const std::int32_t c = compact[i];
    out[i] = c == -1 ? -1
                     : std::int32_t(std::int64_t(retained_blocks[std::size_t(c) / block_size]) *
                                        std::int64_t(block_size) +
                                    std::int64_t(std::size_t(c) % block_size));
  }
  return Ok{};
}

Result<std::size_t, IndexerError> prefill_chunk_rows(std::size_t row_width,
                                                     std::size_t budget_bytes,
                                                     std::size_t bytes_per_logit) {
  const std::size_t row_bytes = row_width * bytes_per_logit;
  if (row_bytes == 0) return MAX_PREFILL_CHUNK_ROWS;
  const std::size_t rows =
      std::min(MAX_PREFILL_CHUNK_ROWS, (budget_bytes / row_bytes) & ~std::size_t(7));
  if (rows == 0) return ie::BudgetTooSmall{budget_bytes, row_bytes};
  return rows;
}

}  // namespace aether::cpu
