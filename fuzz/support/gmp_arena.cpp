#include "fuzz/support/gmp_arena.hpp"

#include <gmp.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>

namespace aether::fuzz {
namespace {

constexpr std::size_t kGrain = 16, kClasses = 16;  // blocks up to 256 bytes are pooled

struct Block {
  Block* next;
};
Block* free_lists[kClasses] = {};

std::size_t class_of(std::size_t bytes) { return (bytes + kGrain - 1) / kGrain - 1; }
bool pooled(std::size_t bytes) { return bytes != 0 && class_of(bytes) < kClasses; }

void* allocate(std::size_t bytes) {
  if (!pooled(bytes)) return std::malloc(bytes);
  Block*& head = free_lists[class_of(bytes)];
  if (head == nullptr) return std::malloc((class_of(bytes) + 1) * kGrain);
  Block* b = head;
  head = b->next;
  return b;
}

void release(void* p, std::size_t bytes) {
  if (!pooled(bytes)) return std::free(p);
  Block* b = static_cast<Block*>(p);
  b->next = free_lists[class_of(bytes)];
  free_lists[class_of(bytes)] = b;
}

void* reallocate(void* p, std::size_t old_bytes, std::size_t new_bytes) {
  if (pooled(old_bytes) && pooled(new_bytes) && class_of(old_bytes) == class_of(new_bytes))
    return p;
  void* q = allocate(new_bytes);
  std::memcpy(q, p, old_bytes < new_bytes ? old_bytes : new_bytes);
  release(p, old_bytes);
  return q;
}

}  // namespace

void use_gmp_arena() { mp_set_memory_functions(&allocate, &reallocate, &release); }

}  // namespace aether::fuzz
