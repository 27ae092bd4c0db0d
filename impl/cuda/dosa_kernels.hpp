// The kernels of CUDA DoSA (impl/cuda/dosa_kernels.cu, dosa_prepare.cu,
// dosa_threshold.cu, dosa_merge.cu) behind host launchers, for impl/cuda/dosa.cu's
// orchestration. Every launcher queues on `stream` and returns the launch's error.
// Scores never come from here: only the scorer computes them.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "api/dosa.hpp"
#include "impl/cuda/device.hpp"
#include "impl/dosa_screen.hpp"

namespace aether::cuda::dosa {

using dosa_screen::ScreenTerms;

// One anchored head of a plan, flattened: its further anchors are
// terms[more_first, more_first + more_count).
struct AnchorEntry {
  std::uint32_t head, anchor;
  float beta;
  std::uint32_t more_first, more_count;
};

// A batch's plans in device memory: query t's retained heads are
// retained[retained_first[t] ...retained_first[t + 1]), likewise its anchors and
// aggregated heads; its screen weights (dosa_screen::screen_weights, zero past its
// own) are screen_weights[t width ...].
struct DevicePlans {
  const std::uint32_t *retained_first, *retained;
  const std::uint32_t* anchor_first;
  const AnchorEntry* anchors;
  const DosaTerm* terms;
  const std::uint32_t *aggregated_first, *aggregated;
  const float* screen_weights;
  std::size_t width;
};

// The largest heads and dims the preparation's shared arrays hold (the scorer's
// own limits: MAX_DEVICE_SCORE_HEADS, MAX_DEVICE_SCORE_DIM).
inline constexpr std::size_t kMaxHeads = 128, kMaxDim = 256;
// The compact merge sorts up to this many candidates a query (K + survivors) in one block.
inline constexpr std::size_t kMergeCapacity = 4096;
// Below every candidate of the wide merge (see place()).
inline constexpr float kFiller = -3.40282347e38f;

cudaError_t fill(std::int32_t* p, std::size_t n, std::int32_t value, cudaStream_t stream);
cudaError_t fill(float* p, std::size_t n, float value, cudaStream_t stream);
// is_seed[seeds[i]] = 1 (is_seed cleared before).
cudaError_t mark_seeds(const std::int32_t* seeds, std::size_t n, std::uint8_t* is_seed,
                       cudaStream_t stream);
// ||k|| from above and the row scale (1 for BF16) of every stored key.
cudaError_t key_norms(const std::byte* keys, KeyFormat format, std::size_t dim, std::size_t count,
                      double* norms, float* scales, cudaStream_t stream);
// Each query's screen rows [T, width, D] (bf16: retained rows, then a_A, zero
// rows after) and terms, computed as dosa_screen::prepare computes them; the rows
// of queries [T, padded) zero (a scorer batch's padding). survivors[t], when
// given, is set to 0 for screen_keys to count into (one launch less than a memset).
cudaError_t prepare_screens(const std::uint16_t* queries, const float* weights,
                            std::size_t query_count, std::size_t padded, std::size_t heads,
                            std::size_t dim, const DevicePlans& plans, std::uint16_t* rows,
                            ScreenTerms* terms, std::int32_t* survivors, cudaStream_t stream);
// tau_t: the K-th greatest of query t's seed scores [T, seed_count] (1 <= k <=
// seed_count, every score finite); with lanes [T, K] (else nullptr), its seeds'
// top-K as positions in the seed list, in no order (the merge ranks them). Blocks
// that find the gate (device.hpp) shut do nothing.
cudaError_t select_seeds(const float* seed_scores, std::size_t seed_count, std::size_t k,
                         std::size_t query_count, float* tau, std::int32_t* lanes,
                         cudaStream_t stream, Gate gate = {});
// Keys [0, count) of every query's screen values p [T, stride]: a non-seed key whose
// bound reaches tau_t is appended to list[t stride ...], counts[t] (zeroed before) its length.
cudaError_t screen_keys(const float* p, std::size_t stride, std::size_t count,
                        std::size_t query_count, const ScreenTerms* terms, const float* tau,
                        const double* norms, const float* scales, const std::uint8_t* is_seed,
                        std::int32_t* list, std::int32_t* counts, cudaStream_t stream);
// out[j] = U of key j for one query's screen values p and its terms (device memory).
cudaError_t key_bounds(const float* p, std::size_t count, const ScreenTerms* terms,
                       const double* norms, const float* scales, double* out, cudaStream_t stream);

// The candidates of a query: its seeds' top-K (lanes into the ascending seed ids)
// and its survivors (list [T, list_stride], their scores [T, score_stride]) scoring
// at least tau_t.
struct Candidates {
  const float* seed_scores;
  std::size_t seed_count;
  const std::int32_t *lanes, *seed_ids;
  std::size_t k;
  const std::int32_t* list;
  std::size_t list_stride;
  const float* list_scores;
  std::size_t score_stride;
  const std::int32_t* counts;
  const float* tau;
  std::uint32_t id_bits;  // every id below 2^id_bits - 1 (at most 31)
};
// The best K of each query's candidates in the total order, ascending, into out
// [T, K]: one block a query, K + counts[t] <= kMergeCapacity.
cudaError_t merge_candidates(const Candidates& c, std::size_t query_count, std::int32_t* out,
                             cudaStream_t stream);
// Decode's ranking: the best min(K, *listed) of the listed keys (list [*listed], ids
// into scores) in the total order, ascending, -1 after, into out [K]; one block,
// K at most kMergeCapacity, every id below 2^id_bits - 1. Nothing is written to out
// when *listed exceeds kMergeCapacity or the verdict holds a refusal; *listed goes
// to the verdict's detail[1].
cudaError_t rank_listed(const float* scores, const std::int32_t* list, const std::int32_t* listed,
                        std::size_t k, std::uint32_t id_bits, DeviceVerdict* verdict,
                        std::int32_t* out, cudaStream_t stream);
// Each query's candidates written at their ids into rows [T, stride] filled with
// kFiller, for the top-k to rank (any K and any survivor count).
cudaError_t place(const Candidates& c, std::size_t query_count, std::size_t longest, float* rows,
                  std::size_t stride, cudaStream_t stream);

}  // namespace aether::cuda::dosa
