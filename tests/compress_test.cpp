// Lab 26 of source 003 (A.1, A.1.1, A.2), verbatim, on the model and on every
// compression backend, plus the refusals and the exp the backends share.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>

#include "impl/compress_math.hpp"
#include "impl/cpu/compress.hpp"
#include "impl/cpu/dispatch.hpp"
#include "model/compress.hpp"
#include "props/support/compress_gen.hpp"
#include "props/support/property.hpp"
#ifdef AETHER_HAVE_CUDA
#include <cstring>
#include <functional>
#include <memory>

#include "impl/cuda/compress.hpp"
#include "props/support/device_buffer.hpp"
#endif

namespace aether {
namespace {

using model::Gate;
using model::Interval;
using model::Position;
using model::Rational;
namespace ce = compress_error;

// The lab's seven positions (D = 2). The text gives the first pair: values (0, 10)
// and (8, 2) with weights (1, 3) and (3, 1). It prints the rows (6, 8), (8, 3),
// (3, 5) and, for ring 6, the corrupted first row (42/5, 8). The other positions
// are ours, chosen consistent with every printed line: (6, 1) and (10, 5) with
// equal weights give (8, 3); (1, 5) weighted (1, 2) and (5, 5) weighted (1, 1) give
// (3, 5); position 6, (9, 10) weighted (2, 3), replacing position 0 in pair (0, 1)
// gives ((2*9 + 3*8) / 5, (3*10 + 1*2) / 4) = (42/5, 8).
struct LabPosition {
  int w0, w1, v0, v1;
};
constexpr LabPosition kLab[7] = {{1, 3, 0, 10}, {3, 1, 8, 2}, {1, 1, 6, 1}, {1, 1, 10, 5},
                                 {1, 2, 1, 5},  {1, 1, 5, 5}, {2, 3, 9, 10}};

std::vector<Position> lab_positions() {
  std::vector<Position> out;
  for (const auto& p : kLab) out.push_back(Position{{p.w0, p.w1}, {p.v0, p.v1}});
  return out;
}

std::vector<Interval> point(Rational a, Rational b) { return {Interval{a, a}, Interval{b, b}}; }

TEST(CompressModel, lab26_first_pair_and_the_three_rows) {
  const auto in = lab_positions();
  EXPECT_EQ(model::compress_group(std::span(in).first(2), Gate::Weight), point(6, 8));
  EXPECT_EQ(model::whole_sequence_rows(in, 2, Gate::Weight),
            (std::vector<std::vector<Interval>>{point(6, 8), point(8, 3), point(3, 5)}));
}

TEST(CompressModel, lab26_chunks_valid_reserved_rows_and_pending) {
  const auto in = lab_positions();
  model::Ring ring(7);
  const std::pair<std::size_t, std::size_t> chunks[3] = {{0, 1}, {1, 4}, {4, 7}};
  const std::pair<std::size_t, std::size_t> want[3] = {
      {0, 1}, {2, 2}, {1, 1}};  // (valid, reserved)
  for (int c = 0; c < 3; ++c) {
    const auto rows = model::prefill(
        ring, 2, std::span(in).subspan(chunks[c].first, chunks[c].second - chunks[c].first),
        Gate::Weight);
    const auto valid = std::size_t(
        std::count_if(rows.begin(), rows.end(), [](const model::Row& r) { return r.row >= 0; }));
    EXPECT_EQ(std::pair(valid, rows.size()), want[c]) << "chunk " << c;
  }
  EXPECT_EQ(model::pending(ring, 2), std::vector<Position>{in[6]});
  // The placeholder of [0, 1): position 0, no row (store slot -1), zero.
  model::Ring fresh(7);
  const auto placeholder = model::prefill(fresh, 2, std::span(in).first(1), Gate::Weight);
  EXPECT_EQ(placeholder, (std::vector<model::Row>{{point(0, 0), -1, 0}}));
}

TEST(CompressModel, lab26_six_position_decode_ring_7_keeps_ring_6_corrupts) {
  const auto in = lab_positions();
  for (std::size_t S : {7, 6}) {
    model::Ring ring(S);
    model::decode(ring, 2, std::span(in).first(1), Gate::Weight);  // position 0 is old
    const auto rows = model::decode(ring, 2, std::span(in).subspan(1, 6), Gate::Weight);
    ASSERT_EQ(rows.size(), 6u);  // one per query position
    EXPECT_EQ(rows[0], (model::Row{S == 7 ? point(6, 8) : point(Rational(42, 5), 8), 0, 0}))
        << "ring " << S;
    EXPECT_EQ(rows[2], (model::Row{point(8, 3), 1, 2}));
    EXPECT_EQ(rows[4], (model::Row{point(3, 5), 2, 4}));
    EXPECT_EQ(rows[1], (model::Row{point(0, 0), -1, 0}));  // completes nothing
  }
  EXPECT_TRUE(ring_capacity_ok(7, 2, 6));
  EXPECT_FALSE(ring_capacity_ok(6, 2, 6));
}

TEST(CompressModel, lab26_all_64_chunk_partitions_agree) {
  const auto in = lab_positions();
  const auto whole = model::whole_sequence_rows(in, 2, Gate::Weight);
  for (unsigned cuts = 0; cuts < 64; ++cuts) {  // bit i: a cut after position i
    model::Ring ring(7);
    std::vector<std::vector<Interval>> rows;
    std::size_t first = 0;
    for (std::size_t p = 0; p < 7; ++p)
      if (p == 6 || cuts >> p & 1) {
        for (const auto& row :
             model::prefill(ring, 2, std::span(in).subspan(first, p + 1 - first), Gate::Weight))
          if (row.row >= 0) rows.push_back(row.z);
        first = p + 1;
      }
    EXPECT_EQ(rows, whole) << "cuts " << cuts;
    EXPECT_EQ(model::pending(ring, 2), std::vector<Position>{in[6]});
  }
}

TEST(CompressModel, lab26_state_payload) {
  EXPECT_EQ(state_payload_bytes(7, 512), 28672u);
  EXPECT_EQ(state_payload_bytes(2 + (6 - 1), 512), 28672u);  // r + backtracking - 1
}

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

TEST(CompressModel, exp_enclosures_are_tight_and_correct) {
  // e to 50 digits; the enclosure's width is far below 10^-27.
  const Rational e(
      "271828182845904523536028747135266249775724709369995/"
      "100000000000000000000000000000000000000000000000000");
  const Rational tiny(1, model::Integer("1000000000000000000000000000"));
  const Interval one = model::exp_enclosure(1);
  EXPECT_LT(one.lo, one.hi);
  EXPECT_LT(abs(one.lo - e), tiny);
  EXPECT_LT(abs(one.hi - e), tiny);
  EXPECT_EQ(model::exp_enclosure(0), (Interval{1, 1}));
  const Interval a = model::exp_enclosure(Rational(-87, 2)),
                 b = model::exp_enclosure(Rational(87, 2));
  EXPECT_TRUE(a.lo * b.lo <= 1 && 1 <= a.hi * b.hi);  // e^-x e^x = 1
  EXPECT_LT(a.hi - a.lo, a.lo * tiny);
}

// The backends' exp: within 4 ulp (2^-21 relative) of e^x, or 2^-147 absolute in
// the subnormal range: the bound model::compress_group_fp32 assumes.
TEST(CompressImpl, shared_exp_is_within_the_assumed_bound) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> x_of(-110.0f, 0.0f);
  std::vector<float> xs{0.0f, -0.0f, -1e-30f, -1.0f, -87.0f, -103.9f, -104.0f, -104.1f};
  for (int i = 0; i < 3000; ++i) xs.push_back(x_of(rng));
  for (float x : xs) {
    const Interval e = model::exp_enclosure(model::exact(x));
    const Rational got = model::exact(impl::exp_nonpositive(x));
    const Rational slack = e.hi / Rational(1 << 21) + Rational(1, model::Integer(1) << 147);
    EXPECT_TRUE(e.lo - slack <= got && got <= e.hi + slack) << "x = " << x;
  }
}

// The CPU's AVX2 build runs the exp eight lanes at a time: the same bits as the
// scalar exp (which the portable build and CUDA run) on every float in [-105, -80]
// (the subnormal results, k = -150, the cut at -104) and on 2^22 more over [-2^9, 0].
TEST(CompressImpl, the_eight_lane_exp_gives_the_scalar_bits) {
  std::vector<float> xs;
  for (float x = -105.0f; x <= -80.0f; x = std::nextafter(x, 0.0f)) xs.push_back(x);
  std::mt19937 rng(11);
  std::uniform_int_distribution<std::uint32_t> bits(0x80000000u, 0xC4000000u);  // -0 down to -512
  for (int i = 0; i < (1 << 22); ++i) xs.push_back(std::bit_cast<float>(bits(rng)));
  for (float x : {0.0f, -0.0f, -1e-45f, -104.0f, -0x1.92068p+5f}) xs.push_back(x);
  while (xs.size() % 8) xs.push_back(-1.0f);
  std::vector<float> lanes(xs.size());
  if (!cpu::exp_nonpositive_avx2(xs.data(), lanes.data(), xs.size()))
    GTEST_SKIP() << "no AVX2 + FMA here";
  std::size_t differ = 0;
  for (std::size_t i = 0; i < xs.size(); ++i)
    if (std::bit_cast<std::uint32_t>(lanes[i]) !=
            std::bit_cast<std::uint32_t>(impl::exp_nonpositive(xs[i])) &&
        ++differ <= 5)
      ADD_FAILURE() << "x = " << std::hexfloat << xs[i] << ": " << lanes[i] << " vs "
                    << impl::exp_nonpositive(xs[i]);
  EXPECT_EQ(differ, 0u) << "of " << xs.size();
}

// The CUDA kernels' pair form: gated_mean's bits for r = 2 on random pairs (scores
// close and far apart, equal, signed zeros, weights that underflow).
TEST(CompressImpl, the_pair_form_gives_the_gated_mean_bits) {
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> near(-2.0f, 2.0f), far(-150.0f, 150.0f);
  std::vector<float> scores{0.0f, -0.0f, 1.0f, -1.0f, 104.0f, -104.0f, 0x1p-140f, 3e38f, -3e38f};
  std::vector<float> values{0.0f, -0.0f, 1.0f, -1.0f, 0x1p-149f, -0x1p-149f, 3e38f, -3e38f};
  for (int i = 0; i < 60; ++i)
    scores.push_back(i % 2 ? near(rng) : far(rng)), values.push_back(far(rng));
  std::size_t differ = 0;
  for (float s0 : scores)
    for (float s1 : scores)
      for (std::size_t a = 0; a < values.size(); ++a)
        for (std::size_t b = a % 7; b < values.size(); b += 7) {
          const float sc[2] = {s0, s1}, v[2] = {values[a], values[b]};
          const float want =
              impl::gated_mean([&](int t) { return sc[t]; }, [&](int t) { return v[t]; }, 2);
          const float got = impl::gated_mean_pair(s0, s1, v[0], v[1]);
          if (std::bit_cast<std::uint32_t>(got) != std::bit_cast<std::uint32_t>(want) &&
              ++differ <= 5)
            ADD_FAILURE() << std::hexfloat << "s " << s0 << ", " << s1 << " v " << v[0] << ", "
                          << v[1] << ": " << got << " vs " << want;
        }
  EXPECT_EQ(differ, 0u);
}

// ---- the backends ---------------------------------------------------------------

class Compress : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam().starts_with("cuda") && !props::gpu_present())
      GTEST_SKIP() << "no CUDA device visible";
    for (auto& b : props::impl_compress_backends())
      if (b.name == GetParam()) backend = b;
  }
  props::CompressBackend backend;
};

// The lab's positions with scores ln(w): the exact rows are bf16 numbers, and the
// backends' rows round to them.
props::Sequence lab_sequence() {
  props::Sequence s{2, {}};
  for (const auto& p : kLab)
    s.projected.insert(s.projected.end(),
                       {std::log(float(p.w0)), std::log(float(p.w1)), float(p.v0), float(p.v1)});
  return s;
}

std::uint16_t bf16(float x) { return std::uint16_t(std::bit_cast<std::uint32_t>(x) >> 16); }
std::vector<std::uint16_t> bf16_row(float a, float b) { return {bf16(a), bf16(b)}; }

TEST_P(Compress, lab26_rows_chunks_and_pending) {
  const CompressShape shape{2, 2, 7, 1};
  const std::vector<std::size_t> chunks{1, 3, 3};
  const auto run = props::run_chunks(backend, shape, lab_sequence(), chunks);
  ASSERT_TRUE(run.ok()) << run.error();
  EXPECT_EQ(run.value().rows, (std::map<std::int32_t, std::vector<std::uint16_t>>{
                                  {0, bf16_row(6, 8)}, {1, bf16_row(8, 3)}, {2, bf16_row(3, 5)}}));
  EXPECT_EQ(run.value().reserved, 4u);  // 1 + 2 + 1
  const auto pending = lab_sequence().positions(6, 1);
  EXPECT_EQ(props::ring_positions(run.value(), shape, 6, 7),
            std::vector<float>(pending.begin(), pending.end()));
}

TEST_P(Compress, lab26_placeholder_of_an_empty_chunk_result) {
  const CompressShape shape{2, 2, 7, 1};
  const auto seq = lab_sequence();
  std::vector<float> ring(28, 0.0f);
  std::vector<std::uint16_t> rows(2, 0x5a5a);
  std::vector<std::int32_t> index(1, 77), position(1, 77);
  const CompressRequest q{0, 0, 1};
  ASSERT_TRUE(
      backend.prefill(std::span(&q, 1), seq.positions(0, 1), ring, shape, rows, index, position)
          .ok());
  EXPECT_EQ(rows, (std::vector<std::uint16_t>{0, 0}));
  EXPECT_EQ(index, std::vector<std::int32_t>{-1});
  EXPECT_EQ(position, std::vector<std::int32_t>{0});
}

TEST_P(Compress, lab26_six_position_decode_ring_7_keeps_ring_6_is_refused) {
  const auto seq = lab_sequence();
  for (std::size_t S : {7, 6}) {
    const CompressShape shape{2, 2, S, 1};
    std::vector<float> ring(S * 4, 0.0f);
    std::vector<std::uint16_t> rows(12, 0x5a5a);
    std::vector<std::int32_t> index(6, 77), position(6, 77);
    std::vector<std::uint16_t> one_row(2);
    std::vector<std::int32_t> one_index(1), one_position(1);
    const CompressRequest first{0, 0, 1}, step{0, 1, 6};
    ASSERT_TRUE(backend
                    .decode(std::span(&first, 1), seq.positions(0, 1), ring, shape, one_row,
                            one_index, one_position)
                    .ok());
    const std::vector<float> ring_before = ring;
    const auto st = backend.decode(std::span(&step, 1), seq.positions(1, 6), ring, shape, rows,
                                   index, position);
    if (S == 7) {
      ASSERT_TRUE(st.ok()) << st.error();
      EXPECT_EQ(index, (std::vector<std::int32_t>{0, -1, 1, -1, 2, -1}));
      EXPECT_EQ(position, (std::vector<std::int32_t>{0, 0, 2, 0, 4, 0}));
      const auto want = [&](float a, float b) { return bf16_row(a, b); };
      EXPECT_EQ(std::vector<std::uint16_t>(rows.begin(), rows.begin() + 2), want(6, 8));
      EXPECT_EQ(std::vector<std::uint16_t>(rows.begin() + 4, rows.begin() + 6), want(8, 3));
      EXPECT_EQ(std::vector<std::uint16_t>(rows.begin() + 8, rows.begin() + 10), want(3, 5));
      EXPECT_EQ(std::vector<std::uint16_t>(rows.begin() + 2, rows.begin() + 4),
                (std::vector<std::uint16_t>{0, 0}));
    } else {
      ASSERT_FALSE(st.ok());
      EXPECT_EQ(st.error(), (CompressError{ce::RingTooSmall{6, 7}}));
      EXPECT_EQ(ring, ring_before);
      EXPECT_EQ(rows, std::vector<std::uint16_t>(12, 0x5a5a));
      EXPECT_EQ(index, std::vector<std::int32_t>(6, 77));
    }
  }
}

TEST_P(Compress, lab26_all_64_partitions_give_the_same_bits) {
  const CompressShape shape{2, 2, 7, 1};
  const auto seq = lab_sequence();
  const std::vector<std::size_t> whole{7};
  const auto want = props::run_chunks(backend, shape, seq, whole);
  ASSERT_TRUE(want.ok());
  for (unsigned cuts = 0; cuts < 64; ++cuts) {
    std::vector<std::size_t> chunks;
    std::size_t first = 0;
    for (std::size_t p = 0; p < 7; ++p)
      if (p == 6 || cuts >> p & 1) {
        chunks.push_back(p + 1 - first);
        first = p + 1;
      }
    const auto got = props::run_chunks(backend, shape, seq, chunks);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(got.value().rows, want.value().rows) << "cuts " << cuts;
    EXPECT_EQ(props::ring_positions(got.value(), shape, 6, 7),
              props::ring_positions(want.value(), shape, 6, 7));
  }
}

// k = rint(x log2 e) picks the exp's reduction, from the exactly rounded product
// (one fma). x = -0x1.92068p+5: x log2 e = -72.5000037 gives k = -73; the product
// rounded to a float first is -72.5, which would give k = -72, an exp one ulp off
// (0x1.6a0998p-73 against 0x1.6a099ap-73) and, times a latent of 0x1.15e4d6p+73,
// the bf16 row 0x3fc4 instead of 0x3fc5. nvcc fuses a * b + c by default, and g++
// contracts it in the AVX2 + FMA build but not in the portable one, so before the
// fma was written out the CPU's two builds (and CUDA) gave different rows here.
TEST_P(Compress, the_exp_reduction_rounds_x_log2e_once) {
  const CompressShape shape{2, 1, 2, 1};
  const std::vector<CompressRequest> requests{{0, 0, 2}};
  const std::vector<float> projected{-0x1.92068p+5f, 0x1.15e4d6p+73f, 0.0f,
                                     0.0f};  // (score, latent) x 2
  for (const bool simd : {true, false}) {    // the CPU's AVX2 + FMA build and its portable one
    cpu::simd_allowed() = simd;
    std::vector<float> ring(4, 0.0f);
    std::vector<std::uint16_t> rows(1, 0);
    std::vector<std::int32_t> index(1), positions(1);
    const bool ok = backend.prefill(requests, projected, ring, shape, rows, index, positions).ok();
    cpu::simd_allowed() = true;
    ASSERT_TRUE(ok);
    EXPECT_EQ(rows[0], 0x3fc5) << (simd ? "" : "portable");
  }
}

TEST_P(Compress, refusals_name_the_problem_and_write_nothing) {
  const auto seq = lab_sequence();
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
  const auto two = seq.positions(0, 2);
  const std::vector<float> in(two.begin(), two.end()), ring(2 * 7 * 4, 0.0f);
  refused(false, {{0, 0, 2}}, {0, 2, 7, 2}, in, ring, 1, ce::BadShape{0, 2, 7});
  refused(false, {{2, 0, 2}}, {2, 2, 7, 2}, in, ring, 1, ce::BadRequest{0});
  refused(false, {{0, 0, 1}, {0, 5, 1}}, {2, 2, 7, 2}, in, ring, 2,
          ce::BadRequest{1});  // same slot twice
  refused(false, {{0, -1, 2}}, {2, 2, 7, 2}, in, ring, 1, ce::BadRequest{0});
  refused(false, {{0, 0, 2}}, {2, 2, 7, 2}, in, ring, 2, ce::ShapeMismatch{2, 4});
  refused(false, {{0, 0, 3}}, {2, 2, 7, 2}, in, ring, 1, ce::ShapeMismatch{12, 8});
  refused(false, {{0, 0, 2}}, {2, 2, 1, 2}, in, std::vector<float>(8), 1, ce::RingTooSmall{1, 2});
  refused(true, {{0, 0, 2}}, {3, 2, 3, 2}, in, std::vector<float>(24), 2, ce::RingTooSmall{3, 4});
  std::vector<float> nan_in = in;
  nan_in[5] = NAN;
  refused(false, {{0, 0, 2}}, {2, 2, 7, 2}, nan_in, ring, 1, ce::NonFiniteInput{0, 5});
  std::vector<float> nan_ring = ring;
  nan_ring[7 * 4 + 2 * 4 + 2] = INFINITY;  // slot 1, entry 2: old position 2, read by pair (2, 3)
  refused(false, {{1, 3, 1}}, {2, 2, 7, 2}, std::vector<float>(in.begin(), in.begin() + 4),
          nan_ring, 1, ce::NonFiniteInput{1, 7 * 4 + 2 * 4 + 2});
  refused(true, {{1, 3, 1}}, {2, 2, 7, 2}, std::vector<float>(in.begin(), in.begin() + 4), nan_ring,
          1, ce::NonFiniteInput{1, 7 * 4 + 2 * 4 + 2});  // decode reads it too
  // An entry the step does not read may hold anything.
  std::vector<float> stale_ring = ring;
  stale_ring[7 * 4 + 5 * 4] = NAN;
  std::vector<std::uint16_t> row(2);
  std::vector<std::int32_t> index(1), position(1);
  const CompressRequest q{1, 3, 1};
  EXPECT_TRUE(backend
                  .prefill(std::span(&q, 1), std::span(in).first(4), stale_ring, {2, 2, 7, 2}, row,
                           index, position)
                  .ok());
}

// Queued calls back to back on one stream, no wait between them (the host fills
// one scratch buffer while the device still reads the other): three prefill chunks
// and two decode steps over three requests, each into its own outputs, equal to the
// same calls on the CPU.
TEST(CompressCuda, queued_calls_back_to_back_equal_the_cpu) {
#ifdef AETHER_HAVE_CUDA
  if (!props::gpu_present()) GTEST_SKIP() << "no CUDA device visible";
  const CompressShape shape{2, 64, 7, 3};
  const std::size_t width = 2 * shape.dim;
  struct Call {
    bool decode;
    std::int64_t start;
    std::int32_t tokens;
  };
  const Call calls[] = {{false, 0, 5}, {false, 5, 4}, {false, 9, 7}, {true, 16, 3}, {true, 19, 3}};
  std::mt19937 rng(17);
  std::normal_distribution<float> normal;
  std::vector<float> ring_cpu(shape.state_slots * shape.ring * width, 0.0f);
  props::DeviceBuffer<float> ring_gpu{std::span<const float>(ring_cpu)};
  props::DeviceBuffer<cuda::DeviceVerdict> verdicts{
      std::vector<cuda::DeviceVerdict>(std::size(calls))};
  std::vector<std::vector<std::uint16_t>> want;
  std::vector<std::unique_ptr<props::DeviceBuffer<float>>> inputs;
  std::vector<std::unique_ptr<props::DeviceBuffer<std::uint16_t>>> rows;
  std::vector<std::unique_ptr<props::DeviceBuffer<std::int32_t>>> index, positions;
  for (std::size_t c = 0; c < std::size(calls); ++c) {
    const Call& call = calls[c];
    std::vector<CompressRequest> requests;
    for (std::int32_t slot = 0; slot < 3; ++slot)
      requests.push_back({slot, call.start, call.tokens});
    const std::size_t per = call.decode ? std::size_t(call.tokens)
                                        : std::size_t(std::max<std::int64_t>(
                                              1, (call.start + call.tokens) / 2 - call.start / 2));
    std::vector<float> projected(3 * std::size_t(call.tokens) * width);
    for (float& x : projected) x = normal(rng);
    std::vector<std::uint16_t> out(3 * per * shape.dim);
    std::vector<std::int32_t> out_index(3 * per), out_positions(3 * per);
    const auto step = call.decode ? cpu::compress_decode : cpu::compress_prefill;
    ASSERT_TRUE(step(requests, projected, ring_cpu, shape, out, out_index, out_positions).ok());
    want.push_back(out);
    inputs.push_back(
        std::make_unique<props::DeviceBuffer<float>>(std::span<const float>(projected)));
    rows.push_back(
        std::make_unique<props::DeviceBuffer<std::uint16_t>>(std::span<const std::uint16_t>(out)));
    index.push_back(std::make_unique<props::DeviceBuffer<std::int32_t>>(
        std::span<const std::int32_t>(out_index)));
    positions.push_back(std::make_unique<props::DeviceBuffer<std::int32_t>>(
        std::span<const std::int32_t>(out_positions)));
    const auto queue = call.decode ? cuda::enqueue_compress_decode : cuda::enqueue_compress_prefill;
    ASSERT_TRUE(queue(requests, inputs.back()->span(), ring_gpu.span(), shape, rows.back()->span(),
                      index.back()->span(), positions.back()->span(), verdicts.span().data() + c,
                      nullptr)
                    .ok());
  }
  std::vector<cuda::DeviceVerdict> verdict(std::size(calls));
  verdicts.download(verdict);
  std::vector<float> ring_back(ring_cpu.size());
  ring_gpu.download(ring_back);
  EXPECT_EQ(std::memcmp(ring_back.data(), ring_cpu.data(), ring_cpu.size() * 4), 0);
  for (std::size_t c = 0; c < std::size(calls); ++c) {
    EXPECT_TRUE(cuda::compress_verdict(verdict[c]).ok()) << "call " << c;
    std::vector<std::uint16_t> got(want[c].size(), 0);
    rows[c]->download(got);
    EXPECT_EQ(got, want[c]) << "call " << c;
  }
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

#ifdef AETHER_HAVE_CUDA
// The calls `queue` makes on a stream of its own, captured into an instantiated
// CUDA graph; ok() is false if a call or the capture failed.
class CapturedCalls {
 public:
  explicit CapturedCalls(const std::function<bool(cudaStream_t)>& queue) {
    if (cudaStreamCreate(&stream_) != cudaSuccess ||
        cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal) != cudaSuccess)
      return;
    const bool queued = queue(stream_);
    cudaGraph_t graph;
    if (cudaStreamEndCapture(stream_, &graph) != cudaSuccess) return;
    ok_ = queued && cudaGraphInstantiate(&exec_, graph, 0) == cudaSuccess;
    cudaGraphDestroy(graph);
  }
  CapturedCalls(const CapturedCalls&) = delete;
  CapturedCalls& operator=(const CapturedCalls&) = delete;
  ~CapturedCalls() {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  bool ok() const { return ok_; }
  cudaStream_t stream() const { return stream_; }
  bool replay() {
    return cudaGraphLaunch(exec_, stream_) == cudaSuccess &&
           cudaStreamSynchronize(stream_) == cudaSuccess;
  }

 private:
  cudaStream_t stream_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  bool ok_ = false;
};

// A prefill and then a decode step over one ring, captured into a CUDA graph with
// the buffers they read and write; the ring starts as standard normal draws from
// `seed`, and random(n) draws the same way. replay(a, b, fill) loads the steps'
// inputs, sets the ring back to ring0() and every output row to `fill`, replays
// the graph and returns what it left; cpu(a, b) is what the CPU backend gives.
class CapturedSteps {
 public:
  struct Outcome {
    std::vector<std::uint16_t> prefill, decode;
    std::vector<float> ring;
    std::vector<cuda::DeviceVerdict> verdicts{2};
  };
  CapturedSteps(const CompressShape& shape, std::vector<CompressRequest> prefill,
                std::vector<CompressRequest> decode, unsigned seed)
      : shape_(shape),
        prefill_(std::move(prefill)),
        decode_(std::move(decode)),
        rng_(seed),
        ring0_(random(shape.state_slots * shape.ring * 2 * shape.dim)),
        prefill_rows_(rows_of(prefill_, shape.ratio)),
        decode_rows_(rows_of(decode_, 0)),
        ring_{std::span<const float>(ring0_)},
        in_prefill_{std::vector<float>(inputs_of(prefill_))},
        in_decode_{std::vector<float>(inputs_of(decode_))},
        rows_prefill_{std::vector<std::uint16_t>(prefill_rows_ * shape.dim)},
        rows_decode_{std::vector<std::uint16_t>(decode_rows_ * shape.dim)},
        index_prefill_{std::vector<std::int32_t>(prefill_rows_)},
        positions_prefill_{std::vector<std::int32_t>(prefill_rows_)},
        index_decode_{std::vector<std::int32_t>(decode_rows_)},
        positions_decode_{std::vector<std::int32_t>(decode_rows_)},
        verdicts_{std::vector<cuda::DeviceVerdict>(2)},
        graph_([this](cudaStream_t stream) {
          return cuda::enqueue_compress_prefill(prefill_, in_prefill_.span(), ring_.span(), shape_,
                                                rows_prefill_.span(), index_prefill_.span(),
                                                positions_prefill_.span(), verdicts_.span().data(),
                                                stream)
                     .ok() &&
                 cuda::enqueue_compress_decode(decode_, in_decode_.span(), ring_.span(), shape_,
                                               rows_decode_.span(), index_decode_.span(),
                                               positions_decode_.span(),
                                               verdicts_.span().data() + 1, stream)
                     .ok();
        }) {}
  bool ok() const { return graph_.ok(); }
  const std::vector<float>& ring0() const { return ring0_; }
  std::vector<float> random(std::size_t n) {
    std::normal_distribution<float> normal;
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng_);
    return v;
  }
  cudaStream_t stream() const { return graph_.stream(); }
  std::size_t prefill_inputs() const { return inputs_of(prefill_); }
  std::size_t decode_inputs() const { return inputs_of(decode_); }

  Outcome replay(const std::vector<float>& a, const std::vector<float>& b, std::uint16_t fill) {
    upload(in_prefill_, a);
    upload(in_decode_, b);
    upload(ring_, ring0_);
    upload(rows_prefill_, std::vector<std::uint16_t>(prefill_rows_ * shape_.dim, fill));
    upload(rows_decode_, std::vector<std::uint16_t>(decode_rows_ * shape_.dim, fill));
    props::cuda_check(graph_.replay() ? cudaSuccess : cudaErrorLaunchFailure, "graph replay");
    Outcome got{std::vector<std::uint16_t>(prefill_rows_ * shape_.dim),
                std::vector<std::uint16_t>(decode_rows_ * shape_.dim),
                std::vector<float>(ring0_.size())};
    rows_prefill_.download(got.prefill);
    rows_decode_.download(got.decode);
    ring_.download(got.ring);
    verdicts_.download(got.verdicts);
    return got;
  }
  Outcome cpu(const std::vector<float>& a, const std::vector<float>& b) const {
    Outcome want{std::vector<std::uint16_t>(prefill_rows_ * shape_.dim),
                 std::vector<std::uint16_t>(decode_rows_ * shape_.dim), ring0_};
    std::vector<std::int32_t> i1(prefill_rows_), p1(prefill_rows_), i2(decode_rows_),
        p2(decode_rows_);
    EXPECT_TRUE(cpu::compress_prefill(prefill_, a, want.ring, shape_, want.prefill, i1, p1).ok());
    EXPECT_TRUE(cpu::compress_decode(decode_, b, want.ring, shape_, want.decode, i2, p2).ok());
    return want;
  }
  // a replay that refused nothing and left what the CPU leaves
  static void expect_clean(const Outcome& got, const Outcome& want, int replay) {
    EXPECT_TRUE(cuda::compress_verdict(got.verdicts[0]).ok() &&
                cuda::compress_verdict(got.verdicts[1]).ok())
        << "replay " << replay;
    EXPECT_EQ(got.prefill, want.prefill) << "replay " << replay;
    EXPECT_EQ(got.decode, want.decode) << "replay " << replay;
    EXPECT_EQ(std::memcmp(got.ring.data(), want.ring.data(), want.ring.size() * 4), 0)
        << "replay " << replay;
  }

 private:
  // output rows of a step: a prefill's max(1, completed) per request (ratio), a decode's one per
  // token (0)
  std::size_t rows_of(const std::vector<CompressRequest>& requests, std::int64_t ratio) const {
    std::size_t rows = 0;
    for (const auto& q : requests)
      rows += ratio == 0 ? std::size_t(q.tokens)
                         : std::size_t(std::max<std::int64_t>(
                               1, (q.start + q.tokens) / ratio - q.start / ratio));
    return rows;
  }
  std::size_t inputs_of(const std::vector<CompressRequest>& requests) const {
    std::size_t tokens = 0;
    for (const auto& q : requests) tokens += std::size_t(q.tokens);
    return tokens * 2 * shape_.dim;
  }
  template <class T>
  static void upload(props::DeviceBuffer<T>& to, const std::vector<T>& from) {
    props::cuda_check(
        cudaMemcpy(to.span().data(), from.data(), from.size() * sizeof(T), cudaMemcpyHostToDevice),
        "upload");
  }

  CompressShape shape_;
  std::vector<CompressRequest> prefill_, decode_;
  std::mt19937 rng_;
  std::vector<float> ring0_;
  std::size_t prefill_rows_, decode_rows_;
  props::DeviceBuffer<float> ring_, in_prefill_, in_decode_;
  props::DeviceBuffer<std::uint16_t> rows_prefill_, rows_decode_;
  props::DeviceBuffer<std::int32_t> index_prefill_, positions_prefill_, index_decode_,
      positions_decode_;
  props::DeviceBuffer<cuda::DeviceVerdict> verdicts_;
  CapturedCalls graph_;
};
#endif

// A prefill and a decode step queued while a stream is captured into a CUDA graph,
// then the graph replayed twice: before each replay the ring is reset, `projected`
// refilled with new values and two calls of other requests run eagerly (they take
// both scratch buffers and overwrite their pinned mirrors). Each replay equals the
// CPU on the values it found: the graph kept its own request tables.
TEST(CompressCuda, calls_captured_in_a_graph_replay_their_own_requests) {
#ifdef AETHER_HAVE_CUDA
  if (!props::gpu_present()) GTEST_SKIP() << "no CUDA device visible";
  const CompressShape shape{2, 64, 7, 4};
  CapturedSteps steps(shape, {{0, 0, 5}, {2, 0, 6}, {1, 0, 3}}, {{0, 5, 3}, {2, 6, 2}, {1, 3, 3}},
                      29);
  ASSERT_TRUE(steps.ok());
  props::DeviceBuffer<cuda::DeviceVerdict> verdict{std::vector<cuda::DeviceVerdict>(1)};
  for (int replay = 0; replay < 2; ++replay) {
    // other requests, eagerly, through both scratch buffers
    for (int other = 0; other < 2; ++other) {
      const std::vector<CompressRequest> them{{3, 100 + other, 4}};
      props::DeviceBuffer<float> in{steps.random(4 * 2 * shape.dim)},
          ring_other{std::span<const float>(steps.ring0())};
      props::DeviceBuffer<std::uint16_t> out{std::vector<std::uint16_t>(2 * shape.dim)};
      props::DeviceBuffer<std::int32_t> idx{std::vector<std::int32_t>(2)},
          pos{std::vector<std::int32_t>(2)};
      ASSERT_TRUE(cuda::enqueue_compress_prefill(them, in.span(), ring_other.span(), shape,
                                                 out.span(), idx.span(), pos.span(),
                                                 verdict.span().data(), steps.stream())
                      .ok());
      ASSERT_EQ(cudaStreamSynchronize(steps.stream()), cudaSuccess);
    }
    const std::vector<float> a = steps.random(steps.prefill_inputs()),
                             b = steps.random(steps.decode_inputs());
    CapturedSteps::expect_clean(steps.replay(a, b, 0), steps.cpu(a, b), replay);
  }
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

// A captured prefill and decode step replayed four times, `projected` holding a
// NaN before the second and fourth replay: each replay refuses exactly when its
// own inputs hold one (the graph's refusal word starts clean at every replay),
// naming that value, and leaves the outputs as they were; a clean replay equals
// the CPU.
TEST(CompressCuda, each_replay_of_a_captured_call_refuses_by_its_own_inputs) {
#ifdef AETHER_HAVE_CUDA
  if (!props::gpu_present()) GTEST_SKIP() << "no CUDA device visible";
  const CompressShape shape{2, 8, 7, 2};
  const std::size_t width = 2 * shape.dim;
  CapturedSteps steps(shape, {{0, 0, 4}, {1, 0, 5}}, {{0, 4, 2}, {1, 5, 3}}, 37);
  ASSERT_TRUE(steps.ok());
  constexpr std::uint16_t kUntouched = 0x7777;
  for (int replay = 0; replay < 4; ++replay) {
    const bool poisoned = replay % 2 == 1;
    std::vector<float> a = steps.random(steps.prefill_inputs()),
                       b = steps.random(steps.decode_inputs());
    // prefill: request 0's position 3, score channel 5; decode: request 1's position 7, latent
    // channel 1
    if (poisoned) a[3 * width + 5] = NAN, b[4 * width + shape.dim + 1] = NAN;
    const CapturedSteps::Outcome got = steps.replay(a, b, kUntouched);
    if (poisoned) {
      const auto first = cuda::compress_verdict(got.verdicts[0]),
                 second = cuda::compress_verdict(got.verdicts[1]);
      ASSERT_FALSE(first.ok() || second.ok()) << "replay " << replay;
      EXPECT_EQ(first.error(), (CompressError{ce::NonFiniteInput{0, 3 * width + 5}}));
      EXPECT_EQ(second.error(), (CompressError{ce::NonFiniteInput{0, 4 * width + shape.dim + 1}}));
      EXPECT_EQ(got.prefill, std::vector<std::uint16_t>(got.prefill.size(), kUntouched));
      EXPECT_EQ(got.decode, std::vector<std::uint16_t>(got.decode.size(), kUntouched));
      EXPECT_EQ(std::memcmp(got.ring.data(), steps.ring0().data(), got.ring.size() * 4), 0)
          << "replay " << replay;
    } else {
      CapturedSteps::expect_clean(got, steps.cpu(a, b), replay);
    }
  }
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

// A captured call whose request table spans several of the pieces a graph carries
// it in (1500 requests, 48000 bytes: past what a queued call carries in a kernel's
// parameters, so a queued call copies it from a pinned mirror): its replay, after
// two eager calls of another table that overwrite both scratch buffers' mirrors,
// equals the CPU.
TEST(CompressCuda, a_captured_call_of_many_requests_replays_its_whole_table) {
#ifdef AETHER_HAVE_CUDA
  if (!props::gpu_present()) GTEST_SKIP() << "no CUDA device visible";
  const std::size_t count = 1500;
  const CompressShape shape{2, 4, 7, count};
  std::vector<CompressRequest> requests;
  std::size_t tokens = 0, rows = 0;
  for (std::size_t i = 0; i < count; ++i) {
    requests.push_back({std::int32_t(count - 1 - i), std::int64_t(i % 5), std::int32_t(2 + i % 3)});
    tokens += std::size_t(requests.back().tokens);
    rows += std::size_t(std::max<std::int64_t>(
        1, (requests.back().start + requests.back().tokens) / 2 - requests.back().start / 2));
  }
  std::mt19937 rng(31);
  std::normal_distribution<float> normal;
  std::vector<float> projected(tokens * 8), ring(count * 7 * 8);
  for (float& x : projected) x = normal(rng);
  for (float& x : ring) x = normal(rng);
  props::DeviceBuffer<float> d_in{std::span<const float>(projected)},
      d_ring{std::span<const float>(ring)};
  props::DeviceBuffer<std::uint16_t> d_rows{std::vector<std::uint16_t>(rows * 4)};
  props::DeviceBuffer<std::int32_t> d_index{std::vector<std::int32_t>(rows)},
      d_positions{std::vector<std::int32_t>(rows)};
  props::DeviceBuffer<cuda::DeviceVerdict> verdict{std::vector<cuda::DeviceVerdict>(1)};
  CapturedCalls graph([&](cudaStream_t stream) {
    return cuda::enqueue_compress_prefill(requests, d_in.span(), d_ring.span(), shape,
                                          d_rows.span(), d_index.span(), d_positions.span(),
                                          verdict.span().data(), stream)
        .ok();
  });
  ASSERT_TRUE(graph.ok());
  // the same requests over other state slots, eagerly, through both scratch buffers
  std::vector<CompressRequest> others = requests;
  for (std::size_t i = 0; i < count; ++i) others[i].state_slot = std::int32_t(i);
  for (int other = 0; other < 2; ++other) {
    props::DeviceBuffer<float> ring_other{std::span<const float>(ring)};
    props::DeviceBuffer<std::uint16_t> rows_other{std::vector<std::uint16_t>(rows * 4)};
    props::DeviceBuffer<std::int32_t> index_other{std::vector<std::int32_t>(rows)},
        positions_other{std::vector<std::int32_t>(rows)};
    ASSERT_TRUE(cuda::enqueue_compress_prefill(others, d_in.span(), ring_other.span(), shape,
                                               rows_other.span(), index_other.span(),
                                               positions_other.span(), verdict.span().data(),
                                               graph.stream())
                    .ok());
    ASSERT_EQ(cudaStreamSynchronize(graph.stream()), cudaSuccess);
  }
  ASSERT_TRUE(graph.replay());
  std::vector<std::uint16_t> want(rows * 4), got(rows * 4);
  std::vector<std::int32_t> index(rows), positions(rows), got_positions(rows);
  ASSERT_TRUE(cpu::compress_prefill(requests, projected, ring, shape, want, index, positions).ok());
  std::vector<cuda::DeviceVerdict> v(1);
  verdict.download(v);
  d_rows.download(got);
  d_positions.download(got_positions);
  EXPECT_TRUE(cuda::compress_verdict(v[0]).ok());
  EXPECT_EQ(got, want);
  EXPECT_EQ(got_positions, positions);
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

// A decode of 1200 requests (38400 bytes of requests, more than one upload kernel
// carries): its table is copied on a second stream while `projected` is checked,
// and the old ring entries are checked there. Waiting, queued and captured in a
// graph: a clean step equals the CPU; a non-finite old entry of a late request is
// refused and named, and with a non-finite value in `projected` as well that one is
// named (whichever check ran first); a refused step leaves rows, indices and ring
// as they were.
TEST(CompressCuda, a_decode_of_many_requests_checks_its_inputs_beside_its_table_copy) {
#ifdef AETHER_HAVE_CUDA
  if (!props::gpu_present()) GTEST_SKIP() << "no CUDA device visible";
  const std::size_t count = 1200, width = 8;
  const CompressShape shape{2, 4, 7, count};
  std::vector<CompressRequest> requests;
  std::size_t tokens = 0;
  for (std::size_t i = 0; i < count; ++i) {
    requests.push_back(
        {std::int32_t(count - 1 - i), std::int64_t(1001 + i % 4), std::int32_t(1 + i % 6)});
    tokens += std::size_t(requests.back().tokens);
  }
  std::mt19937 rng(43);
  std::normal_distribution<float> normal;
  std::vector<float> projected(tokens * width), ring(count * 7 * width);
  for (float& x : projected) x = normal(rng);
  for (float& x : ring) x = normal(rng);
  // request 1150 starts at 1003 (odd) and completes a row: it reads position 1002
  const CompressRequest& late = requests[1150];
  ASSERT_EQ(late.start % 2, 1);
  const std::size_t old_entry =
      (std::size_t(late.state_slot) * 7 + std::size_t((late.start - 1) % 7)) * width + 3;
  const std::size_t bad_input = (tokens - 2) * width + 6;
  struct Case {
    bool poison_ring, poison_input;
  };
  for (const Case c : {Case{false, false}, Case{true, false}, Case{true, true}}) {
    std::vector<float> in = projected, state = ring;
    if (c.poison_ring) state[old_entry] = INFINITY;
    if (c.poison_input) in[bad_input] = NAN;
    std::vector<float> want_ring = state;
    std::vector<std::uint16_t> want(tokens * 4);
    std::vector<std::int32_t> want_index(tokens), want_positions(tokens);
    const auto cpu =
        cpu::compress_decode(requests, in, want_ring, shape, want, want_index, want_positions);
    ASSERT_EQ(cpu.ok(), !c.poison_ring);
    if (c.poison_ring)
      ASSERT_EQ(cpu.error(), (CompressError{c.poison_input ? ce::NonFiniteInput{0, bad_input}
                                                           : ce::NonFiniteInput{1, old_entry}}));
    for (int mode = 0; mode < 3; ++mode) {  // waiting, queued, captured
      props::DeviceBuffer<float> d_in{std::span<const float>(in)},
          d_ring{std::span<const float>(state)};
      props::DeviceBuffer<std::uint16_t> d_rows{std::vector<std::uint16_t>(tokens * 4, 0x5a5a)};
      props::DeviceBuffer<std::int32_t> d_index{std::vector<std::int32_t>(tokens, 77)},
          d_positions{std::vector<std::int32_t>(tokens, 77)};
      props::DeviceBuffer<cuda::DeviceVerdict> verdict{std::vector<cuda::DeviceVerdict>(1)};
      const auto queue = [&](cudaStream_t stream) {
        return cuda::enqueue_compress_decode(requests, d_in.span(), d_ring.span(), shape,
                                             d_rows.span(), d_index.span(), d_positions.span(),
                                             verdict.span().data(), stream)
            .ok();
      };
      Status<CompressError> got = Ok{};
      if (mode == 0) {
        got = cuda::compress_decode(requests, d_in.span(), d_ring.span(), shape, d_rows.span(),
                                    d_index.span(), d_positions.span());
      } else {
        if (mode == 1) {
          ASSERT_TRUE(queue(nullptr));
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        } else {
          CapturedCalls graph(queue);
          ASSERT_TRUE(graph.ok());
          ASSERT_TRUE(graph.replay());
        }
        std::vector<cuda::DeviceVerdict> v(1);
        verdict.download(v);
        got = cuda::compress_verdict(v[0]);
      }
      std::vector<float> got_ring(state.size());
      std::vector<std::uint16_t> got_rows(tokens * 4);
      std::vector<std::int32_t> got_index(tokens);
      d_ring.download(got_ring);
      d_rows.download(got_rows);
      d_index.download(got_index);
      EXPECT_EQ(got, cpu) << "mode " << mode;
      EXPECT_EQ(std::memcmp(got_ring.data(), want_ring.data(), want_ring.size() * 4), 0)
          << "mode " << mode;
      if (cpu.ok()) {
        EXPECT_EQ(got_rows, want) << "mode " << mode;
        EXPECT_EQ(got_index, want_index) << "mode " << mode;
      } else {
        EXPECT_EQ(got_rows, std::vector<std::uint16_t>(tokens * 4, 0x5a5a)) << "mode " << mode;
        EXPECT_EQ(got_index, std::vector<std::int32_t>(tokens, 77)) << "mode " << mode;
      }
    }
  }
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

// Prefill at serving sizes, D 512, r 2, ring 7, against the CPU: 64 requests x 512
// tokens from an odd start (the benchmark's call, 16384 rows) and 72 x 1024 (36864
// rows, 288 MiB in), requests of three lengths. Then a NaN in the last row's input
// (a latent, then a score; refused, that index, nothing written) and one among a
// request's pending positions (which no row reads), each with an inf after it.
TEST(CompressCuda, large_prefills_equal_the_cpu_and_refuse_whole) {
#ifdef AETHER_HAVE_CUDA
  if (!props::gpu_present()) GTEST_SKIP() << "no CUDA device visible";
  for (const std::size_t requests_count : {64, 72}) {
    const std::int32_t tokens = requests_count == 64 ? 512 : 1024;
    const std::int64_t start =
        requests_count == 64 ? 1 : 0;  // an odd start reads a position from the ring
    const CompressShape shape{2, 512, 7, requests_count};
    const std::size_t width = 2 * shape.dim;
    std::vector<CompressRequest> requests;
    for (std::size_t i = 0; i < requests_count; ++i)
      requests.push_back({std::int32_t(i), start, tokens - std::int32_t(i % 3)});
    std::size_t rows = 0, token_count = 0;
    for (const auto& q : requests) {
      rows += std::size_t((q.start + q.tokens) / 2 - q.start / 2);
      token_count += std::size_t(q.tokens);
    }
    std::minstd_rand rng(23);
    std::uniform_real_distribution<float> uniform(-8.0f, 8.0f);
    std::vector<float> projected(token_count * width), ring(shape.state_slots * shape.ring * width);
    for (float& x : projected) x = uniform(rng);
    for (float& x : ring) x = uniform(rng);
    std::vector<float> cpu_ring = ring;
    std::vector<std::uint16_t> want(rows * shape.dim);
    std::vector<std::int32_t> want_index(rows), want_positions(rows);
    ASSERT_TRUE(cpu::compress_prefill(requests, projected, cpu_ring, shape, want, want_index,
                                      want_positions)
                    .ok());
    const auto gpu_call = [&](const std::vector<float>& in, std::vector<float>& ring_after,
                              std::vector<std::uint16_t>& out, std::vector<std::int32_t>& index,
                              std::vector<std::int32_t>& positions) {
      props::DeviceBuffer<float> d_in{std::span<const float>(in)},
          d_ring{std::span<const float>(ring)};
      props::DeviceBuffer<std::uint16_t> d_out{std::span<const std::uint16_t>(out)};
      props::DeviceBuffer<std::int32_t> d_index{std::span<const std::int32_t>(index)},
          d_positions{std::span<const std::int32_t>(positions)};
      const auto st =
          cuda::compress_prefill(requests, d_in.span(), d_ring.span(), shape, d_out.span(),
                                 d_index.span(), d_positions.span(), nullptr);
      d_ring.download(ring_after);
      d_out.download(out);
      d_index.download(index);
      d_positions.download(positions);
      return st;
    };
    std::vector<float> ring_after(ring.size());
    std::vector<std::uint16_t> got(want.size(), 0x5a5a);
    std::vector<std::int32_t> index(rows, 77), positions(rows, 77);
    ASSERT_TRUE(gpu_call(projected, ring_after, got, index, positions).ok()) << requests_count;
    EXPECT_TRUE(got == want) << requests_count << " requests: rows differ";
    EXPECT_EQ(index, want_index);
    EXPECT_EQ(positions, want_positions);
    EXPECT_EQ(std::memcmp(ring_after.data(), cpu_ring.data(), ring.size() * 4), 0)
        << requests_count;
    // the last request's last completed pair, its second latent's last channel; then
    // a pending position (a chunk that ends odd: request 0 of the first size, 1 + 512,
    // request 1 of the second, 0 + 1023)
    std::size_t last_pair = token_count - std::size_t(requests.back().tokens) +
                            std::size_t((start + requests.back().tokens) / 2 * 2 - 1 - start);
    const std::size_t pending_request =
        requests_count == 64 ? 0 : 1;  // 512 tokens from 1; 1023 from 0
    std::size_t pending = 0;
    for (std::size_t i = 0; i <= pending_request; ++i) pending += std::size_t(requests[i].tokens);
    // (and the last pair's first score in lane 2 of its 16-byte group: the index
    // names that lane, not the group's first)
    for (const std::size_t bad :
         {last_pair * width + width - 1, last_pair * width + 6, (pending - 1) * width + 3}) {
      std::vector<float> nan_in = projected;
      nan_in[bad] = NAN;
      if (bad + 1 < nan_in.size()) nan_in[bad + 1] = INFINITY;  // a later one is not the one named
      std::vector<std::uint16_t> untouched(want.size(), 0x5a5a);
      std::vector<std::int32_t> index_untouched(rows, 77), positions_untouched(rows, 77);
      const auto st = gpu_call(nan_in, ring_after, untouched, index_untouched, positions_untouched);
      ASSERT_FALSE(st.ok()) << requests_count << " requests, bad " << bad;
      EXPECT_EQ(st.error(), (CompressError{ce::NonFiniteInput{0, bad}}));
      EXPECT_TRUE(untouched == std::vector<std::uint16_t>(want.size(), 0x5a5a));
      EXPECT_EQ(index_untouched, std::vector<std::int32_t>(rows, 77));
      EXPECT_EQ(positions_untouched, std::vector<std::int32_t>(rows, 77));
      EXPECT_EQ(std::memcmp(ring_after.data(), ring.data(), ring.size() * 4), 0);
    }
  }
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

#ifdef AETHER_HAVE_CUDA
// One step from the same inputs on the CPU and on the device: the CPU backend's
// rows, indices, positions and ring are `want`; the device's copies of the inputs
// and of outputs filled with marks the call must overwrite go to `run` (the waiting
// call), `queue` (queued on a stream, its verdict kept) or a graph capturing
// `queue`. expect_the_cpu's(call) checks what the device left.
class StepOnBoth {
 public:
  StepOnBoth(std::vector<CompressRequest> requests, const CompressShape& shape, bool decode,
             const std::function<float()>& draw)
      : requests_(std::move(requests)), shape_(shape), decode_(decode) {
    std::size_t rows = 0, tokens = 0;
    for (const auto& q : requests_) {
      const std::int64_t r = shape.ratio;
      rows += decode
                  ? std::size_t(q.tokens)
                  : std::size_t(std::max<std::int64_t>(1, (q.start + q.tokens) / r - q.start / r));
      tokens += std::size_t(q.tokens);
    }
    std::vector<float> projected(tokens * 2 * shape.dim),
        ring(shape.state_slots * shape.ring * 2 * shape.dim);
    for (float& x : projected) x = draw();
    for (float& x : ring) x = draw();
    want_ring_ = ring;
    want_rows_.resize(rows * shape.dim);
    want_index_.resize(rows);
    want_positions_.resize(rows);
    const auto step = decode ? cpu::compress_decode : cpu::compress_prefill;
    cpu_ok_ =
        step(requests_, projected, want_ring_, shape, want_rows_, want_index_, want_positions_)
            .ok();
    in_ = std::make_unique<props::DeviceBuffer<float>>(std::span<const float>(projected));
    ring_ = std::make_unique<props::DeviceBuffer<float>>(std::span<const float>(ring));
    rows_ = std::make_unique<props::DeviceBuffer<std::uint16_t>>(
        std::vector<std::uint16_t>(rows * shape.dim, 0x5a5a));
    index_ =
        std::make_unique<props::DeviceBuffer<std::int32_t>>(std::vector<std::int32_t>(rows, 77));
    positions_ =
        std::make_unique<props::DeviceBuffer<std::int32_t>>(std::vector<std::int32_t>(rows, 77));
  }
  bool cpu_ok() const { return cpu_ok_; }
  bool run() {
    const auto step = decode_ ? cuda::compress_decode : cuda::compress_prefill;
    return step(requests_, in_->span(), ring_->span(), shape_, rows_->span(), index_->span(),
                positions_->span(), nullptr)
        .ok();
  }
  bool queue(cudaStream_t stream) {
    const auto step = decode_ ? cuda::enqueue_compress_decode : cuda::enqueue_compress_prefill;
    return step(requests_, in_->span(), ring_->span(), shape_, rows_->span(), index_->span(),
                positions_->span(), verdict_.span().data(), stream)
        .ok();
  }
  bool queued_verdict_clean() {
    std::vector<cuda::DeviceVerdict> v(1);
    verdict_.download(v);
    return cuda::compress_verdict(v[0]).ok();
  }
  void expect_the_cpu_s(const std::string& call) {
    std::vector<std::uint16_t> rows(want_rows_.size());
    std::vector<std::int32_t> index(want_index_.size()), positions(want_positions_.size());
    std::vector<float> ring(want_ring_.size());
    rows_->download(rows);
    index_->download(index);
    positions_->download(positions);
    ring_->download(ring);
    EXPECT_TRUE(rows == want_rows_) << call << ": rows differ";
    EXPECT_EQ(index, want_index_) << call;
    EXPECT_EQ(positions, want_positions_) << call;
    EXPECT_EQ(std::memcmp(ring.data(), want_ring_.data(), ring.size() * 4), 0) << call;
  }

 private:
  std::vector<CompressRequest> requests_;
  CompressShape shape_;
  bool decode_, cpu_ok_ = false;
  std::vector<float> want_ring_;
  std::vector<std::uint16_t> want_rows_;
  std::vector<std::int32_t> want_index_, want_positions_;
  std::unique_ptr<props::DeviceBuffer<float>> in_, ring_;
  std::unique_ptr<props::DeviceBuffer<std::uint16_t>> rows_;
  std::unique_ptr<props::DeviceBuffer<std::int32_t>> index_, positions_;
  props::DeviceBuffer<cuda::DeviceVerdict> verdict_{std::vector<cuda::DeviceVerdict>(1)};
};
#endif

// Every kernel path against the CPU: prefill and a decode step of 6 at D 512 and
// r = 1 and 2 (registers, the next 128 or 256 channels loaded during the current
// ones; prefill at 2 streams), r = 4 (registers) and r = 3 (one channel at a time),
// and r = 2 at D 1024 (eight streamed chunks a row); 16 requests each from starts
// that read old positions from the ring.
TEST(CompressCuda, every_kernel_path_at_d_512_and_1024_equals_the_cpu) {
#ifdef AETHER_HAVE_CUDA
  if (!props::gpu_present()) GTEST_SKIP() << "no CUDA device visible";
  std::minstd_rand rng(29);
  std::uniform_real_distribution<float> uniform(-8.0f, 8.0f);
  for (const auto& [r, dim] :
       {std::pair<std::int64_t, std::size_t>{1, 512}, {2, 512}, {2, 1024}, {3, 512}, {4, 512}})
    for (const bool decode : {false, true}) {
      const std::int32_t tokens = decode ? 6 : 64;
      std::vector<CompressRequest> requests;
      for (std::int32_t i = 0; i < 16; ++i) requests.push_back({15 - i, 1001 + i, tokens - i % 2});
      StepOnBoth step(requests, {r, dim, std::size_t(r + 6 - 1), 16}, decode,
                      [&] { return uniform(rng); });
      ASSERT_TRUE(step.cpu_ok());
      ASSERT_TRUE(step.run());
      step.expect_the_cpu_s((decode ? "decode at r " : "prefill at r ") + std::to_string(r) +
                            ", D " + std::to_string(dim));
    }
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

// A call's request table goes one of several ways by its length (docs/compress.md):
// in the kernels' parameters (up to 64 requests), stored by kernels carrying it in
// pieces of 4, 8, 16 or 32000 bytes' worth (up to 128, 256, 512 and 1000), else
// from a pinned mirror or, for decode, beside the check of `projected`. A prefill
// and a decode step at each length and one past it, waiting, queued and captured in
// a graph, equal the CPU: rows, indices, positions and ring.
TEST(CompressCuda, every_table_length_equals_the_cpu) {
#ifdef AETHER_HAVE_CUDA
  if (!props::gpu_present()) GTEST_SKIP() << "no CUDA device visible";
  enum class Way { Waiting, Queued, Captured };
  std::mt19937 rng(41);
  std::normal_distribution<float> normal;
  for (const std::size_t count : {64, 65, 128, 129, 256, 257, 512, 513, 1000, 1001})
    for (const bool decode : {false, true})
      for (const Way way : {Way::Waiting, Way::Queued, Way::Captured}) {
        std::vector<CompressRequest> requests;
        for (std::size_t i = 0; i < count; ++i)  // slots reversed, starts and lengths varied
          requests.push_back(
              {std::int32_t(count - 1 - i), std::int64_t(i % 5), std::int32_t(1 + i % 4)});
        StepOnBoth step(requests, {2, 4, 7, count}, decode, [&] { return normal(rng); });
        const char* how = way == Way::Waiting  ? "waiting"
                          : way == Way::Queued ? "queued"
                                               : "captured";
        const std::string call = std::string(decode ? "decode" : "prefill") + " of " +
                                 std::to_string(count) + " requests, " + how;
        ASSERT_TRUE(step.cpu_ok()) << call;
        if (way == Way::Waiting) {
          ASSERT_TRUE(step.run()) << call;
        } else if (way == Way::Queued) {
          ASSERT_TRUE(step.queue(nullptr)) << call;
          ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess) << call;
          EXPECT_TRUE(step.queued_verdict_clean()) << call;
        } else {
          CapturedCalls graph([&](cudaStream_t stream) { return step.queue(stream); });
          ASSERT_TRUE(graph.ok()) << call;
          ASSERT_TRUE(graph.replay()) << call;
          EXPECT_TRUE(step.queued_verdict_clean()) << call;
        }
        step.expect_the_cpu_s(call);
      }
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

INSTANTIATE_TEST_SUITE_P(Backends, Compress, ::testing::Values("cpu", "cuda", "cuda_queued"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace aether
