// What every CUDA backend header needs without pulling in the CUDA headers, so
// host-only translation units (tests built by g++) can include them.
#pragma once

struct CUstream_st;

namespace aether::cuda {

using Stream = CUstream_st*;  // cudaStream_t; nullptr is the default stream

// Number of usable CUDA devices; 0 when there is no driver or no GPU.
int device_count();

}  // namespace aether::cuda
