// impl/cpu/parallel.hpp: every row once, on as many threads as allowed, and a
// for_each_row inside a threaded one kept to its share's threads.
#include <gtest/gtest.h>

#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "impl/cpu/parallel.hpp"
#include "props/support/cpu_threads.hpp"

namespace aether {
namespace {

TEST(Parallel, every_row_runs_once_whatever_the_threads) {
  for (const std::size_t threads : {1, 2, 3, 7}) {
    const props::ForcedThreads forced(threads);
    std::vector<int> runs(50, 0);
    cpu::for_each_row(runs.size(), 1, [&](std::size_t r) { ++runs[r]; });
    EXPECT_EQ(runs, std::vector<int>(50, 1)) << threads << " threads";
  }
}

// The threads the inner calls of each outer row ran on: per outer row, its set.
std::vector<std::set<std::thread::id>> inner_threads(std::size_t outer_rows) {
  std::vector<std::set<std::thread::id>> seen(outer_rows);
  std::mutex m;
  cpu::for_each_row(outer_rows, 1, [&](std::size_t o) {
    cpu::for_each_row(16, 1, [&](std::size_t) {
      const std::lock_guard lock(m);
      seen[o].insert(std::this_thread::get_id());
    });
  });
  return seen;
}

TEST(Parallel, an_inner_call_keeps_to_its_shares_threads) {
  {  // 4 threads, 2 outer shares: each inner call on at most 4 / 2
    const props::ForcedThreads forced(4);
    for (const auto& ids : inner_threads(2)) EXPECT_LE(ids.size(), 2u);
    EXPECT_EQ(cpu::threads_of_this_share(), 0u);  // the calling thread's restored
  }
  {  // 2 threads, 2 shares: each inner call on its own share's thread alone
    const props::ForcedThreads forced(2);
    for (const auto& ids : inner_threads(2)) EXPECT_EQ(ids.size(), 1u);
  }
  {  // one outer row runs serially: its inner call may take every thread
    const props::ForcedThreads forced(3);
    EXPECT_EQ(inner_threads(1)[0].size(), 3u);
  }
}

}  // namespace
}  // namespace aether
