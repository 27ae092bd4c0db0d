// aether's C1/C2 compression and its state ring (docs/compress.md): the errors and vocabulary, the
// exact model, the CPU backend and, in a CUDA build (aether::cuda linked), the CUDA backend with
// the device span and buffer types its tensors travel in.
#pragma once

#include "api/compress.hpp"
#include "impl/cpu/compress.hpp"
#include "model/compress.hpp"
#if defined(AETHER_HAVE_CUDA)
#include "impl/cuda/compress.hpp"
#include "impl/cuda/device_buffer.hpp"
#endif
