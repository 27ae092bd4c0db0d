// What DoSA's CPU screen reads beside the scores (impl/cpu/dosa.cpp): the norms of
// the keys it screens, from above.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "api/indexer.hpp"
#include "impl/cpu/key_rows.hpp"
#include "impl/cpu/parallel.hpp"
#include "impl/dosa_screen.hpp"

namespace aether::cpu::dosa_rows {

// ||k|| from above for the keys at `ids` (E4M3: the raw row's norm times its scale),
// keys on threads' shares.
template <KeyFormat kFormat>
void key_norms_of(const IndexKeys& keys, std::span<const std::int32_t> ids,
                  std::span<double> norms) {
  const std::size_t row_bytes = key_row_bytes(keys.format, keys.dim);
  for_each_row(norms.size(), 2 * keys.dim, [&](std::size_t j) {
    thread_local std::vector<float> e;
    e.resize(keys.dim);
    const std::byte* row = keys.bytes.data() + std::size_t(ids[j]) * row_bytes;
    for (std::size_t d = 0; d < keys.dim; ++d) e[d] = element<kFormat>(row, d);
    // plus 2^-66: elements whose squares underflow in the sum
    norms[j] = dosa_screen::up(dosa_screen::norm_up(e) * double(row_scale(keys, row))) + 0x1p-66;
  });
}
inline std::vector<double> key_norms(const IndexKeys& keys, std::span<const std::int32_t> ids) {
  std::vector<double> norms(ids.size());
  switch (keys.format) {
    case KeyFormat::F32:
      key_norms_of<KeyFormat::F32>(keys, ids, norms);
      break;
    case KeyFormat::BF16:
      key_norms_of<KeyFormat::BF16>(keys, ids, norms);
      break;
    case KeyFormat::E4M3:
      key_norms_of<KeyFormat::E4M3>(keys, ids, norms);
      break;
  }
  return norms;
}

}  // namespace aether::cpu::dosa_rows
