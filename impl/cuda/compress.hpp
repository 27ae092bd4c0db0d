// CUDA backend of C1/C2 compression and its state ring: the CPU signature and
// contract (impl/cpu/compress.hpp) with the tensors in device memory and the
// requests, the scheduler's metadata, in host memory. Same arithmetic as the CPU
// (impl/compress_math.hpp): the same bits. Refusals from sizes and metadata are
// decided on the host before any device work and leave every buffer untouched;
// NaN/inf in what a step reads are found by the one pass that reads them, so such a
// refusal leaves the outputs unspecified and the ring changed at most in the
// entries model::entries_a_refusal_may_change names, which no later call reads (the
// CPU backend is stricter: it changes nothing). The waiting calls return once the
// device's verdict is in; the enqueue_ forms leave it on the device.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "api/compress.hpp"
#include "impl/cuda/device.hpp"

namespace aether::cuda {

// How a call's requests reach its kernels (docs/compress.md), named for tests that
// take their edge sizes from them: a prefill's table rides in its kernels'
// parameters up to kPrefillRequestsInParameters requests and is uploaded past
// that; a decode step's always rides in its launches' own parameters, 16 bytes a
// request, in the first of kDecodeLaunchCapacities that holds the step (a launch
// copies all of its parameters), a longer step in parts of at most the last.
namespace compress_tables {
inline constexpr std::size_t kPrefillRequestsInParameters = 64;
inline constexpr std::array<std::size_t, 4> kDecodeLaunchCapacities{64, 256, 1024, 1990};
}  // namespace compress_tables

// Prefill's row items (at r = 2) are fetched under the L2 evict-first policy in
// calls of at most this many output elements (rows x D), under the normal policy in
// larger ones: on the H200, D 512, evict-first took 32 and 64 requests x 512 tokens
// from 70% and 78% of the copy to 75-76% and 82-83%, was even at 96 and cost 3 to 5
// points from 128 (docs/performance.md). Named for tests that take both sides.
inline constexpr std::size_t kPrefillEvictFirstElements = std::size_t(96) * 256 * 512;

Status<CompressError> compress_prefill(std::span<const CompressRequest> requests,
                                       device_span<const float> projected, device_span<float> ring,
                                       const CompressShape& shape, device_span<std::uint16_t> rows,
                                       device_span<std::int32_t> row_index,
                                       device_span<std::int32_t> positions,
                                       Stream stream = nullptr);

Status<CompressError> compress_decode(std::span<const CompressRequest> requests,
                                      device_span<const float> projected, device_span<float> ring,
                                      const CompressShape& shape, device_span<std::uint16_t> rows,
                                      device_span<std::int32_t> row_index,
                                      device_span<std::int32_t> positions, Stream stream = nullptr);

// The same steps queued on `stream` without waiting, for a serving loop that keeps
// the host off the critical path. Refusals from sizes and metadata return at once;
// NaN/inf found on the device are left in *verdict (device memory the caller owns,
// reset by the call): after the stream, copy it to the host and read it with
// compress_verdict. The requests are copied before the call returns; a call may be
// captured in a CUDA graph, and each replay reads the requests it was given and
// refuses by the inputs it finds.
Status<CompressError> enqueue_compress_prefill(std::span<const CompressRequest> requests,
                                               device_span<const float> projected,
                                               device_span<float> ring, const CompressShape& shape,
                                               device_span<std::uint16_t> rows,
                                               device_span<std::int32_t> row_index,
                                               device_span<std::int32_t> positions,
                                               DeviceVerdict* verdict, Stream stream = nullptr);
Status<CompressError> enqueue_compress_decode(std::span<const CompressRequest> requests,
                                              device_span<const float> projected,
                                              device_span<float> ring, const CompressShape& shape,
                                              device_span<std::uint16_t> rows,
                                              device_span<std::int32_t> row_index,
                                              device_span<std::int32_t> positions,
                                              DeviceVerdict* verdict, Stream stream = nullptr);
Status<CompressError> compress_verdict(const DeviceVerdict& verdict);

}  // namespace aether::cuda
