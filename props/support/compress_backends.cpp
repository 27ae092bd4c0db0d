#include "props/support/compress_backends.hpp"

#include "impl/cpu/compress.hpp"
#include "props/support/property.hpp"

namespace aether::props {

CompressBackend cpu_compress_backend() {
  return {"cpu", [](auto... a) { return cpu::compress_prefill(a...); },
          [](auto... a) { return cpu::compress_decode(a...); }};
}

std::vector<CompressBackend> impl_compress_backends() {
  std::vector<CompressBackend> backends{cpu_compress_backend()};
#ifdef AETHER_HAVE_CUDA
  if (gpu_present()) {
    backends.push_back(cuda_compress_backend());
    backends.push_back(cuda_queued_compress_backend());
  }
#endif
  return backends;
}

}  // namespace aether::props
