// Properties of cross-layer sharing (source 003 A.6): valid nested map sets are
// accepted and accounted with every shared object counted once, every layer reads
// from an owner computed earlier in the forward, each single corruption is
// refused with its rule's error, and the CPU refuses and accounts as the model.
#include "impl/cpu/sharing.hpp"
#include "model/sharing.hpp"
#include "props/support/property.hpp"
#include "props/support/sharing_gen.hpp"

namespace aether {
namespace {

namespace se = sharing_error;
constexpr std::size_t kKv = 0, kIndex = 1, kCandidates = 2, kIndices = 3;

// The allocation counted from the segment starts alone (a segment's first layer
// allocates, the rest read it), each region rounded up to `alignment`.
SharingAllocation counted(const props::SharingCase& c, std::uint64_t blocks,
                          std::uint64_t positions, std::uint64_t alignment) {
  const auto up = [&](std::uint64_t x) {
    return alignment ? (x + alignment - 1) / alignment * alignment : x;
  };
  SharingAllocation a;
  for (std::size_t l = 0; l < c.layers.size(); ++l) {
    const LayerSettings& s = c.layers[l];
    const std::uint64_t rows = std::uint64_t(s.block_size / s.ratio);
    const std::uint64_t bytes[kSharedObjects] = {
        blocks * up(rows * cache_row_bytes(s.kv_format, std::size_t(s.kv_dim))),
        blocks * up(rows * cache_row_bytes(s.index_format, std::size_t(s.index_dim))),
        up(positions * std::uint64_t(s.candidate_blocks) * 4),
        up(positions * std::uint64_t(s.topk) * 4)};
    for (std::size_t m = 0; m < kSharedObjects; ++m)
      if (c.starts[m][l]) a.bytes[m] += bytes[m], a.owners[m] += 1, a.total += bytes[m];
  }
  return a;
}

// Layers a and b read map m's object alike (the settings of docs/sharing.md's table).
bool reads_alike(SharedObject m, const LayerSettings& a, const LayerSettings& b) {
  switch (m) {
    case SharedObject::MainKv:
      return a.kv_format == b.kv_format && a.ratio == b.ratio && a.block_size == b.block_size &&
             a.kv_dim == b.kv_dim;
    case SharedObject::IndexKeys:
      return a.index_format == b.index_format && a.ratio == b.ratio &&
             a.block_size == b.block_size && a.index_dim == b.index_dim;
    case SharedObject::CandidateBlocks:
      return a.ratio == b.ratio && a.candidate_blocks == b.candidate_blocks &&
             a.candidate_block == b.candidate_block;
    case SharedObject::Indices:
      return a.ratio == b.ratio && a.topk == b.topk;
  }
  return false;
}

AETHER_PROP(Sharing, valid_maps_are_accepted_and_accounted, "L0", ()) {
  const props::SharingCase c = *props::gen_valid_sharing();
  const auto blocks = *rc::gen::inRange<std::uint64_t>(0, 1000);
  const auto positions = *rc::gen::inRange<std::uint64_t>(0, 64);
  const auto alignment = *rc::gen::element<std::uint64_t>(0, 1, 256, 4096);
  const auto want = counted(c, blocks, positions, alignment);
  RC_ASSERT(model::sharing_allocation(c.layers, c.maps, blocks, positions, alignment).value() ==
            want);
  RC_ASSERT(cpu::sharing_allocation(c.layers, c.maps, blocks, positions, alignment).value() ==
            want);
}

// Every layer's object comes from the first layer of its segment (the generator's
// starts: an owner at or before it that computed its own), and a finer map's owner
// lies in the same coarser segment as the layer.
AETHER_PROP(Sharing, reads_resolve_to_an_owner_computed_earlier, "L0", ()) {
  const props::SharingCase c = *props::gen_valid_sharing();
  RC_ASSERT(model::check_sharing(c.layers, c.maps).ok());
  for (std::size_t m = 0; m < kSharedObjects; ++m)
    for (std::size_t l = 0, start = 0; l < c.layers.size(); ++l) {
      if (c.starts[m][l]) start = l;
      const std::size_t o = model::owner(c.maps, SharedObject(m), l);
      RC_ASSERT(o == start);
      RC_ASSERT(o <= l);
      RC_ASSERT(model::owner(c.maps, SharedObject(m), o) == o);
      if (m > 0)
        RC_ASSERT(model::owner(c.maps, SharedObject(m - 1), o) ==
                  model::owner(c.maps, SharedObject(m - 1), l));
    }
}

// One rule broken by one edit of a valid set; model and CPU both refuse it with
// exactly that rule's error (the edit leaves every earlier check passing).
AETHER_PROP(Sharing, each_corruption_is_refused_with_its_rule, "L0", ()) {
  props::SharingCase c = *props::gen_valid_sharing();
  const std::size_t n = c.layers.size();
  const auto m = *rc::gen::inRange<std::size_t>(0, kSharedObjects);
  auto& map = c.maps.maps[m];
  const auto object = SharedObject(m);
  SharingError want;
  switch (*rc::gen::inRange(0, 6)) {
    case 0: {  // a source outside the layers
      const auto l = *rc::gen::inRange<std::size_t>(0, n);
      map[l] = *rc::gen::element<std::int32_t>(-1, std::int32_t(n));
      want = se::SourceOutOfRange{object, l, map[l]};
      break;
    }
    case 1: {  // layer 0 reusing, or a source after its layer
      RC_PRE(n >= 2);
      const auto l = *rc::gen::inRange<std::size_t>(0, n - 1);
      const auto s = *rc::gen::inRange<std::size_t>(l + 1, n);
      map[l] = std::int32_t(s);
      want = l == 0 ? SharingError{se::FirstLayerReuses{object, map[l]}}
                    : SharingError{se::SourceAfterLayer{object, l, map[l]}};
      break;
    }
    case 2: {  // a source that is itself a consumer
      const auto l = *rc::gen::inRange<std::size_t>(1, std::max<std::size_t>(2, n));
      RC_PRE(l < n);
      const auto s = *rc::gen::inRange<std::size_t>(0, l);
      RC_PRE(map[s] != std::int32_t(s));
      map[l] = std::int32_t(s);
      want = se::SourceNotOwner{object, l, map[l]};
      break;
    }
    case 3: {  // a main-KV consumer reading with another dimension
      std::size_t l = 0;
      while (l < n && c.maps.maps[kKv][l] == std::int32_t(l)) ++l;
      RC_PRE(l < n);
      c.layers[l].kv_dim = c.layers[l].kv_dim == 512 ? 256 : 512;
      want = se::SettingsDiffer{SharedObject::MainKv, l, c.maps.maps[kKv][l], Setting::KvDim};
      break;
    }
    case 4: {  // a finer segment crossing a coarser one
      RC_PRE(m > 0);
      const auto l = *rc::gen::inRange<std::size_t>(0, n);
      const auto s = *rc::gen::inRange<std::size_t>(0, l + 1);
      const auto& coarse = c.maps.maps[m - 1];
      RC_PRE(map[s] == std::int32_t(s) && coarse[s] != coarse[l]);
      // l owns nothing others read, and reads as s does: only the refinement breaks
      for (std::size_t later = l + 1; later < n; ++later) RC_PRE(map[later] != std::int32_t(l));
      RC_PRE(reads_alike(object, c.layers[l], c.layers[s]));
      map[l] = std::int32_t(s);
      want = se::NotRefining{object, SharedObject(m - 1), l};
      break;
    }
    default: {  // a YOCO boundary at a main-KV consumer
      std::size_t l = 0;
      while (l < n && c.maps.maps[kKv][l] == std::int32_t(l)) ++l;
      RC_PRE(l < n);
      c.layers[l].yoco_boundary = true;
      want = se::YocoKvReuse{l, c.maps.maps[kKv][l]};
    }
  }
  RC_TAG(want.index());
  const auto by_model = model::check_sharing(c.layers, c.maps);
  const auto by_cpu = cpu::check_sharing(c.layers, c.maps);
  RC_ASSERT(!by_model.ok() && !by_cpu.ok());
  RC_ASSERT(by_model.error() == want);
  RC_ASSERT(by_cpu.error() == want);
}

// L0 on any map set: the CPU's verdict and allocation are the model's.
AETHER_PROP(SharingCpu, agrees_with_the_model, "L0", ()) {
  const props::SharingCase c = *props::gen_any_sharing();
  const auto want = model::sharing_allocation(c.layers, c.maps, 3, 5, 256);
  const auto got = cpu::sharing_allocation(c.layers, c.maps, 3, 5, 256);
  RC_TAG(want.ok() ? "accepted" : "refused");
  RC_ASSERT(want.ok() == got.ok());
  if (want.ok())
    RC_ASSERT(want.value() == got.value());
  else
    RC_ASSERT(want.error() == got.error());
  RC_ASSERT(model::check_sharing(c.layers, c.maps).ok() == want.ok());
}

}  // namespace
}  // namespace aether
