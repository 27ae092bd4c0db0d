// The compression check of props/support/agreement.hpp.
#include <rapidcheck.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "model/compress.hpp"
#include "props/support/agreement.hpp"
#include "props/support/compare.hpp"

namespace aether::props {

void check_compress_agreement(const CompressBackend& backend, const BatchCall& c, bool grid) {
  const std::size_t D = c.shape.dim;
  Guarded<float> g_ring(c.ring, 1234.5f);
  Guarded<std::uint16_t> g_rows(std::vector<std::uint16_t>(c.rows * D, 0x5a5a), 0x6b6b);
  Guarded<std::int32_t> g_index(std::vector<std::int32_t>(c.index_rows, 0x5a5a5a5a), 0x6b6b6b6b),
      g_positions(std::vector<std::int32_t>(c.position_rows, 0x5a5a5a5a), 0x6b6b6b6b);
  const auto got = (c.decode ? backend.decode : backend.prefill)(
      c.requests, c.projected, g_ring.span(), c.shape, g_rows.span(), g_index.span(),
      g_positions.span());
  for (const auto& d :
       {g_ring.overrun(backend.name + " ring"), g_rows.overrun(backend.name + " rows"),
        g_index.overrun(backend.name + " row_index"),
        g_positions.overrun(backend.name + " positions")})
    if (!d.empty()) RC_FAIL(d);
  const std::vector<float> ring = g_ring.values();
  const std::vector<std::uint16_t> rows = g_rows.values();
  const std::vector<std::int32_t> index = g_index.values(), positions = g_positions.values();
  const auto want = model::compress_batch(c.requests, c.projected, c.ring, c.shape, c.decode,
                                          rows.size(), index.size(), positions.size(),
                                          grid ? model::Gate::Score : model::Gate::ScoreFp32);
  if (!want) {
    RC_TAG("refused");
    if (auto d = verdict_report(got, want, backend.name); !d.empty()) RC_FAIL(d);
    // a data refusal found mid-pass (SPEC section 3): outputs unspecified, the ring
    // changed at most where the model says, where the backend is not transactional
    const bool data = std::holds_alternative<compress_error::NonFiniteInput>(want.error());
    const auto may_change = data && !backend.transactional
                                ? model::entries_a_refusal_may_change(c.requests, c.shape, c.decode)
                                : std::set<std::size_t>{};
    if (const auto d = ring_report(c.ring, ring, c.shape, may_change); !d.empty())
      RC_FAIL(backend.name + " changed the ring of a refused call outside what it may change:\n" +
              d);
    if (data && !backend.transactional) return;
    for (const auto& d :
         {diff_report<std::uint16_t>(std::vector<std::uint16_t>(c.rows * D, 0x5a5a), rows,
                                     backend.name + " rows of a refused call"),
          diff_report<std::int32_t>(std::vector<std::int32_t>(c.index_rows, 0x5a5a5a5a), index,
                                    backend.name + " row_index of a refused call"),
          diff_report<std::int32_t>(std::vector<std::int32_t>(c.position_rows, 0x5a5a5a5a),
                                    positions, backend.name + " positions of a refused call")})
      if (!d.empty()) RC_FAIL(d);
    return;
  }
  if (!got)
    RC_FAIL((std::ostringstream() << backend.name
                                  << " refused a call the model accepts: " << got.error())
                .str());
  RC_TAG(std::count_if(index.begin(), index.end(), [](std::int32_t j) { return j >= 0; }) > 0
             ? "rows completed"
             : "no row completed");
  if (const auto d = ring_report(want.value().ring, ring, c.shape); !d.empty())
    RC_FAIL(backend.name + ":\n" + d);
  for (std::size_t i = 0; i < c.rows; ++i) {
    const model::Row& row = want.value().rows[i];
    if (index[i] != row.row || positions[i] != row.position)
      RC_FAIL(backend.name + " output row " + std::to_string(i) + ": row " +
              std::to_string(index[i]) + " at position " + std::to_string(positions[i]) +
              ", the model's row " + std::to_string(row.row) + " at " +
              std::to_string(row.position));
    for (std::size_t d = 0; d < D; ++d) {
      // the grid's rows are exact (lo == hi): the bits are determined there
      const std::uint16_t y = rows[i * D + d];
      if (!bf16_between(y, row.z[d]))
        RC_FAIL("row " + std::to_string(i) + " channel " + std::to_string(d) + ": bf16 " +
                std::to_string(y) + " is not the rounding of a value in [" + row.z[d].lo.str() +
                ", " + row.z[d].hi.str() + "]: " + std::to_string(bf16_round(row.z[d].lo)) +
                " to " + std::to_string(bf16_round(row.z[d].hi)));
    }
  }
}

}  // namespace aether::props
