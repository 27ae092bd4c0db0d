#include "model/indexer.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>
#include <optional>
#include <set>

namespace aether::model {

namespace {
namespace ie = indexer_error;
}

// I_j = Σ_h w_h max(0, q_h · k_j), keys given as floats
Result<std::vector<Rational>, IndexerError> index_scores(std::span<const float> queries,
                                                         std::span<const float> weights,
                                                         std::span<const float> keys,
                                                         std::size_t dim) {
  return index_scores(queries, weights, IndexKeys{KeyFormat::F32, std::as_bytes(keys), dim});
}

namespace {
// (-1)^s 2^(e-7) (1 + m/8); subnormal (-1)^s 2^-6 (m/8); NaN when e = 15 and m = 7
std::optional<Rational> e4m3_value(std::uint8_t byte) {
  const int sign = byte >> 7, e = (byte >> 3) & 15, m = byte & 7;
  if (e == 15 && m == 7) return std::nullopt;
  const Rational magnitude =
      e == 0 ? Rational(m, 8) / 64
             : Rational(8 + m, 8) *
                   (e >= 7 ? Rational(Integer(1) << (e - 7)) : Rational(1, Integer(1) << (7 - e)));
  return sign ? Rational(-magnitude) : magnitude;
}
}  // namespace

Result<std::vector<Rational>, IndexerError> decode_keys(const IndexKeys& keys) {
  const std::size_t row_bytes = key_row_bytes(keys.format, keys.dim);
  if (row_bytes == 0 ? !keys.bytes.empty() : keys.bytes.size() % row_bytes != 0)
    return ie::ShapeMismatch{row_bytes ? keys.bytes.size() / row_bytes * row_bytes : 0,
                             keys.bytes.size()};
  const std::size_t rows = row_bytes ? keys.bytes.size() / row_bytes : 0;
  std::vector<Rational> values;
  for (std::size_t j = 0; j < rows; ++j) {
    const std::byte* row = keys.bytes.data() + j * row_bytes;
    float scale = 1.0f;
    if (keys.format == KeyFormat::E4M3) {
      std::memcpy(&scale, row + keys.dim, 4);
      if (!std::isfinite(scale) || scale < 0)
        return ie::NonFiniteInput{2, j * row_bytes + keys.dim};
    }
    for (std::size_t d = 0; d < keys.dim; ++d) {
      float f = 0;
      std::optional<Rational> v;
      switch (keys.format) {
        case KeyFormat::F32:
          std::memcpy(&f, row + 4 * d, 4);
          break;
        case KeyFormat::BF16: {
          std::uint16_t half;
          std::memcpy(&half, row + 2 * d, 2);
          f = std::bit_cast<float>(std::uint32_t(half) << 16);
          break;
        }
        case KeyFormat::E4M3:
          v = e4m3_value(std::uint8_t(row[d]));
          break;
      }
      if (keys.format != KeyFormat::E4M3) {
        if (!std::isfinite(f)) return ie::NonFiniteInput{2, j * keys.dim + d};
        v = exact(f);
      }
      if (!v) return ie::NonFiniteInput{2, j * keys.dim + d};
      values.push_back(*v * exact(scale));
    }
  }
  return values;
}

namespace {
// Σ_h w_h max(0, Σ_d q_hd k_d) over exact key values, and Σ_h |w_h| Σ_d |q_hd k_d|
std::pair<Rational, Rational> score_and_magnitude(std::span<const float> queries,
                                                  std::span<const float> weights,
                                                  std::span<const Rational> key) {
  Rational score = 0, magnitude = 0;
  const std::size_t dim = key.size();
  for (std::size_t h = 0; h < weights.size(); ++h) {
    Rational dot = 0, abs_dot = 0;
    for (std::size_t d = 0; d < dim; ++d) {
      const Rational term = exact(queries[h * dim + d]) * key[d];
      dot += term;
      abs_dot += abs(term);
    }
    score += exact(weights[h]) * (dot > 0 ? dot : Rational(0));
    magnitude += abs(exact(weights[h])) * abs_dot;
  }
  return {score, magnitude};
}

// Rows of stored keys (decode_keys has checked the length).
std::size_t key_rows(const IndexKeys& keys) {
  const std::size_t row_bytes = key_row_bytes(keys.format, keys.dim);
  return row_bytes ? keys.bytes.size() / row_bytes : 0;
}

std::optional<IndexerError> check_scorer_inputs(std::span<const float> queries,
                                                std::span<const float> weights, std::size_t dim) {
  if (queries.size() != weights.size() * dim)
    return ie::ShapeMismatch{weights.size() * dim, queries.size()};
  for (std::size_t i = 0; i < queries.size(); ++i)
    if (!std::isfinite(queries[i])) return ie::NonFiniteInput{0, i};
  for (std::size_t i = 0; i < weights.size(); ++i)
    if (!std::isfinite(weights[i])) return ie::NonFiniteInput{1, i};
  return std::nullopt;
}
}  // namespace

Result<std::vector<Rational>, IndexerError> index_scores(std::span<const float> queries,
                                                         std::span<const float> weights,
                                                         const IndexKeys& keys) {
  if (auto e = check_scorer_inputs(queries, weights, keys.dim)) return *e;
  const auto values = decode_keys(keys);
  if (!values) return values.error();
  std::vector<Rational> scores;
  for (std::size_t j = 0; j < key_rows(keys); ++j)
    scores.push_back(score_and_magnitude(queries, weights,
                                         std::span(values.value()).subspan(j * keys.dim, keys.dim))
                         .first);
  return scores;
}

// [I_t,j] = index_scores(q_t, w_t, keys) for t < T
Result<std::vector<Rational>, IndexerError> index_scores_batch(std::span<const float> queries,
                                                               std::span<const float> weights,
                                                               std::size_t query_count,
                                                               const IndexKeys& keys) {
  const std::size_t heads = query_count ? weights.size() / query_count : 0;
  if (heads * query_count != weights.size())
    return ie::ShapeMismatch{heads * query_count, weights.size()};
  if (auto e = check_scorer_inputs(queries, weights, keys.dim)) return *e;
  const auto values = decode_keys(keys);
  if (!values) return values.error();
  std::vector<Rational> scores;
  for (std::size_t t = 0; t < query_count; ++t) {
    const auto row = index_scores(queries.subspan(t * heads * keys.dim, heads * keys.dim),
                                  weights.subspan(t * heads, heads), keys);
    scores.insert(scores.end(), row.value().begin(), row.value().end());
  }
  return scores;
}

// γ_n = n u / (1 - n u)
Rational gamma(std::size_t n) {
  const Rational nu(Integer(n), Integer(1) << 24);
  return nu / (1 - nu);
}

namespace {
// γ_n Σ_h |w_h| Σ_d |q_hd k_jd| for every key j
Result<std::vector<Rational>, IndexerError> magnitude_bounds(std::span<const float> queries,
                                                             std::span<const float> weights,
                                                             const IndexKeys& keys, std::size_t n) {
  if (auto e = check_scorer_inputs(queries, weights, keys.dim)) return *e;
  const auto values = decode_keys(keys);
  if (!values) return values.error();
  const Rational g = gamma(n);
  std::vector<Rational> bounds;
  for (std::size_t j = 0; j < key_rows(keys); ++j)
    bounds.push_back(g *
                     score_and_magnitude(queries, weights,
                                         std::span(values.value()).subspan(j * keys.dim, keys.dim))
                         .second);
  return bounds;
}
}  // namespace

// err_j = γ_{D+H+2} Σ_h |w_h| Σ_d |q_hd k_jd|
Result<std::vector<Rational>, IndexerError> index_score_error_bounds(std::span<const float> queries,
                                                                     std::span<const float> weights,
                                                                     const IndexKeys& keys) {
  return magnitude_bounds(queries, weights, keys, keys.dim + weights.size() + 2);
}

// err_j = γ_{48 ceil(D/16) + H + 2} Σ_h |w_h| Σ_d |q_hd k_jd|
Result<std::vector<Rational>, IndexerError> tensor_core_score_error_bounds(
    std::span<const float> queries, std::span<const float> weights, const IndexKeys& keys) {
  return magnitude_bounds(queries, weights, keys, 48 * ((keys.dim + 15) / 16) + weights.size() + 2);
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
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return ranks_before(row[a], a, row[b], b); });
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
    blocks.push_back(
        *std::max_element(row.begin() + std::ptrdiff_t(b * block_size),
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
  std::sort(candidates.begin(), candidates.end(),
            [&](std::size_t a, std::size_t b) { return ranks_before(row[a], a, row[b], b); });
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
  const std::size_t rows = row_bytes == 0
                               ? MAX_PREFILL_CHUNK_ROWS
                               : std::min(MAX_PREFILL_CHUNK_ROWS, budget_bytes / row_bytes / 8 * 8);
  if (rows == 0) return ie::BudgetTooSmall{budget_bytes, row_bytes};
  return rows;
}

}  // namespace aether::model
