// Reusable RapidCheck generators for DoSA calls (source 001). Adversarial by
// construction: integer grids where every score and bound is exact and ties at
// tau are common; general floats; zero-norm keys and heads; all weights negative
// or all positive; keys far outside the sample's scale; ReLU plateaus (many
// exact-zero scores); tiny and huge score ranges; K at and past L; seeds from
// exactly K to every key; plans from the plan rule and arbitrary valid plans.
#pragma once

#include <rapidcheck.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <ostream>
#include <span>
#include <vector>

#include "api/dosa.hpp"

namespace aether::props {

// One query against L keys: queries [H, D], weights [H], keys [L, D] as the floats
// they are (what the model reads) and as stored in `format` (what backends read;
// the same values: BF16 and E4M3 keys are generated representable, E4M3 with a
// power-of-two scale per row).
struct DosaCall {
  std::vector<float> queries, weights, keys;
  std::size_t dim = 0, k = 0;
  std::vector<std::int32_t> seeds;
  DosaPlan plan;
  KeyFormat format = KeyFormat::F32;
  std::vector<std::byte> key_bytes;
  bool grid = false;  // small integers (times powers of two): every float operation exact
  std::size_t heads() const { return weights.size(); }
  std::size_t key_count() const { return dim ? keys.size() / dim : 0; }
  IndexKeys stored() const { return {format, key_bytes, dim}; }
};
void showValue(const DosaCall& call, std::ostream& os);

// A well-formed call: finite inputs, at least K distinct seeds when L > K, a valid
// plan (the plan rule at a random budget, or any valid split of the heads).
rc::Gen<DosaCall> gen_dosa_call();

// A call with one or more faults: NaN or inf in a query, weight or key element (or an
// E4M3 scale NaN or negative), a seed repeated or out of range, a plan missing an
// anchor or anchored to an omitted head or with a negative beta, seeds cut below K.
rc::Gen<DosaCall> gen_faulty_dosa_call();

// Any valid plan for these weights: retained heads at random, every omitted
// positive head anchored to a random retained head (or none) with beta 0, 1/2, 1, 2
// or any finite nonnegative float, a random subset of the omitted negative heads
// aggregated.
rc::Gen<DosaPlan> gen_valid_plan(const std::vector<float>& weights);

// The decode path's inputs (source 001 §1): a generated call's full scores (the
// CPU's scorer), its seeds as the recent ids, its K; at times every key tied at one
// score (the listed keys are then all of them), at times one fault: a NaN score, a
// repeated or out-of-range id, too few ids.
struct DecodeCase {
  std::vector<float> scores;
  std::vector<std::int32_t> recent;
  std::size_t k = 0;
};
void showValue(const DecodeCase& c, std::ostream& os);
rc::Gen<DecodeCase> gen_decode_case();

// A backend's decode path (scores, recent, K, out) on the case: the model's lanes and
// refusals, out untouched on a refusal (RC_ASSERT).
using DecodeFn = std::function<Status<DosaError>(
    std::span<const float>, std::span<const std::int32_t>, std::size_t, std::span<std::int32_t>)>;
void assert_decode_agrees(const DecodeCase& c, const DecodeFn& decode);

}  // namespace aether::props
