// aether's pruned indexer top-k, DoSA (docs/dosa.md): the plan and errors, the exact
// model (bounds, threshold, plan rule, pruned and decode top-k) and the CPU backend.
#pragma once

#include "api/dosa.hpp"
#include "impl/cpu/dosa.hpp"
#include "model/dosa.hpp"
