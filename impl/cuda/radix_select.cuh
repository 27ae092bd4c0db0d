// A block's k-th greatest key by radix select, shared by DoSA's seed selection and
// its merge (impl/cuda/dosa_threshold.cu, impl/cuda/dosa_merge.cu).
#pragma once

#include <cstdint>

namespace aether::cuda {

// The k-th greatest of the block's keys (1 <= k <= their number), every thread of
// the block calling it: for_each(f) calls f(key) on each of this thread's keys, the
// same keys every time (it is called once a round). Keys lie below 2^bits; the
// select takes a byte a round from the top, counting the keys that share the bytes
// found so far. `ties` gets how many of the keys equal to the result are among the k
// greatest (the rest of those k lie above it).
template <class Key, class ForEach>
__device__ Key kth_greatest_key(ForEach for_each, unsigned k, int bits, unsigned& ties) {
  __shared__ unsigned count[256];
  __shared__ Key prefix;     // the result's bytes so far
  __shared__ unsigned rank;  // its rank among the keys that share them
  const unsigned lane = threadIdx.x % 32;
  if (threadIdx.x == 0) prefix = 0, rank = k;
  for (int shift = (bits + 7) / 8 * 8 - 8; shift >= 0; shift -= 8) {
    for (unsigned d = threadIdx.x; d < 256; d += blockDim.x) count[d] = 0;
    __syncthreads();
    const Key high = shift + 8 >= int(8 * sizeof(Key)) ? Key(0) : ~Key(0) << (shift + 8);
    const Key want = prefix;
    for_each([&](Key key) {
      if ((key & high) == want) atomicAdd(&count[unsigned(key >> shift) & 255u], 1u);
    });
    __syncthreads();
    if (threadIdx.x < 32) {  // lane l: bytes 255 - 8 l down to 248 - 8 l
      const unsigned wanted = rank;
      unsigned mine = 0;
      for (unsigned d = 0; d < 8; ++d) mine += count[255 - 8 * lane - d];
      unsigned above = mine;  // keys with a byte above this lane's last: lanes 0 .. l
      for (unsigned m = 1; m < 32; m *= 2) {
        const unsigned x = __shfl_up_sync(0xffffffffu, above, m);
        if (lane >= m) above += x;
      }
      const unsigned first = __ffs(__ballot_sync(0xffffffffu, above >= wanted)) - 1;
      unsigned byte = 0, left = 0;
      if (lane == first) {
        unsigned seen = above - mine;
        for (byte = 255 - 8 * lane; seen + count[byte] < wanted; --byte) seen += count[byte];
        left = wanted - seen;
      }
      byte = __shfl_sync(0xffffffffu, byte, int(first));
      left = __shfl_sync(0xffffffffu, left, int(first));
      if (lane == 0) prefix = want | Key(byte) << shift, rank = left;
    }
    __syncthreads();
  }
  ties = rank;
  return prefix;
}

}  // namespace aether::cuda
