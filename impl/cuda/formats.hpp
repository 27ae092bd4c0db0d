// CUDA backend of the formats' store and read side (model::store_rows,
// model::gather_rows) on device memory: the same codes, bytes and refusals. One
// pass a call: each row is read once and written once. Geometry and shape refusals
// are decided before any device work and leave every buffer untouched; a call
// refused for its data (a bad slot, NaN/inf: SPEC section 3) returns the model's
// error with its outputs unspecified, and a refused store may have changed the
// rows at its own slots (model::slots_a_refused_store_may_change), nothing else.
// The CPU backend is stricter: it writes nothing.
#pragma once

#include <cstdint>

#include "api/formats.hpp"
#include "impl/cuda/device.hpp"

namespace aether::cuda {

// The waiting calls: queued, then the call waits once for its verdict. A store's
// rows start on a 16-byte boundary (it reads 16-byte words; cudaMalloc's buffers
// do): others are refused with DeviceFailure{cudaErrorMisalignedAddress}, nothing
// queued (a store of no rows reads none and is not).
Status<FormatsError> store_rows(const CacheGeometry& cache, device_span<const float> rows,
                                device_span<const std::int32_t> slots,
                                device_span<std::byte> cache_bytes,
                                RoundingProfile profile = RoundingProfile::Cuda,
                                Stream stream = nullptr);
// out [m, D] as exact doubles (a value can pass FLT_MAX: docs/formats.md).
Status<FormatsError> gather_rows(const CacheGeometry& cache,
                                 device_span<const std::byte> cache_bytes,
                                 device_span<const std::int32_t> slots, device_span<double> out,
                                 Stream stream = nullptr);

// The same calls queued on `stream` without waiting (a serving loop, a CUDA graph).
// Geometry and shape refusals return at once; refusals found in the device data
// are left in *verdict (device memory the caller owns, reset by the call). After
// the stream, copy *verdict to the host and read it with formats_verdict.
Status<FormatsError> enqueue_store_rows(const CacheGeometry& cache, device_span<const float> rows,
                                        device_span<const std::int32_t> slots,
                                        device_span<std::byte> cache_bytes, DeviceVerdict* verdict,
                                        RoundingProfile profile = RoundingProfile::Cuda,
                                        Stream stream = nullptr);
Status<FormatsError> enqueue_gather_rows(const CacheGeometry& cache,
                                         device_span<const std::byte> cache_bytes,
                                         device_span<const std::int32_t> slots,
                                         device_span<double> out, DeviceVerdict* verdict,
                                         Stream stream = nullptr);
Status<FormatsError> formats_verdict(const DeviceVerdict& verdict);

}  // namespace aether::cuda
