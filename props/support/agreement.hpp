// The L0 differential checks of the property suites, reusable on any backend: a
// user fills in a WitnessBackend, IndexerBackend, PagingBackend, CompressBackend or
// StoreBackend, or hands a quantizer or a pruned top-k, with their own kernel and
// runs these inside AETHER_PROP (docs/using-aether.md). Each runs one generated
// call on the backend and on the model and fails the property (RC_FAIL) with the
// comparison helper's report on any difference: the value, the error variant with
// its details, or a byte of a refused call's output.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "api/dosa.hpp"
#include "api/formats.hpp"
#include "props/support/compress_backends.hpp"
#include "props/support/compress_batch_gen.hpp"
#include "props/support/dosa_gen.hpp"
#include "props/support/formats_gen.hpp"
#include "props/support/indexer_backends.hpp"
#include "props/support/indexer_gen.hpp"
#include "props/support/paging_backends.hpp"
#include "props/support/paging_gen.hpp"
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

// `backend`'s conversion (`masked`: its masked one) against model::paged_slots
// (paged_slots_masked) on call c: the lanes, the refusal (variant and fields; the
// output's length refused after the geometry and shapes, before any lane), out
// untouched by a refusal unless the backend is not transactional (then, for a
// refusal of the data, only the error is compared), nothing written past out, and
// in place the same verdict and lanes as out of place.
void check_paging_agreement(const PagingBackend& backend, const PagingCall& c, bool masked = false);

// `backend`'s prefill or decode (c.decode) against model::compress_batch on call c
// (`grid`: a call of gen_batch_call(true), whose rows are exact, so their bf16 bits
// are determined): the refusal (variant and fields) with every buffer untouched, or
// for a backend not transactional and a refusal of the data, the ring changed only
// at the entries the model names; else the ring bit for bit (ring_report: slot,
// entry, channel), each row's index and position, and each bf16 element the
// rounding of a value in the model's enclosure; nothing written past any buffer.
void check_compress_agreement(const CompressBackend& backend, const BatchCall& c, bool grid);

// A pruned indexer top-k under test (DoSA, or any scheme that skips scoring):
// one query [H, D] with weights [H] against stored keys, K lanes into out (ids
// ascending, -1 padded, as the indexer's top-k gives them), from the seeds given;
// heads, anchors and thresholds are its own business.
using PrunedTopk = std::function<Status<DosaError>(
    std::span<const float> query, std::span<const float> weights, const IndexKeys& keys,
    std::size_t k, std::span<const std::int32_t> seeds, std::span<std::int32_t> out)>;

// `pruned` against full scoring's top-K on a well-formed call on the integer grid
// (props::gen_dosa_call with `grid`: every float sum exact, so the exact top-K is
// the one any float full scoring gives; a call off the grid fails the check). The
// lanes compared with model::dosa_topk's, nothing written past them; a difference
// lists the lanes and, for each id one side has and the other lacks, its exact
// score beside tau (the K-th best seed score).
void check_pruned_topk_agreement(const PrunedTopk& pruned, const DosaCall& c,
                                 const std::string& name);

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

// A store under test and its read side: case c's rows into `cache` at c.slots
// under c.profile (model::store_rows's contract), and the rows at c.reads
// dequantized (model::gather_rows's). A transactional store leaves the cache as it
// was when it refuses; any store may change only the rows at its own slots
// (SPEC section 3).
struct StoreBackend {
  std::string name;
  std::function<Status<FormatsError>(const StoreCase& c, std::vector<std::byte>& cache)> store;
  std::function<Result<std::vector<double>, FormatsError>(const StoreCase& c,
                                                          const std::vector<std::byte>& cache)>
      gather;
  bool transactional = true;
};

// `b` against the model on case c: the refusal (variant and fields), the cache's
// bytes (a difference named by slot and byte, cache_report), and on a refusal the
// bytes it may change and that the repaired store (NaN/inf as 0, bad and repeated
// slots as placeholders) then leaves the cache it leaves without the refused call;
// the read side's values exactly, or its refusal.
void check_store_agreement(const StoreBackend& b, const StoreCase& c);

}  // namespace aether::props
