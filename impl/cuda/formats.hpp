// CUDA backend of the formats' store and read side (model::store_rows,
// model::gather_rows) on device memory: the same codes, bytes and refusals. A
// checking kernel decides every refusal first and the call waits for its verdict,
// so a refused store leaves the cache as it was.
#pragma once

#include <cstdint>

#include "api/formats.hpp"
#include "impl/cuda/device.hpp"

namespace aether::cuda {

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

}  // namespace aether::cuda
