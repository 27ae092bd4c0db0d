// Vocabulary of cross-layer sharing (source 003 A.5, A.6): the cache formats' row
// byte counts, a layer's settings, the four layer -> source maps, and the
// refusals of a map set that a forward pass could not run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <variant>
#include <vector>

#include "api/result.hpp"

namespace aether {

// Cache row formats (A.5): main/SWA FP8 (E4M3, one UE8M0 scale per 32, 528 bytes
// at D 512), main FP4 (E2M1, one E4M3 scale per 16, 288 bytes at D 512), index FP4
// (E2M1, one UE8M0 scale per 32, 68 bytes at D 128) and the indexer's FP8 key
// (E4M3 and one fp32 scale, 132 bytes at D 128).
enum class CacheFormat : std::uint8_t { MainFp8, MainFp4, IndexFp4, IndexFp8 };

// Bytes of one row of `dim` elements: data plus scales; 0 when dim is not a whole
// number of scale groups (32 for the UE8M0 formats, 16 for main FP4).
constexpr std::size_t cache_row_bytes(CacheFormat format, std::size_t dim) {
  switch (format) {
    case CacheFormat::MainFp8:
      return dim % 32 == 0 ? dim + dim / 32 : 0;
    case CacheFormat::MainFp4:
      return dim % 16 == 0 ? dim / 2 + dim / 16 : 0;
    case CacheFormat::IndexFp4:
      return dim % 32 == 0 ? dim / 2 + dim / 32 : 0;
    case CacheFormat::IndexFp8:
      return dim + 4;
  }
  return 0;
}

// The four maps of A.6, coarsest first: each refines the one before it.
enum class SharedObject : std::uint8_t { MainKv, IndexKeys, CandidateBlocks, Indices };
inline constexpr std::size_t kSharedObjects = 4;

// What a layer computes with; a consumer must agree with its source on the
// settings its shared object is read with (SharingError::SettingsDiffer).
struct LayerSettings {
  CacheFormat kv_format = CacheFormat::MainFp8, index_format = CacheFormat::IndexFp4;
  std::int64_t ratio = 4;         // compression ratio r: positions a compressed row covers
  std::int64_t block_size = 128;  // positions a cache block holds
  std::int64_t kv_dim = 512, index_dim = 128;
  std::int64_t topk = 2048;           // selected indices a query position
  std::int64_t candidate_blocks = 0;  // candidate blocks a query position keeps
  std::int64_t candidate_block = 0;   // positions a candidate block covers
  bool yoco_boundary = false;         // the first cross-decoder layer: a fresh KV source
  friend bool operator==(const LayerSettings&, const LayerSettings&) = default;
};

// The settings a shared object is read with.
enum class Setting : std::uint8_t {
  KvFormat,
  IndexFormat,
  Ratio,
  BlockSize,
  KvDim,
  IndexDim,
  Topk,
  CandidateBlocks,
  CandidateBlock
};

// layer -> source layer, one vector a map, indexed by SharedObject.
struct SharingMaps {
  std::vector<std::int32_t> maps[kSharedObjects];
  std::vector<std::int32_t>& operator[](SharedObject o) { return maps[std::size_t(o)]; }
  const std::vector<std::int32_t>& operator[](SharedObject o) const { return maps[std::size_t(o)]; }
};

inline const char* name_of(SharedObject o) {
  constexpr const char* names[] = {"MainKv", "IndexKeys", "CandidateBlocks", "Indices"};
  return names[std::size_t(o)];
}
inline const char* name_of(Setting s) {
  constexpr const char* names[] = {"KvFormat",  "IndexFormat",     "Ratio",
                                   "BlockSize", "KvDim",           "IndexDim",
                                   "Topk",      "CandidateBlocks", "CandidateBlock"};
  return names[std::size_t(s)];
}
namespace sharing_error {
// A map's length is not the layer count.
struct ShapeMismatch {
  SharedObject map;
  std::size_t expected, actual;
  friend bool operator==(const ShapeMismatch&, const ShapeMismatch&) = default;
};
// A source outside [0, layers).
struct SourceOutOfRange {
  SharedObject map;
  std::size_t layer;
  std::int64_t source;
  friend bool operator==(const SourceOutOfRange&, const SourceOutOfRange&) = default;
};
// Layer 0 takes a source other than itself: it has nothing earlier to reuse.
struct FirstLayerReuses {
  SharedObject map;
  std::int64_t source;
  friend bool operator==(const FirstLayerReuses&, const FirstLayerReuses&) = default;
};
// A source after its consumer: not computed yet in the forward pass.
struct SourceAfterLayer {
  SharedObject map;
  std::size_t layer;
  std::int64_t source;
  friend bool operator==(const SourceAfterLayer&, const SourceAfterLayer&) = default;
};
// A source that itself reuses another layer's object (sources own what they share).
struct SourceNotOwner {
  SharedObject map;
  std::size_t layer;
  std::int64_t source;
  friend bool operator==(const SourceNotOwner&, const SourceNotOwner&) = default;
};
// Consumer and source read the shared object with different settings.
struct SettingsDiffer {
  SharedObject map;
  std::size_t layer;
  std::int64_t source;
  Setting setting;
  friend bool operator==(const SettingsDiffer&, const SettingsDiffer&) = default;
};
// coarse[fine[l]] != coarse[l]: a finer segment leaves its coarser one.
struct NotRefining {
  SharedObject fine, coarse;
  std::size_t layer;
  friend bool operator==(const NotRefining&, const NotRefining&) = default;
};
// At or after a YOCO boundary b, a KV source before b (or b not its own source).
struct YocoKvReuse {
  std::size_t layer;
  std::int64_t source;
  friend bool operator==(const YocoKvReuse&, const YocoKvReuse&) = default;
};
// A layer's settings no row format can hold (a dimension not a whole number of
// scale groups, a ratio or block size below 1, a block not a whole number of rows).
struct BadSettings {
  std::size_t layer;
  friend bool operator==(const BadSettings&, const BadSettings&) = default;
};

using SharingError =
    std::variant<ShapeMismatch, SourceOutOfRange, FirstLayerReuses, SourceAfterLayer,
                 SourceNotOwner, SettingsDiffer, NotRefining, YocoKvReuse, BadSettings>;

inline std::ostream& operator<<(std::ostream& os, const SharingError& e) {
  if (auto* p = std::get_if<ShapeMismatch>(&e))
    return os << "ShapeMismatch{map=" << name_of(p->map) << ", expected=" << p->expected
              << ", actual=" << p->actual << "}";
  if (auto* p = std::get_if<SourceOutOfRange>(&e))
    return os << "SourceOutOfRange{map=" << name_of(p->map) << ", layer=" << p->layer
              << ", source=" << p->source << "}";
  if (auto* p = std::get_if<FirstLayerReuses>(&e))
    return os << "FirstLayerReuses{map=" << name_of(p->map) << ", source=" << p->source << "}";
  if (auto* p = std::get_if<SourceAfterLayer>(&e))
    return os << "SourceAfterLayer{map=" << name_of(p->map) << ", layer=" << p->layer
              << ", source=" << p->source << "}";
  if (auto* p = std::get_if<SourceNotOwner>(&e))
    return os << "SourceNotOwner{map=" << name_of(p->map) << ", layer=" << p->layer
              << ", source=" << p->source << "}";
  if (auto* p = std::get_if<SettingsDiffer>(&e))
    return os << "SettingsDiffer{map=" << name_of(p->map) << ", layer=" << p->layer
              << ", source=" << p->source << ", setting=" << name_of(p->setting) << "}";
  if (auto* p = std::get_if<NotRefining>(&e))
    return os << "NotRefining{fine=" << name_of(p->fine) << ", coarse=" << name_of(p->coarse)
              << ", layer=" << p->layer << "}";
  if (auto* p = std::get_if<YocoKvReuse>(&e))
    return os << "YocoKvReuse{layer=" << p->layer << ", source=" << p->source << "}";
  return os << "BadSettings{layer=" << std::get<BadSettings>(e).layer << "}";
}
}  // namespace sharing_error

using sharing_error::SharingError;

// Bytes a valid map set allocates (A.5): owners only, each region rounded up to
// `alignment`. Main KV and index keys per owner: `blocks` cache blocks of
// block_size / ratio rows each; indices and candidate blocks per owner: `positions`
// query positions of topk (candidate_blocks) 4-byte ids.
struct SharingAllocation {
  std::uint64_t bytes[kSharedObjects] = {};
  std::size_t owners[kSharedObjects] = {};
  std::uint64_t total = 0;
  friend bool operator==(const SharingAllocation&, const SharingAllocation&) = default;
};

}  // namespace aether
