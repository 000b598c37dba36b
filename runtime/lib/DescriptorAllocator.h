//===- DescriptorAllocator.h - Per-submit descriptor sets -------*- C++ -*-===//
//
// Private to runtime/lib. Every dispatch gets a fresh descriptor set from a
// list of pools; after the submit that used them completes, reset() recycles
// all pools at once (no per-set free). A pool that runs out is followed by a
// new one, so a long command buffer never fails for lack of descriptors.
//
// Ownership: owned by the device state. Threading: under the device mutex.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_DESCRIPTORALLOCATOR_H
#define KILN_RUNTIME_LIB_DESCRIPTORALLOCATOR_H

#include "kiln/runtime/Status.h"

#include "VulkanApi.h"

#include <string>
#include <vector>

namespace kiln::rt {

class DescriptorAllocator {
public:
  DescriptorAllocator(VkDevice device, std::string label)
      : device_(device), label_(std::move(label)) {}
  ~DescriptorAllocator();
  DescriptorAllocator(const DescriptorAllocator &) = delete;
  DescriptorAllocator &operator=(const DescriptorAllocator &) = delete;

  /// A set of `layout`, which holds `numBindings` storage buffers.
  StatusOr<VkDescriptorSet> allocate(VkDescriptorSetLayout layout,
                                     uint32_t numBindings);
  /// No set handed out is in use any more.
  void reset();

private:
  Status addPool(uint32_t minDescriptors);

  VkDevice device_;
  std::string label_;
  std::vector<VkDescriptorPool> pools_;
  size_t current_ = 0;
};

} // namespace kiln::rt

#endif // KILN_RUNTIME_LIB_DESCRIPTORALLOCATOR_H
