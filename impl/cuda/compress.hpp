// CUDA backend of C1/C2 compression and its state ring: the CPU signature and
// contract (impl/cpu/compress.hpp) with the tensors in device memory and the
// requests, the scheduler's metadata, in host memory. Same arithmetic as the CPU
// (impl/compress_math.hpp): the same bits. Refusals from sizes and metadata are
// decided on the host; NaN/inf in the inputs a step reads are found on the device
// before anything the caller sees is written (prefill stages its rows, decode
// checks first), and the call returns once the device's verdict is in.
#pragma once

#include <cstdint>
#include <span>

#include "api/compress.hpp"
#include "impl/cuda/device.hpp"

namespace aether::cuda {

Status<CompressError> compress_prefill(std::span<const CompressRequest> requests,
                                       std::span<const float> projected, std::span<float> ring,
                                       const CompressShape& shape, std::span<std::uint16_t> rows,
                                       std::span<std::int32_t> row_index,
                                       std::span<std::int32_t> positions, Stream stream = nullptr);

Status<CompressError> compress_decode(std::span<const CompressRequest> requests,
                                      std::span<const float> projected, std::span<float> ring,
                                      const CompressShape& shape, std::span<std::uint16_t> rows,
                                      std::span<std::int32_t> row_index,
                                      std::span<std::int32_t> positions, Stream stream = nullptr);

}  // namespace aether::cuda
