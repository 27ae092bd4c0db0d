// aether's cross-layer sharing maps (docs/sharing.md): the cache formats' row bytes, the
// layer settings, maps and errors, the exact model and the CPU backend (host logic: no CUDA).
#pragma once

#include "api/sharing.hpp"
#include "impl/cpu/sharing.hpp"
#include "model/sharing.hpp"
