// CUDA backend of the indexer's valid-prefix top-k: the CPU signature
// (impl/cpu/indexer.hpp) over device memory. Whether a call is refused depends on
// device data (ends, NaN), so a first kernel validates and a second selects only
// if nothing was refused; the call waits for the verdict, so it returns the same
// error the model would, and a refused call writes nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "api/indexer.hpp"
#include "impl/cuda/device.hpp"

namespace aether::cuda {

// One block per row: three radix passes (11, 11, 10 bits) find the K-th largest
// order key, one pass writes the choice in index order (ties to the lower index).
Status<IndexerError> valid_prefix_topk(std::span<const float> scores, std::size_t width,
                                       std::span<const std::int32_t> ends, std::size_t k,
                                       std::span<std::int32_t> out, Stream stream = nullptr);

// Scores of T queries against L stored keys, I_tj = Σ_h w_th max(0, q_th · k_j):
// queries [T, H, D] as bf16 bits, weights [T, H] fp32, keys BF16 or E4M3 rows,
// out [T, L] fp32. Dot products on bf16 tensor cores (mma.sync, fp32 accumulation),
// then fma(w_h, max(dot_h, 0), ·) over each lane's heads h = l/4 (mod 8) ascending
// and a fixed pairwise combination across lanes, then the E4M3 row scale: a fixed
// order, identical results on every run (not the CPU's order). Agreement: exact on
// the L1 grid, inside model::tensor_core_score_error_bounds elsewhere (L2).
// Refuses what the model refuses (same error), plus UnsupportedOnDevice for F32
// keys, H > 128, D > 256, tiles beyond a block's shared memory (H200: D = 256 with
// H > 80) or bf16 keys at an odd address (docs/indexer.md).
inline constexpr std::size_t MAX_DEVICE_SCORE_HEADS = 128, MAX_DEVICE_SCORE_DIM = 256;
Status<IndexerError> index_scores(std::span<const std::uint16_t> queries,
                                  std::span<const float> weights, std::size_t query_count,
                                  const IndexKeys& keys, std::span<float> out,
                                  Stream stream = nullptr);

}  // namespace aether::cuda
