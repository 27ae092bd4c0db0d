// The compression refusals (SPEC section 3): which ring entries the model lets a
// data refusal change, and every backend's typed errors, with shape refusals
// writing nothing and data refusals changing the ring only where the model allows.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "model/compress.hpp"
#include "props/support/compress_gen.hpp"
#include "props/support/property.hpp"
#include "tests/compress_backend_test.hpp"

namespace aether {
namespace {

namespace ce = compress_error;

// What a call refused for its data may leave changed: the entries the step writes,
// less those of its pending inputs. r = 2, S = 3, start 3 (position 2 pending in
// entry 2): a chunk [3, 8) keeps positions 5, 6, 7 in entries 2, 0, 1, and entry 2
// still holds the input a retry reads. Lab 26's decode of six positions from 3 on
// ring 7 writes entries 3, 4, 5, 6, 0, 1, none of them position 2's.
TEST(CompressModel, a_data_refusal_may_change_what_the_step_writes_but_not_its_pending_inputs) {
  const CompressRequest q{0, 3, 5};
  EXPECT_EQ(model::entries_a_refusal_may_change(std::span(&q, 1), {2, 1, 3, 1}, false),
            (std::set<std::size_t>{0, 1}));
  const CompressRequest lab{1, 3, 6};
  EXPECT_EQ(model::entries_a_refusal_may_change(std::span(&lab, 1), {2, 1, 7, 2}, true),
            (std::set<std::size_t>{7 + 0, 7 + 1, 7 + 3, 7 + 4, 7 + 5, 7 + 6}));
}

class CompressRefusal : public CompressBackendTest {};

// Lab 26's first two positions (tests/compress_test.cpp), as (score ln w, value)
// pairs in D = 2: weights (1, 3) and (3, 1), values (0, 10) and (8, 2).
const std::vector<float> first_pair{0.0f,           std::log(3.0f), 0.0f, 10.0f,
                                    std::log(3.0f), 0.0f,           8.0f, 2.0f};

TEST_P(CompressRefusal, refusals_name_the_problem_and_write_nothing) {
  const auto refused = [&](bool decode, std::vector<CompressRequest> requests, CompressShape shape,
                           std::vector<float> projected, std::vector<float> ring,
                           std::size_t out_rows, CompressError want) {
    const std::vector<float> ring_before = ring;
    std::vector<std::uint16_t> rows(out_rows * shape.dim, 0x5a5a);
    std::vector<std::int32_t> index(out_rows, 77), position(out_rows, 77);
    const auto st = (decode ? backend.decode : backend.prefill)(requests, projected, ring, shape,
                                                                rows, index, position);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error(), want);
    if (std::holds_alternative<ce::NonFiniteInput>(want)) {
      // a data refusal: the outputs are unspecified, the ring changed at most where
      // the model allows
      EXPECT_EQ(props::ring_report(ring_before, ring, shape,
                                   model::entries_a_refusal_may_change(requests, shape, decode)),
                "");
      return;
    }
    EXPECT_EQ(ring, ring_before);
    EXPECT_EQ(rows, std::vector<std::uint16_t>(out_rows * shape.dim, 0x5a5a));
    EXPECT_EQ(index, std::vector<std::int32_t>(out_rows, 77));
  };
  const std::vector<float> ring(2 * 7 * 4, 0.0f);
  refused(false, {{0, 0, 2}}, {0, 2, 7, 2}, first_pair, ring, 1, ce::BadShape{0, 2, 7});
  refused(false, {{2, 0, 2}}, {2, 2, 7, 2}, first_pair, ring, 1, ce::BadRequest{0});
  refused(false, {{0, 0, 1}, {0, 5, 1}}, {2, 2, 7, 2}, first_pair, ring, 2,
          ce::BadRequest{1});  // same slot twice
  refused(false, {{0, -1, 2}}, {2, 2, 7, 2}, first_pair, ring, 1, ce::BadRequest{0});
  refused(false, {{0, 0, 2}}, {2, 2, 7, 2}, first_pair, ring, 2, ce::ShapeMismatch{2, 4});
  refused(false, {{0, 0, 3}}, {2, 2, 7, 2}, first_pair, ring, 1, ce::ShapeMismatch{12, 8});
  refused(false, {{0, 0, 2}}, {2, 2, 1, 2}, first_pair, std::vector<float>(8), 1,
          ce::RingTooSmall{1, 2});
  refused(true, {{0, 0, 2}}, {3, 2, 3, 2}, first_pair, std::vector<float>(24), 2,
          ce::RingTooSmall{3, 4});
  std::vector<float> nan_in = first_pair;
  nan_in[5] = NAN;
  refused(false, {{0, 0, 2}}, {2, 2, 7, 2}, nan_in, ring, 1,
          ce::NonFiniteInput{ce::Input::Projected, 5});
  std::vector<float> nan_ring = ring;
  nan_ring[7 * 4 + 2 * 4 + 2] = INFINITY;  // slot 1, entry 2: old position 2, read by pair (2, 3)
  refused(false, {{1, 3, 1}}, {2, 2, 7, 2},
          std::vector<float>(first_pair.begin(), first_pair.begin() + 4), nan_ring, 1,
          ce::NonFiniteInput{ce::Input::Ring, 7 * 4 + 2 * 4 + 2});
  refused(true, {{1, 3, 1}}, {2, 2, 7, 2},
          std::vector<float>(first_pair.begin(), first_pair.begin() + 4), nan_ring, 1,
          ce::NonFiniteInput{ce::Input::Ring, 7 * 4 + 2 * 4 + 2});  // decode reads it too
  // An entry the step does not read may hold anything.
  std::vector<float> stale_ring = ring;
  stale_ring[7 * 4 + 5 * 4] = NAN;
  std::vector<std::uint16_t> row(2);
  std::vector<std::int32_t> index(1), position(1);
  const CompressRequest q{1, 3, 1};
  EXPECT_TRUE(backend
                  .prefill(std::span(&q, 1), std::span(first_pair).first(4), stale_ring,
                           {2, 2, 7, 2}, row, index, position)
                  .ok());
}

INSTANTIATE_TEST_SUITE_P(Backends, CompressRefusal, ::testing::Values("cpu", "cuda", "cuda_queued"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace aether
