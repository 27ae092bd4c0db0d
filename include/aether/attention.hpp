// aether's attention selectors (docs/attention.md): the exact model of the dense
// rows and the Selector baselines the witness null models reuse.
#pragma once

#include "model/attention.hpp"
