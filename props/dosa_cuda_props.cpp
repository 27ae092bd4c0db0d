// Properties of DoSA's CUDA backend (impl/cuda/dosa.hpp): its float bound is at least
// the tensor-core scorer's score of every key, its pruned lanes are full scoring's
// bit for bit, it equals the model where every operation is exact, and it refuses
// what the model refuses. Generated calls go through props::cuda_form (bf16 queries,
// BF16 or E4M3 keys). Each skips without a device.
#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <numeric>

#include "impl/cpu/indexer.hpp"
#include "model/dosa.hpp"
#include "props/support/dosa_backends.hpp"
#include "props/support/dosa_gen.hpp"
#include "props/support/indexer_backends.hpp"
#include "props/support/property.hpp"

namespace aether {
namespace {

using V = std::vector<std::int32_t>;

#ifdef AETHER_HAVE_CUDA
// L2: U >= the CUDA scorer's own float score, every key, every valid plan.
AETHER_GPU_PROP(DosaCuda, the_float_bound_is_at_least_the_scorers_score, "L2", ()) {
  const props::DosaCall c = *props::gen_dosa_call();
  const props::CudaDosaCall d = props::cuda_form(c);
  std::vector<float> scores(c.key_count());
  RC_ASSERT(props::cuda_index_scores(d.queries, c.weights, 1, d.stored(), scores).ok());
  std::vector<double> bounds(c.key_count());
  const auto st = props::cuda_dosa_bounds(d.queries, c.weights, d.stored(), c.plan, bounds);
  RC_ASSERT(st.ok());
  for (std::size_t j = 0; j < c.key_count(); ++j) RC_ASSERT(bounds[j] >= double(scores[j]));
}

// One query's lanes by full scoring on the device: the scorer, then the top-k.
V cuda_full_topk(std::span<const std::uint16_t> q, std::span<const float> w, const IndexKeys& keys,
                 std::size_t count, std::size_t k) {
  std::vector<float> scores(count);
  RC_ASSERT(props::cuda_index_scores(q, w, 1, keys, scores).ok());
  V lanes(k, 77);
  if (count == 0) return V(k, -1);
  RC_ASSERT(props::cuda_valid_prefix_topk(scores, count, V{std::int32_t(count)}, k, lanes).ok());
  return lanes;
}

// L3: a batch of 1 to 3 queries sharing keys and seeds (the first one's heads
// rotated, each with a plan of its own); every query's pruned lanes equal full
// scoring's on the device, ids and order, bit for bit.
AETHER_GPU_PROP(DosaCuda, the_pruned_topk_is_full_scorings_bit_for_bit, "L3", ()) {
  const props::DosaCall c = *props::gen_dosa_call();
  const props::CudaDosaCall d = props::cuda_form(c);
  std::vector<std::uint16_t> queries = d.queries;
  std::vector<float> weights = c.weights;
  std::vector<DosaPlan> plans{c.plan};
  const std::size_t extra = *rc::gen::inRange<std::size_t>(0, 3);
  for (std::size_t t = 0; t < extra; ++t) {
    for (std::size_t i = 0; i < d.queries.size(); ++i)
      queries.push_back(d.queries[(i + (t + 1) * c.dim) % d.queries.size()]);
    weights.insert(weights.end(), c.weights.begin(), c.weights.end());
    plans.push_back(*props::gen_valid_plan(c.weights));
  }
  const std::size_t n = plans.size(), per = d.queries.size();
  V out(n * c.k, 77);
  DosaStats stats;
  const DosaOptions options{*rc::gen::inRange(0, 4) == 0};
  const auto st = props::cuda_dosa_topk(queries, weights, n, d.stored(), c.k, c.seeds, plans, out,
                                        options, &stats);
  RC_ASSERT(st.ok());
  for (std::size_t t = 0; t < n; ++t)
    RC_ASSERT(
        V(out.begin() + std::ptrdiff_t(t * c.k), out.begin() + std::ptrdiff_t((t + 1) * c.k)) ==
        cuda_full_topk(std::span(queries).subspan(t * per, per),
                       std::span(weights).subspan(t * c.heads(), c.heads()), d.stored(),
                       c.key_count(), c.k));
  RC_TAG(stats.full_queries == n ? "every query scored in full" : "pruned");
}

// L1 on the integer grid, where the tensor cores are exact too: the pruned lanes
// are the model's.
AETHER_GPU_PROP(DosaCuda, agrees_with_the_model_on_the_grid, "L1", ()) {
  const props::DosaCall c =
      *rc::gen::suchThat(props::gen_dosa_call(), [](const props::DosaCall& d) { return d.grid; });
  const props::CudaDosaCall d = props::cuda_form(c);
  V out(c.k, 77);
  const std::vector<DosaPlan> plans{c.plan};
  RC_ASSERT(props::cuda_dosa_topk(d.queries, c.weights, 1, d.stored(), c.k, c.seeds, plans, out,
                                  DosaOptions{false})
                .ok());
  RC_ASSERT(out == model::dosa_topk(props::bf16_values(d.queries), c.weights, d.stored(), c.k,
                                    c.seeds, c.plan)
                       .value());
}

// L0: each query's tau (the k-th greatest seed score) is the value a sort puts
// k-th, and its seeds' top-k lanes are, as a set, the first k positions of a
// stable sort by score descending (ties, -0 with +0 among them, to the lower
// position), on rows of a few distinct values (long ties), of both signs and both
// zeros, and of any floats, up to twelve thousand scores (several rounds of the
// select's loops a thread).
AETHER_GPU_PROP(DosaCuda, seed_selection_is_the_kth_greatest_and_the_top_k, "L0", ()) {
  const std::size_t n = *rc::gen::oneOf(rc::gen::inRange<std::size_t>(1, 40),
                                        rc::gen::inRange<std::size_t>(1, 12289));
  const std::size_t queries = *rc::gen::inRange<std::size_t>(1, 4);
  const auto few = rc::gen::element(-2.5f, -0.0f, 0.0f, 1.0f, 3.0e38f, -1.0e-40f);
  const auto any = rc::gen::map(rc::gen::arbitrary<std::uint32_t>(), [](std::uint32_t u) {
    const float x = std::bit_cast<float>(u);
    return std::isfinite(x) ? x : 1.0f;
  });
  const std::vector<float> scores = *rc::gen::container<std::vector<float>>(
      queries * n, *rc::gen::element(0, 1) == 0 ? few : any);
  const std::size_t k = *rc::gen::inRange<std::size_t>(1, n + 1);
  const props::SeedSelection got = props::cuda_select_seeds(scores, queries, k);
  for (std::size_t t = 0; t < queries; ++t) {
    const auto row = std::span(scores).subspan(t * n, n);
    std::vector<std::int32_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
      return row[std::size_t(a)] > row[std::size_t(b)];
    });
    std::vector<std::int32_t> want(order.begin(), order.begin() + std::ptrdiff_t(k));
    std::vector<std::int32_t> lanes(got.lanes.begin() + std::ptrdiff_t(t * k),
                                    got.lanes.begin() + std::ptrdiff_t(t * k + k));
    std::sort(want.begin(), want.end());
    std::sort(lanes.begin(), lanes.end());
    RC_ASSERT(got.tau[t] == row[std::size_t(order[k - 1])]);
    RC_ASSERT(lanes == want);
  }
}

// L0: the decode path gives the model's lanes (the plain top-K) and its refusals,
// out untouched on a refusal (props::gen_decode_case: the CPU property's faults and
// rows of one tied score).
AETHER_GPU_PROP(DosaCuda, decode_agrees_with_the_model, "L0", ()) {
  props::assert_decode_agrees(*props::gen_decode_case(), props::cuda_decode_topk);
}

// L0 refusals: the same error as the model on the same values, out untouched;
// where the model accepts, a wrong out length is refused.
AETHER_GPU_PROP(DosaCuda, refusals_agree_with_the_model, "L0", ()) {
  const props::DosaCall c = *props::gen_faulty_dosa_call();
  const props::CudaDosaCall d = props::cuda_form(c);
  const auto want =
      model::dosa_topk(props::bf16_values(d.queries), c.weights, d.stored(), c.k, c.seeds, c.plan);
  const std::ptrdiff_t delta = want.ok() ? *rc::gen::element<std::ptrdiff_t>(-1, 1) : 0;
  V out(std::size_t(std::ptrdiff_t(c.k) + delta), 77);
  const std::vector<DosaPlan> plans{c.plan};
  const auto got =
      props::cuda_dosa_topk(d.queries, c.weights, 1, d.stored(), c.k, c.seeds, plans, out);
  RC_ASSERT(!got.ok());
  RC_ASSERT(got.error() ==
            (want.ok() ? DosaError{dosa_error::ShapeMismatch{c.k, out.size()}} : want.error()));
  RC_ASSERT(out == V(out.size(), 77));
}
#endif

}  // namespace
}  // namespace aether
