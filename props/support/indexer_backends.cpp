#include "props/support/indexer_backends.hpp"

#include "impl/cpu/indexer.hpp"
#include "model/indexer.hpp"
#include "props/support/model_adapter.hpp"
#include "props/support/property.hpp"

namespace aether::props {

namespace {
const auto indexer_size = [](std::size_t expected, std::size_t actual) {
  return IndexerError{indexer_error::ShapeMismatch{expected, actual}};
};
}  // namespace

IndexerBackend model_indexer_backend() {
  namespace m = aether::model;
  return {
      "model",
      [](auto scores, auto width, auto ends, auto k, auto out) {
        return write_into(m::valid_prefix_topk(scores, width, ends, k), out, indexer_size);
      },
      [](auto row, auto end, auto retained, auto bs, auto k, auto out) {
        return write_into(m::candidate_topk(row, end, retained, bs, k), out, indexer_size);
      },
      [](auto row, auto end, auto bs, auto out) {
        return write_into(m::candidate_block_scores(row, end, bs), out, indexer_size);
      },
      [](auto compact, auto retained, auto bs, auto out) {
        return write_into(m::restore_candidate_indices(compact, retained, bs), out, indexer_size);
      },
      [](auto rows, auto offset, auto out) {
        return write_into(
            Result<std::vector<std::int32_t>, IndexerError>(m::add_prefill_offset(rows, offset)),
            out, indexer_size);
      }};
}

IndexerBackend cpu_indexer_backend() {
  return {"cpu",
          [](auto... a) { return cpu::valid_prefix_topk(a...); },
          [](auto... a) { return cpu::candidate_topk(a...); },
          [](auto... a) { return cpu::candidate_block_scores(a...); },
          [](auto... a) { return cpu::restore_candidate_indices(a...); },
          [](auto... a) { return cpu::add_prefill_offset(a...); }};
}

std::vector<IndexerBackend> all_indexer_backends() {
  return {model_indexer_backend(), cpu_indexer_backend()};
}

}  // namespace aether::props
