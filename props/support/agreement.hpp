// The L0 differential checks of the property suites, reusable on any backend:
// a user fills in a WitnessBackend or IndexerBackend with their own kernel and
// runs these inside AETHER_PROP (docs/using-aether.md). Each runs one generated
// call on the backend and on the model and fails the property (RC_FAIL) with the
// comparison helper's report on any difference: the value, the error variant with
// its details, or a byte of a refused call's output.
#pragma once

#include "props/support/indexer_backends.hpp"
#include "props/support/indexer_gen.hpp"
#include "props/support/witness_backends.hpp"
#include "props/support/witness_gen.hpp"

namespace aether::props {

// apply, scatter and indices of `backend` (those it fills in) against the model on
// call `c` (outputs poisoned beforehand, so a refusal must leave them untouched).
void check_witness_agreement(const WitnessBackend& backend, const WitnessCall& c);

// Where a backend checks its output buffer's length: last, as the model orders the
// refusals, or before anything that depends on the data (a call that only queues
// work, as cuda::enqueue_valid_prefix_topk, cannot wait for the data's verdict).
enum class OutputCheck { Last, BeforeData };

// `topk` (an IndexerBackend::topk) against model::valid_prefix_topk on call `c`.
void check_topk_agreement(const decltype(IndexerBackend::topk)& topk, const TopkCall& c,
                          const std::string& name, OutputCheck output_check = OutputCheck::Last);

}  // namespace aether::props
