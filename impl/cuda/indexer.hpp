// CUDA backend of the indexer's valid-prefix top-k: the CPU signature
// (impl/cpu/indexer.hpp) over device memory. Whether a call is refused depends on
// device data (ends, NaN), so the kernels that check come first and the kernels
// that write read the device's verdict and write nothing after a refusal. The
// call waits for the verdict, so it returns the same error the model would; the
// enqueue_ form below leaves it on the device.
#pragma once

#include <cstddef>
#include <cstdint>

#include "api/indexer.hpp"
#include "impl/cuda/device.hpp"

namespace aether::cuda {

// Stored keys in device memory: IndexKeys' layout (api/indexer.hpp).
struct DeviceIndexKeys {
  KeyFormat format = KeyFormat::F32;
  device_span<const std::byte> bytes;  // rows * key_row_bytes(format, dim)
  std::size_t dim = 0;
};

// Rows of 16384 scores and more, K <= 2048, up to 2048 rows: the scores read once
// (a sample, one gathering pass, an exact finish per row). Other calls: one block
// per row, three radix passes (11, 11, 10 bits) for the K-th largest order key,
// one pass writing the choice in index order (ties to the lower index).
Status<IndexerError> valid_prefix_topk(device_span<const float> scores, std::size_t width,
                                       device_span<const std::int32_t> ends, std::size_t k,
                                       device_span<std::int32_t> out, Stream stream = nullptr);

// The same call queued on `stream` without a host wait (capturable in a CUDA graph,
// its scratch then the graph's own): out's and scores' shapes are refused at once;
// a bad end or non-finite score is left in *verdict (device memory), read back and
// turned into the model's error by valid_prefix_topk_verdict (width: the call's).
// verdict->detail[0] counts the read-once rows whose sampled threshold missed,
// selected by the slower one-block method (a speed figure, never a different
// answer).
Status<IndexerError> enqueue_valid_prefix_topk(device_span<const float> scores, std::size_t width,
                                               device_span<const std::int32_t> ends, std::size_t k,
                                               device_span<std::int32_t> out,
                                               DeviceVerdict* verdict, Stream stream = nullptr);
Status<IndexerError> valid_prefix_topk_verdict(const DeviceVerdict& verdict, std::size_t width);

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
Status<IndexerError> index_scores(device_span<const std::uint16_t> queries,
                                  device_span<const float> weights, std::size_t query_count,
                                  const DeviceIndexKeys& keys, device_span<float> out,
                                  Stream stream = nullptr);

}  // namespace aether::cuda
