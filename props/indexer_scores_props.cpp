// Properties of the indexer's scorer (source 003 A.4.1): exact on integer grids
// (L1), within the certified bound on general floats (L2), a selection from float
// scores certified against the exact ones, refusals as the model's with the output
// untouched, and L3 agreement of the portable and AVX2 paths and of batched and
// lone queries; on CUDA, the same within the tensor-core bound.
#include <bit>
#include <cmath>
#include <cstring>
#include <set>
#include <sstream>

#include "impl/cpu/dispatch.hpp"
#include "impl/cpu/indexer.hpp"
#include "model/indexer.hpp"
#include "props/support/indexer_backends.hpp"
#include "props/support/indexer_scores_gen.hpp"
#include "props/support/model_adapter.hpp"
#include "props/support/property.hpp"

namespace aether {
namespace {

namespace gen = rc::gen;
using I = std::int32_t;
using V = std::vector<I>;

// Every float score equal to the exact one (the L1 grid), a difference named (a
// NaN or infinity too, before it meets a rational).
void exact_on_the_grid(std::span<const float> got, const std::vector<model::Rational>& exact,
                       const std::string& backend) {
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!std::isfinite(got[i]) || model::exact(got[i]) != exact[i])
      RC_FAIL("score " + std::to_string(i) + ": " + backend + " " + std::to_string(got[i]) +
              ", exact " + exact[i].str());
}

std::vector<float> cpu_scores(const props::ScoreCall& c) {
  std::vector<float> out(c.rows(), NAN);
  const auto st = cpu::index_scores(c.queries, c.weights, c.keys(), out);
  if (!st) RC_FAIL("cpu refused a well-formed scorer call");
  return out;
}

AETHER_PROP(IndexerCpu, scores_are_exact_on_the_grid, "L1", ()) {
  const props::ScoreCall c = *props::gen_grid_score_call();
  const auto exact = model::index_scores(c.queries, c.weights, c.keys());
  RC_ASSERT(exact.ok());
  exact_on_the_grid(cpu_scores(c), exact.value(), "cpu");
}

AETHER_PROP(IndexerCpu, scores_lie_within_the_certified_bound, "L2", ()) {
  const props::ScoreCall c = *props::gen_float_score_call();
  const auto exact = model::index_scores(c.queries, c.weights, c.keys());
  const auto bound = model::index_score_error_bounds(c.queries, c.weights, c.keys());
  RC_ASSERT(exact.ok() && bound.ok());
  const auto got = cpu_scores(c);
  for (std::size_t j = 0; j < got.size(); ++j) {
    RC_ASSERT(std::isfinite(got[j]));
    const model::Rational error = abs(model::exact(got[j]) - exact.value()[j]);
    if (error > bound.value()[j])
      RC_FAIL("key " + std::to_string(j) + ": |cpu - exact| = " + error.str() + " > bound " +
              bound.value()[j].str());
  }
}

// A top-k chosen from float scores, certified against the exact ones (SPEC §2 L2):
// for selected i and unselected j, exact(i) >= exact(j) - (err_i + err_j).
AETHER_PROP(IndexerCpu, a_selection_from_float_scores_is_certified, "L2", ()) {
  const props::ScoreCall c = *props::gen_float_score_call();
  const auto exact = model::index_scores(c.queries, c.weights, c.keys()).value();
  const auto bound = model::index_score_error_bounds(c.queries, c.weights, c.keys()).value();
  const auto scores = cpu_scores(c);
  const std::size_t k = *gen::inRange<std::size_t>(0, scores.size() + 2);
  V chosen(k);
  RC_ASSERT(props::cpu_indexer_backend()
                .topk(scores, scores.size(), V{I(scores.size())}, k, chosen)
                .ok());
  std::set<I> in(chosen.begin(), chosen.end());
  in.erase(-1);
  for (I i : in) RC_ASSERT(i >= 0 && std::size_t(i) < scores.size());  // before indexing by it
  for (I i : in)
    for (std::size_t j = 0; j < scores.size(); ++j)
      if (!in.contains(I(j)))
        RC_ASSERT(exact[std::size_t(i)] >= exact[j] - (bound[std::size_t(i)] + bound[j]));
}

// One to three inputs of a scorer call spoiled at once (a NaN/inf query, weight or
// key element, an E4M3 scale NaN/inf/negative, a torn key row, a query too many), or
// the output length off by one (out_delta); sometimes nothing, which must be
// accepted. Several spoils in one call check that the refusal named is the first in
// the model's order.
struct SpoiledCall {
  props::ScoreCall call;
  int out_delta = 0;
};
SpoiledCall spoil_one_input(props::ScoreCall c) {
  const std::size_t rows = c.rows(), dim = c.dim, row_bytes = key_row_bytes(c.format, dim);
  int out_delta = 0;
  const int spoils = *gen::weightedElement<int>({{3, 1}, {1, 2}, {1, 3}});
  for (int spoil = 0; spoil < spoils; ++spoil) {
    const float bad = *gen::element(NAN, INFINITY, -INFINITY);
    switch (*gen::inRange(0, 7)) {
      case 0:
        if (!c.queries.empty()) c.queries[*gen::inRange<std::size_t>(0, c.queries.size())] = bad;
        break;
      case 1:
        if (!c.weights.empty()) c.weights[*gen::inRange<std::size_t>(0, c.weights.size())] = bad;
        break;
      case 2:
        if (rows > 0 && dim > 0) {
          std::byte* row = c.key_bytes.data() + *gen::inRange<std::size_t>(0, rows) * row_bytes;
          const std::size_t d = *gen::inRange<std::size_t>(0, dim);
          if (c.format == KeyFormat::F32)
            std::memcpy(row + 4 * d, &bad, 4);
          else if (c.format == KeyFormat::BF16)
            row[2 * d + 1] = std::byte(0x7f), row[2 * d] = std::byte(0x80 | *gen::inRange(0, 128));
          else
            row[d] = std::byte(*gen::element<int>(0x7f, 0xff));
        }
        break;
      case 3:
        if (rows > 0 && c.format == KeyFormat::E4M3) {
          const float scale = *gen::element(-1.0f, NAN, INFINITY);
          std::memcpy(c.key_bytes.data() + *gen::inRange<std::size_t>(0, rows) * row_bytes + dim,
                      &scale, 4);
        }
        break;
      case 4:
        if (!c.key_bytes.empty()) c.key_bytes.pop_back();
        break;
      case 5:
        c.queries.push_back(0.0f);
        break;
      default:
        out_delta = *gen::arbitrary<bool>() ? -1 : 1;
    }
  }
  return {c, out_delta};
}

// The call refused exactly as the model refuses (or, for a well-formed call, as a
// wrong output length demands), the output untouched; else accepted.
void refused_like_the_model(const Status<IndexerError>& got,
                            const Result<std::vector<model::Rational>, IndexerError>& want,
                            const std::vector<float>& out, const std::vector<float>& before) {
  if (!want) {
    RC_ASSERT(!got.ok());
    RC_ASSERT(got.error() == want.error());
    RC_ASSERT(std::memcmp(out.data(), before.data(), out.size() * 4) == 0);
  } else if (want.value().size() != out.size()) {
    RC_ASSERT(!got.ok());
    const IndexerError wrong_length = indexer_error::ShapeMismatch{want.value().size(), out.size()};
    RC_ASSERT(got.error() == wrong_length);
    RC_ASSERT(std::memcmp(out.data(), before.data(), out.size() * 4) == 0);
  } else {
    RC_ASSERT(got.ok());
  }
}

#ifdef AETHER_HAVE_CUDA
std::vector<float> cuda_scores(const props::DeviceScoreCall& d) {
  std::vector<float> out(d.count * d.keys.rows(), NAN);
  const auto st = props::cuda_index_scores(d.queries, d.weights, d.count, d.keys.keys(), out);
  if (!st)
    RC_FAIL("cuda refused a well-formed scorer call: " +
            (std::ostringstream() << st.error()).str());
  return out;
}

AETHER_GPU_PROP(IndexerCuda, scores_are_exact_on_the_grid, "L1", ()) {
  const props::DeviceScoreCall d = *props::gen_device_score_call(props::gen_grid_score_call());
  const auto exact = model::index_scores_batch(d.query_values, d.weights, d.count, d.keys.keys());
  RC_ASSERT(exact.ok());
  exact_on_the_grid(cuda_scores(d), exact.value(), "cuda");
}

AETHER_GPU_PROP(IndexerCuda, scores_lie_within_the_tensor_core_bound, "L2", ()) {
  const props::DeviceScoreCall d = *props::gen_device_score_call(props::gen_float_score_call());
  const auto exact = model::index_scores_batch(d.query_values, d.weights, d.count, d.keys.keys());
  RC_ASSERT(exact.ok());
  const auto got = cuda_scores(d);
  const std::size_t rows = d.keys.rows();
  for (std::size_t t = 0; t < d.count; ++t) {
    const auto bound =
        model::tensor_core_score_error_bounds(d.query(t), d.weight(t), d.keys.keys()).value();
    for (std::size_t j = 0; j < rows; ++j) {
      const std::size_t i = t * rows + j;
      RC_ASSERT(std::isfinite(got[i]));
      const model::Rational error = abs(model::exact(got[i]) - exact.value()[i]);
      if (error > bound[j])
        RC_FAIL("query " + std::to_string(t) + " key " + std::to_string(j) +
                ": |cuda - exact| = " + error.str() + " > bound " + bound[j].str());
    }
  }
}

AETHER_GPU_PROP(IndexerCuda, scores_are_identical_on_every_run, "L3", ()) {
  const props::DeviceScoreCall d = *props::gen_device_score_call(
      gen::oneOf(props::gen_grid_score_call(), props::gen_float_score_call()));
  const auto first = cuda_scores(d), second = cuda_scores(d);
  for (std::size_t i = 0; i < first.size(); ++i)
    RC_ASSERT(std::bit_cast<std::uint32_t>(first[i]) == std::bit_cast<std::uint32_t>(second[i]));
}

// L0 on refusals (spoil_one_input on a call with device keys; NaN/inf queries round
// to bf16 NaN/inf), the model's error, the output untouched.
AETHER_GPU_PROP(IndexerCuda, scorer_refusals_agree_with_the_model, "L0", ()) {
  const SpoiledCall spoiled =
      spoil_one_input(props::with_device_keys(*props::gen_grid_score_call()));
  const props::DeviceScoreCall d =
      props::device_call(spoiled.call, *gen::inRange<std::size_t>(1, 4));
  const std::vector<float> before(props::off_by(d.count * d.keys.rows(), spoiled.out_delta),
                                  1234.5f);
  std::vector<float> out = before;
  const auto got = props::cuda_index_scores(d.queries, d.weights, d.count, d.keys.keys(), out);
  refused_like_the_model(
      got, model::index_scores_batch(d.query_values, d.weights, d.count, d.keys.keys()), out,
      before);
}
#endif

// L0 on the CPU scorer's refusals (spoil_one_input), the model's error, the output
// untouched; unspoiled calls are accepted.
AETHER_PROP(IndexerCpu, scorer_refusals_agree_with_the_model, "L0", ()) {
  const SpoiledCall spoiled = spoil_one_input(*props::gen_grid_score_call());
  const props::ScoreCall& c = spoiled.call;
  const std::vector<float> before(props::off_by(c.rows(), spoiled.out_delta), 1234.5f);
  std::vector<float> out = before;
  const auto got = cpu::index_scores(c.queries, c.weights, c.keys(), out);
  refused_like_the_model(got, model::index_scores(c.queries, c.weights, c.keys()), out, before);
}

AETHER_PROP(IndexerCpu, the_portable_path_equals_the_avx2_path, "L3", ()) {
  const props::ScoreCall c =
      *gen::oneOf(props::gen_grid_score_call(), props::gen_float_score_call());
  const auto simd = cpu_scores(c);
  struct Portable {
    Portable() { cpu::simd_allowed() = false; }
    ~Portable() { cpu::simd_allowed() = true; }
  } portable;
  const auto plain = cpu_scores(c);
  for (std::size_t j = 0; j < simd.size(); ++j)
    RC_ASSERT(std::bit_cast<std::uint32_t>(simd[j]) == std::bit_cast<std::uint32_t>(plain[j]));
}

// L3: a batch of 1 to 4 queries (the call's heads rotated) scores each query bit for
// bit as index_scores does alone, on the AVX2 and the portable path.
AETHER_PROP(IndexerCpu, a_batch_scores_each_query_as_alone, "L3", ()) {
  const props::ScoreCall c =
      *gen::oneOf(props::gen_grid_score_call(), props::gen_float_score_call());
  const std::size_t batch = *gen::inRange<std::size_t>(1, 5), rows = c.rows();
  std::vector<float> queries, weights;
  for (std::size_t t = 0; t < batch; ++t) {
    for (std::size_t i = 0; i < c.queries.size(); ++i)
      queries.push_back(c.queries[(i + t * c.dim) % c.queries.size()]);
    for (std::size_t i = 0; i < c.weights.size(); ++i)
      weights.push_back(c.weights[(i + t) % c.weights.size()]);
  }
  const bool simd = *gen::arbitrary<bool>();
  struct Path {
    explicit Path(bool simd) { cpu::simd_allowed() = simd; }
    ~Path() { cpu::simd_allowed() = true; }
  } path(simd);
  std::vector<float> all(batch * rows), one(rows);
  RC_ASSERT(cpu::index_scores_batch(queries, weights, batch, c.keys(), all).ok());
  const std::size_t per_query = c.queries.size(), heads = c.weights.size();
  for (std::size_t t = 0; t < batch; ++t) {
    RC_ASSERT(cpu::index_scores(std::span(queries).subspan(t * per_query, per_query),
                                std::span(weights).subspan(t * heads, heads), c.keys(), one)
                  .ok());
    for (std::size_t j = 0; j < rows; ++j)
      RC_ASSERT(std::bit_cast<std::uint32_t>(all[t * rows + j]) ==
                std::bit_cast<std::uint32_t>(one[j]));
  }
  std::vector<float> short_out(batch * rows + 1);
  RC_ASSERT(cpu::index_scores_batch(queries, weights, batch, c.keys(), short_out).error() ==
            (IndexerError{indexer_error::ShapeMismatch{batch * rows, batch * rows + 1}}));
}

// L3: keys named by id (any order, repeats, partial and whole tiles: DoSA's seeds,
// chunks and survivors) score bit for bit as the same keys in a call over every key,
// on the AVX2 and the portable path.
AETHER_PROP(IndexerCpu, keys_named_by_id_score_as_in_place, "L3", ()) {
  const props::ScoreCall c =
      *gen::oneOf(props::gen_grid_score_call(), props::gen_float_score_call());
  const std::size_t rows = c.rows();
  RC_PRE(rows > 0);
  const auto ids =
      *gen::container<std::vector<std::int32_t>>(gen::inRange<std::int32_t>(0, std::int32_t(rows)));
  const bool simd = *gen::arbitrary<bool>();
  struct Path {
    explicit Path(bool simd) { cpu::simd_allowed() = simd; }
    ~Path() { cpu::simd_allowed() = true; }
  } path(simd);
  std::vector<float> all(rows), at(ids.size(), NAN);
  RC_ASSERT(cpu::index_scores(c.queries, c.weights, c.keys(), all).ok());
  cpu::index_scores_at(c.queries, c.weights, 1, c.keys(), ids, at);
  for (std::size_t i = 0; i < ids.size(); ++i)
    RC_ASSERT(std::bit_cast<std::uint32_t>(at[i]) ==
              std::bit_cast<std::uint32_t>(all[std::size_t(ids[i])]));
}

}  // namespace
}  // namespace aether
