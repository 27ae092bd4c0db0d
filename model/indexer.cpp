#include "model/indexer.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

namespace aether::model {

namespace {
namespace ie = indexer_error;
}

// I_j = Σ_h w_h max(0, q_h · k_j)
Result<std::vector<Rational>, IndexerError> index_scores(std::span<const float> queries,
                                                         std::span<const float> weights,
                                                         std::span<const float> keys,
                                                         std::size_t dim) {
  const std::size_t heads = weights.size();
  if (queries.size() != heads * dim) return ie::ShapeMismatch{heads * dim, queries.size()};
  if (dim == 0 ? !keys.empty() : keys.size() % dim != 0)
    return ie::ShapeMismatch{dim == 0 ? 0 : keys.size() / dim * dim, keys.size()};
  const std::span<const float> inputs[3] = {queries, weights, keys};
  for (int in = 0; in < 3; ++in)
    for (std::size_t i = 0; i < inputs[in].size(); ++i)
      if (!std::isfinite(inputs[in][i])) return ie::NonFiniteInput{in, i};
  const std::size_t n = dim == 0 ? 0 : keys.size() / dim;
  std::vector<Rational> scores(n, Rational(0));
  for (std::size_t j = 0; j < n; ++j)
    for (std::size_t h = 0; h < heads; ++h) {
      Rational dot = 0;
      for (std::size_t d = 0; d < dim; ++d) dot += exact(queries[h * dim + d]) * exact(keys[j * dim + d]);
      scores[j] += exact(weights[h]) * (dot > 0 ? dot : Rational(0));
    }
  return scores;
}

// floor((p + 1) / r)
std::int64_t completed_rows(std::int64_t position, std::int64_t ratio) {
  const std::int64_t n = position + 1;
  return n >= 0 ? n / ratio : -((-n + ratio - 1) / ratio);
}

// max(0, seq_len - next_n + offset + 1)
std::int64_t speculative_row_end(std::int64_t seq_len, std::int64_t next_n, std::int64_t offset) {
  return std::max<std::int64_t>(0, seq_len - next_n + offset + 1);
}

bool ranks_before(float score_a, std::size_t a, float score_b, std::size_t b) {
  return score_a > score_b || (score_a == score_b && a < b);
}

Result<std::vector<std::int32_t>, IndexerError> valid_prefix_topk(
    std::span<const float> scores, std::size_t width, std::span<const std::int32_t> ends,
    std::size_t k) {
  const std::size_t rows = ends.size();
  if (scores.size() != rows * width) return ie::ShapeMismatch{rows * width, scores.size()};
  for (std::size_t r = 0; r < rows; ++r)
    if (ends[r] < 0 || std::size_t(ends[r]) > width) return ie::EndOutOfRange{r, ends[r], width};
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t j = 0; j < std::size_t(ends[r]); ++j)
      if (!std::isfinite(scores[r * width + j])) return ie::NonFiniteScore{r, j};

  std::vector<std::int32_t> out(rows * k, -1);
  for (std::size_t r = 0; r < rows; ++r) {
    const auto row = scores.subspan(r * width, std::size_t(ends[r]));
    std::vector<std::size_t> order(row.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return ranks_before(row[a], a, row[b], b);
    });
    order.resize(std::min(k, order.size()));
    std::sort(order.begin(), order.end());
    for (std::size_t i = 0; i < order.size(); ++i) out[r * k + i] = std::int32_t(order[i]);
  }
  return out;
}

std::vector<std::int32_t> add_prefill_offset(std::span<const std::int32_t> rows,
                                             std::int32_t offset) {
  std::vector<std::int32_t> out;
  for (std::int32_t x : rows) out.push_back(x == -1 ? -1 : x + offset);
  return out;
}

// score(b) = max{ row[j] : b bs <= j < min((b + 1) bs, end) }
Result<std::vector<float>, IndexerError> candidate_block_scores(std::span<const float> row,
                                                                std::size_t end,
                                                                std::size_t block_size) {
  if (block_size == 0) return ie::BadCandidateBlock{0, 0};
  if (end > row.size()) return ie::EndOutOfRange{0, std::int64_t(end), row.size()};
  for (std::size_t j = 0; j < end; ++j)
    if (!std::isfinite(row[j])) return ie::NonFiniteScore{0, j};
  std::vector<float> blocks;
  for (std::size_t b = 0; b * block_size < end; ++b)
    blocks.push_back(*std::max_element(row.begin() + std::ptrdiff_t(b * block_size),
                                       row.begin() + std::ptrdiff_t(std::min((b + 1) * block_size, end))));
  return blocks;
}

Result<std::vector<std::int32_t>, IndexerError> candidate_topk(
    std::span<const float> row, std::size_t end, std::span<const std::int32_t> retained_blocks,
    std::size_t block_size, std::size_t k) {
  if (block_size == 0) return ie::BadCandidateBlock{0, 0};
  if (end > row.size()) return ie::EndOutOfRange{0, std::int64_t(end), row.size()};
  std::vector<std::size_t> candidates;
  std::set<std::int32_t> seen;
  for (std::int32_t b : retained_blocks) {
    if (b < 0 || std::size_t(b) * block_size >= end || !seen.insert(b).second)
      return ie::BadCandidateBlock{std::size_t(std::max(b, 0)), block_size};
    for (std::size_t j = std::size_t(b) * block_size;
         j < std::min((std::size_t(b) + 1) * block_size, end); ++j)
      candidates.push_back(j);
  }
  for (std::size_t j : candidates)
    if (!std::isfinite(row[j])) return ie::NonFiniteScore{0, j};
  std::sort(candidates.begin(), candidates.end(), [&](std::size_t a, std::size_t b) {
    return ranks_before(row[a], a, row[b], b);
  });
  candidates.resize(std::min(k, candidates.size()));
  std::sort(candidates.begin(), candidates.end());
  std::vector<std::int32_t> out(k, -1);
  std::copy(candidates.begin(), candidates.end(), out.begin());
  return out;
}

Result<std::vector<std::int32_t>, IndexerError> restore_candidate_indices(
    std::span<const std::int32_t> compact, std::span<const std::int32_t> retained_blocks,
    std::size_t block_size) {
  if (block_size == 0) return ie::BadCandidateBlock{0, 0};
  std::vector<std::int32_t> out;
  for (std::int32_t c : compact) {
    if (c == -1) {
      out.push_back(-1);
      continue;
    }
    const std::size_t slot = std::size_t(c) / block_size;
    if (c < 0 || slot >= retained_blocks.size())
      return ie::BadCandidateBlock{c < 0 ? 0 : slot, block_size};
    out.push_back(std::int32_t(std::int64_t(retained_blocks[slot]) * std::int64_t(block_size) +
                               std::int64_t(std::size_t(c) % block_size)));
  }
  return out;
}

// min(8192, 8 floor(floor(budget / (width * bytes)) / 8))
Result<std::size_t, IndexerError> prefill_chunk_rows(std::size_t row_width,
                                                     std::size_t budget_bytes,
                                                     std::size_t bytes_per_logit) {
  const std::size_t row_bytes = row_width * bytes_per_logit;
  const std::size_t rows =
      row_bytes == 0 ? MAX_PREFILL_CHUNK_ROWS
                     : std::min(MAX_PREFILL_CHUNK_ROWS, budget_bytes / row_bytes / 8 * 8);
  if (rows == 0) return ie::BudgetTooSmall{budget_bytes, row_bytes};
  return rows;
}

}  // namespace aether::model
