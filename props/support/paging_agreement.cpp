// The paged-slot check of props/support/agreement.hpp.
#include <rapidcheck.h>

#include <variant>
#include <vector>

#include "model/paging.hpp"
#include "props/support/agreement.hpp"
#include "props/support/compare.hpp"

namespace aether::props {

void check_paging_agreement(const PagingBackend& backend, const PagingCall& c, bool masked) {
  using I = std::int32_t;
  using V = std::vector<I>;
  const std::string name = backend.name + (masked ? " masked" : " slots");
  const auto& convert = masked ? backend.masked : backend.slots;
  if (!convert) return;  // left empty: not checked
  const V before(c.out_len(), 0x5a5a5a5a);
  Guarded<I> guarded(before, 0x6b6b6b6b);
  const auto got = convert(c.rows, c.k, c.valid_counts, c.block_tables, c.blocks_per_request,
                           c.block_tokens, c.ratio, guarded.span());
  if (auto d = guarded.overrun(name); !d.empty()) RC_FAIL(d);
  const V out = guarded.values();
  auto want = (masked ? model::paged_slots_masked : model::paged_slots)(
      c.rows, c.k, c.valid_counts, c.block_tables, c.blocks_per_request, c.block_tokens, c.ratio);
  // The output's length is a shape: refused after the model's geometry and shape
  // refusals and before any lane's.
  const bool shape_refused =
      !want.ok() && (std::holds_alternative<paging_error::BadGeometry>(want.error()) ||
                     std::holds_alternative<paging_error::ShapeMismatch>(want.error()));
  if (out.size() != c.rows.size() && !shape_refused)
    want = PagingError{paging_error::ShapeMismatch{c.rows.size(), out.size()}};
  // A refusal for the data leaves out unspecified where the backend is not
  // transactional: only the error is compared.
  const bool out_unspecified = !want.ok() && !shape_refused && !backend.transactional;
  if (out_unspecified) {
    RC_TAG("data refusal, out unspecified");
    if (auto d = verdict_report(got, want, name); !d.empty()) RC_FAIL(d);
  } else if (auto d = differential_report<I>(want, got, before, out, name); !d.empty()) {
    RC_FAIL(d);
  }
  if (c.out_delta != 0) return;  // in place, out has the rows' length
  V in_place = c.rows;
  const auto again = convert(in_place, c.k, c.valid_counts, c.block_tables, c.blocks_per_request,
                             c.block_tokens, c.ratio, in_place);
  if (!(again == got))  // the same verdict in place, the refused lane named the same
    RC_FAIL(name + ": in place, another verdict than out of place");
  if (out_unspecified) return;
  if (auto d = diff_report<I>(got.ok() ? out : c.rows, in_place, name + " in place"); !d.empty())
    RC_FAIL(d);
}

}  // namespace aether::props
