// The fixture of the compression suites that run one body on every backend
// (tests/compress_test.cpp, tests/compress_refusal_test.cpp): the parameter names
// the backend (props::impl_compress_backends); the CUDA ones skip without a device.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "props/support/compress_backends.hpp"
#include "props/support/property.hpp"

namespace aether {

class CompressBackendTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam().starts_with("cuda") && !props::gpu_present())
      GTEST_SKIP() << "no CUDA device visible";
    for (auto& b : props::impl_compress_backends())
      if (b.name == GetParam()) backend = b;
  }
  props::CompressBackend backend;
};

}  // namespace aether
