//===- VulkanApi.cpp - volk's function pointers, defined once -------------===//

#define VOLK_IMPLEMENTATION
#include "VulkanApi.h"
