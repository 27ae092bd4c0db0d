// The read-once top-k (impl/cuda/indexer_read_once.cu) behind cuda::valid_prefix_topk:
// rows of 16384 scores and more, K <= 2048, up to 2048 rows. Host declarations only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "impl/cuda/device.hpp"

namespace aether::cuda::topk {

// The path's limits, and the tiles its tests aim at: rows of kWideMinWidth scores
// and more, K up to kWideMaxK, up to kWideMaxRows rows; gathered in chunks of
// kWideChunk scores (a plateau's ties are counted per chunk); a list of up to
// kCandidates keys per row; the sample reads kSampledRun scores at the start of
// every kSampleStride.
inline constexpr std::size_t kWideMinWidth = 16384, kWideMaxK = 2048, kWideMaxRows = 2048;
inline constexpr std::size_t kWideChunk = 8192, kCandidates = 8192;
inline constexpr std::size_t kSampledRun = 32, kSampleStride = 32 * 32;

// Whether a call of this shape (out already K lanes per row) takes the read-once path.
bool read_once_fits(std::size_t width, std::size_t k, std::size_t rows);

// Queues the sample, gathering and finishing kernels on `stream` (device pointers;
// the scores' and out's shapes already checked): the sample resets the verdict
// word, the gather records refusals in it, the finish writes `out` only if it
// stays clean. 0 or the cudaError_t.
int launch_read_once(const float* scores, std::size_t width, const std::int32_t* ends,
                     std::size_t rows, std::size_t k, std::int32_t* out, DeviceVerdict* verdict,
                     Stream stream);

}  // namespace aether::cuda::topk
