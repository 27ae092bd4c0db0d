// The seeds' two rounds (impl/cpu/dosa_seeds.hpp, docs/dosa.md): the seeds' top-K
// scored from the seeds their bounds cannot rule out, on hand-made bounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "impl/cpu/dosa_seeds.hpp"

namespace aether {
namespace {

// K = 2, seeds 10..14 scoring 9, 6, 2, 7, 6 (the total order: 9, 7, then 6 by id).
struct SeedsCase {
  std::vector<double> bounds;
  std::size_t scored;  // seeds the two rounds score
};
void expect_seeds_top_k(const SeedsCase& c) {
  const std::vector<std::int32_t> seeds = {10, 11, 12, 13, 14};
  const std::vector<float> score_of = {9, 6, 2, 7, 6};  // by seed - 10
  std::vector<cpu::dosa_seeds::Scored> chosen;
  std::size_t calls = 0;
  const std::size_t scored = cpu::dosa_seeds::seeds_top_k(
      seeds, c.bounds, 2,
      [&](std::span<const std::int32_t> ids, std::span<float> out) {
        ++calls;
        for (std::size_t i = 0; i < ids.size(); ++i) out[i] = score_of[std::size_t(ids[i] - 10)];
      },
      chosen);
  std::sort(chosen.begin(), chosen.end(), cpu::dosa_seeds::before);
  EXPECT_EQ(chosen, (std::vector<cpu::dosa_seeds::Scored>{{9.0f, 10}, {7.0f, 13}}));
  EXPECT_EQ(scored, c.scored);
  EXPECT_EQ(calls, c.scored > 2 ? 2u : 1u);
}
}  // namespace

TEST(DosaCpu, tight_seed_bounds_score_the_first_round_only) {
  // first round (K + K / 8 = 2): seeds 10 and 13, t = 7; every other bound is below 7
  expect_seeds_top_k({{9.5, 6.5, 2.5, 7.5, 6.5}, 2});
}

TEST(DosaCpu, an_overrated_seed_brings_a_second_round) {
  // seed 12 (score 2) bounded at 8: the first round is 10 and 12, t = 2; seeds 11, 13
  // and 14 bound at or above 2 and are scored: tau 7, and 14's 6 ties 11's below it
  expect_seeds_top_k({{9.5, 6.5, 8.0, 7.5, 6.0}, 5});
}

TEST(DosaCpu, a_seed_bounded_exactly_at_t_is_scored) {
  // first round 10 and 13 (t = 7); seed 11 bounded at 7 exactly (U = t is not
  // excluded), the rest below
  expect_seeds_top_k({{9.5, 7.0, 2.5, 7.5, 6.5}, 3});
}

}  // namespace aether
