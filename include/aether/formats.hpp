// aether's cache formats' codecs (docs/formats.md): elements, scales, rounding profiles and
// errors, the exact model, the CPU backend where CUDA's conversion headers are
// (AETHER_HAVE_FP_CONVERSIONS) and, in a CUDA build, the CUDA store and read side.
#pragma once

#include "api/formats.hpp"
#include "model/formats.hpp"
#if defined(AETHER_HAVE_FP_CONVERSIONS)
#include "impl/cpu/formats.hpp"
#endif
#if defined(AETHER_HAVE_CUDA)
#include "impl/cuda/device_buffer.hpp"
#include "impl/cuda/formats.hpp"
#endif
