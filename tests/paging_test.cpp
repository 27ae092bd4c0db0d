// Lab 27's paged-slot conversion (source 003 A.4.3), verbatim, on every backend,
// and the refusals (docs/paging.md says which lanes map to -1 and which refuse).
#include <gtest/gtest.h>

#include <random>

#include "impl/cpu/paging.hpp"
#include "model/paging.hpp"
#include "props/support/paging_backends.hpp"
#include "props/support/property.hpp"

namespace aether {
namespace {

using V = std::vector<std::int32_t>;
namespace pe = paging_error;

class Paging : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam().starts_with("cuda") && !props::gpu_present())
      GTEST_SKIP() << "no CUDA device visible";
    for (auto& b : props::all_paging_backends())
      if (b.name == GetParam()) backend = b;
  }
  props::PagingBackend backend;
};

TEST_P(Paging, lab27_decode_rows_to_slots) {
  // B = 8, r = 2, Bc = 4, block table [7, 2]: rows 1, 2, 4 -> 29, 30, 8; padding stays -1.
  V out(4, 77);
  ASSERT_TRUE(backend.slots(V{1, 2, 4, -1}, 4, V{3}, V{7, 2}, 2, 8, 2, out).ok());
  EXPECT_EQ(out, (V{29, 30, 8, -1}));
  // The same with the padding lane counted valid: -1 still stays -1.
  ASSERT_TRUE(backend.slots(V{1, 2, 4, -1}, 4, V{4}, V{7, 2}, 2, 8, 2, out).ok());
  EXPECT_EQ(out, (V{29, 30, 8, -1}));
  // The masked conversion gives the same slots: nothing here is refused.
  V masked(4, 77);
  ASSERT_TRUE(backend.masked(V{1, 2, 4, -1}, 4, V{3}, V{7, 2}, 2, 8, 2, masked).ok());
  EXPECT_EQ(masked, (V{29, 30, 8, -1}));
}

TEST_P(Paging, lanes_past_the_valid_count_are_minus_one_whatever_they_hold) {
  V out(4, 77);
  ASSERT_TRUE(backend.slots(V{1, 999, -5, 3}, 4, V{1}, V{7, 2}, 2, 8, 2, out).ok());
  EXPECT_EQ(out, (V{29, -1, -1, -1}));
  ASSERT_TRUE(backend.slots(V{1, 2, 4, 5}, 2, V{-3, 9}, V{7, 2, 0, 1}, 2, 8, 2, out).ok());
  EXPECT_EQ(out, (V{-1, -1, 4, 5}));  // negative count: no valid lane; 9 > K: all valid
}

TEST_P(Paging, in_place_conversion_matches) {
  V buf{1, 2, 4, -1};
  ASSERT_TRUE(backend.slots(buf, 4, V{3}, V{7, 2}, 2, 8, 2, buf).ok());
  EXPECT_EQ(buf, (V{29, 30, 8, -1}));
  V masked{1, 8, 4, 3};  // lane 1 outside the table, lane 3 past the valid count
  ASSERT_TRUE(backend.masked(masked, 4, V{3}, V{7, 2}, 2, 8, 2, masked).ok());
  EXPECT_EQ(masked, (V{29, -1, 8, -1}));
}

// What the conversion refuses lane by lane, the masked one maps to -1 and carries
// on (docs/paging.md); a bad geometry or shape it refuses the same way, writing
// nothing.
TEST_P(Paging, the_masked_conversion_maps_each_refused_lane_to_minus_one) {
  const auto masked = [&](const V& rows, std::size_t k, const V& counts, const V& table,
                          std::size_t per, std::int64_t b, std::int64_t r) {
    V out(rows.size(), 77);
    EXPECT_TRUE(backend.masked(rows, k, counts, table, per, b, r, out).ok());
    return out;
  };
  EXPECT_EQ(masked({1, 8, 2}, 3, {3}, {7, 2}, 2, 8, 2), (V{29, -1, 30}));   // row past the table
  EXPECT_EQ(masked({1, -2, 2}, 3, {3}, {7, 2}, 2, 8, 2), (V{29, -1, 30}));  // row below -1
  EXPECT_EQ(masked({1, 4, 5}, 3, {3}, {7, -1}, 2, 8, 2), (V{29, -1, -1}));  // negative block
  EXPECT_EQ(masked({1, 0}, 2, {2}, {0x7fffffff}, 1, 8, 2), (V{-1, -1}));    // slots past INT32_MAX
  EXPECT_EQ(masked({3, 0}, 2, {2}, {0x1fffffff}, 1, 8, 2),
            (V{0x7fffffff, 0x7ffffffc}));                                 // INT32_MAX itself
  EXPECT_EQ(masked({0, 3}, 2, {2}, {0x20000000}, 1, 8, 2), (V{-1, -1}));  // and one past it
  const std::int64_t huge = std::int64_t(1) << 33;  // Bc = 2^33: only block 0 holds a slot
  EXPECT_EQ(masked({5, 0}, 2, {2}, {0x7fffffff}, 1, huge, 1), (V{-1, -1}));
  EXPECT_EQ(masked({5, 0}, 2, {2}, {1}, 1, huge, 1), (V{-1, -1}));
  EXPECT_EQ(masked({5, 0}, 2, {2}, {0}, 1, huge, 1), (V{5, 0}));
  for (const auto& [b, r] : {std::pair<std::int64_t, std::int64_t>{8, 3}, {8, 0}, {1, 2}}) {
    V out(1, 77);
    const auto st = backend.masked(V{1}, 1, V{1}, V{7}, 1, b, r, out);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error(), (PagingError{pe::BadGeometry{b, r}}));
    EXPECT_EQ(out, V(1, 77));
  }
  V out(2, 77);
  const auto st = backend.masked(V{1, 2}, 1, V{1}, V{7}, 1, 8, 2, out);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error(), (PagingError{pe::ShapeMismatch{1, 2}}));
  EXPECT_EQ(out, V(2, 77));
}

TEST_P(Paging, malformed_calls_are_refused_with_the_models_error) {
  auto refused = [&](const V& rows, std::size_t k, const V& counts, const V& table, std::size_t per,
                     std::int64_t b, std::int64_t r, PagingError want) {
    V out(rows.size(), 77);
    const auto st = backend.slots(rows, k, counts, table, per, b, r, out);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error(), want);
    const bool data = std::holds_alternative<pe::RowOutsideTable>(want) ||
                      std::holds_alternative<pe::BadBlock>(want);
    if (!data || backend.transactional) EXPECT_EQ(out, V(rows.size(), 77));  // else unspecified
  };
  refused({1}, 1, {1}, {7}, 1, 8, 3, pe::BadGeometry{8, 3});
  refused({1}, 1, {1}, {7}, 1, 8, 0, pe::BadGeometry{8, 0});
  refused({1}, 1, {1}, {7}, 1, 1, 2, pe::BadGeometry{1, 2});
  refused({1, 2}, 1, {1}, {7}, 1, 8, 2, pe::ShapeMismatch{1, 2});
  refused({1, 8}, 2, {2}, {7, 2}, 2, 8, 2, pe::RowOutsideTable{1, 8});
  refused({1, -2}, 2, {2}, {7, 2}, 2, 8, 2, pe::RowOutsideTable{1, -2});
  refused({1, 4}, 2, {2}, {7, -1}, 2, 8, 2, pe::BadBlock{1, -1});
  refused({1}, 1, {1}, {0x7fffffff}, 1, 8, 2, pe::BadBlock{0, 0x7fffffff});
  refused({0}, 1, {1}, {0x20000000}, 1, 8, 2,
          pe::BadBlock{0, 0x20000000});  // slot 2^31: one past INT32_MAX
  // Bc = 2^33: block Bc wraps 64 bits for this block, and is still refused.
  refused({5, 0}, 2, {2}, {0x7fffffff}, 1, std::int64_t(1) << 33, 1, pe::BadBlock{0, 0x7fffffff});
  refused({5, 0}, 2, {2}, {1}, 1, std::int64_t(1) << 33, 1,
          pe::BadBlock{0, 1});  // block 1: 2^33 + 5
}

// Past lab size: three calls (2, 19 and 42 MiB of lanes at the first geometry),
// each equal to the model lane for lane (the model itself to the CPU backend), then
// refused at two lanes (the lower reported; out untouched where the backend is
// transactional, the model's and the CPU's).
// Three geometries: the benchmark's (powers of two); an odd K (quads straddle
// requests) with Bc = 1000003, so rows and slots reach near 2^31 (the CUDA
// kernels divide by multiplying); and a small K, so a block of the CUDA kernels
// spans many requests.
TEST_P(Paging, large_calls_match_the_model_and_name_the_first_refused_lane) {
  struct Geometry {
    std::size_t k, per;
    std::int64_t block_tokens, ratio;
    std::int32_t most_block;  // keeps every slot below 2^31
    std::size_t scale;        // requests are 300, 2700 and 6000 times this
  };
  for (const Geometry geo :
       {Geometry{2048, 1024, 64, 4, 1 << 20, 1}, Geometry{2047, 2000, 3000009, 3, 2100, 1},
        Geometry{100, 16, 64, 4, 1 << 20, 20}}) {
    const std::size_t k = geo.k, per = geo.per;
    const std::int64_t bc = geo.block_tokens / geo.ratio, rows_in_table = std::int64_t(per) * bc;
    const auto slots = [&](const V& rows, const V& counts, const V& tables, V& out) {
      return backend.slots(rows, k, counts, tables, per, geo.block_tokens, geo.ratio, out);
    };
    for (const std::size_t requests : {300 * geo.scale, 2700 * geo.scale, 6000 * geo.scale}) {
      std::mt19937 rng(5);
      std::uniform_int_distribution<std::int32_t> row(-1, std::int32_t(rows_in_table - 1)),
          block(0, geo.most_block);
      V rows(requests * k), counts(requests), tables(requests * per);
      for (auto& r : rows) r = row(rng);
      for (auto& b : tables) b = block(rng);
      for (std::size_t n = 0; n < requests; ++n) counts[n] = std::int32_t((n * 37) % (k + 1));
      V want(rows.size()), got(rows.size(), 77);
      if (backend.name == "model") {
        ASSERT_TRUE(
            cpu::paged_slots(rows, k, counts, tables, per, geo.block_tokens, geo.ratio, want).ok());
      } else {
        auto exact = model::paged_slots(rows, k, counts, tables, per, geo.block_tokens, geo.ratio);
        ASSERT_TRUE(exact.ok());
        want = exact.value();
      }
      ASSERT_TRUE(slots(rows, counts, tables, got).ok()) << requests;
      EXPECT_EQ(got, want) << requests << " requests, K " << k;
      const std::size_t late = rows.size() - 5, early = rows.size() / 2 + 7;  // both valid lanes
      counts[late / k] = counts[early / k] = std::int32_t(k);
      rows[late] = std::int32_t(rows_in_table), rows[early] = -9;
      V untouched(rows.size(), 77);
      const auto st = slots(rows, counts, tables, untouched);
      ASSERT_FALSE(st.ok());
      EXPECT_EQ(st.error(), (PagingError{pe::RowOutsideTable{early, -9}}))
          << requests << " requests, K " << k;
      if (backend.transactional) EXPECT_EQ(untouched, V(rows.size(), 77));
      // The masked conversion of the same lanes: the model's, the two bad lanes -1.
      auto exact_masked =
          model::paged_slots_masked(rows, k, counts, tables, per, geo.block_tokens, geo.ratio);
      ASSERT_TRUE(exact_masked.ok());
      EXPECT_EQ(exact_masked.value()[early], -1);
      EXPECT_EQ(exact_masked.value()[late], -1);
      V masked(rows.size(), 77);
      ASSERT_TRUE(
          backend.masked(rows, k, counts, tables, per, geo.block_tokens, geo.ratio, masked).ok());
      EXPECT_EQ(masked, exact_masked.value()) << requests << " requests, K " << k;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Paging, ::testing::Values("model", "cpu", "cuda", "cuda_queued"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace aether
