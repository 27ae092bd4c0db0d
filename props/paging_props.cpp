// Properties of paged-slot conversion (source 003 A.4.3): the slot lands in its
// block at its offset; a masked lane is that lane converted alone or -1; L0
// agreement of the backends with the model (both conversions), refusals and
// untouched buffers included; in place equals out of place.

#include "model/paging.hpp"
#include "props/support/agreement.hpp"
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

AETHER_PROP(PagingCpu, agrees_with_the_model_on_every_call, "L0", ()) {
  props::check_paging_agreement(props::cpu_paging_backend(), *props::gen_paging_call());
}

AETHER_PROP(PagingCpu, the_masked_conversion_agrees_with_the_model, "L0", ()) {
  props::check_paging_agreement(props::cpu_paging_backend(), *props::gen_paging_call(), true);
}

#ifdef AETHER_HAVE_CUDA
AETHER_GPU_PROP(PagingCuda, agrees_with_the_model_on_every_call, "L0", ()) {
  props::check_paging_agreement(props::cuda_paging_backend(), *props::gen_paging_call());
}

AETHER_GPU_PROP(PagingCuda, the_queued_call_agrees_with_the_model, "L0", ()) {
  props::check_paging_agreement(props::cuda_queued_paging_backend(), *props::gen_paging_call());
}

AETHER_GPU_PROP(PagingCuda, the_masked_conversion_agrees_with_the_model, "L0", ()) {
  props::check_paging_agreement(props::cuda_paging_backend(), *props::gen_paging_call(), true);
}

AETHER_GPU_PROP(PagingCuda, the_queued_masked_conversion_agrees_with_the_model, "L0", ()) {
  props::check_paging_agreement(props::cuda_queued_paging_backend(), *props::gen_paging_call(),
                                true);
}
#endif

}  // namespace
}  // namespace aether
