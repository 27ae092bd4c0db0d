// What every CUDA backend header needs without pulling in the CUDA headers, so
// host-only translation units (tests built by g++) can include them.
#pragma once

struct CUstream_st;

namespace aether::cuda {

using Stream = CUstream_st*;  // cudaStream_t; nullptr is the default stream

// Number of usable CUDA devices; 0 when there is no driver or no GPU.
int device_count();

// Validation on the device, verdict on the host. Calls that must refuse before
// writing anything run a validation kernel that atomicMin's its refusals into a
// word, wait for the word, and only then launch the kernel that writes. The word
// and its pinned host mirror are allocated once per thread and device (an
// allocation per call cost tens of microseconds: the default pool hands memory back
// at every synchronize). Only validation kernels may touch the word.
struct Verdict {
  unsigned long long* word = nullptr;  // device memory
  const unsigned long long* host = nullptr;
};
inline constexpr unsigned long long kNoRefusal = ~0ull;
// Sets the word to kNoRefusal on `stream`; 0 or the cudaError_t.
int begin_verdict(Verdict& verdict, Stream stream);
// Copies the word to *verdict.host and waits for `stream`; 0 or the cudaError_t.
int end_verdict(const Verdict& verdict, Stream stream);

}  // namespace aether::cuda
