// aether's logical-row to paged-slot conversion (docs/paging.md): the errors and vocabulary, the
// exact model, the CPU backend and, in a CUDA build (aether::cuda linked), the CUDA backend with
// the device span and buffer types its tensors travel in.
#pragma once

#include "api/paging.hpp"
#include "impl/cpu/paging.hpp"
#include "model/paging.hpp"
#if defined(AETHER_HAVE_CUDA)
#include "impl/cuda/device_buffer.hpp"
#include "impl/cuda/paging.hpp"
#endif
