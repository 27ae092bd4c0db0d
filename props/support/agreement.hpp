// The L0 differential checks of the property suites, reusable on any backend:
// a user fills in a WitnessBackend or IndexerBackend, or hands a quantizer, with
// their own kernel and runs these inside AETHER_PROP (docs/using-aether.md). Each runs one
// generated call on the backend and on the model and fails the property (RC_FAIL) with the
// comparison helper's report on any difference: the value, the error variant with
// its details, or a byte of a refused call's output.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "api/formats.hpp"
#include "props/support/formats_gen.hpp"
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

// A row quantizer under test: one row of `format`, group by group.
using Quantizer =
    std::function<Result<QuantizedRow, FormatsError>(CacheFormat, std::span<const float>)>;

// `quantize` against model::quantize_row under `profile` (the rule its author
// claims; c.profile is not used) on case c's format and row: the refusal, its
// variant and fields; else every scale byte and code. A difference names the
// element, its group, its value, the group's scale, x / scale exactly, both codes
// and their values, whether x / scale lies halfway between them (a tie: where the
// profiles part), and the named profiles the row does follow (profiles_followed).
void check_quantizer_agreement(const Quantizer& quantize, const FormatsCase& c,
                               RoundingProfile profile, const std::string& name);

// The named profiles under which the model quantizes `row` to `got`: the rule a
// quantizer followed on that row (none, one, or both where the row has no tie).
std::vector<RoundingProfile> profiles_followed(CacheFormat format, std::span<const float> row,
                                               const QuantizedRow& got);

}  // namespace aether::props
