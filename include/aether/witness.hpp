// aether's segment witnesses (docs/witness.md): the errors and vocabulary, the exact model, the
// CPU backend and, in a CUDA build (aether::cuda linked), the CUDA backend with the device
// span and buffer types its tensors travel in.
#pragma once

#include "api/witness.hpp"
#include "impl/cpu/witness.hpp"
#include "model/witness.hpp"
#if defined(AETHER_HAVE_CUDA)
#include "impl/cuda/device_buffer.hpp"
#include "impl/cuda/witness.hpp"
#endif
