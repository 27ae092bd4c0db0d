// The compression backends behind one host-memory interface (see
// witness_backends.hpp): the CPU and, when a device is visible, CUDA with every
// buffer staged through device memory (outputs and the ring too, so untouched-on-
// refusal checks mean something). The model is compared through
// model::compress_batch, whose rows are intervals.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "api/compress.hpp"

namespace aether::props {

using CompressStep = std::function<Status<CompressError>(
    std::span<const CompressRequest> requests, std::span<const float> projected,
    std::span<float> ring, const CompressShape& shape, std::span<std::uint16_t> rows,
    std::span<std::int32_t> row_index, std::span<std::int32_t> positions)>;

struct CompressBackend {
  std::string name;
  CompressStep prefill, decode;
  // A call refused for its data (NaN/inf read mid-pass) leaves every buffer as it
  // was: the CPU. A one-pass backend (CUDA) may change the outputs and the ring
  // entries model::entries_a_refusal_may_change names (SPEC section 3).
  bool transactional = true;
};

CompressBackend cpu_compress_backend();
#ifdef AETHER_HAVE_CUDA
CompressBackend cuda_compress_backend();
CompressBackend cuda_queued_compress_backend();  // the enqueue_ steps, verdict read back
#endif
// The CPU, then both CUDA entry points when a device is visible.
std::vector<CompressBackend> impl_compress_backends();

}  // namespace aether::props
