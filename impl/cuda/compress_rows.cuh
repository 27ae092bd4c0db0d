// The arithmetic a warp does for one compressed row, and the checked copies of
// positions into the ring: every float a step reads is tested for NaN/inf where it
// is read, and each one found is reported into the call's verdict word (atomicMin
// of its code, so the lowest, the model's first, stays). CUDA source only.
#pragma once

#include <cstdint>

#include "impl/compress_math.hpp"
#include "impl/cuda/compress_table.cuh"
#include "impl/cuda/launch.cuh"

namespace aether::cuda::compress_kernels {

// (after the verdict's reset, which a decode part does not wait for at its start)
__device__ inline void report(unsigned long long* refusal, unsigned long long code) {
  wait_for_previous_kernel();
  atomicMin(refusal, code);
}

// `&`, not `&&`: four comparisons into one predicate, where the short circuit
// compiled to a branch per value (16 a quad in the rows kernels)
__device__ inline bool all_finite(const float4& x) {
  return isfinite(x.x) & isfinite(x.y) & isfinite(x.z) & isfinite(x.w);
}
__device__ inline float component(const float4& x, int k) {
  return k == 0 ? x.x : k == 1 ? x.y : k == 2 ? x.z : x.w;
}

// The warp copies n floats from `from` to `to` (nullptr: only checks them), 16 bytes
// a lane where `vector` (n a multiple of 4, both 16-byte aligned), reporting every
// non-finite value by `code` + its offset. kLoads loads a lane are in flight before
// the first store (8: a 4 KiB position at once): a store may alias the next load,
// so one load at a time would wait out DRAM's latency at every step. With
// kOnCleanVerdict, nothing is stored unless the verdict (`refusal`) is still clean,
// read after each round's loads are issued (one trip to memory, not two) and once
// the kernel that reports into it (the one before this, launch.cuh) has finished:
// the loads, of values it does not write, go before that wait.
template <int kLoads, bool kOnCleanVerdict = false>
__device__ inline void copy_checked(const float* from, float* to, std::size_t n,
                                    unsigned long long code, unsigned long long* refusal,
                                    unsigned lane, bool vector) {
  if (vector) {
    const std::size_t quads = n / 4;
    for (std::size_t base = lane; base < quads; base += 32 * kLoads) {
      float4 x[kLoads];
#pragma unroll
      for (int k = 0; k < kLoads; ++k)
        if (base + 32 * k < quads)
          x[k] = __ldg(reinterpret_cast<const float4*>(from) + base + 32 * k);
      if constexpr (kOnCleanVerdict) wait_for_previous_kernel();
      if (kOnCleanVerdict && *refusal != kNoRefusal) return;
#pragma unroll
      for (int k = 0; k < kLoads; ++k) {
        const std::size_t i = base + 32 * k;
        if (i >= quads) break;
        if (!all_finite(x[k]))
          for (int c = 0; c < 4; ++c)
            if (!isfinite(component(x[k], c))) report(refusal, code + 4 * i + std::size_t(c));
        if (to != nullptr) reinterpret_cast<float4*>(to)[i] = x[k];
      }
    }
    return;
  }
  for (std::size_t i = lane; i < n; i += 32) {
    const float x = from[i];
    if constexpr (kOnCleanVerdict) wait_for_previous_kernel();
    if (kOnCleanVerdict && *refusal != kNoRefusal) return;
    if (!isfinite(x)) report(refusal, code + i);
    if (to != nullptr) to[i] = x;
  }
}

// Channels d .. d+3 of a group's row from its R positions' scores s and latents v
// (16-byte loads, position t read from in[t]): every non-finite value reported, the
// four bf16 written.
template <int R>
__device__ void channel_quad(const float4 (&s)[R], const float4 (&v)[R], const Input (&in)[R],
                             unsigned d, unsigned D, unsigned long long* refusal,
                             std::uint16_t* out) {
  bool finite = true;
#pragma unroll
  for (int t = 0; t < R; ++t) finite = finite & all_finite(s[t]) & all_finite(v[t]);
  if (!finite)  // unrolled: a loop indexing the registers by t would put them in memory
#pragma unroll
    for (int t = 0; t < R; ++t)
#pragma unroll
      for (unsigned c = 0; c < 4; ++c) {
        if (!isfinite(component(s[t], int(c)))) report(refusal, in[t].code + d + c);
        if (!isfinite(component(v[t], int(c)))) report(refusal, in[t].code + D + d + c);
      }
  std::uint16_t z[4];
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    const auto score = [&](int t) { return component(s[t], c); };
    const auto value = [&](int t) { return component(v[t], c); };
    if constexpr (R == 2)
      z[c] = impl::bf16_nearest(impl::gated_mean_pair(score(0), score(1), value(0), value(1)));
    else
      z[c] = impl::bf16_nearest(impl::gated_mean(score, value, R));
  }
  *reinterpret_cast<uint2*>(out + d) =
      make_uint2(z[0] | unsigned(z[1]) << 16, z[2] | unsigned(z[3]) << 16);
}

// Compressed row j of request q, a warp's lanes over the channels; every value read
// is checked. R in {1, 2, 4}: channels 4 at a time from 16-byte loads, the group in
// registers, the next 128 channels' loads in flight during the current ones'
// arithmetic where R <= 2 (one chunk in flight per warp cannot cover DRAM latency;
// R = 4 would need twice the registers). R = 0: any ratio, a channel at a time.
// `ring_out` (decode): the group's new positions also go to their ring entries,
// from the registers the row is computed from, so a step reads each of them once.
template <int R>
__device__ void group_row(const RequestMeta& q, std::int64_t j, const float* projected,
                          const float* ring, const Geometry& g, unsigned long long* refusal,
                          std::uint16_t* out, unsigned lane, float* ring_out) {
  const unsigned D = g.dim;
  if constexpr (R > 0) {
    constexpr int kQuads = R < 2 ? 2 : 1;  // 4 loads in flight per lane before any use
    constexpr unsigned kStep = 128 * kQuads;
    Input in[R];
    float* keep[R];  // position t's ring entry if it is new in this decode step
#pragma unroll
    for (int t = 0; t < R; ++t) {
      const std::int64_t p = j * R + t;
      in[t] = input_of(q, p, projected, ring, g);
      keep[t] = ring_out == nullptr || p < q.start ? nullptr : ring_out + entry_of(q, p, g);
    }
    const auto load = [&](unsigned base, float4(&s)[kQuads][R], float4(&v)[kQuads][R]) {
#pragma unroll
      for (int k = 0; k < kQuads; ++k)
#pragma unroll
        for (int t = 0; t < R; ++t)
          if (base + 128 * k < D) {
            s[k][t] = __ldg(reinterpret_cast<const float4*>(in[t].at + base + 128 * k));
            v[k][t] = __ldg(reinterpret_cast<const float4*>(in[t].at + D + base + 128 * k));
          }
    };
    float4 s[kQuads][R], v[kQuads][R];
    load(4 * lane, s, v);
    for (unsigned base = 4 * lane; base < D; base += kStep) {
      float4 next_s[kQuads][R], next_v[kQuads][R];
      if (R <= 2 && base + kStep < D) load(base + kStep, next_s, next_v);
#pragma unroll
      for (int k = 0; k < kQuads; ++k) {
        const unsigned d = base + 128 * k;
        if (d >= D) break;
        channel_quad<R>(s[k], v[k], in, d, D, refusal, out);
#pragma unroll
        for (int t = 0; t < R; ++t)
          if (keep[t] != nullptr) {
            *reinterpret_cast<float4*>(keep[t] + d) = s[k][t];
            *reinterpret_cast<float4*>(keep[t] + D + d) = v[k][t];
          }
      }
      if (R <= 2) {
#pragma unroll
        for (int k = 0; k < kQuads; ++k)
#pragma unroll
          for (int t = 0; t < R; ++t) s[k][t] = next_s[k][t], v[k][t] = next_v[k][t];
      } else if (base + kStep < D) {
        load(base + kStep, s, v);
      }
    }
  } else {
    const std::int64_t r = g.ratio;
    for (unsigned d = lane; d < D; d += 32) {
      for (std::int64_t t = 0; t < r; ++t) {
        const Input in = input_of(q, j * r + t, projected, ring, g);
        if (!isfinite(in.at[d])) report(refusal, in.code + d);
        if (!isfinite(in.at[D + d])) report(refusal, in.code + D + d);
      }
      const auto at = [&](int t) { return input_of(q, j * r + t, projected, ring, g).at; };
      out[d] = impl::bf16_nearest(impl::gated_mean([&](int t) { return at(t)[d]; },
                                                   [&](int t) { return at(t)[D + d]; }, int(r)));
    }
  }
}

}  // namespace aether::cuda::compress_kernels
