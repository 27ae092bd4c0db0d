// Source 003 A.5 and A.6 verbatim on the model and the CPU: the formats' bytes per
// row and per C2 block, the four-layer sharing example, and each rule's refusal
// on a minimal map set.
#include <gtest/gtest.h>

#include <functional>

#include "api/compress.hpp"
#include "impl/cpu/sharing.hpp"
#include "model/sharing.hpp"

namespace aether {
namespace {

using V = std::vector<std::int32_t>;
using L = std::vector<LayerSettings>;
namespace se = sharing_error;
using Check =
    std::function<Status<SharingError>(std::span<const LayerSettings>, const SharingMaps&)>;
const Check kModel = model::check_sharing, kCpu = cpu::check_sharing;

SharingMaps maps_of(V kv, V index_k, V candidates, V indices) {
  SharingMaps m;
  m[SharedObject::MainKv] = std::move(kv);
  m[SharedObject::IndexKeys] = std::move(index_k);
  m[SharedObject::CandidateBlocks] = std::move(candidates);
  m[SharedObject::Indices] = std::move(indices);
  return m;
}

// A.5's table: data plus scales, per row.
TEST(Sharing, rows_count_data_and_scales) {
  EXPECT_EQ(cache_row_bytes(CacheFormat::MainFp8, 512), 512u + 512 / 32);  // 528
  EXPECT_EQ(cache_row_bytes(CacheFormat::MainFp8, 512), 528u);
  EXPECT_EQ(cache_row_bytes(CacheFormat::MainFp4, 512), 288u);   // 512/2 + 512/16
  EXPECT_EQ(cache_row_bytes(CacheFormat::IndexFp4, 128), 68u);   // 128/2 + 128/32
  EXPECT_EQ(cache_row_bytes(CacheFormat::IndexFp8, 128), 132u);  // 128 + one fp32
  EXPECT_EQ(cache_row_bytes(CacheFormat::MainFp8, 500), 0u);     // not whole scale groups
}

// A.5: a 128-position C2 block has 64 row slots: 64 x 528 = 33,792 bytes of FP8 main,
// 18,432 of FP4 main, 64 x 68 = 4,352 of FP4 index; the 28,672-byte compression
// state is a separate per-request allocation (api/compress.hpp).
TEST(Sharing, a_c2_block_of_128_positions) {
  EXPECT_EQ(model::block_payload_bytes(CacheFormat::MainFp8, 512, 128, 2), 33792u);
  EXPECT_EQ(model::block_payload_bytes(CacheFormat::MainFp4, 512, 128, 2), 18432u);
  EXPECT_EQ(model::block_payload_bytes(CacheFormat::IndexFp4, 128, 128, 2), 4352u);
  EXPECT_EQ(state_payload_bytes(7, 512), 28672u);
}

// A.6: main KV [0,0,0,0], index keys [0,0,2,2], indices [0,1,2,3] (candidate blocks
// each their own): each finer segment inside a coarser one. Owners and what they
// allocate, a shared object counted once.
TEST(Sharing, the_four_layer_example) {
  LayerSettings s;
  s.ratio = 2;
  const L layers(4, s);
  const SharingMaps maps = maps_of({0, 0, 0, 0}, {0, 0, 2, 2}, {0, 1, 2, 3}, {0, 1, 2, 3});
  for (const Check& check : {kModel, kCpu}) EXPECT_TRUE(check(layers, maps).ok());
  EXPECT_EQ(model::owner(maps, SharedObject::IndexKeys, 3), 2u);
  EXPECT_EQ(model::owner(maps, SharedObject::MainKv, 3), 0u);
  const auto a = model::sharing_allocation(layers, maps, 10, 1, 0).value();
  EXPECT_EQ(a.bytes[0], 10u * 33792);     // one main KV owner
  EXPECT_EQ(a.bytes[1], 2u * 10 * 4352);  // index keys owned by layers 0 and 2
  EXPECT_EQ(a.bytes[3], 4u * 2048 * 4);   // every layer its own indices
  EXPECT_EQ(a.total, 10u * 33792 + 2u * 10 * 4352 + 4u * 2048 * 4);
  EXPECT_EQ(cpu::sharing_allocation(layers, maps, 10, 1, 0).value(), a);
  // rounded to 4096-byte regions: 33,792 -> 36,864 and 4,352 -> 8,192
  const auto b = model::sharing_allocation(layers, maps, 1, 1, 4096).value();
  EXPECT_EQ(b.bytes[0], 36864u);
  EXPECT_EQ(b.bytes[1], 2u * 8192);
  EXPECT_EQ(cpu::sharing_allocation(layers, maps, 1, 1, 4096).value(), b);
}

// Each rule refused on a minimal map set, by model and CPU alike.
TEST(Sharing, each_rule_refused) {
  const LayerSettings s;
  const auto expect = [](const L& layers, const SharingMaps& maps, SharingError want) {
    for (const Check& check : {kModel, kCpu}) {
      const auto got = check(layers, maps);
      ASSERT_FALSE(got.ok());
      EXPECT_EQ(got.error(), want);
    }
  };
  const V own2{0, 1};
  LayerSettings odd = s;
  odd.kv_dim = 500;  // not whole scale groups
  expect({s, odd}, maps_of(own2, own2, own2, own2), se::BadSettings{1});
  expect({s, s}, maps_of(own2, {0}, own2, own2), se::ShapeMismatch{SharedObject::IndexKeys, 2, 1});
  expect({s, s}, maps_of({0, 5}, own2, own2, own2),
         se::SourceOutOfRange{SharedObject::MainKv, 1, 5});
  expect({s, s}, maps_of({1, 1}, own2, own2, own2), se::FirstLayerReuses{SharedObject::MainKv, 1});
  expect({s, s, s}, maps_of({0, 2, 2}, {0, 1, 2}, {0, 1, 2}, {0, 1, 2}),
         se::SourceAfterLayer{SharedObject::MainKv, 1, 2});
  expect({s, s, s}, maps_of({0, 0, 1}, {0, 1, 2}, {0, 1, 2}, {0, 1, 2}),
         se::SourceNotOwner{SharedObject::MainKv, 2, 1});
  // equal page bytes are not enough: 64 rows a block either way, but the ratio differs
  LayerSettings coarser = s;
  coarser.ratio = 2;
  coarser.block_size = 128;
  LayerSettings finer = s;
  finer.ratio = 4;
  finer.block_size = 256;
  expect({coarser, finer}, maps_of({0, 0}, own2, own2, own2),
         se::SettingsDiffer{SharedObject::MainKv, 1, 0, Setting::Ratio});
  // index keys shared across two main-KV segments
  expect({s, s, s}, maps_of({0, 0, 2}, {0, 0, 0}, {0, 1, 2}, {0, 1, 2}),
         se::NotRefining{SharedObject::IndexKeys, SharedObject::MainKv, 2});
  // refinement checked the right way round: finer maps may not be coarser
  expect({s, s}, maps_of({0, 1}, {0, 1}, {0, 1}, {0, 0}),
         se::NotRefining{SharedObject::Indices, SharedObject::CandidateBlocks, 1});
  LayerSettings boundary = s;
  boundary.yoco_boundary = true;
  expect({s, boundary}, maps_of({0, 0}, own2, own2, own2), se::YocoKvReuse{1, 0});
  // after the boundary too: a cross-decoder layer reads KV from the boundary on
  expect({s, boundary, s}, maps_of({0, 1, 0}, {0, 1, 2}, {0, 1, 2}, {0, 1, 2}),
         se::YocoKvReuse{2, 0});
}

}  // namespace
}  // namespace aether
