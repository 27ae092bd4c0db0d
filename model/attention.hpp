// Causal attention selectors (source 000, "Null models"): for query row i of a
// context, which keys in [0, i] a baseline attends to. The witness nulls are the
// last row of Random and Local.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <variant>
#include <vector>

#include "api/result.hpp"

namespace aether::model {

struct Dense {};
struct Local {
  std::size_t window;  // the `window` most recent keys [i + 1 - window, i]
};
struct Random {
  std::size_t budget;  // a seeded uniform draw of min(budget, i + 1) distinct keys
  std::uint64_t seed;
};
struct LearnedTopK {
  std::size_t k;            // the k highest scores of the row
  std::size_t context_len;  // scores are row-major [context_len, context_len]
  std::span<const double> scores;
};
using Selector = std::variant<Dense, Local, Random, LearnedTopK>;

namespace attention_error {
struct ScoresShapeMismatch {
  std::size_t expected, actual;
  friend bool operator==(const ScoresShapeMismatch&, const ScoresShapeMismatch&) = default;
};
struct NonFiniteScore {
  std::size_t row, key;
  friend bool operator==(const NonFiniteScore&, const NonFiniteScore&) = default;
};
struct RowOutOfRange {
  std::size_t row, context_len;
  friend bool operator==(const RowOutOfRange&, const RowOutOfRange&) = default;
};
}  // namespace attention_error
using AttentionError =
    std::variant<attention_error::ScoresShapeMismatch, attention_error::NonFiniteScore,
                 attention_error::RowOutOfRange>;

// Keys selected by query row i, ascending. Dense, Local and Random cannot fail;
// LearnedTopK refuses a bad shape, a row past its context or a non-finite causal score.
Result<std::vector<std::int32_t>, AttentionError> select_row(const Selector& selector,
                                                             std::size_t row);

// A uniform draw of min(budget, n) distinct values of [0, n), Floyd's algorithm
// over a splitmix64 stream keyed by (seed, n): reproducible on every platform.
std::vector<std::int32_t> seeded_sample(std::size_t n, std::size_t budget, std::uint64_t seed);

}  // namespace aether::model
