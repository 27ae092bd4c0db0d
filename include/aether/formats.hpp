// aether's cache formats' codecs (docs/formats.md): elements, scales, rounding profiles and
// errors, the exact model and, where CUDA's conversion headers are (AETHER_HAVE_FP_CONVERSIONS),
// the CPU backend.
#pragma once

#include "api/formats.hpp"
#include "model/formats.hpp"
#if defined(AETHER_HAVE_FP_CONVERSIONS)
#include "impl/cpu/formats.hpp"
#endif
