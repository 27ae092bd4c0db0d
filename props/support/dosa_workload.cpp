#include "props/support/dosa_workload.hpp"

#include <cmath>
#include <random>

namespace aether::props {

namespace {
// n unit vectors of dimension d with independent Gaussian entries
std::vector<std::vector<float>> directions(std::size_t n, std::size_t d, std::mt19937& rng) {
  std::normal_distribution<float> normal;
  std::vector<std::vector<float>> out(n, std::vector<float>(d));
  for (auto& v : out) {
    double norm = 0;
    for (float& x : v) norm += double(x = normal(rng)) * x;
    for (float& x : v) x = float(x / std::sqrt(norm));
  }
  return out;
}
}  // namespace

DosaWorkload make_dosa_workload(const DosaWorkloadParams& p) {
  std::mt19937 rng(p.seed);
  std::normal_distribution<float> normal;
  const std::size_t d = p.dim;
  const auto key_basis = directions(p.key_directions, d, rng);
  const auto head_basis = directions(p.head_directions, d, rng);
  DosaWorkload w;
  w.keys.resize(p.keys * d);
  const float noise = p.key_noise / std::sqrt(float(d));
  for (std::size_t j = 0; j < p.keys; ++j) {
    float* k = w.keys.data() + j * d;
    for (std::size_t i = 0; i < d; ++i) k[i] = noise * normal(rng);
    if (j < p.sinks) {
      for (std::size_t i = 0; i < d && !key_basis.empty(); ++i)
        k[i] += p.sink_scale * key_basis[0][i];
      continue;
    }
    for (std::size_t b = 0; b < key_basis.size(); ++b) {
      const float a = normal(rng) / std::sqrt(float(b + 1));
      for (std::size_t i = 0; i < d; ++i) k[i] += a * key_basis[b][i];
    }
  }
  std::vector<float> first(p.heads * d);
  const float head_noise = p.head_noise / std::sqrt(float(d));
  for (std::size_t h = 0; h < p.heads; ++h) {
    float* q = first.data() + h * d;
    for (std::size_t i = 0; i < d; ++i) q[i] = head_noise * normal(rng);
    for (const auto& v : head_basis) {
      const float b = normal(rng);
      for (std::size_t i = 0; i < d; ++i) q[i] += b * v[i];
    }
  }
  std::uniform_real_distribution<float> magnitude(0.5f, 1.5f), coin(0.0f, 1.0f);
  std::vector<float> weights(p.heads);
  for (float& x : weights) x = magnitude(rng) * (coin(rng) < p.negative_heads ? -1.0f : 1.0f);
  const float drift = p.query_drift / std::sqrt(float(d));
  for (std::size_t t = 0; t < p.queries; ++t) {
    for (std::size_t i = 0; i < first.size(); ++i)
      w.queries.push_back(first[i] + (t == 0 ? 0.0f : drift * normal(rng)));
    w.weights.insert(w.weights.end(), weights.begin(), weights.end());
  }
  return w;
}

}  // namespace aether::props
