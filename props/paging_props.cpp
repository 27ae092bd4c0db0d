// Properties of paged-slot conversion (source 003 A.4.3): the slot lands in its
// block at its offset; a masked lane is that lane converted alone or -1; L0
// agreement of the backends with the model (both conversions), refusals and
// untouched buffers included; in place equals out of place.
#include <sstream>

#include "model/paging.hpp"
#include "props/support/compare.hpp"
#include "props/support/paging_backends.hpp"
#include "props/support/paging_gen.hpp"
#include "props/support/property.hpp"

namespace aether {
namespace {

using I = std::int32_t;
using V = std::vector<I>;

AETHER_PROP(PagingModel, a_slot_is_its_block_times_bc_plus_its_offset, "model", ()) {
  const props::PagingCall c = *props::gen_paging_call();
  const auto out = model::paged_slots(c.rows, c.k, c.valid_counts, c.block_tables,
                                      c.blocks_per_request, c.block_tokens, c.ratio);
  if (!out) return;
  const std::int64_t bc = c.block_tokens / c.ratio;
  for (std::size_t n = 0; n < c.valid_counts.size(); ++n)
    for (std::size_t i = 0; i < c.k; ++i) {
      const I slot = out.value()[n * c.k + i], row = c.rows[n * c.k + i];
      const bool valid = I(i) < c.valid_counts[n] && row != -1;
      RC_ASSERT((slot == -1) == !valid);
      if (valid) {
        RC_ASSERT(slot / bc == c.block_tables[n * c.blocks_per_request + std::size_t(row / bc)]);
        RC_ASSERT(slot % bc == row % bc);
      }
    }
}

// A lane of the masked conversion is that lane converted alone (one request of
// one lane, its own table), or -1 where that call is refused; a bad geometry or
// shape is refused as the conversion refuses it.
AETHER_PROP(PagingModel, a_masked_lane_is_that_lane_converted_alone_or_minus_one, "model", ()) {
  const props::PagingCall c = *props::gen_paging_call();
  const auto masked = model::paged_slots_masked(c.rows, c.k, c.valid_counts, c.block_tables,
                                                c.blocks_per_request, c.block_tokens, c.ratio);
  const auto whole = model::paged_slots(c.rows, c.k, c.valid_counts, c.block_tables,
                                        c.blocks_per_request, c.block_tokens, c.ratio);
  const bool data_refusal =
      !whole.ok() && (std::holds_alternative<paging_error::RowOutsideTable>(whole.error()) ||
                      std::holds_alternative<paging_error::BadBlock>(whole.error()));
  if (!whole.ok() && !data_refusal) {
    RC_ASSERT(!masked.ok());
    RC_ASSERT(masked.error() == whole.error());
    return;
  }
  RC_ASSERT(masked.ok());
  if (whole.ok()) RC_ASSERT(masked.value() == whole.value());
  for (std::size_t n = 0; n < c.valid_counts.size(); ++n)
    for (std::size_t i = 0; i < c.k; ++i) {
      const std::span<const I> table(c.block_tables.data() + n * c.blocks_per_request,
                                     c.blocks_per_request);
      const I count = I(i) < c.valid_counts[n] ? 1 : 0;
      const auto alone = model::paged_slots(V{c.rows[n * c.k + i]}, 1, V{count}, table,
                                            c.blocks_per_request, c.block_tokens, c.ratio);
      RC_ASSERT(masked.value()[n * c.k + i] == (alone.ok() ? alone.value()[0] : -1));
    }
}

// L0: backend == model on every call, refusals and untouched buffers included;
// in place equals out of place. `masked`: the masked conversion.
void agrees_with_the_model(const props::PagingBackend& backend, bool masked = false) {
  const props::PagingCall c = *props::gen_paging_call();
  const auto& convert = masked ? backend.masked : backend.slots;
  const V before(c.out_len(), 0x5a5a5a5a);
  props::Guarded<I> guarded(before, 0x6b6b6b6b);
  const auto got = convert(c.rows, c.k, c.valid_counts, c.block_tables, c.blocks_per_request,
                           c.block_tokens, c.ratio, guarded.span());
  if (auto d = guarded.overrun(backend.name + " slots"); !d.empty()) RC_FAIL(d);
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
    RC_ASSERT(!got.ok());
    if (!(got.error() == want.error()))
      RC_FAIL((std::ostringstream() << backend.name << " refused with " << got.error()
                                    << ", the model with " << want.error())
                  .str());
  } else if (auto d = props::differential_report<I>(want, got, before, out,
                                                    backend.name + (masked ? " masked" : " slots"));
             !d.empty()) {
    RC_FAIL(d);
  }
  if (c.out_delta != 0) return;  // in place, out has the rows' length
  V in_place = c.rows;
  const auto again = convert(in_place, c.k, c.valid_counts, c.block_tables, c.blocks_per_request,
                             c.block_tokens, c.ratio, in_place);
  RC_ASSERT(again == got);  // the same verdict in place, the refused lane named the same
  if (!out_unspecified) RC_ASSERT(in_place == (got.ok() ? out : c.rows));
}

AETHER_PROP(PagingCpu, agrees_with_the_model_on_every_call, "L0", ()) {
  agrees_with_the_model(props::cpu_paging_backend());
}

AETHER_PROP(PagingCpu, the_masked_conversion_agrees_with_the_model, "L0", ()) {
  agrees_with_the_model(props::cpu_paging_backend(), true);
}

#ifdef AETHER_HAVE_CUDA
AETHER_GPU_PROP(PagingCuda, agrees_with_the_model_on_every_call, "L0", ()) {
  agrees_with_the_model(props::cuda_paging_backend());
}

AETHER_GPU_PROP(PagingCuda, the_queued_call_agrees_with_the_model, "L0", ()) {
  agrees_with_the_model(props::cuda_queued_paging_backend());
}

AETHER_GPU_PROP(PagingCuda, the_masked_conversion_agrees_with_the_model, "L0", ()) {
  agrees_with_the_model(props::cuda_paging_backend(), true);
}

AETHER_GPU_PROP(PagingCuda, the_queued_masked_conversion_agrees_with_the_model, "L0", ()) {
  agrees_with_the_model(props::cuda_queued_paging_backend(), true);
}
#endif

}  // namespace
}  // namespace aether
