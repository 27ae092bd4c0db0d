// The CUDA store and read side of the cache formats behind host buffers (staged
// through device memory, the cache too, so that checks of the bytes a refused
// store left mean something), in each launch mode (props/support/cuda_launch.hpp),
// in the shape props/formats_props.cpp's check_store takes.
#pragma once

#include <vector>

#include "api/formats.hpp"
#include "props/support/formats_gen.hpp"
#ifdef AETHER_HAVE_CUDA
#include "props/support/cuda_launch.hpp"
#endif

namespace aether::props {

#ifdef AETHER_HAVE_CUDA
Status<FormatsError> cuda_store_rows(const StoreCase& c, std::vector<std::byte>& cache,
                                     Mode mode = Mode::Waiting);
Result<std::vector<double>, FormatsError> cuda_gather_rows(const StoreCase& c,
                                                           const std::vector<std::byte>& cache,
                                                           Mode mode = Mode::Waiting);
#endif

}  // namespace aether::props
