//===- CommandStream.h - The device's command buffer and fence --*- C++ -*-===//
//
// Private to runtime/lib. One primary command buffer, begun lazily by the
// first recorded command, submitted and waited on by submitAndWait(). Every
// command recorded after the first is ordered after the previous one by a
// memory barrier from the previous command's stage and writes to this
// command's stage and accesses; barriers chain, so each command is ordered
// after everything recorded before it.
//
// Each recording gets a serial (1, 2, ...); buffers remember the serial of
// their last use so the pool knows when they are free again.
//
// Ownership: owned by the device state. Threading: under the device mutex.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_COMMANDSTREAM_H
#define KILN_RUNTIME_LIB_COMMANDSTREAM_H

#include "kiln/runtime/Status.h"

#include "VulkanApi.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::rt {

/// How a command touches memory.
struct CommandUse {
  VkPipelineStageFlags stage;
  VkAccessFlags access; // everything it reads or writes
  VkAccessFlags writes; // the subset it writes

  static CommandUse compute() {
    return {VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
            VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
            VK_ACCESS_SHADER_WRITE_BIT};
  }
  static CommandUse transfer() {
    return {VK_PIPELINE_STAGE_TRANSFER_BIT,
            VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
            VK_ACCESS_TRANSFER_WRITE_BIT};
  }
};

/// How a submit waits for its fence: polling first, then sleeping in the
/// driver (a blocking wait wakes tens of microseconds late: on the H200 about
/// 100 us, most of a small model's run; CUDA's synchronize spins too).
struct FenceSpin {
  /// Polled at least this long.
  std::chrono::microseconds floor{0};
  /// Polled longer when the previous submit took longer (a replayed model
  /// takes about as long each run), up to kMaxAdaptiveSpin.
  bool adaptive = false;
};

class CommandStream {
public:
  static constexpr std::chrono::microseconds kMaxAdaptiveSpin{20000};

  static StatusOr<std::unique_ptr<CommandStream>>
  create(VkDevice device, VkQueue queue, uint32_t queueFamily, std::string label,
         FenceSpin spin = {});
  /// KILN_FENCE_SPIN_US when set (microseconds, 0 to sleep at once; not
  /// adapted), else on a GPU 200 us or a bit more than the previous submit
  /// took, and on a CPU implementation none: its work needs the host's cores.
  static FenceSpin defaultSpin(bool cpuAdapter);
  ~CommandStream();
  CommandStream(const CommandStream &) = delete;
  CommandStream &operator=(const CommandStream &) = delete;

  /// The open command buffer, begun if needed, after the barrier that orders
  /// a command of kind `use` after the earlier ones. Record exactly one
  /// command of that kind into it.
  StatusOr<VkCommandBuffer> record(const CommandUse &use);
  /// Makes the transfer writes recorded so far visible to host reads once
  /// the submit completes. Needs an open command buffer.
  void hostReadBarrier();

  bool hasWork() const { return recording_; }
  /// The serial of the open command buffer; valid while hasWork().
  uint64_t recordingSerial() const { return serial_; }
  /// Begins the command buffer if it is not open (a replay needs a serial
  /// even when nothing else was recorded).
  Status begin();
  /// Ends, submits and waits for the open command buffer, followed in the
  /// same submit by `more` (command buffers recorded elsewhere). It is reset
  /// whatever the outcome; a lost device fails every later call.
  Status submitAndWait(const std::vector<VkCommandBuffer> &more = {});

private:
  CommandStream(VkDevice device, VkQueue queue, std::string label)
      : device_(device), queue_(queue), label_(std::move(label)) {}
  /// Ends, submits and waits for the command buffer and `more`.
  Status execute(const std::vector<VkCommandBuffer> &more);

  VkDevice device_;
  VkQueue queue_;
  std::string label_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer commandBuffer_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;

  bool recording_ = false;
  uint64_t serial_ = 0;
  // The previous command's stage and writes, still to be waited on.
  VkPipelineStageFlags pendingStages_ = 0;
  VkAccessFlags pendingWrites_ = 0;
  Status broken_ = Status::ok();
  FenceSpin spin_;
  // How long the previous submit took to complete, as seen by its wait.
  std::chrono::microseconds lastWait_{0};
};

} // namespace kiln::rt

#endif // KILN_RUNTIME_LIB_COMMANDSTREAM_H
