//===- CallStack.cpp - KILN_TRACE call stacks through libbacktrace --------===//
//
// GCC 12's <stacktrace> is not enabled in Debian's libstdc++, so this uses
// the library behind it, GCC's libbacktrace, directly: backtrace_simple to
// record (an unwind, no symbols), backtrace_pcinfo / backtrace_syminfo to
// print.
//
//===----------------------------------------------------------------------===//

#include "lib/Frontend/CallStack.h"
#include "lib/Driver/Environment.h"

#include "kiln/Tensor.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cxxabi.h>
#include <mutex>
#include <optional>

#if KILN_HAVE_BACKTRACE
#include <backtrace.h>
#endif

using namespace kiln;

namespace {
std::atomic<int> traceSetting{-1}; // -1: not decided yet

bool traceFromEnvironment() { return environment::trace(); }

std::string demangled(const char *name) {
  if (!name)
    return {};
  int status = 0;
  char *text = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && text ? text : name;
  std::free(text);
  return out;
}

struct Frame {
  std::string file;
  int line = 0;
  std::string function;
  uintptr_t pc = 0;
};

/// Kiln's own frames (and the standard library's inside them) are not the
/// user's: by source directory where there is debug information, else by
/// name.
bool isKilnFrame(const Frame &frame) {
  static const std::string lib = std::string(KILN_SOURCE_DIR) + "/lib/";
  static const std::string include = std::string(KILN_SOURCE_DIR) + "/include/";
  if (!frame.file.empty())
    return frame.file.starts_with(lib) || frame.file.starts_with(include) ||
           frame.file.find("/c++/") != std::string::npos;
  return frame.function.empty() || frame.function.starts_with("kiln::") ||
         frame.function.starts_with("std::") ||
         frame.function.starts_with("(anonymous namespace)::");
}

#if KILN_HAVE_BACKTRACE
backtrace_state *state() {
  static backtrace_state *s =
      backtrace_create_state(nullptr, /*threaded=*/1, [](void *, const char *, int) {}, nullptr);
  return s;
}

/// The frames at `pc`: an inlined call gives several, innermost first.
std::vector<Frame> framesAt(uintptr_t pc) {
  std::vector<Frame> frames;
  backtrace_pcinfo(
      state(), pc,
      [](void *data, uintptr_t pc, const char *file, int line, const char *function) {
        if (file || function)
          static_cast<std::vector<Frame> *>(data)->push_back(
              {file ? file : "", line, demangled(function), pc});
        return 0;
      },
      [](void *, const char *, int) {}, &frames);
  if (frames.empty()) {
    Frame frame{"", 0, "", pc};
    backtrace_syminfo(
        state(), pc,
        [](void *data, uintptr_t, const char *symbol, uintptr_t, uintptr_t) {
          static_cast<Frame *>(data)->function = demangled(symbol);
        },
        [](void *, const char *, int) {}, &frame);
    frames.push_back(frame);
  }
  return frames;
}
#endif
} // namespace

void kiln::set_trace(bool enabled) { traceSetting = enabled ? 1 : 0; }

bool kiln::tracingAvailable() { return KILN_HAVE_BACKTRACE != 0; }

bool kiln::tracing() {
  int setting = traceSetting.load(std::memory_order_relaxed);
  if (setting < 0) {
    int expected = -1;
    traceSetting.compare_exchange_strong(expected, traceFromEnvironment() ? 1 : 0);
    setting = traceSetting.load();
  }
  return setting == 1;
}

std::shared_ptr<const CallStack> kiln::recordCallStack() {
#if KILN_HAVE_BACKTRACE
  if (!tracing() || !state())
    return nullptr;
  auto stack = std::make_shared<CallStack>();
  stack->pcs.reserve(32);
  backtrace_simple(
      state(), /*skip=*/1,
      [](void *data, uintptr_t pc) {
        auto &pcs = *static_cast<std::vector<uintptr_t> *>(data);
        pcs.push_back(pc);
        return pcs.size() >= 64 ? 1 : 0;
      },
      [](void *, const char *, int) {}, &stack->pcs);
  return stack;
#else
  return nullptr;
#endif
}

std::vector<std::string> kiln::userFrames(const CallStack &stack) {
  std::vector<std::string> out;
#if KILN_HAVE_BACKTRACE
  std::vector<Frame> frames;
  for (uintptr_t pc : stack.pcs)
    for (Frame &frame : framesAt(pc))
      frames.push_back(std::move(frame));
  // Skip Kiln's frames innermost (the recording itself and the API call),
  // then print the user's up to main.
  size_t first = 0;
  while (first < frames.size() && isKilnFrame(frames[first]))
    ++first;
  for (size_t i = first; i < frames.size(); ++i) {
    const Frame &frame = frames[i];
    if (isKilnFrame(frame))
      continue;
    char address[32];
    std::snprintf(address, sizeof address, "0x%llx", static_cast<unsigned long long>(frame.pc));
    std::string where = frame.file.empty() ? std::string(address)
                                           : frame.file + ":" + std::to_string(frame.line);
    out.push_back(where + " in " + (frame.function.empty() ? "??" : frame.function));
    if (frame.function == "main")
      break;
  }
#endif
  return out;
}
