// aether's indexer scores and selection (valid-prefix top-k, candidate blocks) (docs/indexer.md):
// the errors and vocabulary, the exact model, the CPU backend and, in a CUDA build (aether::cuda
// linked), the CUDA backend with the device span and buffer types its tensors travel in.
#pragma once

#include "api/indexer.hpp"
#include "impl/cpu/indexer.hpp"
#include "model/indexer.hpp"
#if defined(AETHER_HAVE_CUDA)
#include "impl/cuda/device_buffer.hpp"
#include "impl/cuda/indexer.hpp"
#endif
