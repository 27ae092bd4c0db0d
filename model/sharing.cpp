#include "model/sharing.hpp"

namespace aether::model {

namespace {
namespace se = sharing_error;

constexpr SharedObject kMaps[] = {SharedObject::MainKv, SharedObject::IndexKeys,
                                  SharedObject::CandidateBlocks, SharedObject::Indices};

std::int64_t value_of(const LayerSettings& s, Setting setting) {
  switch (setting) {
    case Setting::KvFormat:
      return std::int64_t(s.kv_format);
    case Setting::IndexFormat:
      return std::int64_t(s.index_format);
    case Setting::Ratio:
      return s.ratio;
    case Setting::BlockSize:
      return s.block_size;
    case Setting::KvDim:
      return s.kv_dim;
    case Setting::IndexDim:
      return s.index_dim;
    case Setting::Topk:
      return s.topk;
    case Setting::CandidateBlocks:
      return s.candidate_blocks;
    case Setting::CandidateBlock:
      return s.candidate_block;
  }
  return 0;
}

// A main format for the KV, an index format for the keys, whole scale groups,
// whole rows in a block, no negative counts.
bool holds(const LayerSettings& s) {
  const bool main_kv = s.kv_format == CacheFormat::MainFp8 || s.kv_format == CacheFormat::MainFp4;
  const bool index =
      s.index_format == CacheFormat::IndexFp4 || s.index_format == CacheFormat::IndexFp8;
  return main_kv && index && s.ratio >= 1 && s.block_size >= 1 && s.block_size % s.ratio == 0 &&
         s.kv_dim > 0 && s.index_dim > 0 &&
         cache_row_bytes(s.kv_format, std::size_t(s.kv_dim)) > 0 &&
         cache_row_bytes(s.index_format, std::size_t(s.index_dim)) > 0 && s.topk >= 0 &&
         s.candidate_blocks >= 0 && s.candidate_block >= 0;
}

// ceil(x / a) a
std::uint64_t aligned(std::uint64_t x, std::uint64_t a) { return a == 0 ? x : (x + a - 1) / a * a; }
}  // namespace

std::vector<Setting> read_settings(SharedObject map) {
  switch (map) {
    case SharedObject::MainKv:
      return {Setting::KvFormat, Setting::Ratio, Setting::BlockSize, Setting::KvDim};
    case SharedObject::IndexKeys:
      return {Setting::IndexFormat, Setting::Ratio, Setting::BlockSize, Setting::IndexDim};
    case SharedObject::CandidateBlocks:
      return {Setting::Ratio, Setting::CandidateBlocks, Setting::CandidateBlock};
    case SharedObject::Indices:
      return {Setting::Ratio, Setting::Topk};
  }
  return {};
}

Status<SharingError> check_sharing(std::span<const LayerSettings> layers, const SharingMaps& maps) {
  const std::size_t n = layers.size();
  for (std::size_t l = 0; l < n; ++l)
    if (!holds(layers[l])) return se::BadSettings{l};
  for (SharedObject m : kMaps)
    if (maps[m].size() != n) return se::ShapeMismatch{m, n, maps[m].size()};
  for (SharedObject m : kMaps) {
    const auto& map = maps[m];
    for (std::size_t l = 0; l < n; ++l) {
      const std::int64_t s = map[l];
      if (s < 0 || s >= std::int64_t(n)) return se::SourceOutOfRange{m, l, s};
      if (l == 0 && s != 0) return se::FirstLayerReuses{m, s};
      if (s > std::int64_t(l)) return se::SourceAfterLayer{m, l, s};
      if (map[std::size_t(s)] != s) return se::SourceNotOwner{m, l, s};
      for (Setting setting : read_settings(m))
        if (value_of(layers[l], setting) != value_of(layers[std::size_t(s)], setting))
          return se::SettingsDiffer{m, l, s, setting};
    }
  }
  // each map refines the one before it: coarse[fine[l]] == coarse[l]
  for (std::size_t i = 1; i < std::size(kMaps); ++i) {
    const auto &fine = maps[kMaps[i]], &coarse = maps[kMaps[i - 1]];
    for (std::size_t l = 0; l < n; ++l)
      if (coarse[std::size_t(fine[l])] != coarse[l])
        return se::NotRefining{kMaps[i], kMaps[i - 1], l};
  }
  std::int64_t boundary = 0;  // the latest YOCO boundary at or before the layer
  for (std::size_t l = 0; l < n; ++l) {
    if (layers[l].yoco_boundary) boundary = std::int64_t(l);
    const std::int64_t s = maps[SharedObject::MainKv][l];
    if (s < boundary) return se::YocoKvReuse{l, s};
  }
  return Ok{};
}

std::size_t owner(const SharingMaps& maps, SharedObject map, std::size_t layer) {
  return std::size_t(maps[map][layer]);
}

// (block_size / ratio) row_bytes
std::uint64_t block_payload_bytes(CacheFormat format, std::size_t dim, std::int64_t block_size,
                                  std::int64_t ratio) {
  return std::uint64_t(block_size / ratio) * cache_row_bytes(format, dim);
}

Result<SharingAllocation, SharingError> sharing_allocation(std::span<const LayerSettings> layers,
                                                           const SharingMaps& maps,
                                                           std::uint64_t blocks,
                                                           std::uint64_t positions,
                                                           std::uint64_t alignment) {
  if (auto st = check_sharing(layers, maps); !st.ok()) return st.error();
  SharingAllocation a;
  for (SharedObject m : kMaps)
    for (std::size_t l = 0; l < layers.size(); ++l) {
      if (owner(maps, m, l) != l) continue;  // a consumer allocates nothing of its own
      const LayerSettings& s = layers[l];
      std::uint64_t bytes = 0;
      switch (m) {
        case SharedObject::MainKv:
          bytes = blocks * aligned(block_payload_bytes(s.kv_format, std::size_t(s.kv_dim),
                                                       s.block_size, s.ratio),
                                   alignment);
          break;
        case SharedObject::IndexKeys:
          bytes = blocks * aligned(block_payload_bytes(s.index_format, std::size_t(s.index_dim),
                                                       s.block_size, s.ratio),
                                   alignment);
          break;
        case SharedObject::CandidateBlocks:
          bytes = aligned(positions * std::uint64_t(s.candidate_blocks) * 4, alignment);
          break;
        case SharedObject::Indices:
          bytes = aligned(positions * std::uint64_t(s.topk) * 4, alignment);
          break;
      }
      a.bytes[std::size_t(m)] += bytes;
      a.owners[std::size_t(m)] += 1;
      a.total += bytes;
    }
  return a;
}

}  // namespace aether::model
