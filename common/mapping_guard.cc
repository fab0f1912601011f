#include "common/mapping_guard.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <mutex>

namespace ember {
namespace {

// A slot is free while start is 0. Writers claim a slot under `table_mu` (only to keep two
// registrations off one slot); the handler reads with acquire loads and no lock.
struct Slot {
  std::atomic<uintptr_t> start{0};
  std::atomic<uintptr_t> end{0};
  std::atomic<std::atomic<bool>*> shrunk{nullptr};
};

Slot table[kMaxGuardedMappings];
std::mutex table_mu;
struct sigaction previous;
std::once_flag installed;

void OnSigbus(int sig, siginfo_t* info, void* context) {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Slot& slot : table) {
    const uintptr_t start = slot.start.load(std::memory_order_acquire);
    if (start == 0 || addr < start || addr >= slot.end.load(std::memory_order_acquire)) continue;
    std::atomic<bool>* shrunk = slot.shrunk.load(std::memory_order_acquire);
    const uintptr_t page_size = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    void* page = reinterpret_cast<void*>(addr & ~(page_size - 1));
    // Zeros in place of the page past the file's end: the read goes on and sees them.
    if (mmap(page, page_size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) ==
        MAP_FAILED)
      break;
    if (shrunk != nullptr) shrunk->store(true, std::memory_order_release);
    return;
  }
  // Not ours: what was there before handles the fault that follows.
  (void)sig;
  (void)context;
  sigaction(SIGBUS, &previous, nullptr);
}

void Install() {
  struct sigaction action {};
  action.sa_sigaction = OnSigbus;
  action.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&action.sa_mask);
  sigaction(SIGBUS, &action, &previous);
}

}  // namespace

bool GuardMapping(const void* data, size_t size, std::atomic<bool>* shrunk) {
  if (data == nullptr || size == 0) return true;
  std::call_once(installed, Install);
  std::lock_guard<std::mutex> lock(table_mu);
  for (Slot& slot : table) {
    if (slot.start.load(std::memory_order_relaxed) != 0) continue;
    const uintptr_t start = reinterpret_cast<uintptr_t>(data);
    slot.shrunk.store(shrunk, std::memory_order_relaxed);
    slot.end.store(start + size, std::memory_order_relaxed);
    slot.start.store(start, std::memory_order_release);
    return true;
  }
  return false;
}

void UnguardMapping(const void* data) {
  if (data == nullptr) return;
  std::lock_guard<std::mutex> lock(table_mu);
  for (Slot& slot : table) {
    if (slot.start.load(std::memory_order_relaxed) != reinterpret_cast<uintptr_t>(data)) continue;
    slot.start.store(0, std::memory_order_release);
    slot.end.store(0, std::memory_order_relaxed);
    slot.shrunk.store(nullptr, std::memory_order_relaxed);
    return;
  }
}

}  // namespace ember
