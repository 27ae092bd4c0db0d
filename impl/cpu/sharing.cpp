#include "impl/cpu/sharing.hpp"

#include <array>
#include <optional>
#include <vector>

namespace aether::cpu {

namespace {
namespace se = sharing_error;

// A layer's read settings per map, packed so that one array compare decides a map.
using Key = std::array<std::int64_t, 4>;
std::array<Key, kSharedObjects> keys_of(const LayerSettings& s) {
  return {Key{std::int64_t(s.kv_format), s.ratio, s.block_size, s.kv_dim},
          Key{std::int64_t(s.index_format), s.ratio, s.block_size, s.index_dim},
          Key{s.ratio, s.candidate_blocks, s.candidate_block, 0}, Key{s.ratio, s.topk, 0, 0}};
}
// The setting a differing key names: the first field that differs, in read order.
constexpr Setting kFields[kSharedObjects][4] = {
    {Setting::KvFormat, Setting::Ratio, Setting::BlockSize, Setting::KvDim},
    {Setting::IndexFormat, Setting::Ratio, Setting::BlockSize, Setting::IndexDim},
    {Setting::Ratio, Setting::CandidateBlocks, Setting::CandidateBlock, Setting::Ratio},
    {Setting::Ratio, Setting::Topk, Setting::Ratio, Setting::Ratio}};

bool valid(const LayerSettings& s) {
  const auto kv = cache_row_bytes(s.kv_format, s.kv_dim > 0 ? std::size_t(s.kv_dim) : 0);
  const auto index =
      cache_row_bytes(s.index_format, s.index_dim > 0 ? std::size_t(s.index_dim) : 0);
  return std::uint8_t(s.kv_format) <= 1 && std::uint8_t(s.index_format) >= 2 &&
         std::uint8_t(s.index_format) <= 3 && s.kv_dim > 0 && s.index_dim > 0 && kv > 0 &&
         index > 0 && s.ratio > 0 && s.block_size > 0 && s.block_size % s.ratio == 0 &&
         (s.topk | s.candidate_blocks | s.candidate_block) >= 0;
}

std::uint64_t round_up(std::uint64_t x, std::uint64_t a) { return a ? (x + a - 1) / a * a : x; }
}  // namespace

Status<SharingError> check_sharing(std::span<const LayerSettings> layers, const SharingMaps& maps) {
  const std::size_t n = layers.size();
  for (std::size_t l = 0; l < n; ++l)
    if (!valid(layers[l])) return se::BadSettings{l};
  for (std::size_t m = 0; m < kSharedObjects; ++m)
    if (maps.maps[m].size() != n) return se::ShapeMismatch{SharedObject(m), n, maps.maps[m].size()};
  std::vector<std::array<Key, kSharedObjects>> keys;
  keys.reserve(n);
  for (const LayerSettings& s : layers) keys.push_back(keys_of(s));
  // One pass over the layers; the first refusal of each map kept (maps are
  // reported in order, so a later map's refusal waits for the earlier maps').
  std::optional<SharingError> first[kSharedObjects];
  for (std::size_t l = 0; l < n; ++l)
    for (std::size_t m = 0; m < kSharedObjects; ++m) {
      if (first[m]) continue;
      const auto object = SharedObject(m);
      const std::int64_t s = maps.maps[m][l];
      if (s < 0 || s >= std::int64_t(n)) {
        first[m] = se::SourceOutOfRange{object, l, s};
      } else if (l == 0 && s != 0) {
        first[m] = se::FirstLayerReuses{object, s};
      } else if (s > std::int64_t(l)) {
        first[m] = se::SourceAfterLayer{object, l, s};
      } else if (maps.maps[m][std::size_t(s)] != s) {
        first[m] = se::SourceNotOwner{object, l, s};
      } else if (const Key& a = keys[l][m], &b = keys[std::size_t(s)][m]; a != b) {
        std::size_t f = 0;
        while (a[f] == b[f]) ++f;
        first[m] = se::SettingsDiffer{object, l, s, kFields[m][f]};
      }
    }
  for (const auto& e : first)
    if (e) return *e;
  for (std::size_t m = 1; m < kSharedObjects; ++m)
    for (std::size_t l = 0; l < n; ++l) {
      const auto& coarse = maps.maps[m - 1];
      if (coarse[std::size_t(maps.maps[m][l])] != coarse[l])
        return se::NotRefining{SharedObject(m), SharedObject(m - 1), l};
    }
  std::int64_t fresh = 0;  // KV sources from here on: the last YOCO boundary
  for (std::size_t l = 0; l < n; ++l) {
    fresh = layers[l].yoco_boundary ? std::int64_t(l) : fresh;
    if (maps[SharedObject::MainKv][l] < fresh)
      return se::YocoKvReuse{l, maps[SharedObject::MainKv][l]};
  }
  return Ok{};
}

Result<SharingAllocation, SharingError> sharing_allocation(std::span<const LayerSettings> layers,
                                                           const SharingMaps& maps,
                                                           std::uint64_t blocks,
                                                           std::uint64_t positions,
                                                           std::uint64_t alignment) {
  if (auto st = check_sharing(layers, maps); !st.ok()) return st.error();
  SharingAllocation a;
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const LayerSettings& s = layers[l];
    const std::uint64_t rows = std::uint64_t(s.block_size / s.ratio);
    const std::uint64_t region[kSharedObjects] = {
        blocks * round_up(rows * cache_row_bytes(s.kv_format, std::size_t(s.kv_dim)), alignment),
        blocks *
            round_up(rows * cache_row_bytes(s.index_format, std::size_t(s.index_dim)), alignment),
        round_up(positions * std::uint64_t(s.candidate_blocks) * 4, alignment),
        round_up(positions * std::uint64_t(s.topk) * 4, alignment)};
    for (std::size_t m = 0; m < kSharedObjects; ++m)
      if (maps.maps[m][l] == std::int32_t(l)) {  // owners only: a shared object counts once
        a.bytes[m] += region[m];
        a.owners[m] += 1;
        a.total += region[m];
      }
  }
  return a;
}

}  // namespace aether::cpu
