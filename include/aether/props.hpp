// aether's generator and oracle library (aether::props_support): the property
// macro with its replay line (AETHER_PROP), the RapidCheck generators of every
// component's calls, the backends behind one host-memory interface, the one
// comparison helper, and the L0 checks to run on a backend of one's own
// (docs/using-aether.md).
#pragma once

#include "props/support/agreement.hpp"
#include "props/support/compare.hpp"
#include "props/support/compress_backends.hpp"
#include "props/support/compress_gen.hpp"
#include "props/support/dosa_backends.hpp"
#include "props/support/dosa_gen.hpp"
#include "props/support/formats_gen.hpp"
#include "props/support/indexer_backends.hpp"
#include "props/support/indexer_gen.hpp"
#include "props/support/indexer_scores_gen.hpp"
#include "props/support/model_adapter.hpp"
#include "props/support/paging_backends.hpp"
#include "props/support/paging_gen.hpp"
#include "props/support/property.hpp"
#include "props/support/sharing_gen.hpp"
#include "props/support/witness_backends.hpp"
#include "props/support/witness_gen.hpp"
