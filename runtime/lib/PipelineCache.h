//===- PipelineCache.h - the driver's pipeline cache, kept in the store -*- C++ -*-===//
//
// Private to runtime/lib. One VkPipelineCache per device, seeded from the
// process store's blob for this adapter (Store.h): Kiln's own header is
// checked first (PipelineCacheBlob.h), so a driver only ever sees data made
// by the same vendor, device, driver version and pipelineCacheUUID. A
// missing or rejected blob is an empty cache plus, for a rejected one, one
// warning. save() writes the driver's data back when pipelines were added.
//
// Ownership: owned by the device state, destroyed before the VkDevice.
// Threading: used under the device mutex.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_PIPELINECACHE_H
#define KILN_RUNTIME_LIB_PIPELINECACHE_H

#include "kiln/runtime/Vulkan.h"

#include "VulkanApi.h"

#include <memory>
#include <string>

namespace kiln::rt {

class DriverPipelineCache {
public:
  /// Never fails: without a store or with data the driver refuses, the
  /// cache starts empty (VK_NULL_HANDLE only when even that fails).
  static std::unique_ptr<DriverPipelineCache> create(VkDevice device, const AdapterInfo &adapter,
                                                     const std::string &label);
  ~DriverPipelineCache();
  DriverPipelineCache(const DriverPipelineCache &) = delete;
  DriverPipelineCache &operator=(const DriverPipelineCache &) = delete;

  VkPipelineCache handle() const { return cache_; }
  /// Whether the store's data seeded this cache.
  bool seeded() const { return seeded_; }
  /// A pipeline was created through the cache: save() has work.
  void noteCreated() { dirty_ = true; }
  /// Writes the driver's data to the store when pipelines were added.
  void save();

private:
  DriverPipelineCache(VkDevice device, const AdapterInfo &adapter, std::string label)
      : device_(device), adapter_(adapter), label_(std::move(label)) {}

  VkDevice device_;
  const AdapterInfo &adapter_;
  std::string label_;
  VkPipelineCache cache_ = VK_NULL_HANDLE;
  bool seeded_ = false;
  bool dirty_ = false;
};

} // namespace kiln::rt

#endif // KILN_RUNTIME_LIB_PIPELINECACHE_H
