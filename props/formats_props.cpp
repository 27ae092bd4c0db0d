// Properties of the cache formats' codecs (source 003 A.5): the CPU's codes, scale
// bytes, refusals and bytes equal the model's on rows that hit every tie; every
// dequantized value is within the model's round-trip bound of its input; rows
// round-trip through their layout; the index block's sections place each row.
#include <cmath>
#include <limits>

#include "model/formats.hpp"
#include "props/support/agreement.hpp"
#include "props/support/formats_backends.hpp"
#include "props/support/formats_gen.hpp"
#include "props/support/property.hpp"
#if defined(AETHER_HAVE_FP_CONVERSIONS)
#include "impl/cpu/formats.hpp"
#endif

namespace aether {
namespace {

using R = model::Rational;

// Every value within half a step of its group's scale (or its saturation excess).
AETHER_PROP(Formats, dequantized_values_are_within_the_round_trip_bound, "model", ()) {
  const props::FormatsCase c = *props::gen_formats_row();
  const auto q = model::quantize_row(c.format, c.row, c.profile).value();
  const auto values = model::dequantize_row(c.format, q);
  const GroupFormat f = group_format(c.format);
  for (std::size_t i = 0; i < c.row.size(); ++i) {
    const R x = model::exact(c.row[i]), s = model::scale_value(f.scale, q.scales[i / f.group]);
    const R error = x > values[i] ? R(x - values[i]) : R(values[i] - x);
    RC_ASSERT(error <= model::round_trip_bound(f.element, x, s));
  }
}

AETHER_PROP(Formats, rows_round_trip_through_their_layout, "model", ()) {
  const props::FormatsCase c = *props::gen_formats_row();
  const auto q = model::quantize_row(c.format, c.row, c.profile).value();
  const auto bytes = model::pack_row(c.format, q);
  const std::size_t group = group_format(c.format).group;
  RC_ASSERT(bytes.size() == c.row.size() / group * cache_row_bytes(c.format, group));
  RC_ASSERT(model::unpack_row(c.format, bytes) == q);
}

// Rows of a block: data and scale sections disjoint, each byte of the block used
// once, in order.
AETHER_PROP(Formats, index_sections_place_every_row_once, "model", ()) {
  const auto rows = *rc::gen::inRange<std::size_t>(1, 130);
  const auto dim = 32 * *rc::gen::inRange<std::size_t>(1, 9);
  std::vector<int> used(rows * cache_row_bytes(CacheFormat::IndexFp4, dim), 0);
  for (std::size_t r = 0; r < rows; ++r) {
    const auto at = model::index_block_offsets(rows, dim, r);
    RC_ASSERT(at.data + dim / 2 <= rows * dim / 2);  // inside the data section
    RC_ASSERT(at.scales >= rows * dim / 2);          // inside the scale section
    for (std::size_t b = 0; b < dim / 2; ++b) ++used[at.data + b];
    for (std::size_t b = 0; b < dim / 32; ++b) ++used[at.scales + b];
  }
  for (int u : used) RC_ASSERT(u == 1);
}

#if defined(AETHER_HAVE_CUDA)
// Every launch mode: waiting, queued, captured in a graph.
AETHER_GPU_PROP(FormatsCuda, store_and_gather_equal_the_models, "L0", ()) {
  const props::StoreCase c = *props::gen_store_case();
  const props::Mode mode =
      *rc::gen::element(props::Mode::Waiting, props::Mode::Queued, props::Mode::Captured);
  RC_TAG(props::mode_name(mode));
  props::check_store_agreement({std::string("cuda ") + props::mode_name(mode),
                                [&](const props::StoreCase& c, auto& cache) {
                                  return props::cuda_store_rows(c, cache, mode);
                                },
                                [&](const props::StoreCase& c, const auto& cache) {
                                  return props::cuda_gather_rows(c, cache, mode);
                                },
                                false},
                               c);
}
#endif

#if defined(AETHER_HAVE_FP_CONVERSIONS)
// L0: codes, scale bytes and refusals equal the model's, every profile.
AETHER_PROP(FormatsCpu, codes_and_scales_equal_the_models, "L0", ()) {
  const props::FormatsCase c = *props::gen_faulty_formats_row();
  props::check_quantizer_agreement(
      [&](CacheFormat f, std::span<const float> row) {
        return cpu::quantize_row(f, row, c.profile);
      },
      c, c.profile, "cpu");
  const auto want = model::quantize_row(c.format, c.row, c.profile);
  RC_TAG(want.ok() ? "quantized" : "refused");
  if (!want.ok()) return;
  const auto got = cpu::quantize_row(c.format, c.row, c.profile);
  // exact dequantization: the CPU's floats are the model's rationals
  const auto values = model::dequantize_row(c.format, want.value());
  const auto doubles = cpu::dequantize_row(c.format, got.value());
  for (std::size_t i = 0; i < values.size(); ++i) RC_ASSERT(model::exact(doubles[i]) == values[i]);
  const auto bytes = model::pack_row(c.format, want.value());
  RC_ASSERT(cpu::pack_row(c.format, got.value()) == bytes);
  RC_ASSERT(cpu::unpack_row(c.format, bytes) == want.value());
}

// L0 on the store and the read side: the CPU writes the model's bytes and nothing
// else, refuses what it refuses (transactional: then the cache is untouched), and
// gathers its values.
AETHER_PROP(FormatsCpu, store_and_gather_equal_the_models, "L0", ()) {
  const props::StoreCase c = *props::gen_store_case();
  props::check_store_agreement({"cpu",
                                [](const props::StoreCase& c, std::vector<std::byte>& cache) {
                                  return cpu::store_rows(c.cache, c.rows, c.slots, cache,
                                                         c.profile);
                                },
                                [](const props::StoreCase& c, const std::vector<std::byte>& cache) {
                                  return cpu::gather_rows(c.cache, cache, c.reads);
                                },
                                true},
                               c);
}

AETHER_PROP(FormatsCpu, index_sections_equal_the_models, "L0", ()) {
  const auto rows = *rc::gen::inRange<std::size_t>(1, 130);
  const auto dim = 32 * *rc::gen::inRange<std::size_t>(1, 9);
  const auto r = *rc::gen::inRange<std::size_t>(0, rows);
  RC_ASSERT(cpu::index_block_offsets(rows, dim, r) == model::index_block_offsets(rows, dim, r));
}
#endif

}  // namespace
}  // namespace aether
