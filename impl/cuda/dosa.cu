// CUDA DoSA (impl/cuda/dosa.hpp): the kernels of the screen and the merge, and the
// host orchestration. Scores come only from the scorer's own kernel (over every
// key, or over per-query lists of keys), so a rescored key's value is the bits full
// scoring gives it; the answer is ranked by the top-k's own kernels.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <thread>
#include <vector>

#include "impl/cuda/dosa.hpp"
#include "impl/cuda/indexer_scores.hpp"
#include "impl/cuda/key_rows.cuh"
#include "impl/dosa_screen.hpp"

namespace aether::cuda {

namespace {
namespace de = dosa_error;
using dosa_screen::Screen;

// The first query's first kProbe keys are the batch's probe (see dosa.hpp).
constexpr std::size_t kProbe = 16384;
constexpr double kPays = 0.9;        // pruning must cost under this share of full scoring
constexpr double kBoundTiles = 0.5;  // a key's bound and its filler write, in 16-head tiles
constexpr int kThreads = 256;
// Below every candidate: a candidate scores at least tau > kFiller (a query whose
// tau is kFiller is scored in full).
constexpr float kFiller = -FLT_MAX;

std::size_t tiles16(std::size_t heads) { return (heads + 15) / 16; }

// The tensor cores' arithmetic (model::tensor_core_score_error_bounds); a_A stored
// as a bf16 row.
constexpr dosa_screen::Arithmetic kArithmetic{
    [](std::size_t heads, std::size_t dim) { return 48 * ((dim + 15) / 16) + heads + 2; },
    [](double x) { return __bfloat162float(__float2bfloat16_rn(float(x))); }};

struct ScreenTerms {
  double residual, slack;
};

__global__ void fill(std::int32_t* p, std::size_t n, std::int32_t value) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    p[i] = value;
}

__global__ void mark_seeds(const std::int32_t* seeds, std::size_t n, std::uint8_t* is_seed) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    is_seed[seeds[i]] = 1;
}

// A warp a key: ||k|| from above (the raw row's norm, raised by (D + 4) 2^-52 for
// the double sum and sqrt in any order, times its scale, plus 2^-66 for squares
// that underflow) and the row's scale (1 for bf16 rows).
__global__ void key_norms(const std::byte* keys, KeyFormat format, std::size_t dim,
                          std::size_t row_bytes, std::size_t count, double* norms, float* scales) {
  const unsigned lane = threadIdx.x % 32;
  for (std::size_t j = (blockIdx.x * std::size_t(blockDim.x) + threadIdx.x) / 32; j < count;
       j += std::size_t(gridDim.x) * blockDim.x / 32) {
    const std::byte* row = keys + j * row_bytes;
    double sum = 0;
    for (std::size_t d = lane; d < dim; d += 32) {
      const double e =
          format == KeyFormat::E4M3
              ? double(e4m3_value(std::uint8_t(row[d])))
              : double(__uint_as_float(std::uint32_t(reinterpret_cast<const std::uint16_t*>(row)[d])
                                       << 16));
      sum += e * e;
    }
    for (int m = 16; m >= 1; m /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, m);
    if (lane == 0) {
      const float scale = format == KeyFormat::E4M3 ? row_scale(row, dim) : 1.0f;
      norms[j] =
          dosa_screen::up(sqrt(sum) * (1 + double(dim + 4) * 0x1p-52) * double(scale)) + 0x1p-66;
      scales[j] = scale;
    }
  }
}

// tau_t: the least score among query t's seed top-K (block t).
__global__ void seed_threshold(const float* seed_scores, std::size_t seed_count,
                               const std::int32_t* lanes, std::size_t k, float* tau) {
  __shared__ float least[kThreads];
  const std::size_t t = blockIdx.x;
  float m = FLT_MAX;
  for (std::size_t i = threadIdx.x; i < k; i += kThreads)
    m = fminf(m, seed_scores[t * seed_count + std::size_t(lanes[t * k + i])]);
  least[threadIdx.x] = m;
  __syncthreads();
  for (unsigned half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half)
      least[threadIdx.x] = fminf(least[threadIdx.x], least[threadIdx.x + half]);
    __syncthreads();
  }
  if (threadIdx.x == 0) tau[t] = least[0];
}

// Thread (key j, query t = block y): a non-seed key whose bound reaches tau_t is
// listed for query t (list [T, stride], counts[t]); with `clear`, the key's screen
// value is replaced by kFiller (the row becomes query t's candidate row).
__global__ void screen_keys(float* scores, std::size_t stride, std::size_t count,
                            const ScreenTerms* terms, const float* tau, const double* norms,
                            const float* scales, const std::uint8_t* is_seed, std::int32_t* list,
                            std::int32_t* counts, bool clear) {
  const std::size_t t = blockIdx.y, j = blockIdx.x * std::size_t(kThreads) + threadIdx.x;
  bool survives = false;
  if (j < count) {
    if (!is_seed[j])
      survives = dosa_screen::bound_of(terms[t].residual, terms[t].slack, scores[t * stride + j],
                                       norms[j], double(scales[j])) >= double(tau[t]);
    if (clear) scores[t * stride + j] = kFiller;
  }
  const unsigned mask = __ballot_sync(0xffffffffu, survives), lane = threadIdx.x % 32;
  int base = 0;
  if (lane == 0 && mask != 0) base = atomicAdd(counts + t, __popc(mask));
  base = __shfl_sync(0xffffffffu, base, 0);
  if (survives)
    list[t * stride + std::size_t(base) + __popc(mask & ((1u << lane) - 1))] = std::int32_t(j);
}

// Query t's (block y) candidates into its row of kFiller: the seeds' top-K, then the
// survivors scoring at least tau_t.
__global__ void place(float* scores, std::size_t stride, const float* seed_scores,
                      std::size_t seed_count, const std::int32_t* lanes, const std::int32_t* seeds,
                      std::size_t k, const std::int32_t* list, const float* list_scores,
                      std::size_t list_stride, const std::int32_t* counts, const float* tau) {
  const std::size_t t = blockIdx.y, i = blockIdx.x * std::size_t(kThreads) + threadIdx.x;
  if (i < k) {
    const std::size_t lane = std::size_t(lanes[t * k + i]);
    scores[t * stride + std::size_t(seeds[lane])] = seed_scores[t * seed_count + lane];
  }
  if (i < std::size_t(counts[t]) && list_scores[t * list_stride + i] >= tau[t])
    scores[t * stride + std::size_t(list[t * stride + i])] = list_scores[t * list_stride + i];
}

// out[j] = U of key j (the query's screen value in p[j]).
__global__ void key_bounds(const float* p, std::size_t count, ScreenTerms terms,
                           const double* norms, const float* scales, double* out) {
  for (std::size_t j = blockIdx.x * std::size_t(kThreads) + threadIdx.x; j < count;
       j += std::size_t(gridDim.x) * kThreads)
    out[j] = dosa_screen::bound_of(terms.residual, terms.slack, p[j], norms[j], double(scales[j]));
}

unsigned blocks_for(std::size_t n) {
  return unsigned(std::clamp<std::size_t>((n + kThreads - 1) / kThreads, 1, 65535));
}

DosaError from_indexer(const IndexerError& e) {
  namespace ie = indexer_error;
  if (auto* p = std::get_if<ie::ShapeMismatch>(&e)) return *p;
  if (auto* p = std::get_if<ie::NonFiniteInput>(&e)) return *p;
  if (auto* p = std::get_if<ie::UnsupportedOnDevice>(&e)) return *p;
  if (auto* p = std::get_if<ie::DeviceFailure>(&e)) return *p;
  return de::DeviceFailure{int(cudaErrorUnknown)};
}

// The host side's part of a call: copies of what the plans are checked and
// prepared against.
struct HostInputs {
  std::vector<float> queries, weights;  // queries as the floats their bf16 bits are
  std::vector<std::int32_t> seeds;
};

Status<DosaError> download(device_span<const std::uint16_t> queries,
                           device_span<const float> weights, device_span<const std::int32_t> seeds,
                           Stream stream, HostInputs& host) {
  std::vector<std::uint16_t> bits(queries.size());
  host.weights.resize(weights.size());
  host.seeds.resize(seeds.size());
  for (auto [dst, src, bytes] : {std::tuple<void*, const void*, std::size_t>{
                                     bits.data(), queries.data(), queries.size_bytes()},
                                 {host.weights.data(), weights.data(), weights.size_bytes()},
                                 {host.seeds.data(), seeds.data(), seeds.size_bytes()}})
    if (bytes != 0)
      if (cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream);
          e != cudaSuccess)
        return de::DeviceFailure{int(e)};
  if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess)
    return de::DeviceFailure{int(e)};
  host.queries.resize(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i)
    host.queries[i] = std::bit_cast<float>(std::uint32_t(bits[i]) << 16);
  return Ok{};
}

// Every query's screen, the queries spread over the host's threads (the
// preparation is O(H D) a query in double).
std::vector<Screen> prepare_all(const HostInputs& host, std::size_t heads, std::size_t dim,
                                std::span<const DosaPlan> plans) {
  std::vector<Screen> screens(plans.size());
  const std::size_t threads =
      std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, (plans.size() + 7) / 8);
  {
    std::vector<std::jthread> pool;
    for (std::size_t w = 0; w < threads; ++w)
      pool.emplace_back([&, w] {
        for (std::size_t t = w; t < plans.size(); t += threads)
          screens[t] = dosa_screen::prepare(
              std::span(host.queries).subspan(t * heads * dim, heads * dim),
              std::span(host.weights).subspan(t * heads, heads), dim, plans[t], kArithmetic);
      });
  }
  return screens;
}

// The calling thread's device memory for a call's intermediates, grown as needed and
// kept (a call waits for the device before it returns, so the next call may reuse
// it), carved in 256-byte aligned pieces.
class Workspace {
 public:
  template <class T>
  void reserve(std::size_t n) {
    bytes_ += (n * sizeof(T) + 255) / 256 * 256;
  }
  int allocate() {
    thread_local struct Held {
      void* p = nullptr;
      std::size_t bytes = 0;
      int device = -1;
      ~Held() { cudaFree(p); }
    } held;
    int device = 0;
    if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
    if (held.bytes < bytes_ || held.device != device) {
      if (held.device == device) cudaFree(held.p);
      held = {};
      if (cudaError_t e = cudaMalloc(&held.p, bytes_); e != cudaSuccess) return e;
      held.bytes = bytes_;
      held.device = device;
    }
    base_ = static_cast<char*>(held.p);
    return 0;
  }
  template <class T>
  T* take(std::size_t n) {  // in the order reserved
    T* p = reinterpret_cast<T*>(base_ + used_);
    used_ += (n * sizeof(T) + 255) / 256 * 256;
    return p;
  }

 private:
  std::size_t bytes_ = 256, used_ = 0;
  char* base_ = nullptr;
};

// A batch's screens as device rows: [n, width, D] bf16 (zero rows past a screen's
// own: exact zeros), weights [n, width], terms [n].
cudaError_t upload_screens(std::span<const Screen> screens, std::size_t width, std::size_t dim,
                           std::uint16_t* rows, float* weights, ScreenTerms* terms, Stream stream) {
  std::vector<std::uint16_t> host_rows(screens.size() * width * dim, 0);
  std::vector<float> host_weights(screens.size() * width, 0.0f);
  std::vector<ScreenTerms> host_terms;
  for (std::size_t t = 0; t < screens.size(); ++t) {
    const Screen& s = screens[t];
    for (std::size_t i = 0; i < s.queries.size(); ++i)
      host_rows[t * width * dim + i] = __bfloat16_as_ushort(__float2bfloat16_rn(s.queries[i]));
    std::copy(s.weights.begin(), s.weights.end(), host_weights.begin() + std::ptrdiff_t(t * width));
    host_terms.push_back({s.residual, s.slack});
  }
  // pageable sources: each copy returns once its bytes are staged
  if (cudaError_t e = cudaMemcpyAsync(rows, host_rows.data(), host_rows.size() * 2,
                                      cudaMemcpyHostToDevice, stream);
      e != cudaSuccess)
    return e;
  if (cudaError_t e = cudaMemcpyAsync(weights, host_weights.data(), host_weights.size() * 4,
                                      cudaMemcpyHostToDevice, stream);
      e != cudaSuccess)
    return e;
  return cudaMemcpyAsync(terms, host_terms.data(), host_terms.size() * sizeof(ScreenTerms),
                         cudaMemcpyHostToDevice, stream);
}

// The common checks of dosa_topk and dosa_bounds, in the model's order up to the
// plans: the scorer's, then the seeds (against the stored keys).
Status<DosaError> check_inputs(device_span<const std::uint16_t> queries,
                               device_span<const float> weights, std::size_t query_count,
                               const DeviceIndexKeys& keys, device_span<const std::int32_t> seeds,
                               Stream stream, HostInputs& host) {
  if (auto st = check_index_scores(queries, weights, query_count, keys, stream); !st.ok())
    return from_indexer(st.error());
  if (auto st = download(queries, weights, seeds, stream, host); !st.ok()) return st;
  const std::size_t row_bytes = key_row_bytes(keys.format, keys.dim);
  const std::size_t count = row_bytes ? keys.bytes.size() / row_bytes : 0;
  std::vector<char> seen(count, 0);
  for (std::size_t i = 0; i < host.seeds.size(); ++i) {
    const std::int32_t id = host.seeds[i];
    if (id < 0 || std::size_t(id) >= count || seen[std::size_t(id)]) return de::BadSeed{i, id};
    seen[std::size_t(id)] = 1;
  }
  return Ok{};
}

#define AETHER_TRY(call)                                                                        \
  if (const cudaError_t aether_e = cudaError_t(call); aether_e != 0) return de::DeviceFailure { \
      int(aether_e)                                                                             \
    }

}  // namespace

Status<DosaError> dosa_topk(device_span<const std::uint16_t> queries,
                            device_span<const float> weights, std::size_t query_count,
                            const DeviceIndexKeys& keys, std::size_t k,
                            device_span<const std::int32_t> seeds, std::span<const DosaPlan> plans,
                            device_span<std::int32_t> out, const DosaOptions& options,
                            DosaStats* stats, Stream stream) {
  HostInputs host;
  if (auto st = check_inputs(queries, weights, query_count, keys, seeds, stream, host); !st.ok())
    return st;
  const std::size_t n = query_count, heads = n ? weights.size() / n : 0, dim = keys.dim;
  const std::size_t row_bytes = key_row_bytes(keys.format, dim);
  const std::size_t count = row_bytes ? keys.bytes.size() / row_bytes : 0,
                    seed_count = seeds.size();
  if (plans.size() != n) return de::ShapeMismatch{n, plans.size()};
  for (std::size_t t = 0; t < n; ++t)
    if (auto st =
            dosa_screen::check_plan(std::span(host.weights).subspan(t * heads, heads), plans[t]);
        !st.ok())
      return st;
  if (count > k && seed_count < k) return de::TooFewSeeds{seed_count, k};
  if (out.size() != n * k) return de::ShapeMismatch{n * k, out.size()};
  DosaStats local;
  if (stats != nullptr) *stats = local;
  if (n == 0 || k == 0) return Ok{};

  std::size_t width = 1;  // the widest screen
  for (const DosaPlan& p : plans)
    width = std::max(width, p.retained.size() + (p.aggregated.empty() ? 0 : 1));
  const auto pays = [&](double rho) {
    return !options.fall_back_when_unpaid ||
           double(seed_count) * double(tiles16(heads)) +
                   double(count) * (double(tiles16(width)) + kBoundTiles) +
                   rho * double(count - seed_count) * double(tiles16(heads)) <
               kPays * double(count) * double(tiles16(heads));
  };
  const bool prune = count > k && pays(0);

  Workspace ws;
  ws.reserve<float>(n * count);  // the candidate rows (screen values first)
  ws.reserve<std::int32_t>(n);   // ends
  if (prune) {
    ws.reserve<std::int32_t>(seed_count);
    ws.reserve<std::uint8_t>(count);
    ws.reserve<double>(count);
    ws.reserve<float>(count);
    ws.reserve<float>(n * seed_count);
    ws.reserve<std::int32_t>(n * k);
    ws.reserve<float>(n);
    ws.reserve<ScreenTerms>(n);
    ws.reserve<std::uint16_t>(n * width * dim);
    ws.reserve<float>(n * width);
    ws.reserve<std::int32_t>(n * count);  // survivor lists
    ws.reserve<std::int32_t>(n);          // their lengths
    ws.reserve<float>(n * count);         // their scores
  }
  AETHER_TRY(ws.allocate());
  float* rows = ws.take<float>(n * count);
  std::int32_t* ends = ws.take<std::int32_t>(n);
  const device_span<float> all_rows(rows, n * count);
  const device_span<const std::int32_t> all_ends(ends, n);

  const auto in_full = [&]() -> Status<DosaError> {
    local.full_queries = n;
    if (stats != nullptr) *stats = local;
    if (count == 0) {
      fill<<<blocks_for(n * k), kThreads, 0, stream>>>(out.data(), n * k, -1);
      AETHER_TRY(cudaGetLastError());
      AETHER_TRY(cudaStreamSynchronize(stream));
      return Ok{};
    }
    AETHER_TRY(launch_index_scores(queries, weights, n, keys, {}, 0, all_rows, stream));
    fill<<<blocks_for(n), kThreads, 0, stream>>>(ends, n, std::int32_t(count));
    AETHER_TRY(cudaGetLastError());
    (void)valid_prefix_topk(all_rows, count, all_ends, k, out, stream);  // finite scores
    return Ok{};
  };
  if (!prune) return in_full();

  std::int32_t* seed_ids = ws.take<std::int32_t>(seed_count);
  std::uint8_t* is_seed = ws.take<std::uint8_t>(count);
  double* norms = ws.take<double>(count);
  float* scales = ws.take<float>(count);
  float* seed_scores = ws.take<float>(n * seed_count);
  std::int32_t* lanes = ws.take<std::int32_t>(n * k);
  float* tau = ws.take<float>(n);
  ScreenTerms* terms = ws.take<ScreenTerms>(n);
  std::uint16_t* screen_rows = ws.take<std::uint16_t>(n * width * dim);
  float* screen_weights = ws.take<float>(n * width);
  std::int32_t* list = ws.take<std::int32_t>(n * count);
  std::int32_t* counts = ws.take<std::int32_t>(n);
  float* list_scores = ws.take<float>(n * count);

  // the seeds ascending: their top-k's ties to the lower position are to the lower id
  std::vector<std::int32_t> sorted = host.seeds;
  std::sort(sorted.begin(), sorted.end());
  AETHER_TRY(
      cudaMemcpyAsync(seed_ids, sorted.data(), seed_count * 4, cudaMemcpyHostToDevice, stream));
  AETHER_TRY(cudaMemsetAsync(is_seed, 0, count, stream));
  mark_seeds<<<blocks_for(seed_count), kThreads, 0, stream>>>(seed_ids, seed_count, is_seed);
  key_norms<<<blocks_for(count * 32), kThreads, 0, stream>>>(keys.bytes.data(), keys.format, dim,
                                                             row_bytes, count, norms, scales);
  AETHER_TRY(cudaGetLastError());
  const ScoreList seed_list{seed_ids, 0, nullptr};
  const auto query_rows = [&](std::size_t t0, std::size_t m) {
    return queries.subspan(t0 * heads * dim, m * heads * dim);
  };
  const auto weight_rows = [&](std::size_t t0, std::size_t m) {
    return weights.subspan(t0 * heads, m * heads);
  };
  // Seeds of queries [0, m) scored: their top-K (waits), then tau.
  const auto threshold = [&](std::size_t m) -> Status<DosaError> {
    fill<<<blocks_for(m), kThreads, 0, stream>>>(ends, m, std::int32_t(seed_count));
    AETHER_TRY(cudaGetLastError());
    (void)valid_prefix_topk(device_span<const float>(seed_scores, m * seed_count), seed_count,
                            device_span<const std::int32_t>(ends, m), k,
                            device_span<std::int32_t>(lanes, m * k), stream);
    seed_threshold<<<unsigned(m), kThreads, 0, stream>>>(seed_scores, seed_count, lanes, k, tau);
    AETHER_TRY(cudaGetLastError());
    return Ok{};
  };

  if (options.fall_back_when_unpaid) {  // the probe: query 0 on the first kProbe keys
    const std::size_t probe = std::min(count, kProbe);
    AETHER_TRY(launch_index_scores(query_rows(0, 1), weight_rows(0, 1), 1, keys, seed_list,
                                   seed_count, device_span<float>(seed_scores, seed_count),
                                   stream));
    const Screen first =
        dosa_screen::prepare(std::span(host.queries).first(heads * dim),
                             std::span(host.weights).first(heads), dim, plans[0], kArithmetic);
    AETHER_TRY(upload_screens({&first, 1}, width, dim, screen_rows, screen_weights, terms, stream));
    if (auto st = threshold(1); !st.ok()) return st;
    AETHER_TRY(launch_index_scores(
        device_span<const std::uint16_t>(screen_rows, width * dim),
        device_span<const float>(screen_weights, width), 1,
        DeviceIndexKeys{keys.format, keys.bytes.subspan(0, probe * row_bytes), dim}, {}, 0,
        device_span<float>(rows, probe), stream));
    AETHER_TRY(cudaMemsetAsync(counts, 0, 4, stream));
    screen_keys<<<dim3(blocks_for(probe), 1), kThreads, 0, stream>>>(
        rows, probe, probe, terms, tau, norms, scales, is_seed, list, counts, false);
    AETHER_TRY(cudaGetLastError());
    std::int32_t survivors = 0;
    AETHER_TRY(cudaMemcpyAsync(&survivors, counts, 4, cudaMemcpyDeviceToHost, stream));
    AETHER_TRY(cudaStreamSynchronize(stream));
    const auto probed_seeds = std::size_t(
        std::lower_bound(sorted.begin(), sorted.end(), std::int32_t(probe)) - sorted.begin());
    const std::size_t others = probe - probed_seeds;
    if (!pays(others ? double(survivors) / double(others) : 0)) return in_full();
  }

  AETHER_TRY(launch_index_scores(queries, weights, n, keys, seed_list, seed_count,
                                 device_span<float>(seed_scores, n * seed_count), stream));
  const std::vector<Screen> screens = prepare_all(host, heads, dim, plans);  // while seeds score
  AETHER_TRY(upload_screens(screens, width, dim, screen_rows, screen_weights, terms, stream));
  if (auto st = threshold(n); !st.ok()) return st;
  AETHER_TRY(launch_index_scores(device_span<const std::uint16_t>(screen_rows, n * width * dim),
                                 device_span<const float>(screen_weights, n * width), n, keys, {},
                                 0, all_rows, stream));
  AETHER_TRY(cudaMemsetAsync(counts, 0, n * 4, stream));
  screen_keys<<<dim3(blocks_for(count), unsigned(n)), kThreads, 0, stream>>>(
      rows, count, count, terms, tau, norms, scales, is_seed, list, counts, true);
  AETHER_TRY(cudaGetLastError());
  std::vector<std::int32_t> host_counts(n);
  std::vector<float> host_tau(n);
  AETHER_TRY(cudaMemcpyAsync(host_counts.data(), counts, n * 4, cudaMemcpyDeviceToHost, stream));
  AETHER_TRY(cudaMemcpyAsync(host_tau.data(), tau, n * 4, cudaMemcpyDeviceToHost, stream));
  AETHER_TRY(cudaStreamSynchronize(stream));
  const std::size_t longest =
      std::size_t(*std::max_element(host_counts.begin(), host_counts.end()));
  if (longest > 0) {
    AETHER_TRY(launch_index_scores(queries, weights, n, keys, ScoreList{list, count, counts},
                                   longest, device_span<float>(list_scores, n * longest), stream));
  }
  place<<<dim3(blocks_for(std::max(k, longest)), unsigned(n)), kThreads, 0, stream>>>(
      rows, count, seed_scores, seed_count, lanes, seed_ids, k, list, list_scores, longest, counts,
      tau);
  AETHER_TRY(cudaGetLastError());
  for (std::size_t t = 0; t < n; ++t)
    if (host_tau[t] == kFiller) {  // kFiller would tie with candidates: this row in full
      AETHER_TRY(launch_index_scores(query_rows(t, 1), weight_rows(t, 1), 1, keys, {}, 0,
                                     all_rows.subspan(t * count, count), stream));
    }
  fill<<<blocks_for(n), kThreads, 0, stream>>>(ends, n, std::int32_t(count));
  AETHER_TRY(cudaGetLastError());
  (void)valid_prefix_topk(all_rows, count, all_ends, k, out, stream);
  for (std::size_t t = 0; t < n; ++t) {
    local.screened += count - seed_count;
    local.survivors += std::size_t(host_counts[t]);
  }
  if (stats != nullptr) *stats = local;
  return Ok{};
}

Status<DosaError> dosa_bounds(device_span<const std::uint16_t> query,
                              device_span<const float> weights, const DeviceIndexKeys& keys,
                              const DosaPlan& plan, device_span<double> out, Stream stream) {
  HostInputs host;
  if (auto st = check_inputs(query, weights, 1, keys, {}, stream, host); !st.ok()) return st;
  if (auto st = dosa_screen::check_plan(host.weights, plan); !st.ok()) return st;
  const std::size_t dim = keys.dim, row_bytes = key_row_bytes(keys.format, dim);
  const std::size_t count = row_bytes ? keys.bytes.size() / row_bytes : 0;
  if (out.size() != count) return de::ShapeMismatch{count, out.size()};
  if (count == 0) return Ok{};
  const Screen screen = dosa_screen::prepare(host.queries, host.weights, dim, plan, kArithmetic);
  const std::size_t width = std::max<std::size_t>(1, screen.weights.size());
  Workspace ws;
  ws.reserve<float>(count);
  ws.reserve<double>(count);
  ws.reserve<float>(count);
  ws.reserve<std::uint16_t>(width * dim);
  ws.reserve<float>(width);
  ws.reserve<ScreenTerms>(1);
  AETHER_TRY(ws.allocate());
  float* p = ws.take<float>(count);
  double* norms = ws.take<double>(count);
  float* scales = ws.take<float>(count);
  auto* rows = ws.take<std::uint16_t>(width * dim);
  float* screen_weights = ws.take<float>(width);
  auto* terms = ws.take<ScreenTerms>(1);
  AETHER_TRY(upload_screens({&screen, 1}, width, dim, rows, screen_weights, terms, stream));
  key_norms<<<blocks_for(count * 32), kThreads, 0, stream>>>(keys.bytes.data(), keys.format, dim,
                                                             row_bytes, count, norms, scales);
  AETHER_TRY(cudaGetLastError());
  AETHER_TRY(launch_index_scores(device_span<const std::uint16_t>(rows, width * dim),
                                 device_span<const float>(screen_weights, width), 1, keys, {}, 0,
                                 device_span<float>(p, count), stream));
  key_bounds<<<blocks_for(count), kThreads, 0, stream>>>(p, count, {screen.residual, screen.slack},
                                                         norms, scales, out.data());
  AETHER_TRY(cudaGetLastError());
  AETHER_TRY(cudaStreamSynchronize(stream));
  return Ok{};
}

}  // namespace aether::cuda
