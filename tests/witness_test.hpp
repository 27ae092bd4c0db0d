// The fixture of the witness suites that run one body on every backend
// (tests/witness_test.cpp, tests/witness_shapes_test.cpp): the parameter names the
// backend (props::all_witness_backends: the model adapter, the CPU, CUDA); CUDA
// skips without a device. Each call's output starts as 99 so that an unwritten
// slot shows.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "props/support/property.hpp"
#include "props/support/witness_backends.hpp"

namespace aether {

class Witness : public ::testing::TestWithParam<std::string> {
 protected:
  using V = std::vector<std::int32_t>;

  void SetUp() override {
    if (GetParam() == "cuda" && !props::gpu_present()) GTEST_SKIP() << "no CUDA device visible";
    for (auto& b : props::all_witness_backends())
      if (b.name == GetParam()) backend = b;
  }

  V indices(const V& learned, std::size_t topk, const V& lens, std::size_t s) {
    V out(lens.size() * s, 99);
    auto st = backend.indices(learned, topk, lens, s, out);
    EXPECT_TRUE(st.ok()) << st.error();
    return out;
  }
  V apply(const V& learned, std::size_t topk, const V& lens, std::size_t keep, std::size_t s,
          std::size_t b) {
    V out(learned.size(), 99);
    auto st = backend.apply(learned, topk, lens, keep, s, b, out);
    EXPECT_TRUE(st.ok()) << st.error();
    return out;
  }
  V scatter(V buf, std::size_t topk, const V& lens, std::size_t s) {
    auto st = backend.scatter(buf, topk, lens, s);
    EXPECT_TRUE(st.ok()) << st.error();
    return buf;
  }

  props::WitnessBackend backend;
};

}  // namespace aether
