//===- GraphCache.cpp - reuse a Program for a graph of the same structure -===//

#include "lib/Frontend/GraphCache.h"
#include "lib/Driver/Environment.h"

#include "lib/Frontend/GraphBuilder.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/DenseMap.h"

#include <cstdlib>
#include <cstring>

using namespace kiln;

namespace {
/// Appends fields as text with separators: cheap, and readable when a test
/// prints two keys that should have been equal.
class KeyWriter {
public:
  explicit KeyWriter(std::string &out) : out(out) {}
  KeyWriter &operator<<(int64_t v) {
    out += std::to_string(v);
    out += ',';
    return *this;
  }
  KeyWriter &operator<<(const std::string &s) {
    out += s;
    out += ',';
    return *this;
  }
  KeyWriter &list(const std::vector<int64_t> &v) {
    out += '[';
    for (int64_t x : v)
      *this << x;
    out += ']';
    return *this;
  }

private:
  std::string &out;
};

uint32_t floatBits(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return bits;
}

} // namespace

size_t kiln::graphCacheCapacity() { return environment::graphCacheCapacity(); }

GraphStructure kiln::graphStructure(const std::vector<std::shared_ptr<Node>> &roots,
                                    const std::string &context) {
  GraphStructure out;
  out.order = topologicalOrder(roots);
  out.key.reserve(out.order.size() * 48 + context.size());
  out.key = context;
  KeyWriter key(out.key);
  llvm::DenseMap<Node *, int64_t> position;
  // Rank-0 constants: equal values of one dtype and device form a class.
  std::vector<std::pair<const Node *, int64_t>> scalarClasses;
  for (size_t i = 0; i < out.order.size(); ++i) {
    Node *node = out.order[i];
    position[node] = static_cast<int64_t>(i);
    key << "|" << static_cast<int64_t>(node->dtype) << (node->device ? node->device->name() : "-");
    key.list(node->shape);
    if (isGraphInput(*node)) {
      key << "in";
      continue;
    }
    key << static_cast<int64_t>(node->kind) << node->op;
    if (node->kind == OpKind::Constant) {
      if (node->shape.empty()) {
        int64_t cls = static_cast<int64_t>(i);
        for (auto [other, first] : scalarClasses)
          if (other->dtype == node->dtype && other->device == node->device &&
              floatBits(other->value) == floatBits(node->value)) {
            cls = first;
            break;
          }
        if (cls == static_cast<int64_t>(i))
          scalarClasses.push_back({node, cls});
        key << "s" << cls;
      } else {
        key << static_cast<int64_t>(floatBits(node->value));
      }
      continue;
    }
    for (const auto &operand : node->operands)
      key << position.lookup(operand.get());
    key.list(node->permutation).list(node->starts).list(node->steps).list(node->axes);
    key << static_cast<int64_t>(node->keepdims) << static_cast<int64_t>(node->ceilMode)
        << static_cast<int64_t>(node->causal);
    key.list(node->window).list(node->stride).list(node->padding).list(node->dilation);
    key << node->groups;
    key.list(node->low).list(node->high);
    if (node->kind == OpKind::Pad || node->kind == OpKind::Attention)
      key << static_cast<int64_t>(floatBits(node->value));
  }
  key << "roots";
  for (const auto &root : roots)
    key << position.lookup(root.get());
  return out;
}

const CachedGraph *GraphCache::find(const std::string &key) {
  auto it = entries.find(key);
  if (it == entries.end())
    return nullptr;
  order.splice(order.begin(), order, it->second);
  return &it->second->second;
}

const CachedGraph &GraphCache::insert(const std::string &key, CachedGraph graph) {
  if (auto it = entries.find(key); it != entries.end()) {
    it->second->second = std::move(graph);
    order.splice(order.begin(), order, it->second);
    return it->second->second;
  }
  order.emplace_front(key, std::move(graph));
  entries[key] = order.begin();
  size_t capacity = graphCacheCapacity();
  while (order.size() > std::max<size_t>(capacity, 1)) {
    entries.erase(order.back().first);
    order.pop_back();
  }
  return order.front().second;
}

uint16_t kiln::halfBitsOf(double value, DType dtype) {
  llvm::APFloat rounded(value);
  bool lost = false;
  rounded.convert(dtype == DType::f16 ? llvm::APFloat::IEEEhalf() : llvm::APFloat::BFloat(),
                  llvm::APFloat::rmNearestTiesToEven, &lost);
  return static_cast<uint16_t>(rounded.bitcastToAPInt().getZExtValue());
}

float kiln::halfBitsToFloat(uint16_t bits, DType dtype) {
  if (dtype == DType::f16)
    return half{bits};
  uint32_t wide = uint32_t(bits) << 16; // bf16 is an f32's upper half
  float value;
  std::memcpy(&value, &wide, 4);
  return value;
}

std::vector<uint8_t> kiln::splatBytesOf(const Node &node) {
  switch (node.dtype) {
  case DType::boolean: return {uint8_t(node.value != 0 ? 1 : 0)};
  case DType::f16:
  case DType::bf16: {
    uint16_t raw = halfBitsOf(node.value, node.dtype);
    return {uint8_t(raw & 0xFF), uint8_t(raw >> 8)};
  }
  default: {
    std::vector<uint8_t> bytes(4);
    std::memcpy(bytes.data(), &node.value, 4);
    return bytes;
  }
  }
}
