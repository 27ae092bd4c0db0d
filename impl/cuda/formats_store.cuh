// The store's kernel (impl/cuda/formats.cu): a warp a batch of rows
// (impl/cuda/formats_rows.cuh), each item's values staged in shared memory ahead
// of their conversion. Codes come from impl/formats_codes.hpp, the CPU's rules.
// CUDA source only.
#pragma once

#include "impl/cuda/evict_first.cuh"
#include "impl/cuda/formats_rows.cuh"

namespace aether::cuda::formats_rows {

// The claims' table, emptied by the store's first kernel. Direct (`words`) where
// the cache's slots number at most twice the open-addressed table's entries, so
// that it takes no more memory: slot s's word is the lowest row that claimed it,
// ~0u when none. Otherwise open-addressed (`entries`): 2^bits entries (at least
// twice the distinct slots a call can name, at most 2^32), each a slot and a row
// as slot << 32 | row, ~0 when empty (no slot is 2^32 - 1); a slot's first probe
// is the top bits of a multiplicative hash, so slots that differ only in their
// high bits spread too.
struct Claims {
  unsigned* words;
  unsigned long long* entries;
  unsigned bits;
};
inline constexpr unsigned long long kUnclaimed = ~0ull;
inline constexpr unsigned kNoRow = ~0u;

// Of two rows j and `before` on one slot, the later refused (rows fit 32 bits:
// 2^32 rows of 16 floats outgrow any device).
__device__ inline void refuse_the_later(unsigned before, unsigned j, unsigned long long* verdict) {
  atomicMin(verdict, refusal(0, before > j ? before : j));
}

// Row j's claim on slot s, open-addressed: every row but the lowest on a slot is
// refused, whichever arrives first. A slot's first claim is one compare-and-swap;
// a later one keeps the lower row by a minimum over the entry (its high half, the
// slot, is the same in both), and refuses the later of its own row and the one it
// found.
__device__ inline void claim_slot(Claims c, std::int32_t s, unsigned j,
                                  unsigned long long* verdict) {
  const std::size_t mask = (std::size_t(1) << c.bits) - 1;
  const unsigned long long mine = (unsigned long long)(unsigned(s)) << 32 | j;
  for (std::size_t h = (unsigned(s) * 0x9e3779b1u) >> (32 - c.bits);; h = (h + 1) & mask) {
    const unsigned long long held = atomicCAS(c.entries + h, kUnclaimed, mine);
    if (held == kUnclaimed) return;
    if (held >> 32 != unsigned(s)) continue;
    return refuse_the_later(unsigned(atomicMin(c.entries + h, mine)), j, verdict);
  }
}

// Row j's claim begun, for settle_claim to finish after the batch's items. Direct:
// one minimum over the slot's word, whose answer (the lowest row before it) is read
// only then, so that its round trip lies behind the items: each warp's first claim
// queues behind every warp's first fetches, and with the probes' chains the last
// warps of a 65536-row store made theirs at 13 us of its 15 (docs/performance.md).
// Open-addressed: the claim settled now, kNoRow returned.
__device__ inline unsigned begin_claim(Claims c, std::int32_t s, unsigned j,
                                       unsigned long long* verdict) {
  if (c.words != nullptr) return atomicMin(c.words + s, j);
  claim_slot(c, s, j, verdict);
  return kNoRow;
}
__device__ inline void settle_claim(unsigned before, unsigned j, unsigned long long* verdict) {
  if (before != kNoRow) refuse_the_later(before, j, verdict);
}

// Items in flight a warp (kStoreStages - 1 fetched while one is converted: two
// stages measured ahead of three and four on the H200, docs/performance.md), each
// staged as its 128 quads with quad q placed at q ^ ((q / 8) % 8): the eight lanes
// of a fetch's 16-byte write share q / 8 (a permutation of eight consecutive
// quads), and the eight lanes reading 4 l + u for one u meet eight distinct
// (q ^ l / 2) % 8, so neither side conflicts on a bank, and a stage is 2 KiB, no
// padding. The stages are dynamic shared memory (resident_blocks allows them).
inline constexpr unsigned kStagedQuads = kChunk / 4, kStoreStages = 2;
__host__ __device__ constexpr unsigned staged_quad(unsigned q) { return q ^ (q / 8 % 8); }
// The same for a lane's own quads, 4 l + u (u < 4): (4 l ^ (l / 2) % 8) ^ u, and for
// the quads it fetches, l + 32 u: (l ^ l / 8 ^ 4 (u % 2)) + 32 u; a lane constant
// each, so that an item's addresses cost one or two instructions a quad.
__host__ __device__ constexpr unsigned read_key(unsigned lane) { return 4 * lane ^ (lane / 2 % 8); }
__host__ __device__ constexpr unsigned fetch_key(unsigned lane) { return lane ^ lane / 8; }
constexpr bool keys_are_staged_quads() {
  for (unsigned l = 0; l < 32; ++l)
    for (unsigned u = 0; u < kChunk / 128; ++u)
      if ((read_key(l) ^ u) != staged_quad(4 * l + u) ||
          (fetch_key(l) ^ 4 * (u % 2)) + 32 * u != staged_quad(l + 32 * u))
        return false;
  return true;
}
static_assert(keys_are_staged_quads());
inline constexpr std::size_t kStoreStageBytes =
    std::size_t(kWarps) * kStoreStages * kStagedQuads * sizeof(float4);

// An item's values into a stage (cp.async; the caller commits): `from` is this
// lane's first value (the item's first plus 4 lane), `stage` the stage's shared
// address. Placeholders' values come too (inside the rows, never checked nor
// stored: see store_item). EvictFirst: the values, read once, marked first to
// leave the L2 (IndexFp4: 0.77 of the copy at 262144 rows against 0.74-0.75, 0.66-0.68
// at 65536 against 0.64-0.66; MainFp8 fell from 0.83 to 0.68 at 262144 so, and
// keeps the default: docs/performance.md).
template <bool EvictFirst>
__device__ void fetch_values(const float* from, unsigned size, unsigned stage) {
  const unsigned lane = threadIdx.x % 32, key = fetch_key(lane);
  const unsigned long long policy = EvictFirst ? evict_first_policy() : 0;
#pragma unroll
  for (unsigned u = 0; u < kChunk / 128; ++u) {
    if (4 * (lane + 32 * u) >= size) continue;
    const unsigned to = stage + 16 * ((key ^ 4 * (u % 2)) + 32 * u);
    if constexpr (EvictFirst)
      fetch_evict_first(to, from + 128 * u, policy);
    else
      fetch_plain(to, from + 128 * u);
  }
}

// A NaN or infinity among a lane's values refused at the first one's flat index.
__device__ inline void refuse_nonfinite(const float (&x)[kLaneElems], std::size_t first,
                                        unsigned long long* verdict) {
  for (unsigned k = 0; k < kLaneElems; ++k)
    if (!isfinite(x[k])) return void(atomicMin(verdict, refusal(1, first + k)));
}

// A lane's codes: kLaneElems E4M3 bytes, or kLaneElems / 2 bytes of E2M1 pairs (the
// first element in the low nibble), little-endian in words. Fast (UE8M0 scale, Cuda
// profile; docs/formats.md): x times the scale's inverse (`inverse`, a power of two)
// is exact in float (a product that underflows is under 2^-126, whose code is +-0
// either way), so the paired E4M3 conversion and e2m1_pair give the double path's
// codes. Otherwise each value is divided by the scale in double, as on the CPU.
template <CacheFormat F, bool Fast>
__device__ void encode_lane(const float (&x)[kLaneElems], std::uint8_t scale,
                            RoundingProfile profile, const E2m1Codes& e2m1,
                            unsigned (&codes)[kLaneElems / 4]) {
  using L = Layout<F>;
  std::uint8_t c[kLaneElems] = {};
  if constexpr (Fast) {
    // 2^(127 - b): the float whose biased exponent is 254 - b (b <= 247 here)
    const float inverse = __uint_as_float(unsigned(254 - scale) << 23);
#pragma unroll
    for (unsigned k = 0; k < kLaneElems; k += 2) {
      const float2 q{x[k] * inverse, x[k + 1] * inverse};
      if constexpr (L::e4m3) {
        const unsigned pair = __nv_cvt_float2_to_fp8x2(q, __NV_SATFINITE, __NV_E4M3);
        c[k] = std::uint8_t(pair), c[k + 1] = std::uint8_t(pair >> 8);
      } else {
        c[k / 2] = e2m1_pair(q, e2m1);
      }
    }
  } else {
    const double s = scale_of(L::format.scale, scale);
#pragma unroll
    for (unsigned k = 0; k < kLaneElems; ++k) {
      const std::uint8_t code = encode(L::format.element, double(x[k]) / s, profile);
      if constexpr (L::e4m3)
        c[k] = code;
      else
        c[k / 2] = k % 2 ? std::uint8_t(c[k / 2] | code << 4) : code;
    }
  }
#pragma unroll
  for (unsigned w = 0; w < kLaneElems / 4; ++w)
    codes[w] = unsigned(c[4 * w]) | unsigned(c[4 * w + 1]) << 8 | unsigned(c[4 * w + 2]) << 16 |
               unsigned(c[4 * w + 3]) << 24;
}

// N bytes (a multiple of 4, little-endian in words) into shared memory at `to`,
// any alignment: the aligned words whole, the at most three bytes before and after
// them alone (the main formats' groups are 33 or 9 bytes, so a lane's codes land
// at every alignment).
template <unsigned N>
__device__ void put_unaligned(std::byte* to, const unsigned* w) {
  const unsigned s = (4 - unsigned(reinterpret_cast<std::uintptr_t>(to) % 4)) % 4;
#pragma unroll
  for (unsigned m = 0; m < 3; ++m)
    if (m < s) to[m] = std::byte(w[0] >> 8 * m);
  auto* words = reinterpret_cast<unsigned*>(to + s);
#pragma unroll
  for (unsigned j = 0; j < N / 4; ++j)
    if (s == 0 || j + 1 < N / 4)
      words[j] = __funnelshift_r(w[j], j + 1 < N / 4 ? w[j + 1] : 0, 8 * s);
#pragma unroll
  for (unsigned m = N - 3; m < N; ++m)
    if (s != 0 && m + 4 >= N + s) to[m] = std::byte(w[m / 4] >> 8 * (m % 4));
}

// Item t into the cache. Each lane: its values' largest magnitude and any NaN or
// infinity by one integer maximum of their bits (for finite floats the order of
// the bits is the order of the magnitudes; NaN and inf lie above every finite
// float), shared with the other half of a 32-element group by one shuffle; its
// group's scale byte; its codes. IndexFp4 writes them to the slot's data and scale
// sections at once; the main formats, whose groups are 33 or 9 bytes, place them
// in the item's image in shared memory, copied to each stored row's slot in whole
// words.
template <CacheFormat F, bool Fast>
__device__ void store_item(const float4* stage, const LanePart& p, const Batch& b, unsigned t,
                           const Layout<F>& lay, RoundingProfile profile, const E2m1Codes& e2m1,
                           std::byte* image, unsigned long long* verdict, std::byte* cache) {
  using L = Layout<F>;
  static_assert(L::group == kLaneElems || L::group == 2 * kLaneElems);
  const unsigned lane = threadIdx.x % 32, i = kLaneElems * lane, key = read_key(lane);
  float x[kLaneElems];
  unsigned bits = 0;
#pragma unroll
  for (unsigned u = 0; u < kLaneElems / 4; ++u) {
    const float4 quad = stage[key ^ u];
    const float in[4] = {quad.x, quad.y, quad.z, quad.w};
#pragma unroll
    for (unsigned k = 0; k < 4; ++k) {
      x[4 * u + k] = in[k];
      bits = max(bits, __float_as_uint(in[k]) & 0x7fffffffu);
    }
  }
  // (a group's two lanes share a row: both stored, or neither)
  if (p.stored && bits >= 0x7f800000u)
    refuse_nonfinite(x, (b.base + p.row) * lay.dim + p.at, verdict);
  if constexpr (L::group == 2 * kLaneElems) bits = max(bits, __shfl_xor_sync(kAll, bits, 1));
  const std::uint8_t scale = Fast ? ue8m0_scale_of_bits(bits, L::format.element)
                                  : scale_byte(L::format, double(__uint_as_float(bits)), profile);
  unsigned codes[kLaneElems / 4];
  encode_lane<F, Fast>(x, scale, profile, e2m1, codes);
  const bool scale_lane = i % L::group == 0;
  if constexpr (L::index) {
    if (!p.stored) return;
    // streaming stores (__stcs): the cache's rows are read by later calls, not this
    // one, and leave the L2 first to the values in flight (0.83 of the copy against
    // 0.81 queued at 262144 rows, no change at 65536: docs/performance.md)
    std::byte* to = cache + p.data + p.at / 2;
    if (reinterpret_cast<std::uintptr_t>(to) % 8 == 0)
      __stcs(reinterpret_cast<uint2*>(to), uint2{codes[0], codes[1]});
    else
      for (unsigned k = 0; k < kLaneElems / 2; ++k) to[k] = std::byte(codes[k / 4] >> 8 * (k % 4));
    if (scale_lane)
      __stcs(reinterpret_cast<unsigned char*>(cache + p.scales + p.at / 32),
             static_cast<unsigned char>(scale));
  } else {
    const unsigned size = b.size(t);
    if (i < size) {
      std::byte* to = image + L::image_data(i) + i % L::group / (L::e4m3 ? 1 : 2);
      put_unaligned<L::data_bytes / (L::group / kLaneElems)>(to, codes);
      if (scale_lane) image[L::image_scale(i, size)] = std::byte(scale);
    }
    __syncwarp();
    for_each_row_part(b, t, p, lay,
                      [&](bool stored, std::size_t data, std::size_t e, unsigned j, unsigned n) {
                        if (stored)
                          copy_bytes(cache + data + L::data_within(e), image + L::image_data(j),
                                     L::data_length(n), lane);
                      });
    __syncwarp();
  }
}

// The store: placeholders skipped (their values never read); a slot outside the
// cache refused (batch_at) and not written; a slot given twice refused at the later
// row (begin_claim, settle_claim), both rows written; a NaN/inf refused, its row
// written anyway.
template <CacheFormat F, bool Fast>
__global__ void __launch_bounds__(kThreads, store_blocks_per_sm(Layout<F>::e4m3, Fast))
    store_rows(const float* rows, const std::int32_t* slots, std::size_t n, unsigned per_batch,
               Layout<F> lay, RoundingProfile profile, Claims claims, unsigned long long* verdict,
               std::byte* cache) {
  constexpr unsigned stages = kStoreStages;
  __shared__ alignas(16) std::byte images[kWarps][kChunkBytes];
  extern __shared__ float4 staged_all[];
  __shared__ E2m1Codes e2m1;
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float4* staged = staged_all + warp * stages * kStagedQuads;
  const auto stage_base = unsigned(__cvta_generic_to_shared(staged));
  // The first batch's slots asked for before its values: asked for behind every
  // warp's first fetches, a slot waits for most of them (docs/performance.md).
  const std::size_t first = first_batch(per_batch);
  const std::int32_t first_slot = slot_at(first, per_batch, n, slots);
  // The fetch runs stages - 1 items ahead of the conversion, across batches (it
  // needs no slot): a warp's pipeline fills once, not once a batch, and its first
  // items are on their way while the block fills its table. Item k of the warp's
  // run is staged at k % stages. `ahead` is this lane's first value of the next
  // item to fetch, `ahead_left` the values left from there in its batch.
  std::size_t ahead_base = first, ahead_left = 0;
  const float* ahead = nullptr;
  const auto start_batch = [&] {
    if (ahead_base >= n) return;
    ahead = rows + ahead_base * lay.dim + 4 * lane;
    ahead_left = batch_shape(ahead_base, per_batch, n, lay.dim).count * lay.dim;
  };
  start_batch();
  unsigned fetched = 0;
  const auto fetch_next = [&] {
    if (ahead_left != 0) {
      const unsigned size = ahead_left < kChunk ? unsigned(ahead_left) : kChunk;
      fetch_values<Layout<F>::index>(ahead, size,
                                     stage_base + fetched % stages * kStagedQuads * 16);
      ahead += kChunk, ahead_left -= size;
      if (ahead_left == 0) ahead_base += batch_stride(per_batch), start_batch();
    }
    ++fetched;
    __pipeline_commit();
  };
  for (unsigned k = 0; k < stages - 1; ++k) fetch_next();
  if constexpr (Fast && !Layout<F>::e4m3) fill_e2m1_codes(e2m1);
  __syncthreads();
  // the claims' table cleared and the verdict reset: nothing above touches either
  // (a programmatic dependent of begin_store, impl/cuda/formats.cu)
  wait_for_previous_kernel();
  const LaneStep step = lane_step(lay.dim);
  unsigned k = 0;  // items converted
  for (std::size_t base = first; base < n; base += batch_stride(per_batch)) {
    const Batch b =
        batch_of(base, per_batch, n,
                 base == first ? first_slot : slot_at(base, per_batch, n, slots), lay, verdict);
    const unsigned row = unsigned(base + lane);
    const unsigned before = lay.inside(b.slot) ? begin_claim(claims, b.slot, row, verdict) : kNoRow;
    LanePart p = first_lane_part(b, lay);
    for (unsigned t = 0; t < b.items(); ++t, ++k) {
      fetch_next();
      __pipeline_wait_prior(stages - 1);  // item k's fetch, not the ones ahead
      __syncwarp();
      store_item<F, Fast>(staged + k % stages * kStagedQuads, p, b, t, lay, profile, e2m1,
                          images[warp], verdict, cache);
      __syncwarp();  // item k's stage is item k + stages's
      next_lane_part(p, step, b, lay);
    }
    settle_claim(before, row, verdict);
  }
}

}  // namespace aether::cuda::formats_rows
