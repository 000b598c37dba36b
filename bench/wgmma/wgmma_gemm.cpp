// Prototype harness: runs make_ptx.py's wgmma GEMMs on an NVIDIA GPU
// through Vulkan (VK_NVX_binary_import: the driver JIT-compiles the PTX;
// the kernels' pointers are buffer device addresses), checks rows of C
// exactly against a double-precision reference on small integers, and
// times each variant with timestamp queries.
//   wgmma_gemm DIR M N K [reps [variant]]   (DIR holds variants.txt and the .ptx files)
#include "../HalfBits.h"

#include <vulkan/vulkan.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#define CK(x)                                                                  \
  do {                                                                         \
    VkResult r_ = (x);                                                         \
    if (r_ != VK_SUCCESS) {                                                    \
      printf("error: %s -> %d\n", #x, r_);                                     \
      return 1;                                                                \
    }                                                                          \
  } while (0)

struct Buf {
  VkBuffer buf;
  VkDeviceMemory mem;
  VkDeviceAddress addr = 0;
  void *map = nullptr;
};

static VkPhysicalDevice pd;
static VkDevice dev;

static int makeBuf(size_t size, bool host, Buf &b) {
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = size;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT |
              VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  CK(vkCreateBuffer(dev, &bci, nullptr, &b.buf));
  VkMemoryRequirements mr;
  vkGetBufferMemoryRequirements(dev, b.buf, &mr);
  VkPhysicalDeviceMemoryProperties mp;
  vkGetPhysicalDeviceMemoryProperties(pd, &mp);
  VkMemoryPropertyFlags want = host ? VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
                                    : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  uint32_t ti = 0;
  for (; ti < mp.memoryTypeCount; ++ti)
    if ((mr.memoryTypeBits >> ti & 1) && (mp.memoryTypes[ti].propertyFlags & want) == want) break;
  VkMemoryAllocateFlagsInfo fl{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
  fl.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
  VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  mai.pNext = &fl;
  mai.allocationSize = mr.size;
  mai.memoryTypeIndex = ti;
  CK(vkAllocateMemory(dev, &mai, nullptr, &b.mem));
  CK(vkBindBufferMemory(dev, b.buf, b.mem, 0));
  if (host) CK(vkMapMemory(dev, b.mem, 0, VK_WHOLE_SIZE, 0, &b.map));
  VkBufferDeviceAddressInfo bai{VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO};
  bai.buffer = b.buf;
  b.addr = vkGetBufferDeviceAddress(dev, &bai);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: wgmma_gemm DIR M N K [reps]\n");
    return 2;
  }
  std::string dir = argv[1];
  uint32_t M = atoi(argv[2]), N = atoi(argv[3]), K = atoi(argv[4]);
  int reps = argc > 5 ? atoi(argv[5]) : 20;
  std::string only = argc > 6 ? argv[6] : "";
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.apiVersion = VK_API_VERSION_1_3;
  VkInstanceCreateInfo ici{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ici.pApplicationInfo = &app;
  VkInstance inst;
  CK(vkCreateInstance(&ici, nullptr, &inst));
  uint32_t n = 0;
  vkEnumeratePhysicalDevices(inst, &n, nullptr);
  std::vector<VkPhysicalDevice> pds(n);
  vkEnumeratePhysicalDevices(inst, &n, pds.data());
  bool found = false;
  VkPhysicalDeviceProperties props;
  for (auto p : pds) {
    uint32_t ne = 0;
    vkEnumerateDeviceExtensionProperties(p, nullptr, &ne, nullptr);
    std::vector<VkExtensionProperties> ex(ne);
    vkEnumerateDeviceExtensionProperties(p, nullptr, &ne, ex.data());
    for (auto &e : ex)
      if (!strcmp(e.extensionName, VK_NVX_BINARY_IMPORT_EXTENSION_NAME)) found = true;
    if (found) {
      pd = p;
      break;
    }
  }
  if (!found) {
    printf("skipped: no device offers VK_NVX_binary_import\n");
    return 0;
  }
  vkGetPhysicalDeviceProperties(pd, &props);
  float prio = 1;
  VkDeviceQueueCreateInfo q{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  q.queueCount = 1;
  q.pQueuePriorities = &prio;
  const char *exts[] = {VK_NVX_BINARY_IMPORT_EXTENSION_NAME};
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  f12.bufferDeviceAddress = VK_TRUE;
  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  dci.pNext = &f12;
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &q;
  dci.enabledExtensionCount = 1;
  dci.ppEnabledExtensionNames = exts;
  CK(vkCreateDevice(pd, &dci, nullptr, &dev));
  auto createModule = (PFN_vkCreateCuModuleNVX)vkGetDeviceProcAddr(dev, "vkCreateCuModuleNVX");
  auto createFunction = (PFN_vkCreateCuFunctionNVX)vkGetDeviceProcAddr(dev, "vkCreateCuFunctionNVX");
  auto launch = (PFN_vkCmdCuLaunchKernelNVX)vkGetDeviceProcAddr(dev, "vkCmdCuLaunchKernelNVX");
  VkQueue queue;
  vkGetDeviceQueue(dev, 0, 0, &queue);
  VkCommandPoolCreateInfo cpi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  cpi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  VkCommandPool pool;
  CK(vkCreateCommandPool(dev, &cpi, nullptr, &pool));
  VkCommandBufferAllocateInfo cai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  cai.commandPool = pool;
  cai.commandBufferCount = 1;
  VkCommandBuffer cb;
  CK(vkAllocateCommandBuffers(dev, &cai, &cb));
  VkQueryPoolCreateInfo qpi{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
  qpi.queryType = VK_QUERY_TYPE_TIMESTAMP;
  qpi.queryCount = 2;
  VkQueryPool qp;
  CK(vkCreateQueryPool(dev, &qpi, nullptr, &qp));
  auto submit = [&]() -> VkResult {
    VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cb;
    VkResult r = vkQueueSubmit(queue, 1, &si, VK_NULL_HANDLE);
    if (r != VK_SUCCESS) return r;
    return vkQueueWaitIdle(queue);
  };
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};

  size_t aN = size_t(M) * K, bN = size_t(K) * N, cN = size_t(M) * N;
  Buf A, B, C, stage;
  if (makeBuf(aN * 2, false, A) || makeBuf(bN * 2, false, B) || makeBuf(cN * 2, false, C) ||
      makeBuf((aN + bN + cN) * 2, true, stage))
    return 1;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(-2, 2);
  std::vector<float> a(aN), b(bN);
  auto *h = static_cast<uint16_t *>(stage.map);
  for (size_t i = 0; i < aN; ++i) h[i] = toHalf(a[i] = float(small(rng)));
  for (size_t i = 0; i < bN; ++i) h[aN + i] = toHalf(b[i] = float(small(rng)));
  CK(vkBeginCommandBuffer(cb, &bi));
  VkBufferCopy ca{0, 0, aN * 2}, cbb{aN * 2, 0, bN * 2};
  vkCmdCopyBuffer(cb, stage.buf, A.buf, 1, &ca);
  vkCmdCopyBuffer(cb, stage.buf, B.buf, 1, &cbb);
  CK(vkEndCommandBuffer(cb));
  CK(submit());
  // Reference rows: both halves of tiles, both warps' 8-row groups.
  std::vector<uint32_t> rows = {0, 1, 7, 8, 15, 16, 63, 64, 65, 127, M / 2 + 3, M - 1};
  std::vector<std::vector<uint16_t>> ref;
  for (uint32_t r : rows) {
    std::vector<uint16_t> row(N);
    std::vector<double> acc(N, 0.0);
    for (uint32_t k = 0; k < K; ++k) {
      double av = a[size_t(r) * K + k];
      if (av == 0) continue;
      const float *brow = &b[size_t(k) * N];
      for (uint32_t j = 0; j < N; ++j) acc[j] += av * brow[j];
    }
    for (uint32_t j = 0; j < N; ++j) row[j] = toHalf(float(acc[j]));
    ref.push_back(row);
  }
  double flops = 2.0 * M * N * K;
  std::ifstream vf(dir + "/variants.txt");
  std::string line;
  if (only.empty()) printf("device %s, C = A B, %u x %u x %u f16, f32 accumulation\n", props.deviceName, M, N, K);
  while (std::getline(vf, line)) {
    std::istringstream ls(line);
    std::string name;
    uint32_t BM, BN, smem, WG = 1, group = 0;
    ls >> name >> BM >> BN >> smem >> WG >> group;
    if (!only.empty() && name != only) continue;
    std::ifstream pf(dir + "/" + name + ".ptx");
    std::stringstream ss;
    ss << pf.rdbuf();
    std::string ptx = ss.str();
    VkCuModuleCreateInfoNVX mi{VK_STRUCTURE_TYPE_CU_MODULE_CREATE_INFO_NVX};
    mi.dataSize = ptx.size() + 1;
    mi.pData = ptx.c_str();
    VkCuModuleNVX mod;
    auto t0 = std::chrono::steady_clock::now();
    VkResult r = createModule(dev, &mi, nullptr, &mod);
    double jitMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (r != VK_SUCCESS) {
      printf("%-30s module: error %d\n", name.c_str(), r);
      continue;
    }
    VkCuFunctionCreateInfoNVX fi{VK_STRUCTURE_TYPE_CU_FUNCTION_CREATE_INFO_NVX};
    fi.module = mod;
    fi.pName = "gemm";
    VkCuFunctionNVX fn;
    if ((r = createFunction(dev, &fi, nullptr, &fn)) != VK_SUCCESS) {
      printf("%-30s function: error %d\n", name.c_str(), r);
      continue;
    }
    const void *params[] = {&A.addr, &B.addr, &C.addr, &M, &N, &K};
    VkCuLaunchInfoNVX li{VK_STRUCTURE_TYPE_CU_LAUNCH_INFO_NVX};
    li.function = fn;
    li.gridDimX = group ? (N / BN) * (M / BM) : N / BN;
    li.gridDimY = group ? 1 : M / BM;
    li.gridDimZ = 1;
    li.blockDimX = 128 * WG;
    li.blockDimY = li.blockDimZ = 1;
    li.sharedMemBytes = smem;
    li.paramCount = 6;
    li.pParams = params;
    // One launch, checked.
    CK(vkResetCommandBuffer(cb, 0));
    CK(vkBeginCommandBuffer(cb, &bi));
    vkCmdFillBuffer(cb, C.buf, 0, cN * 2, 0x7e007e00u); // NaN: a tile never written shows
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT;
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1, &mb, 0,
                         nullptr, 0, nullptr);
    launch(cb, &li);
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1, &mb, 0,
                         nullptr, 0, nullptr);
    VkBufferCopy cc{0, (aN + bN) * 2, cN * 2};
    vkCmdCopyBuffer(cb, C.buf, stage.buf, 1, &cc);
    CK(vkEndCommandBuffer(cb));
    if ((r = submit()) != VK_SUCCESS) {
      printf("%-30s launch: error %d\n", name.c_str(), r);
      return 1;
    }
    const uint16_t *c = h + aN + bN;
    size_t wrong = 0, nanTiles = 0;
    for (size_t i = 0; i < rows.size(); ++i)
      for (uint32_t j = 0; j < N; ++j)
        if (c[size_t(rows[i]) * N + j] != ref[i][j]) {
          if (wrong++ < 3)
            printf("   C[%u,%u] = 0x%04x, expected 0x%04x\n", rows[i], j, c[size_t(rows[i]) * N + j], ref[i][j]);
        }
    for (size_t i = 0; i < cN; i += 61)
      if (c[i] == 0x7e00) ++nanTiles;
    // Timed: reps launches between two timestamps.
    CK(vkResetCommandBuffer(cb, 0));
    CK(vkBeginCommandBuffer(cb, &bi));
    vkCmdResetQueryPool(cb, qp, 0, 2);
    launch(cb, &li); // warm
    vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, qp, 0);
    for (int i = 0; i < reps; ++i) launch(cb, &li);
    vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, qp, 1);
    CK(vkEndCommandBuffer(cb));
    CK(submit());
    uint64_t ts[2];
    CK(vkGetQueryPoolResults(dev, qp, 0, 2, sizeof ts, ts, 8, VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
    double ms = double(ts[1] - ts[0]) * props.limits.timestampPeriod * 1e-6 / reps;
    printf("%-30s %s (%zu of %zu checked wrong, %zu unwritten samples)  %.4f ms  %.0f TFLOP/s  jit %.0f ms\n",
           name.c_str(), wrong || nanTiles ? "WRONG" : "exact", wrong, rows.size() * N, nanTiles, ms,
           flops / ms * 1e-9, jitMs);
  }
  vkDeviceWaitIdle(dev);
  return 0;
}
