#include "props/support/property.hpp"

#include <cstdlib>
#include <iostream>

#ifdef AETHER_HAVE_CUDA
#include "impl/cuda/device.hpp"
#endif

namespace aether::props {

namespace {
std::string& program_path_storage() {
  static std::string path;
  return path;
}
}  // namespace

bool gpu_present() {
#ifdef AETHER_HAVE_CUDA
  // A driver that cannot serve this runtime is a broken set-up, not a machine
  // without a GPU: say so and stop rather than skip every CUDA case.
  static const bool present = [] {
    const auto n = cuda::device_count();
    if (!n.ok()) {
      std::cerr << "aether: CUDA is unusable here: " << n.error() << "\n";
      std::exit(3);
    }
    return n.value() > 0;
  }();
  return present;
#else
  return false;
#endif
}

const std::string& program_path() { return program_path_storage(); }
void set_program_path(const char* argv0) { program_path_storage() = argv0; }

std::string replay_line(const std::string& test_id, const rc::detail::Reproduce& reproduce) {
  rc::detail::Configuration config;
  config.reproduce[test_id] = reproduce;
  std::string filter = test_id;
  filter[filter.find('/')] = '.';
  return "replay: RC_PARAMS=\"" + rc::detail::configToMinimalString(config) + "\" " +
         program_path() + " --gtest_filter=" + filter;
}

}  // namespace aether::props
