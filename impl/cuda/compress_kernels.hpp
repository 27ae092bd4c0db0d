// The kernels of a CUDA compression call (impl/cuda/compress_prefill.cu,
// compress_decode.cu), queued from its plan (impl/cuda/compress.cu plans, hands
// over the requests and reads the verdict). Each step reads its inputs once, in one
// pass that writes the caller's rows and the ring as it goes and reports every
// NaN/inf it reads into the verdict word; a refused call's outputs are then
// unspecified and its ring differs only where model::entries_a_refusal_may_change
// allows: decode writes only its own positions' entries, prefill leaves the writes
// that land on a pending input to a second kernel that runs them only if the word
// is clean. CUDA source only.
#pragma once

#include <cuda_runtime.h>

#include <span>

#include "impl/cuda/compress_table.cuh"
#include "impl/cuda/device.hpp"

namespace aether::cuda::compress_kernels {

struct Launch {
  std::size_t rows = 0, tokens = 0;  // the plan's output rows and new positions
  std::int32_t most_tokens = 0;      // the batch's longest step
  const float* projected = nullptr;
  float* ring = nullptr;
  Geometry g{};
  std::uint16_t* out = nullptr;
  std::int32_t *row_index = nullptr, *positions = nullptr;
  unsigned long long* refusal = nullptr;  // the verdict word, kNoRefusal before the call
  int ratio_path = 0;                     // 1, 2 or 4: the 16-byte register paths; 0: any ratio
  bool vector = false;                    // D % 4 == 0 and projected, ring 16-byte aligned
  // prefill: some request starts inside a group (start mod r != 0), so some ring
  // writes wait for the verdict, in a second kernel
  bool pending_inputs = false;
  // prefill: its row items fetched under the L2 evict-first policy (compress_prefill.cu)
  bool evict_first = false;
};

cudaError_t queue_prefill(const Launch& launch, const Requests& table, Stream stream);
// The step's requests and their first tokens (the plan's) go into the launches' own
// parameters (DecodeRequests).
cudaError_t queue_decode(const Launch& launch, std::span<const CompressRequest> requests,
                         std::span<const std::size_t> token_offset, Stream stream);

}  // namespace aether::cuda::compress_kernels
