// Corpus replay for compilers without libFuzzer (gcc): feeds every file named on
// the command line, or found in a named folder, to LLVMFuzzerTestOneInput.
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(
    int* argc, char*** argv);  // optional, as in libFuzzer

namespace {
// The input being replayed, named on stderr when a harness aborts on a difference
// (write(2) alone: the handler runs inside abort()).
char current_input[4096];
void name_the_failing_input(int sig) {
  constexpr char prefix[] = "replay: failed on ";
  (void)!write(2, prefix, sizeof(prefix) - 1);
  (void)!write(2, current_input, std::strlen(current_input));
  (void)!write(2, "\n", 1);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}
}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  for (int sig : {SIGABRT, SIGSEGV, SIGFPE, SIGBUS, SIGILL})
    std::signal(sig, name_the_failing_input);
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  std::size_t replayed = 0;
  for (int i = 1; i < argc; ++i) {
    std::vector<fs::path> files;
    if (fs::is_directory(argv[i])) {
      for (const auto& e : fs::directory_iterator(argv[i]))
        if (e.is_regular_file()) files.push_back(e.path());
    } else if (fs::is_regular_file(argv[i])) {
      files.push_back(argv[i]);
    } else {
      std::fprintf(stderr, "replay: no such file or folder: %s\n", argv[i]);
      return 2;
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      std::snprintf(current_input, sizeof(current_input), "%s", f.c_str());
      std::ifstream in(f, std::ios::binary);
      const std::vector<char> bytes{std::istreambuf_iterator<char>(in), {}};
      LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
      ++replayed;
    }
  }
  if (replayed == 0) {
    std::fprintf(stderr, "replay: no inputs replayed\n");
    return 2;
  }
  std::printf("replay: %zu inputs, no difference from the model\n", replayed);
  return 0;
}
