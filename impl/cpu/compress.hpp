// CPU backend of C1/C2 compression and its state ring: the model's contracts and
// refusals (model/compress.hpp, docs/compress.md), caller buffers, nothing written
// (ring included) on a refusal.
//   projected  [tokens, 2, D] fp32: each new position's score row then latent row,
//              requests' tokens back to back in request order
//   ring       [slots, S, 2, D] fp32, read and written
//   rows       [rows, D] bf16 bits; row_index [rows] (compressed row j, or -1);
//              positions [rows] (j r, or 0)
// Prefill: max(1, nc) rows per request (a zero placeholder when nc = 0), the old
// inputs of a pending group read from the ring, then the chunk's last S positions
// written to it. Decode: the new positions written to the ring first, then one row
// per position, read back from the ring (S >= r + qmax - 1 is checked). Arithmetic:
// impl/compress_math.hpp, the same as the CUDA backend's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "api/compress.hpp"

namespace aether::cpu {

Status<CompressError> compress_prefill(std::span<const CompressRequest> requests,
                                       std::span<const float> projected, std::span<float> ring,
                                       const CompressShape& shape, std::span<std::uint16_t> rows,
                                       std::span<std::int32_t> row_index,
                                       std::span<std::int32_t> positions);

Status<CompressError> compress_decode(std::span<const CompressRequest> requests,
                                      std::span<const float> projected, std::span<float> ring,
                                      const CompressShape& shape, std::span<std::uint16_t> rows,
                                      std::span<std::int32_t> row_index,
                                      std::span<std::int32_t> positions);

// The AVX2 build's eight-lane exp, over n values (n a multiple of 8), for the test
// that it gives impl::exp_nonpositive's bits on every input; false (nothing
// written) where the CPU has no AVX2 + FMA.
bool exp_nonpositive_avx2(const float* x, float* out, std::size_t n);

}  // namespace aether::cpu
