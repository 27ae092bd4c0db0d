// AETHER_PROP: a RapidCheck property as a GoogleTest, tagged with its level of
// agreement (SPEC section 2). On failure it prints a one-line replay command:
//   replay: RC_PARAMS="reproduce=..." <binary> --gtest_filter=Suite.Name
// The default run is 10,000 cases per property (set in prop_main.cpp); RC_PARAMS
// overrides it.
#pragma once

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <sstream>
#include <string>

namespace aether::props {

enum class Needs { Cpu, Gpu };

// True when a CUDA device is visible (always false in a build without CUDA).
bool gpu_present();

// The path this binary was started with, for replay lines.
const std::string& program_path();
void set_program_path(const char* argv0);

std::string replay_line(const std::string& test_id, const rc::detail::Reproduce& reproduce);

template <class Testable>
void check_property(Testable&& testable, const char* level, Needs needs) {
  ::testing::Test::RecordProperty("agreement_level", level);
  if (needs == Needs::Gpu && !gpu_present()) GTEST_SKIP() << "no CUDA device visible";
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  rc::detail::TestMetadata metadata;
  metadata.id = std::string(info->test_suite_name()) + "/" + info->name();
  metadata.description = info->name();
  const auto result = rc::detail::checkTestable(std::forward<Testable>(testable), metadata);
  // Cases run, for the report and the JUnit XML (a failure counts its failing case).
  using rc::detail::FailureResult, rc::detail::GaveUpResult, rc::detail::SuccessResult;
  if (result.template is<SuccessResult>())
    ::testing::Test::RecordProperty("cases", result.template get<SuccessResult>().numSuccess);
  if (result.template is<FailureResult>()) {
    const auto& failure = result.template get<FailureResult>();
    ::testing::Test::RecordProperty("cases", failure.numSuccess + 1);
    const std::string replay = replay_line(metadata.id, failure.reproduce);
    ::testing::Test::RecordProperty("replay", replay);
    std::ostringstream ss;
    rc::detail::printResultMessage(result, ss);
    FAIL() << "[" << level << "] " << ss.str() << "\n" << replay;
  } else if (result.template is<GaveUpResult>()) {
    ::testing::Test::RecordProperty("cases", result.template get<GaveUpResult>().numSuccess);
    std::ostringstream ss;
    rc::detail::printResultMessage(result, ss);
    FAIL() << "[" << level << "] " << ss.str();
  }
}

}  // namespace aether::props

#define AETHER_PROP_IMPL(Suite, Name, Level, Needs, ArgList)                      \
  static void aether_prop_##Suite##_##Name ArgList;                               \
  TEST(Suite, Name) {                                                             \
    ::aether::props::check_property(&aether_prop_##Suite##_##Name, Level, Needs); \
  }                                                                               \
  static void aether_prop_##Suite##_##Name ArgList

// A property of the model, or of the CPU backend against the model.
#define AETHER_PROP(Suite, Name, Level, ArgList) \
  AETHER_PROP_IMPL(Suite, Name, Level, ::aether::props::Needs::Cpu, ArgList)
// A property that needs a CUDA device; it skips cleanly without one.
#define AETHER_GPU_PROP(Suite, Name, Level, ArgList) \
  AETHER_PROP_IMPL(Suite, Name, Level, ::aether::props::Needs::Gpu, ArgList)
