// Lab 27 of source 003 (A.4), verbatim, on the indexer's scorer: the model, the
// CPU in every key format, and the CUDA scorer with its tiles and refusals; then a
// call wide enough that each CUDA block streams several queries, on every backend.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>

#include "impl/cpu/indexer.hpp"
#include "model/indexer.hpp"
#include "props/support/indexer_backends.hpp"
#include "props/support/property.hpp"

namespace aether {
namespace {

using F = std::vector<float>;
namespace ie = indexer_error;

// The lab's five keys: the text gives (0, 3) -> 6 and (1, 1) -> 3 and prints the
// scores [2, 6, 3, 0, 300]; the other three keys are ours, consistent with them.
const F kQueries{1, 0, 0, 1};  // heads (1, 0) and (0, 1)
const F kWeights{1, 2};
const F kKeys{2, 0, 0, 3, 1, 1, -1, -1, 100, 100};
const F kScores{2, 6, 3, 0, 300};

TEST(IndexerModel, lab27_scores_are_the_weighted_relu_sum) {
  const auto scores = model::index_scores(kQueries, kWeights, kKeys, 2);
  ASSERT_TRUE(scores.ok());
  std::vector<model::Rational> want;
  for (float s : kScores) want.emplace_back(s);
  EXPECT_EQ(scores.value(), want);
  // A negative weight subtracts; a negative dot product is clipped first (001 §3).
  const auto mixed = model::index_scores(F{1, 0, 0, 1}, F{2, -1}, F{4, 3, -4, 3}, 2);
  EXPECT_EQ(mixed.value(), (std::vector<model::Rational>{5, -3}));
  EXPECT_EQ(model::index_scores(F{1, NAN}, F{1}, F{1, 1}, 2).error(),
            (IndexerError{ie::NonFiniteInput{0, 1}}));
}

// The lab's keys stored as F32, BF16 and E4M3 (doubled values with scale 1/2; the
// last key as (8, 8) with scale 12.5, since 100 has no E4M3 code): the CPU scorer
// gives the printed scores exactly.
struct LabKeys {
  std::vector<std::byte> f32, bf16, e4m3;
};
LabKeys lab_keys() {
  LabKeys k;
  k.f32.assign(std::as_bytes(std::span(kKeys)).begin(), std::as_bytes(std::span(kKeys)).end());
  auto& bf16 = k.bf16;
  auto& e4m3 = k.e4m3;
  const std::uint8_t e4m3_codes[5][2] = {
      {0x48, 0x00}, {0x00, 0x4c}, {0x40, 0x40}, {0xc0, 0xc0}, {0x50, 0x50}};
  const float scales[5] = {0.5f, 0.5f, 0.5f, 0.5f, 12.5f};
  for (std::size_t j = 0; j < 5; ++j) {
    for (std::size_t d = 0; d < 2; ++d) {
      const auto h = std::uint16_t(std::bit_cast<std::uint32_t>(kKeys[2 * j + d]) >> 16);
      const auto* p = reinterpret_cast<const std::byte*>(&h);
      bf16.insert(bf16.end(), p, p + 2);
      e4m3.push_back(std::byte(e4m3_codes[j][d]));
    }
    const auto* p = reinterpret_cast<const std::byte*>(&scales[j]);
    e4m3.insert(e4m3.end(), p, p + 4);
  }
  return k;
}

TEST(IndexerCpu, lab27_scores_in_every_key_format) {
  const LabKeys lab = lab_keys();
  for (const IndexKeys& keys :
       {IndexKeys{KeyFormat::F32, lab.f32, 2}, IndexKeys{KeyFormat::BF16, lab.bf16, 2},
        IndexKeys{KeyFormat::E4M3, lab.e4m3, 2}}) {
    F out(5, -7);
    ASSERT_TRUE(cpu::index_scores(kQueries, kWeights, keys, out).ok());
    EXPECT_EQ(out, kScores) << "format " << int(keys.format);
    std::vector<model::Rational> want(kScores.begin(), kScores.end());
    EXPECT_EQ(model::index_scores(kQueries, kWeights, keys).value(), want);
  }
}

// A batch on an integer grid: T queries of H heads, D dimensions, over L bf16 keys,
// the values small integers (queries in [-8, 8], weights in [-4, 4], keys in
// [-15, 15]), all exact in bf16.
struct GridCall {
  std::size_t T, H, D, L;
  F queries, weights, keys;
  std::vector<std::uint16_t> query_bits;
  std::vector<std::byte> key_bytes;
  GridCall(std::size_t t, std::size_t h, std::size_t d, std::size_t l)
      : T(t),
        H(h),
        D(d),
        L(l),
        queries(t * h * d),
        weights(t * h),
        keys(l * d),
        query_bits(t * h * d),
        key_bytes(l * d * 2) {
    for (std::size_t i = 0; i < queries.size(); ++i) {
      queries[i] = float(int(i * 37 % 17) - 8);
      query_bits[i] = std::uint16_t(std::bit_cast<std::uint32_t>(queries[i]) >> 16);
    }
    for (std::size_t i = 0; i < weights.size(); ++i) weights[i] = float(int(i * 11 % 9) - 4);
    for (std::size_t i = 0; i < keys.size(); ++i) {
      keys[i] = float(int(i * 13 % 31) - 15);
      const auto bits = std::uint16_t(std::bit_cast<std::uint32_t>(keys[i]) >> 16);
      std::memcpy(key_bytes.data() + 2 * i, &bits, 2);
    }
  }
  IndexKeys bf16_keys() const { return {KeyFormat::BF16, key_bytes, D}; }
  // query t's score of key j in doubles: exact while every partial sum stays below 2^53
  double score(std::size_t t, std::size_t j) const {
    double sum = 0;
    for (std::size_t h = 0; h < H; ++h) {
      double dot = 0;
      for (std::size_t d = 0; d < D; ++d)
        dot += double(queries[(t * H + h) * D + d]) * double(keys[j * D + d]);
      sum += double(weights[t * H + h]) * std::max(dot, 0.0);
    }
    return sum;
  }
};

// The CUDA scorer: the lab's printed scores from bf16 and E4M3 keys; a grid batch
// spanning several key tiles and query groups equal to the model bit for bit;
// what the device refuses.
TEST(IndexerCuda, lab27_scores_tiles_query_groups_and_refusals) {
#ifdef AETHER_HAVE_CUDA
  if (!props::gpu_present()) GTEST_SKIP() << "no CUDA device visible";
  const std::vector<std::uint16_t> lab_queries{0x3f80, 0, 0, 0x3f80};  // bf16 1, 0, 0, 1
  const LabKeys lab = lab_keys();
  for (const IndexKeys& keys :
       {IndexKeys{KeyFormat::BF16, lab.bf16, 2}, IndexKeys{KeyFormat::E4M3, lab.e4m3, 2}}) {
    F out(5, -7);
    const auto st = props::cuda_index_scores(lab_queries, kWeights, 1, keys, out);
    ASSERT_TRUE(st.ok()) << st.error();
    EXPECT_EQ(out, kScores) << "format " << int(keys.format);
  }

  // 2 key tiles; then D > 128 (the 16-slice kernel), an odd D (element-wise loads)
  // and H not a multiple of 16; then the widest D with 64 heads.
  struct Case {
    std::size_t T, H, D, L;
  };
  for (const Case& c : {Case{40, 5, 24, 300}, Case{3, 17, 201, 130}, Case{2, 64, 256, 40}}) {
    const GridCall g(c.T, c.H, c.D, c.L);
    F out(c.T * c.L, NAN);
    ASSERT_TRUE(props::cuda_index_scores(g.query_bits, g.weights, c.T, g.bf16_keys(), out).ok());
    const auto want = model::index_scores_batch(g.queries, g.weights, c.T, g.bf16_keys()).value();
    for (std::size_t i = 0; i < out.size(); ++i)
      ASSERT_EQ(model::exact(out[i]), want[i]) << "D " << c.D << " score " << i;
  }

  F untouched(5, -7);
  EXPECT_EQ(props::cuda_index_scores(lab_queries, kWeights, 1,
                                     IndexKeys{KeyFormat::F32, lab.f32, 2}, untouched)
                .error(),
            (IndexerError{ie::UnsupportedOnDevice{KeyFormat::F32, 2, 2}}));
  const std::vector<std::uint16_t> wide(257);
  EXPECT_EQ(props::cuda_index_scores(wide, F{1}, 1, IndexKeys{KeyFormat::BF16, {}, 257}, untouched)
                .error(),
            (IndexerError{ie::UnsupportedOnDevice{KeyFormat::BF16, 1, 257}}));
  const std::vector<std::uint16_t> many_heads(128 *
                                              256);  // 270 KB of tiles: more than a block holds
  EXPECT_EQ(props::cuda_index_scores(many_heads, F(128, 1.0f), 1,
                                     IndexKeys{KeyFormat::BF16, {}, 256}, untouched)
                .error(),
            (IndexerError{ie::UnsupportedOnDevice{KeyFormat::BF16, 128, 256}}));
  EXPECT_EQ(props::cuda_index_scores(lab_queries, F{1, NAN}, 1,
                                     IndexKeys{KeyFormat::BF16, lab.bf16, 2}, untouched)
                .error(),
            (IndexerError{ie::NonFiniteInput{1, 1}}));
  EXPECT_EQ(untouched, F(5, -7));
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

// 800 queries over 2 key tiles: T 2 past the resident blocks of any device up to 400
// SMs, so that every CUDA block streams several queries through its two query tiles,
// and the last block fewer; 40 heads of 72 dimensions, so that a query tile (48
// padded rows of 10 pieces of 16 bytes) takes the block's 256 threads twice and a
// thread's second piece, 25 rows on, wraps its chunk into the next row while that row
// is still a real head (rows 25 to 39). Every sum is exact in fp32 in any order
// (|score| <= 40 4 72 8 15 < 2^24), so each backend's score is the doubles' one.
GridCall wide_call() { return GridCall(800, 40, 72, 260); }
void expect_exact(const GridCall& c, const F& out, const char* backend) {
  ASSERT_EQ(out.size(), c.T * c.L);
  for (std::size_t t = 0; t < c.T; ++t)
    for (std::size_t j = 0; j < c.L; ++j)
      ASSERT_EQ(double(out[t * c.L + j]), c.score(t, j))
          << backend << " query " << t << " key " << j;
}

TEST(IndexerCpu, a_call_of_many_queries_is_exact_on_the_grid) {
  const GridCall c = wide_call();
  F out(c.T * c.L, NAN);
  ASSERT_TRUE(cpu::index_scores_batch(c.queries, c.weights, c.T, c.bf16_keys(), out).ok());
  expect_exact(c, out, "cpu");
}

// Zero heads appended (a zero query row, weight 0) leave every score's bits as they
// are: each adds an exact zero after the real heads to a sum that starts at +0. DoSA's
// CPU screens are padded so to the scorer's paced width (impl/cpu/dosa.cpp); the head
// counts cover every remainder of its blocks of six and four, with random floats so
// that each sum rounds.
TEST(IndexerCpu, zero_heads_padded_to_the_paced_width_change_no_bits) {
  EXPECT_EQ(cpu::index_scores_paced_heads(17), 18u);  // budget 16 and a_A
  EXPECT_EQ(cpu::index_scores_paced_heads(16), 16u);
  EXPECT_EQ(cpu::index_scores_paced_heads(13), 13u);  // a lone head beats a padded four
  std::minstd_rand rng(5);
  std::normal_distribution<float> normal;
  constexpr std::size_t dim = 24, count = 40;  // three 16-key tiles, the last partial
  F k(count * dim);
  for (float& x : k) x = normal(rng);
  std::vector<std::byte> bytes(k.size() * 4);
  std::memcpy(bytes.data(), k.data(), bytes.size());
  const IndexKeys keys{KeyFormat::F32, bytes, dim};
  for (std::size_t heads = 1; heads <= 20; ++heads) {
    const std::size_t paced = cpu::index_scores_paced_heads(heads);
    ASSERT_GE(paced, heads);
    F q(heads * dim), w(heads);
    for (float& x : q) x = normal(rng);
    for (float& x : w) x = normal(rng);
    F padded_q = q, padded_w = w;
    padded_q.resize(paced * dim, 0.0f);
    padded_w.resize(paced, 0.0f);
    F out(count), padded(count);
    ASSERT_TRUE(cpu::index_scores(q, w, keys, out).ok());
    ASSERT_TRUE(cpu::index_scores(padded_q, padded_w, keys, padded).ok());
    for (std::size_t j = 0; j < count; ++j)
      ASSERT_EQ(std::bit_cast<std::uint32_t>(out[j]), std::bit_cast<std::uint32_t>(padded[j]))
          << heads << " heads padded to " << paced << ", key " << j << ": " << out[j] << " against "
          << padded[j];
  }
}

TEST(IndexerCuda, blocks_of_several_queries_are_exact_on_the_grid) {
#ifdef AETHER_HAVE_CUDA
  if (!props::gpu_present()) GTEST_SKIP() << "no CUDA device visible";
  const GridCall c = wide_call();
  F out(c.T * c.L, NAN);
  ASSERT_TRUE(props::cuda_index_scores(c.query_bits, c.weights, c.T, c.bf16_keys(), out).ok());
  expect_exact(c, out, "cuda");
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

}  // namespace
}  // namespace aether
