// Reusable RapidCheck generators for cross-layer sharing (source 003 A.6): valid
// map sets built as nested segmentations (each map's segments cut the one before
// it further; a segment's first layer owns it), with layer settings that agree
// wherever a map shares, and YOCO boundaries at main-KV segment starts.
#pragma once

#include <rapidcheck.h>

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <vector>

#include "api/sharing.hpp"

namespace aether::props {

struct SharingCase {
  std::vector<LayerSettings> layers;
  SharingMaps maps;
  // starts[m][l]: layer l begins a segment of map m (its own source)
  std::vector<std::vector<bool>> starts;
};
void showValue(const SharingCase& c, std::ostream& os);

// A valid map set of 1 to 12 layers; settings from a few values, so that a
// corruption often keeps them equal.
rc::Gen<SharingCase> gen_valid_sharing();

// Any map set: lengths off by one now and then, sources anywhere in [-1, L],
// settings at random (some no format holds), boundaries at random.
rc::Gen<SharingCase> gen_any_sharing();

}  // namespace aether::props
