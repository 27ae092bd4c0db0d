// Generators and drivers for compression properties, tests and the fuzz target:
// one request's sequence of positions run through a backend as prefill chunks or
// verify steps, and the same through the model.
#pragma once

#include <rapidcheck.h>

#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "api/compress.hpp"
#include "model/compress.hpp"
#include "props/support/compress_backends.hpp"

namespace aether::props {

// n positions, [n, 2, D]: each position's score row then latent row.
struct Sequence {
  std::size_t dim = 1;
  std::vector<float> projected;
  std::size_t size() const { return projected.size() / (2 * dim); }
  std::span<const float> positions(std::size_t first, std::size_t count) const {
    return std::span(projected).subspan(first * 2 * dim, count * 2 * dim);
  }
};

// L1 grid: every score of a channel equal (e^0 = 1 exactly after the shift), so for
// r in {1, 2, 4} the fp32 mean is exact. Latents: integers in [-15, 15] (the mean a
// bf16), or, in one sequence of three, one value per channel shared by every
// position (the mean is that value) drawn from the bf16 rounding's hard cases: exact
// ties between two bf16 numbers, an fp32 step either side of one, and (where
// `ratio` is 1, so no sum can overflow) the largest finite bf16 and the fp32 values
// either side of its rounding boundary, one of which rounds to infinity.
rc::Gen<Sequence> gen_grid_sequence(std::size_t n, std::size_t dim, std::int64_t ratio);

// The bf16 nearest-even rounding of an exact value, found by exact comparisons (a
// binary search over the bf16 grid, then the midpoint): the oracle the backends'
// rows are held to. A value at or past the midpoint between the largest finite bf16
// and 2^128 gives infinity, as IEEE rounding does.
std::uint16_t bf16_round(const model::Rational& x);
// Whether bf16 bits y can be the rounding of an fp32 value in z: rounding is
// monotone, so y must lie between bf16_round(z.lo) and bf16_round(z.hi); where both
// are the same, y must be exactly that (the bits are determined).
bool bf16_between(std::uint16_t y, const model::Interval& z);
// General: scores in [-30, 30], latents of any sign with exponents within +-20.
rc::Gen<Sequence> gen_float_sequence(std::size_t n, std::size_t dim);
// Chunk lengths summing to n (empty chunks included now and then).
rc::Gen<std::vector<std::size_t>> gen_partition(std::size_t n);

// A schedule of verify steps over a true sequence of n positions: a prefill of
// `prefix`, then steps that each draft up to qmax positions (the accepted prefix
// true, the rest garbage) and accept a prefix, until the sequence is consumed (at
// most 12 steps).
struct VerifySchedule {
  std::size_t prefix = 0;
  std::vector<std::pair<std::size_t, std::size_t>> steps;  // (drafted, accepted)
};
rc::Gen<VerifySchedule> gen_verify_schedule(std::size_t n, std::int64_t qmax);

// What a backend produced for one request: every completed row by its index
// (bf16 bits), and the ring after the last step.
struct ImplRun {
  std::map<std::int32_t, std::vector<std::uint16_t>> rows;
  std::vector<float> ring;
  std::size_t reserved = 0;  // output rows, placeholders included
};

// The sequence's positions [0, n) as prefill chunks of the given lengths, state
// slot 0 of a one-slot ring of `shape.ring` entries (zeros at first).
Result<ImplRun, CompressError> run_chunks(const CompressBackend& backend,
                                          const CompressShape& shape, const Sequence& seq,
                                          std::span<const std::size_t> chunks);

// A verify step: `draft` positions from `start` (the first `accepted` of them the
// sequence's own, the rest whatever the draft holds), then the accepted prefix.
struct VerifyStep {
  std::vector<float> draft;  // [q, 2, D]
  std::size_t accepted = 0;
};
// Prefill of the first `prefix` positions, then the verify steps through decode;
// rows of accepted positions only.
Result<ImplRun, CompressError> run_verify(const CompressBackend& backend,
                                          const CompressShape& shape, const Sequence& seq,
                                          std::size_t prefix, std::span<const VerifyStep> steps);

// The model's positions of a sequence (scores as the gate).
std::vector<model::Position> model_positions(const Sequence& seq);

// The ring entries holding positions [first, last) of slot 0, as the impl left them.
std::vector<float> ring_positions(const ImplRun& run, const CompressShape& shape,
                                  std::int64_t first, std::int64_t last);

// The one comparison of two rings ([slots, S, 2, D] floats, compared as bits, so
// -0 and NaN payloads count): empty when equal outside `skip` (entry numbers
// slot * S + entry), else each differing float by slot, entry, channel (score or
// latent, d) and both values, the first and last few of them.
std::string ring_report(std::span<const float> expected, std::span<const float> actual,
                        const CompressShape& shape, const std::set<std::size_t>& skip = {});

}  // namespace aether::props
