//===- PipelineCache.cpp - the driver's pipeline cache, kept in the store -===//

#include "PipelineCache.h"

#include "kiln/runtime/PipelineCacheBlob.h"
#include "kiln/runtime/Store.h"

#include <cstdio>
#include <cstring>
#include <vector>

namespace kiln::rt {

static PipelineCacheIdentity identityOf(const AdapterInfo &adapter) {
  PipelineCacheIdentity id;
  id.vendorId = adapter.vendorId;
  id.deviceId = adapter.deviceId;
  id.driverVersion = adapter.driverVersion;
  std::memcpy(id.uuid, adapter.pipelineCacheUUID, sizeof(id.uuid));
  return id;
}

std::unique_ptr<DriverPipelineCache>
DriverPipelineCache::create(VkDevice device, const AdapterInfo &adapter, const std::string &label) {
  std::unique_ptr<DriverPipelineCache> cache(new DriverPipelineCache(device, adapter, label));
  std::vector<uint8_t> initial;
  if (Store *store = Store::process()) {
    PipelineCacheIdentity id = identityOf(adapter);
    if (std::optional<std::vector<uint8_t>> blob = store->findPipelineCache(fingerprint(id))) {
      StatusOr<std::vector<uint8_t>> data = unwrapPipelineCache(id, blob->data(), blob->size());
      if (data.isOk())
        initial = std::move(*data);
      else
        std::fprintf(stderr,
                     "kiln: warning: the cached pipeline data for %s is not usable (%s); "
                     "starting with an empty pipeline cache\n",
                     label.c_str(), data.status().message().c_str());
    }
  }
  VkPipelineCacheCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO;
  info.initialDataSize = initial.size();
  info.pInitialData = initial.empty() ? nullptr : initial.data();
  if (vkCreatePipelineCache(device, &info, nullptr, &cache->cache_) == VK_SUCCESS) {
    cache->seeded_ = !initial.empty();
    return cache;
  }
  // The driver refused data that passed Kiln's checks: start empty.
  info.initialDataSize = 0;
  info.pInitialData = nullptr;
  if (vkCreatePipelineCache(device, &info, nullptr, &cache->cache_) != VK_SUCCESS)
    cache->cache_ = VK_NULL_HANDLE;
  return cache;
}

void DriverPipelineCache::save() {
  if (!dirty_ || !cache_)
    return;
  Store *store = Store::process();
  if (!store)
    return;
  size_t size = 0;
  if (vkGetPipelineCacheData(device_, cache_, &size, nullptr) != VK_SUCCESS || size == 0)
    return;
  std::vector<uint8_t> data(size);
  if (vkGetPipelineCacheData(device_, cache_, &size, data.data()) != VK_SUCCESS)
    return;
  data.resize(size);
  PipelineCacheIdentity id = identityOf(adapter_);
  std::vector<uint8_t> blob = wrapPipelineCache(id, data.data(), data.size());
  if (store->putPipelineCache(fingerprint(id), blob.data(), blob.size()))
    dirty_ = false;
}

DriverPipelineCache::~DriverPipelineCache() {
  save();
  if (cache_)
    vkDestroyPipelineCache(device_, cache_, nullptr);
}

} // namespace kiln::rt
