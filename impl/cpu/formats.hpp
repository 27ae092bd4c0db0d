// CPU backend of the cache formats' codecs (model/formats.hpp): CUDA's own
// conversions (cuda_fp8.h, cuda_fp4.h, on the host) on each value divided by its
// group's scale in double. The quotient is exact for UE8M0 scales; for E4M3 scales
// its double rounding never moves it across or onto a rounding tie (docs/formats.md),
// so every code and scale byte equals the model's.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "api/formats.hpp"

namespace aether::cpu {

// model::quantize_row's codes and scales, and refusals.
Result<QuantizedRow, FormatsError> quantize_row(CacheFormat format, std::span<const float> row,
                                                RoundingProfile profile = RoundingProfile::Cuda);
// Each element's value times its group's scale, exact in double (a 4-bit by 1-bit
// significand product below 2^136; in float it could pass FLT_MAX: 256 x 2^120).
std::vector<double> dequantize_row(CacheFormat format, const QuantizedRow& q);
// model::pack_row's bytes, and back.
std::vector<std::byte> pack_row(CacheFormat format, const QuantizedRow& q);
QuantizedRow unpack_row(CacheFormat format, std::span<const std::byte> bytes);
// model::index_block_offsets.
SectionOffsets index_block_offsets(std::size_t rows, std::size_t dim, std::size_t row);

// model::store_rows and model::gather_rows (values as exact doubles).
Status<FormatsError> store_rows(const CacheGeometry& cache, std::span<const float> rows,
                                std::span<const std::int32_t> slots,
                                std::span<std::byte> cache_bytes,
                                RoundingProfile profile = RoundingProfile::Cuda);
Result<std::vector<double>, FormatsError> gather_rows(const CacheGeometry& cache,
                                                      std::span<const std::byte> cache_bytes,
                                                      std::span<const std::int32_t> slots);

}  // namespace aether::cpu
