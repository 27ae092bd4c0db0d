// What the compression kernels' launches share (impl/cuda/compress_prefill.cu,
// impl/cuda/compress_decode.cu): a block's warps, the dispatch to the kernels'
// ratio template, and the resident grid their warps persist over. CUDA source only.
#pragma once

#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "impl/cuda/launch.cuh"

namespace aether::cuda::compress_kernels {

inline constexpr unsigned kWarpsPerBlock = 8;  // the row kernels: a warp per output row

// Calls f(std::integral_constant<int, R>) for the kernels' ratio template.
template <class F>
void with_ratio(int ratio, F f) {
  switch (ratio) {
    case 1:
      return f(std::integral_constant<int, 1>{});
    case 2:
      return f(std::integral_constant<int, 2>{});
    case 4:
      return f(std::integral_constant<int, 4>{});
    default:
      return f(std::integral_constant<int, 0>{});
  }
}

// Blocks of kWarpsPerBlock warps for `warps` warps of work, at most what the
// device holds at once (the row kernels' warps persist over their share).
template <auto kernel>
unsigned resident_grid(std::size_t warps) {
  const std::size_t most = std::max<std::size_t>(
      1, resident_blocks(reinterpret_cast<const void*>(kernel), int(32 * kWarpsPerBlock)));
  return unsigned(std::clamp<std::size_t>((warps + kWarpsPerBlock - 1) / kWarpsPerBlock, 1, most));
}

}  // namespace aether::cuda::compress_kernels
