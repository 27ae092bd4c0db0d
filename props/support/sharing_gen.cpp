#include "props/support/sharing_gen.hpp"

namespace aether::props {

using namespace rc;

void showValue(const SharingCase& c, std::ostream& os) {
  os << "layers " << c.layers.size() << "\n";
  for (std::size_t l = 0; l < c.layers.size(); ++l) {
    const LayerSettings& s = c.layers[l];
    os << "  " << l << ": kv " << int(s.kv_format) << "/" << s.kv_dim << ", index "
       << int(s.index_format) << "/" << s.index_dim << ", r " << s.ratio << ", block "
       << s.block_size << ", K " << s.topk << ", candidates " << s.candidate_blocks << "x"
       << s.candidate_block << (s.yoco_boundary ? ", YOCO boundary" : "") << "\n";
  }
  for (std::size_t m = 0; m < kSharedObjects; ++m) {
    os << name_of(SharedObject(m)) << ":";
    for (std::int32_t x : c.maps.maps[m]) os << " " << x;
    os << "\n";
  }
}

namespace {
// Settings a map reads, drawn per segment of that map (the values few, so that
// different segments often agree anyway).
void kv_settings(LayerSettings& s) {
  s.kv_format = *gen::element(CacheFormat::MainFp8, CacheFormat::MainFp4);
  s.kv_dim = *gen::element<std::int64_t>(256, 512);
  s.ratio = *gen::element<std::int64_t>(1, 2, 4);
  s.block_size = s.ratio * *gen::element<std::int64_t>(16, 32, 64);
}
void index_settings(LayerSettings& s) {
  s.index_format = *gen::element(CacheFormat::IndexFp4, CacheFormat::IndexFp8);
  s.index_dim = *gen::element<std::int64_t>(64, 128);
}
void candidate_settings(LayerSettings& s) {
  s.candidate_blocks = *gen::element<std::int64_t>(0, 8, 16);
  s.candidate_block = *gen::element<std::int64_t>(0, 64);
}
void indices_settings(LayerSettings& s) { s.topk = *gen::element<std::int64_t>(512, 2048); }
}  // namespace

Gen<SharingCase> gen_valid_sharing() {
  return gen::exec([] {
    const auto n = *gen::inRange<std::size_t>(1, 13);
    SharingCase c;
    c.layers.resize(n);
    c.starts.assign(kSharedObjects, std::vector<bool>(n, false));
    for (std::size_t m = 0; m < kSharedObjects; ++m) {
      auto& map = c.maps.maps[m];
      map.resize(n);
      std::int32_t source = 0;
      for (std::size_t l = 0; l < n; ++l) {
        // a coarser map's start is a start here too; else a new segment now and then
        const bool start = l == 0 || (m > 0 && c.starts[m - 1][l]) || *gen::inRange(0, 3) == 0;
        c.starts[m][l] = start;
        if (start) source = std::int32_t(l);
        map[l] = source;
      }
    }
    for (std::size_t l = 0; l < n; ++l) {  // each map's settings from its segment's owner
      LayerSettings& s = c.layers[l];
      const auto from = [&](SharedObject m) -> const LayerSettings& {
        return c.layers[std::size_t(c.maps[m][l])];
      };
      if (c.starts[0][l])
        kv_settings(s);
      else {
        const auto& o = from(SharedObject::MainKv);
        s.kv_format = o.kv_format, s.kv_dim = o.kv_dim, s.ratio = o.ratio;
        s.block_size = o.block_size;
      }
      if (c.starts[1][l])
        index_settings(s);
      else {
        const auto& o = from(SharedObject::IndexKeys);
        s.index_format = o.index_format, s.index_dim = o.index_dim;
      }
      if (c.starts[2][l])
        candidate_settings(s);
      else {
        const auto& o = from(SharedObject::CandidateBlocks);
        s.candidate_blocks = o.candidate_blocks, s.candidate_block = o.candidate_block;
      }
      if (c.starts[3][l])
        indices_settings(s);
      else
        s.topk = from(SharedObject::Indices).topk;
      s.yoco_boundary = c.starts[0][l] && l > 0 && *gen::inRange(0, 4) == 0;
    }
    // boundaries only at main-KV segment starts: no layer reads KV from before one
    return c;
  });
}

Gen<SharingCase> gen_any_sharing() {
  return gen::exec([] {
    SharingCase c = *gen_valid_sharing();
    const std::size_t n = c.layers.size();
    const auto edits = *gen::inRange(0, 4);
    for (int e = 0; e < edits; ++e) {
      const auto m = *gen::inRange<std::size_t>(0, kSharedObjects);
      switch (*gen::inRange(0, 5)) {
        case 0:  // a source anywhere
          c.maps.maps[m][*gen::inRange<std::size_t>(0, n)] =
              *gen::inRange<std::int32_t>(-1, std::int32_t(n) + 1);
          break;
        case 1:  // a length off by one
          if (*gen::arbitrary<bool>())
            c.maps.maps[m].push_back(0);
          else
            c.maps.maps[m].pop_back();
          break;
        case 2: {  // a setting redrawn
          LayerSettings& s = c.layers[*gen::inRange<std::size_t>(0, n)];
          switch (m) {
            case 0:
              kv_settings(s);
              break;
            case 1:
              index_settings(s);
              break;
            case 2:
              candidate_settings(s);
              break;
            default:
              indices_settings(s);
          }
          break;
        }
        case 3:  // a dimension no format holds, or a ratio that does not divide the block
          c.layers[*gen::inRange<std::size_t>(0, n)].kv_dim = *gen::element<std::int64_t>(0, 100);
          break;
        default:
          c.layers[*gen::inRange<std::size_t>(0, n)].yoco_boundary ^= true;
      }
      if (c.maps.maps[m].empty() && n > 0) c.maps.maps[m].push_back(0);
    }
    return c;
  });
}

}  // namespace aether::props
