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
  if (needs == Needs::Gpu && !gpu_present()) GTEST_SKIP() << "no CUDA device visible";
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  ::testing::Test::RecordProperty("agreement_level", level);
  rc::detail::TestMetadata metadata;
  metadata.id = std::string(info->test_suite_name()) + "/" + info->name();
  metadata.description = info->name();
  const auto result = rc::detail::checkTestable(std::forward<Testable>(testable), metadata);
  if (result.template is<rc::detail::FailureResult>()) {
    std::ostringstream ss;
    rc::detail::printResultMessage(result, ss);
    FAIL() << "[" << level << "] " << ss.str() << "\n"
           << replay_line(metadata.id, result.template get<rc::detail::FailureResult>().reproduce);
  } else if (!result.template is<rc::detail::SuccessResult>()) {
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
