// aether's pruned indexer top-k, DoSA (docs/dosa.md): the plan and errors, the exact
// model (bounds, threshold, plan rule, pruned and decode top-k), the CPU backend and, in
// a CUDA build (aether::cuda linked), the CUDA backend.
#pragma once

#include "api/dosa.hpp"
#include "impl/cpu/dosa.hpp"
#include "model/dosa.hpp"
#if defined(AETHER_HAVE_CUDA)
#include "impl/cuda/device_buffer.hpp"
#include "impl/cuda/dosa.hpp"
#endif
