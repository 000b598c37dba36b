//===- Tensor.cpp - recording ops -----------------------------------------===//
//
// Shapes and dtypes are checked here, when the op is recorded, so a shape
// error points at the user's line at once; devices are checked later, on
// the whole graph, by the placement pass.
//
//===----------------------------------------------------------------------===//

#include "lib/Frontend/Devices.h"
#include "lib/Frontend/CallStack.h"
#include "lib/Frontend/Graph.h"
#include "lib/Frontend/GraphCache.h"
#include "lib/Frontend/OpRecording.h"

#include "dialects/Kiln/ShapeRules.h"

#include "kiln/runtime/Cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <random>
#include <string_view>
#include <utility>

using namespace kiln;
using namespace kiln::detail;

std::string kiln::detail::shapeText(const Shape &shape) { return shapes::text(shape); }

std::string kiln::detail::sitePrefix(std::source_location loc) {
  return std::string(loc.file_name()) + ":" + std::to_string(loc.line()) + ": ";
}

const Node &kiln::detail::nodeOf(const Tensor &t, std::source_location loc) {
  if (!t.defined())
    throw Error(sitePrefix(loc) + "use of an empty (default-constructed) Tensor");
  return *t.node();
}

namespace {
void checkShape(const Shape &shape, std::source_location loc) {
  int64_t total = 1;
  for (int64_t d : shape) {
    if (d < 0)
      throw Error(sitePrefix(loc) + "negative dimension in shape " + shapeText(shape));
    // Element counts (and byte sizes) must not overflow: 2^40 elements is
    // far beyond any device here.
    if (d && __builtin_mul_overflow(total, d, &total))
      total = INT64_MAX;
    if (total > (int64_t(1) << 40))
      throw Error(sitePrefix(loc) + "shape " + shapeText(shape) + " has too many elements");
  }
}

/// The compound API call being recorded on this thread, if any.
thread_local std::shared_ptr<const ApiCall> currentCall;
/// The innermost OpLabel's label on this thread.
thread_local std::shared_ptr<const std::string> currentLabel;

} // namespace

CallScope::CallScope(const char *name, std::source_location loc,
                     std::initializer_list<std::pair<const char *, const Tensor *>> args) {
  if (currentCall)
    return;
  auto call = std::make_shared<ApiCall>();
  call->name = name;
  call->loc = loc;
  for (auto [argName, tensor] : args)
    if (tensor->defined())
      call->args.push_back({argName, tensor->node()});
  call->stack = recordCallStack();
  currentCall = std::move(call);
  owner = true;
}

CallScope::~CallScope() {
  if (owner)
    currentCall.reset();
}

namespace {
/// The tensor of a new op node, its derived shape checked like a created
/// one: [2^21, 1] + [1, 2^21] must not wrap into another size.
Tensor made(std::shared_ptr<Node> node) {
  checkShape(node->shape, node->loc);
  node->call = currentCall;
  if (!node->call)
    node->stack = recordCallStack();
  return Tensor(std::move(node));
}

} // namespace

Tensor kiln::detail::recordNode(std::shared_ptr<Node> node) { return made(std::move(node)); }

namespace {
std::shared_ptr<Node> source(OpKind kind, Shape shape, std::optional<Device> device,
                             std::source_location loc) {
  checkShape(shape, loc);
  auto node = std::make_shared<Node>();
  node->kind = kind;
  node->shape = std::move(shape);
  node->device = std::move(device);
  node->loc = loc;
  return node;
}

/// An Input node for `count` host values of `shape`.
std::shared_ptr<Node> hostInput(size_t count, Shape shape, std::optional<Device> device,
                                std::source_location loc) {
  auto node = source(OpKind::Input, std::move(shape), std::move(device), loc);
  if (static_cast<int64_t>(count) != numElements(node->shape))
    throw Error(sitePrefix(loc) + "Tensor::from got " + std::to_string(count) +
                " values for shape " + shapeText(node->shape) + " (" +
                std::to_string(numElements(node->shape)) + " elements)");
  return node;
}

Tensor input(std::vector<float> data, Shape shape, std::optional<Device> device,
             std::source_location loc) {
  auto node = hostInput(data.size(), std::move(shape), std::move(device), loc);
  node->host = std::make_shared<const std::vector<float>>(std::move(data));
  return made(node);
}

Tensor intInput(std::vector<int32_t> data, Shape shape, std::optional<Device> device,
                std::source_location loc) {
  auto node = hostInput(data.size(), std::move(shape), std::move(device), loc);
  node->dtype = DType::i32;
  node->hostInts = std::make_shared<const std::vector<int32_t>>(std::move(data));
  return made(node);
}

Tensor constant(Shape shape, float value, std::optional<Device> device,
                std::source_location loc, DType dtype = DType::f32) {
  auto node = source(OpKind::Constant, std::move(shape), std::move(device), loc);
  node->value = value;
  node->dtype = dtype;
  return made(node);
}

} // namespace

/// In `other`'s floating dtype, so `h * 2.0f` works on f16 and bf16 tensors
/// as it does on f32 ones.
Tensor kiln::detail::scalarLike(float value, const Tensor &other, std::source_location loc) {
  DType dtype = other.defined() && (other.node()->dtype == DType::f16 ||
                                    other.node()->dtype == DType::bf16)
                    ? other.node()->dtype
                    : DType::f32;
  return constant({}, value, std::nullopt, loc, dtype);
}

namespace {
std::mutex rngMutex;
std::mt19937_64 &generator() {
  static std::mt19937_64 rng{std::random_device{}()};
  return rng;
}

template <typename Dist>
Tensor random(Shape shape, std::optional<Device> device, std::source_location loc,
              Dist dist) {
  checkShape(shape, loc);
  std::vector<float> data;
  try {
    data.resize(numElements(shape));
  } catch (const std::bad_alloc &) {
    throw hostOutOfMemory(uint64_t(numElements(shape)) * 4, "generating random values");
  }
  {
    std::lock_guard<std::mutex> lock(rngMutex);
    for (float &v : data)
      v = dist(generator());
  }
  return input(std::move(data), std::move(shape), std::move(device), loc);
}

} // namespace

bool kiln::detail::isFloat(DType dtype) {
  return dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16;
}

namespace {
Tensor unary(const char *op, const Tensor &x, std::source_location loc) {
  const Node &in = nodeOf(x, loc);
  if (!isFloat(in.dtype))
    throw Error(sitePrefix(loc) + op + " needs a floating-point tensor, got " +
                dtype_name(in.dtype) + " (convert it with .to(DType::f32))");
  auto node = std::make_shared<Node>();
  node->kind = OpKind::Unary;
  node->op = op;
  node->operands = {x.node()};
  node->shape = in.shape;
  node->dtype = in.dtype;
  node->loc = loc;
  return made(node);
}

/// The dialect's rule's shape (ShapeRules.h), or its reason as the user's
/// error at `loc`.
Shape ruled(const shapes::Inferred &rule, const char *op, std::source_location loc) {
  if (!rule.ok())
    throw Error(sitePrefix(loc) + op + ": " + rule.error);
  return rule.shape;
}

Shape broadcast(const std::vector<const Node *> &nodes, const char *op,
                std::source_location loc) {
  std::vector<llvm::ArrayRef<int64_t>> shapes;
  for (const Node *n : nodes)
    shapes.push_back(n->shape);
  return ruled(shapes::broadcast(shapes), op, loc);
}

Tensor binary(OpKind kind, const char *op, const Tensor &a, const Tensor &b,
              std::source_location loc) {
  const Node &l = nodeOf(a, loc), &r = nodeOf(b, loc);
  if (l.dtype != r.dtype || !isFloat(l.dtype))
    throw Error(sitePrefix(loc) + op + " needs two floating-point tensors of one dtype, got " +
                dtype_name(l.dtype) + " and " + dtype_name(r.dtype) +
                " (convert one with .to(DType::...))");
  auto node = std::make_shared<Node>();
  node->kind = kind;
  node->op = op;
  node->operands = {a.node(), b.node()};
  node->shape = broadcast({&l, &r}, op, loc);
  node->dtype = kind == OpKind::Compare ? DType::boolean : l.dtype;
  node->loc = loc;
  return made(node);
}
} // namespace

Node::~Node() {
  std::vector<std::shared_ptr<Node>> pending = std::move(operands);
  while (!pending.empty()) {
    std::shared_ptr<Node> last = std::move(pending.back());
    pending.pop_back();
    // Only the last owner takes the operands over; others just release.
    if (last && last.use_count() == 1)
      for (auto &operand : last->operands)
        pending.push_back(std::move(operand));
  }
}

int64_t kiln::numElements(const Shape &shape) {
  // Saturating: shapes are checked when recorded, this must still never wrap.
  int64_t n = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n))
      return INT64_MAX;
  return n;
}

size_t kiln::elementBytes(DType dtype) {
  switch (dtype) {
  case DType::f32: return 4;
  case DType::f16: return 2;
  case DType::i32: return 4;
  case DType::boolean: return 1;
  case DType::bf16: return 2;
  }
  return 4;
}

const char *kiln::dtype_name(DType dtype) {
  switch (dtype) {
  case DType::f32: return "f32";
  case DType::f16: return "f16";
  case DType::i32: return "i32";
  case DType::boolean: return "bool";
  case DType::bf16: return "bf16";
  }
  return "?";
}

void kiln::manual_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(rngMutex);
  generator().seed(seed);
}

Tensor Tensor::from(std::vector<float> data, Shape shape, Loc loc) {
  return input(std::move(data), std::move(shape), std::nullopt, loc);
}
Tensor Tensor::from(std::vector<float> data, Shape shape, const Device &device, Loc loc) {
  return input(std::move(data), std::move(shape), device, loc);
}
Tensor Tensor::from(std::vector<float> data, Shape shape, DType dtype, Loc loc) {
  switch (dtype) {
  case DType::f32:
    return input(std::move(data), std::move(shape), std::nullopt, loc);
  case DType::i32: {
    std::vector<int32_t> ints(data.size());
    for (size_t i = 0; i < data.size(); ++i) {
      if (!(data[i] == std::trunc(data[i]) && std::fabs(data[i]) < 2147483648.0f))
        throw Error(sitePrefix(loc) + "Tensor::from: value " + std::to_string(data[i]) +
                    " at element " + std::to_string(i) + " is not an i32");
      ints[i] = int32_t(data[i]);
    }
    return intInput(std::move(ints), std::move(shape), std::nullopt, loc);
  }
  case DType::f16:
  case DType::bf16:
    for (float &v : data) // held as the values the 16 bits store
      v = halfBitsToFloat(halfBitsOf(v, dtype), dtype);
    break;
  case DType::boolean:
    for (float &v : data)
      v = v != 0.0f ? 1.0f : 0.0f;
    break;
  }
  auto node = hostInput(data.size(), std::move(shape), std::nullopt, loc);
  node->dtype = dtype;
  node->host = std::make_shared<const std::vector<float>>(std::move(data));
  return made(node);
}
Tensor Tensor::fromInts(std::vector<int32_t> data, Shape shape, const Device *device, Loc loc) {
  return intInput(std::move(data), std::move(shape),
                  device ? std::optional<Device>(*device) : std::nullopt, loc);
}
Tensor Tensor::scalar(float value, Loc loc) { return constant({}, value, std::nullopt, loc); }
Tensor Tensor::full(Shape shape, float value, Loc loc) {
  return constant(std::move(shape), value, std::nullopt, loc);
}
Tensor Tensor::full(Shape shape, float value, const Device &device, Loc loc) {
  return constant(std::move(shape), value, device, loc);
}
Tensor Tensor::zeros(Shape shape, Loc loc) { return full(std::move(shape), 0.0f, loc); }
Tensor Tensor::zeros(Shape shape, const Device &device, Loc loc) {
  return full(std::move(shape), 0.0f, device, loc);
}
Tensor Tensor::rand(Shape shape, Loc loc) {
  return random(std::move(shape), std::nullopt, loc, std::uniform_real_distribution<float>(0, 1));
}
Tensor Tensor::rand(Shape shape, const Device &device, Loc loc) {
  return random(std::move(shape), device, loc, std::uniform_real_distribution<float>(0, 1));
}
Tensor Tensor::randn(Shape shape, Loc loc) {
  return random(std::move(shape), std::nullopt, loc, std::normal_distribution<float>(0, 1));
}
Tensor Tensor::randn(Shape shape, const Device &device, Loc loc) {
  return random(std::move(shape), device, loc, std::normal_distribution<float>(0, 1));
}

Tensor Tensor::like(const Tensor &like, std::vector<float> data, Shape shape, Loc loc) {
  return input(std::move(data), std::move(shape), nodeOf(like, loc).device, loc);
}
Tensor Tensor::full_like(const Tensor &like, float value, Loc loc) {
  const Node &n = nodeOf(like, loc);
  return constant(n.shape, value, n.device, loc, n.dtype);
}
Tensor Tensor::zeros_like(const Tensor &like, Loc loc) { return full_like(like, 0.0f, loc); }

namespace {
std::shared_ptr<Node> view(const Tensor &x, const char *op, Shape shape, std::source_location loc) {
  auto node = std::make_shared<Node>();
  node->kind = OpKind::View;
  node->op = op;
  node->operands = {x.node()};
  node->shape = std::move(shape);
  node->dtype = x.node()->dtype;
  node->loc = loc;
  return node;
}

} // namespace

int64_t kiln::detail::normalizeDim(int64_t dim, size_t rank, std::source_location loc,
                                   const char *op) {
  int64_t r = static_cast<int64_t>(rank);
  if (dim < -r || dim >= r)
    throw Error(sitePrefix(loc) + op + ": dimension " + std::to_string(dim) +
                " is out of range for a rank-" + std::to_string(rank) + " tensor");
  return dim < 0 ? dim + r : dim;
}

Tensor Tensor::permute(std::vector<int64_t> order, Loc loc) const {
  const Node &in = nodeOf(*this, loc);
  if (order.size() == in.shape.size())
    for (int64_t &d : order)
      d = normalizeDim(d, in.shape.size(), loc, "permute");
  auto node = view(*this, "transpose", ruled(shapes::transpose(in.shape, order), "permute", loc),
                   loc);
  node->permutation = std::move(order);
  return made(node);
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1, Loc loc) const {
  const Node &in = nodeOf(*this, loc);
  std::vector<int64_t> order(in.shape.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = static_cast<int64_t>(i);
  std::swap(order[normalizeDim(dim0, order.size(), loc, "transpose")],
            order[normalizeDim(dim1, order.size(), loc, "transpose")]);
  return permute(std::move(order), loc);
}

Tensor Tensor::reshape(Shape shape, Loc loc) const {
  const Node &in = nodeOf(*this, loc);
  int64_t known = 1, inferred = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1 && inferred < 0)
      inferred = static_cast<int64_t>(i);
    else if (shape[i] < 0)
      throw Error(sitePrefix(loc) + "reshape: bad shape " + shapeText(shape) +
                  " (one dimension may be -1)");
    else if (__builtin_mul_overflow(known, shape[i], &known))
      throw Error(sitePrefix(loc) + "reshape: shape " + shapeText(shape) +
                  " has too many elements");
  }
  int64_t total = numElements(in.shape);
  if (inferred >= 0 && known > 0 && total % known == 0)
    shape[inferred] = total / known;
  if (inferred >= 0 && (known == 0 || total % known != 0))
    throw Error(sitePrefix(loc) + "reshape: cannot view " + shapeText(in.shape) + " (" +
                std::to_string(total) + " elements) as " + shapeText(shape));
  if (std::string why = shapes::checkReshape(in.shape, shape); !why.empty())
    throw Error(sitePrefix(loc) + "reshape: " + why);
  return made(view(*this, "reshape", std::move(shape), loc));
}

Tensor Tensor::broadcast_to(Shape shape, Loc loc) const {
  const Node &in = nodeOf(*this, loc);
  checkShape(shape, loc);
  if (std::string why = shapes::checkBroadcastTo(in.shape, shape); !why.empty())
    throw Error(sitePrefix(loc) + "broadcast_to: " + why);
  return made(view(*this, "broadcast_to", std::move(shape), loc));
}

Tensor Tensor::slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
                     int64_t step, Loc loc) const {
  const Node &in = nodeOf(*this, loc);
  dim = normalizeDim(dim, in.shape.size(), loc, "slice");
  if (step == 0)
    throw Error(sitePrefix(loc) + "slice: step must not be 0");
  int64_t n = in.shape[dim];
  // Python's rules: wrap negative indices once, then clamp to the range the
  // step walks through.
  auto wrap = [&](std::optional<int64_t> i, int64_t fallback, int64_t lo, int64_t hi) {
    if (!i)
      return fallback;
    int64_t v = *i < 0 ? *i + n : *i;
    return std::clamp(v, lo, hi);
  };
  int64_t first = step > 0 ? wrap(start, 0, 0, n) : wrap(start, n - 1, -1, n - 1);
  int64_t stop = step > 0 ? wrap(end, n, 0, n) : wrap(end, -1, -1, n - 1);
  // In unsigned arithmetic: steps of INT64_MAX or INT64_MIN must not wrap.
  uint64_t magnitude = step > 0 ? uint64_t(step) : uint64_t(0) - uint64_t(step);
  int64_t span = step > 0 ? stop - first : first - stop;
  int64_t count = span > 0 ? int64_t((uint64_t(span) - 1) / magnitude + 1) : 0;
  Shape shape = in.shape;
  shape[dim] = count;
  auto node = view(*this, "slice", std::move(shape), loc);
  node->starts.assign(in.shape.size(), 0);
  node->steps.assign(in.shape.size(), 1);
  node->starts[dim] = count ? first : 0;
  // One element or none: the step is never taken, and one of INT64_MIN
  // would not fit a GPU kernel's 32-bit index constants.
  node->steps[dim] = count > 1 ? step : 1;
  return made(node);
}

Tensor Tensor::to(DType dtype, Loc loc) const {
  const Node &in = nodeOf(*this, loc);
  if (in.dtype == dtype)
    return *this;
  auto node = std::make_shared<Node>();
  node->kind = OpKind::Unary;
  node->op = "cast";
  node->operands = {node_};
  node->shape = in.shape;
  node->dtype = dtype;
  node->loc = loc;
  return made(node);
}

Tensor Tensor::to(const Device &device, Loc loc) const {
  const Node &in = nodeOf(*this, loc);
  if (in.device && *in.device == device)
    return *this;
  auto node = std::make_shared<Node>();
  node->kind = OpKind::Transfer;
  node->operands = {node_};
  node->shape = in.shape;
  node->dtype = in.dtype;
  node->device = device;
  node->loc = loc;
  return made(node);
}

const Shape &Tensor::shape() const { return nodeOf(*this, Loc::current()).shape; }
int64_t Tensor::numel() const { return numElements(shape()); }
DType Tensor::dtype() const { return nodeOf(*this, Loc::current()).dtype; }
bool Tensor::is_committed() const { return nodeOf(*this, Loc::current()).device.has_value(); }
bool Tensor::is_realized() const {
  nodeOf(*this, Loc::current());
  return realizedOn(*node_).has_value();
}

Device Tensor::device() const {
  const Node &n = nodeOf(*this, Loc::current());
  if (n.device)
    return *n.device;
  if (std::optional<Device> computed = realizedOn(*node_))
    return *computed;
  // Unread and uncommitted: where placement will run it (the device of the
  // committed operands it meets), not simply the default device.
  if (n.kind == OpKind::Input || n.kind == OpKind::Constant)
    return Device::default_device();
  return placedDevice(node_);
}

namespace {
/// The realized node behind `t`, its dtype checked against what the
/// accessor `accessor` reads.
Node &readable(const Tensor &t, std::initializer_list<DType> allowed, const char *accessor,
               const char *instead) {
  nodeOf(t, std::source_location::current());
  Node &node = *t.node();
  if (std::find(allowed.begin(), allowed.end(), node.dtype) == allowed.end())
    throw Error(std::string(accessor) + " cannot read a tensor of dtype " +
                dtype_name(node.dtype) + " without changing its values: " + instead);
  realizeNodes({t.node()}); // (nothing to do when it is realized)
  return node;
}

template <typename Raw> std::vector<Raw> readRaw(Node &node) {
  size_t n = static_cast<size_t>(numElements(node.shape));
  std::vector<Raw> raw;
  try {
    raw.resize(n);
  } catch (const std::bad_alloc &) {
    throw hostOutOfMemory(n * sizeof(Raw), "reading a tensor to the host");
  }
  readNodeInto(node, raw.data());
  return raw;
}

/// IEEE binary16 to float (exact: every half is a float).
float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16, exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
  uint32_t bits;
  if (exponent == 0x1F) { // inf, NaN
    bits = sign | 0x7F800000 | (mantissa << 13);
  } else if (exponent != 0) { // normal
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) { // zero
    bits = sign;
  } else { // subnormal: renormalize
    int shift = 0;
    while (!(mantissa & 0x400)) {
      mantissa <<= 1;
      ++shift;
    }
    bits = sign | (uint32_t(113 - shift) << 23) | ((mantissa & 0x3FF) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// item<T>(): the size is checked before anything is computed or read.
template <typename T> T itemOf(const Tensor &t) {
  if (t.numel() != 1)
    throw Error("item() needs a tensor of one element, this one has shape " +
                shapeText(t.shape()) + " (read it with to_vector)");
  return t.to_vector<T>().front();
}
} // namespace

kiln::half::operator float() const { return halfToFloat(bits); }

template <> std::vector<float> Tensor::to_vector<float>() const {
  Node &node = readable(*this, {DType::f32, DType::f16, DType::bf16, DType::boolean},
                        "to_vector<float>()",
                        "read i32 tensors with to_vector<int32_t>(), or convert them with "
                        ".to(DType::f32) (rounds past 2^24)");
  if (node.dtype == DType::f32)
    return readRaw<float>(node);
  std::vector<float> values(static_cast<size_t>(numElements(node.shape)));
  if (node.dtype == DType::f16 || node.dtype == DType::bf16) {
    std::vector<uint16_t> raw = readRaw<uint16_t>(node);
    for (size_t i = 0; i < raw.size(); ++i)
      values[i] = halfBitsToFloat(raw[i], node.dtype);
  } else {
    std::vector<uint8_t> raw = readRaw<uint8_t>(node);
    for (size_t i = 0; i < raw.size(); ++i)
      values[i] = raw[i] ? 1.0f : 0.0f;
  }
  return values;
}

template <> std::vector<int32_t> Tensor::to_vector<int32_t>() const {
  Node &node = readable(*this, {DType::i32, DType::boolean}, "to_vector<int32_t>()",
                        "read it with to_vector<float>(), or convert it with .to(DType::i32)");
  if (node.dtype == DType::i32)
    return readRaw<int32_t>(node);
  std::vector<uint8_t> raw = readRaw<uint8_t>(node);
  return std::vector<int32_t>(raw.begin(), raw.end());
}

template <> std::vector<bool> Tensor::to_vector<bool>() const {
  Node &node = readable(*this, {DType::boolean}, "to_vector<bool>()",
                        "compare it (ne(x, zeros_like(x))) or convert it with "
                        ".to(DType::boolean)");
  std::vector<uint8_t> raw = readRaw<uint8_t>(node);
  std::vector<bool> values(raw.size());
  for (size_t i = 0; i < raw.size(); ++i)
    values[i] = raw[i] != 0;
  return values;
}

template <> std::vector<half> Tensor::to_vector<half>() const {
  Node &node = readable(*this, {DType::f16}, "to_vector<half>()",
                        "read it with to_vector<float>(), or convert it with .to(DType::f16)");
  std::vector<uint16_t> raw = readRaw<uint16_t>(node);
  std::vector<half> values(raw.size());
  for (size_t i = 0; i < raw.size(); ++i)
    values[i].bits = raw[i];
  return values;
}

std::span<const float> Tensor::cpu_view() const {
  nodeOf(*this, Loc::current());
  realizeNodes({node_});
  auto [data, device] = hostDataOf(*node_);
  if (!data || node_->dtype != DType::f32)
    throw Error("cpu_view needs an f32 tensor on cpu:0; this one is " +
                std::string(dtype_name(node_->dtype)) + " on " + device.name() +
                ": read it with to_vector<float>() or move it with .to(Device::cpu())");
  return {static_cast<const float *>(data), static_cast<size_t>(numel())};
}

template <> float Tensor::item<float>() const { return itemOf<float>(*this); }
template <> int32_t Tensor::item<int32_t>() const { return itemOf<int32_t>(*this); }
template <> bool Tensor::item<bool>() const { return itemOf<bool>(*this); }
template <> half Tensor::item<half>() const { return itemOf<half>(*this); }

void kiln::realize(const std::vector<Tensor> &tensors, const RealizeOptions &options) {
  std::vector<std::shared_ptr<Node>> roots;
  for (const Tensor &t : tensors) {
    nodeOf(t, std::source_location::current());
    roots.push_back(t.node());
  }
  realizeNodes(roots, options); // skips the realized ones, under the lock
}

#define KILN_UNARY(NAME)                                                       \
  Tensor kiln::NAME(const Tensor &x, std::source_location loc) {               \
    return unary(#NAME, x, loc);                                               \
  }
KILN_UNARY(neg)
KILN_UNARY(abs)
KILN_UNARY(exp)
KILN_UNARY(log)
KILN_UNARY(sqrt)
KILN_UNARY(rsqrt)
KILN_UNARY(tanh)
KILN_UNARY(sin)
KILN_UNARY(cos)
KILN_UNARY(floor)
KILN_UNARY(ceil)
KILN_UNARY(round)
KILN_UNARY(sigmoid)
KILN_UNARY(relu)
KILN_UNARY(gelu)
KILN_UNARY(erf)
#undef KILN_UNARY

#define KILN_BINARY(NAME, KIND, OP)                                            \
  Tensor kiln::NAME(const Tensor &a, const Tensor &b, std::source_location loc) { \
    return binary(KIND, OP, a, b, loc);                                        \
  }
KILN_BINARY(add, OpKind::Binary, "add")
KILN_BINARY(sub, OpKind::Binary, "sub")
KILN_BINARY(mul, OpKind::Binary, "mul")
KILN_BINARY(div, OpKind::Binary, "div")
KILN_BINARY(maximum, OpKind::Binary, "max")
KILN_BINARY(minimum, OpKind::Binary, "min")
KILN_BINARY(pow, OpKind::Binary, "pow")
KILN_BINARY(eq, OpKind::Compare, "eq")
KILN_BINARY(ne, OpKind::Compare, "ne")
KILN_BINARY(lt, OpKind::Compare, "lt")
KILN_BINARY(le, OpKind::Compare, "le")
KILN_BINARY(gt, OpKind::Compare, "gt")
KILN_BINARY(ge, OpKind::Compare, "ge")
#undef KILN_BINARY

Tensor kiln::where(const Tensor &cond, const Tensor &a, const Tensor &b,
                   std::source_location loc) {
  const Node &c = nodeOf(cond, loc), &l = nodeOf(a, loc), &r = nodeOf(b, loc);
  if (c.dtype != DType::boolean)
    throw Error(sitePrefix(loc) + "where: the condition must be a boolean tensor "
                "(from a comparison), got " + dtype_name(c.dtype));
  if (l.dtype != r.dtype || !isFloat(l.dtype))
    throw Error(sitePrefix(loc) + "where: both branches must be floating-point tensors "
                "of one dtype");
  auto node = std::make_shared<Node>();
  node->kind = OpKind::Select;
  node->op = "select";
  node->operands = {cond.node(), a.node(), b.node()};
  node->shape = broadcast({&c, &l, &r}, "where", loc);
  node->dtype = l.dtype;
  node->loc = loc;
  return made(node);
}

namespace {
Tensor reduce(const char *kind, const Tensor &x, std::vector<int64_t> axes, bool keepdims,
              std::source_location loc) {
  const Node &in = nodeOf(x, loc);
  if (!detail::isFloat(in.dtype))
    throw Error(sitePrefix(loc) + kind + " needs a floating-point tensor");
  if (axes.empty())
    for (size_t d = 0; d < in.shape.size(); ++d)
      axes.push_back(static_cast<int64_t>(d));
  for (int64_t &axis : axes)
    axis = normalizeDim(axis, in.shape.size(), loc, kind);
  std::sort(axes.begin(), axes.end());
  Shape shape = ruled(shapes::reduce(in.shape, axes, keepdims), kind, loc);
  std::optional<int64_t> emptyAxis;
  for (int64_t axis : axes)
    if (in.shape[axis] == 0)
      emptyAxis = axis;
  if (emptyAxis) {
    // As in PyTorch: an empty sum is 0, an empty product 1, an empty mean
    // NaN; max, min and their positions have no value to give.
    std::string k = kind;
    if (k == "max" || k == "min")
      throw Error(sitePrefix(loc) + kind + ": dimension " + std::to_string(*emptyAxis) +
                  " is empty and " + kind + " has no identity; reduce a non-empty dimension "
                  "or check the size first");
    float value = k == "sum" ? 0.0f : k == "prod" ? 1.0f : std::nanf("");
    return constant(std::move(shape), value, in.device, loc, in.dtype);
  }
  auto node = std::make_shared<Node>();
  node->kind = OpKind::Reduce;
  node->op = kind;
  node->operands = {x.node()};
  node->shape = std::move(shape);
  node->dtype = in.dtype;
  node->loc = loc;
  node->axes = std::move(axes);
  node->keepdims = keepdims;
  return made(node);
}
} // namespace

namespace {
Tensor argReduce(const char *kind, const Tensor &x, std::optional<int64_t> axis, bool keepdims,
                 std::source_location loc) {
  std::vector<int64_t> axes;
  if (axis)
    axes.push_back(*axis);
  Tensor r = reduce(kind, x, std::move(axes), keepdims, loc);
  r.node()->kind = OpKind::ArgReduce;
  r.node()->dtype = DType::i32;
  return r;
}
} // namespace

Tensor kiln::argmax(const Tensor &x, std::optional<int64_t> axis, bool keepdims,
                    std::source_location loc) {
  return argReduce("max", x, axis, keepdims, loc);
}
Tensor kiln::argmin(const Tensor &x, std::optional<int64_t> axis, bool keepdims,
                    std::source_location loc) {
  return argReduce("min", x, axis, keepdims, loc);
}

Tensor kiln::sum(const Tensor &x, std::vector<int64_t> axes, bool keepdims, std::source_location loc) {
  return reduce("sum", x, std::move(axes), keepdims, loc);
}
Tensor kiln::mean(const Tensor &x, std::vector<int64_t> axes, bool keepdims, std::source_location loc) {
  return reduce("mean", x, std::move(axes), keepdims, loc);
}
Tensor kiln::amax(const Tensor &x, std::vector<int64_t> axes, bool keepdims, std::source_location loc) {
  return reduce("max", x, std::move(axes), keepdims, loc);
}
Tensor kiln::amin(const Tensor &x, std::vector<int64_t> axes, bool keepdims, std::source_location loc) {
  return reduce("min", x, std::move(axes), keepdims, loc);
}
Tensor kiln::prod(const Tensor &x, std::vector<int64_t> axes, bool keepdims, std::source_location loc) {
  return reduce("prod", x, std::move(axes), keepdims, loc);
}

Tensor kiln::var(const Tensor &x, std::vector<int64_t> axes, bool keepdims, int64_t correction,
                 std::source_location loc) {
  CallScope scope("var", loc, {{"x", &x}});
  const Shape &shape = nodeOf(x, loc).shape;
  if (axes.empty())
    for (size_t d = 0; d < shape.size(); ++d)
      axes.push_back(static_cast<int64_t>(d));
  for (int64_t &axis : axes)
    axis = normalizeDim(axis, shape.size(), loc, "var");
  std::sort(axes.begin(), axes.end());
  ruled(shapes::reduce(shape, axes, keepdims), "var", loc); // distinct axes
  int64_t n = 1;
  for (int64_t axis : axes)
    n *= shape[axis];
  if (n - correction <= 0)
    throw Error(sitePrefix(loc) + "var: " + std::to_string(n) +
                " elements per result leave no degrees of freedom with correction " +
                std::to_string(correction));
  // Shifted by each result's first element before the two passes: far from
  // zero (1e8 + [1, 3, 5, 7]) the f32 mean's rounding was as large as the
  // spread and doubled the variance; x - x0 is exact when x is near x0.
  Tensor first = x;
  for (int64_t axis : axes)
    first = first.slice(axis, 0, 1, 1, loc);
  Tensor shifted = sub(x, first, loc);
  Tensor centered = sub(shifted, mean(shifted, axes, true, loc), loc);
  Tensor m = mean(mul(centered, centered, loc), axes, keepdims, loc);
  return mul(m, scalarLike(float(double(n) / double(n - correction)), x, loc), loc);
}

Tensor kiln::softmax(const Tensor &x, int64_t axis, std::source_location loc) {
  CallScope scope("softmax", loc, {{"x", &x}});
  axis = normalizeDim(axis, nodeOf(x, loc).shape.size(), loc, "softmax");
  Tensor e = exp(sub(x, amax(x, {axis}, true, loc), loc), loc);
  return div(e, sum(e, {axis}, true, loc), loc);
}

Tensor kiln::log_softmax(const Tensor &x, int64_t axis, std::source_location loc) {
  CallScope scope("log_softmax", loc, {{"x", &x}});
  axis = normalizeDim(axis, nodeOf(x, loc).shape.size(), loc, "log_softmax");
  Tensor shifted = sub(x, amax(x, {axis}, true, loc), loc);
  return sub(shifted, log(sum(exp(shifted, loc), {axis}, true, loc), loc), loc);
}

Tensor kiln::pad(const Tensor &x, std::vector<int64_t> low, std::vector<int64_t> high,
                 float value, std::source_location loc) {
  const Node &in = nodeOf(x, loc);
  if (!isFloat(in.dtype))
    throw Error(sitePrefix(loc) + "pad needs a floating-point tensor");
  Shape shape = ruled(shapes::pad(in.shape, low, high), "pad", loc);
  checkShape(shape, loc);
  auto node = std::make_shared<Node>();
  node->kind = OpKind::Pad;
  node->op = "pad";
  node->operands = {x.node()};
  node->shape = std::move(shape);
  node->dtype = in.dtype;
  node->loc = loc;
  node->low = std::move(low);
  node->high = std::move(high);
  node->value = value;
  return made(node);
}

Tensor kiln::concat(const std::vector<Tensor> &tensors, int64_t axis, std::source_location loc) {
  if (tensors.empty())
    throw Error(sitePrefix(loc) + "concat needs at least one tensor");
  const Node &first = nodeOf(tensors.front(), loc);
  axis = normalizeDim(axis, first.shape.size(), loc, "concat");
  auto node = std::make_shared<Node>();
  std::vector<llvm::ArrayRef<int64_t>> shapes;
  for (const Tensor &t : tensors) {
    const Node &in = nodeOf(t, loc);
    if (in.dtype != first.dtype || !isFloat(in.dtype))
      throw Error(sitePrefix(loc) + "concat needs floating-point tensors of one dtype");
    shapes.push_back(in.shape);
    node->operands.push_back(t.node());
  }
  Shape shape = ruled(shapes::concat(shapes, axis), "concat", loc);
  checkShape(shape, loc);
  // Pieces of length 0 along the axis add nothing (a split at its end): a
  // kernel would divide its indices by their zero length.
  std::vector<Tensor> pieces;
  for (const Tensor &t : tensors)
    if (nodeOf(t, loc).shape[size_t(axis)] != 0)
      pieces.push_back(t);
  if (pieces.size() == 1)
    return pieces.front();
  if (!pieces.empty() && pieces.size() < tensors.size())
    return concat(pieces, axis, loc);
  node->kind = OpKind::Concat;
  node->op = "concat";
  node->shape = std::move(shape);
  node->dtype = first.dtype;
  node->loc = loc;
  node->axes = {axis};
  return made(node);
}

Tensor kiln::index_select(const Tensor &x, int64_t dim, const Tensor &indices,
                          std::source_location loc) {
  const Node &in = nodeOf(x, loc), &idx = nodeOf(indices, loc);
  if (!isFloat(in.dtype))
    throw Error(sitePrefix(loc) + "index_select needs a floating-point tensor");
  if (idx.dtype != DType::i32 || idx.shape.size() != 1)
    throw Error(sitePrefix(loc) + "index_select needs rank-1 i32 indices, got " +
                dtype_name(idx.dtype) + " " + shapeText(idx.shape) +
                " (convert with .to(DType::i32))");
  dim = normalizeDim(dim, in.shape.size(), loc, "index_select");
  if (in.shape[dim] == 0)
    throw Error(sitePrefix(loc) + "index_select from an empty dimension");
  Shape shape = ruled(shapes::gather(in.shape, idx.shape, dim), "index_select", loc);
  auto node = std::make_shared<Node>();
  node->kind = OpKind::Gather;
  node->op = "gather";
  node->operands = {x.node(), indices.node()};
  node->shape = std::move(shape);
  node->dtype = in.dtype;
  node->loc = loc;
  node->axes = {dim};
  restrictValues(indices, 0, in.shape[dim],
                 "the " + std::to_string(in.shape[dim]) + " entries of dim " + std::to_string(dim) +
                     " of index_select's x",
                 loc);
  return made(node);
}

bool kiln::detail::restrictValues(const Tensor &t, int64_t low, int64_t high,
                                  const std::string &use, std::source_location loc) {
  // Back to the tensor the values come from, through ops that keep every
  // element and its value: not a slice (the rest of the input may index
  // nothing), and casts only between i32 and f32 (whole below 2^24; the
  // source must be an i32 input), not through bool.
  auto wholeNumbers = [](DType d) { return d == DType::i32 || d == DType::f32; };
  auto keepsValues = [&](const Node &n) {
    if (n.operands.size() != 1)
      return false;
    if (n.kind == OpKind::View)
      return n.op == "reshape" || n.op == "transpose" || n.op == "broadcast_to";
    if (n.kind == OpKind::Unary && n.op == "cast")
      return wholeNumbers(n.dtype) && wholeNumbers(n.operands[0]->dtype);
    return n.kind == OpKind::Transfer;
  };
  std::shared_ptr<Node> node = t.node();
  while (node && keepsValues(*node))
    node = node->operands[0];
  if (!node || node->kind != OpKind::Input || node->dtype != DType::i32)
    return false;
  if (node->hostInts)
    for (size_t k = 0; k < node->hostInts->size(); ++k) {
      int32_t v = (*node->hostInts)[k];
      if (v < low || v >= high)
        throw Error(sitePrefix(loc) + "index " + std::to_string(v) + " (element " +
                    std::to_string(k) + ") is outside " + std::to_string(low) + " <= i < " +
                    std::to_string(high) + " of " + use);
    }
  // The tightest range any use asks for.
  int64_t from = node->valueRange ? std::max(node->valueRange->first, low) : low;
  int64_t to = node->valueRange ? std::min(node->valueRange->second, high) : high;
  if (!node->valueRange || to - from < node->valueRange->second - node->valueRange->first)
    node->valueRangeUse = use;
  node->valueRange = {from, to};
  return true;
}

Tensor kiln::index_select(const Tensor &x, int64_t dim, const std::vector<int64_t> &indices,
                          std::source_location loc) {
  // Checked here, exactly: a float detour would round 16777217 to
  // 16777216, and i32 would wrap 2^40.
  const Node &in = nodeOf(x, loc);
  CallScope scope("index_select", loc, {{"x", &x}});
  dim = normalizeDim(dim, in.shape.size(), loc, "index_select");
  int64_t size = in.shape[dim];
  std::vector<int32_t> values;
  values.reserve(indices.size());
  for (int64_t i : indices) {
    if (i < 0 || i >= size || i > INT32_MAX)
      throw Error(sitePrefix(loc) + "index_select: index " + std::to_string(i) +
                  " is outside the " + std::to_string(size) + " entries of dim " +
                  std::to_string(dim));
    values.push_back(static_cast<int32_t>(i));
  }
  int64_t n = static_cast<int64_t>(values.size());
  return index_select(x, dim, Tensor::from(std::move(values), {n}, loc), loc);
}

Tensor kiln::matmul(const Tensor &a, const Tensor &b, std::source_location loc) {
  const Node &l = nodeOf(a, loc), &r = nodeOf(b, loc);
  if (l.dtype != r.dtype || !detail::isFloat(l.dtype))
    throw Error(sitePrefix(loc) + "matmul needs two floating-point tensors of one dtype, got " +
                dtype_name(l.dtype) + " and " + dtype_name(r.dtype) +
                " (convert one with .to(DType::...))");
  if (l.shape.empty() || r.shape.empty())
    throw Error(sitePrefix(loc) + "matmul: needs operands of rank 1 or more, got " +
                shapeText(l.shape) + " and " + shapeText(r.shape) +
                " (a scalar multiplies with *)");
  // A vector operand as in PyTorch: [K] is a row [1, K] on the left, a
  // column [K, 1] on the right, and its dimension leaves the result.
  if (l.shape.size() == 1 || r.shape.size() == 1) {
    bool row = l.shape.size() == 1, column = r.shape.size() == 1;
    int64_t leftK = l.shape.back(), rightK = r.shape[r.shape.size() - (column ? 1 : 2)];
    if (leftK != rightK)
      throw Error(sitePrefix(loc) + "matmul: " + shapeText(l.shape) + " x " + shapeText(r.shape) +
                  ": the contracted dimensions (" + std::to_string(leftK) + " and " +
                  std::to_string(rightK) + ") differ");
    Tensor product = matmul(row ? a.reshape({1, l.shape[0]}, loc) : a,
                            column ? b.reshape({r.shape[0], 1}, loc) : b, loc);
    Shape shape = product.shape();
    if (column)
      shape.pop_back();
    if (row)
      shape.erase(shape.end() - (column ? 1 : 2));
    return product.reshape(shape, loc);
  }
  Shape shape = ruled(shapes::matmul(l.shape, r.shape), "matmul", loc);
  // An empty contraction is zeros (as in PyTorch), on the operands' device;
  // operands committed to two devices still go to placement's diagnostic.
  if (l.shape.back() == 0 && (!l.device || !r.device || *l.device == *r.device))
    return constant(std::move(shape), 0.0f, l.device ? l.device : r.device, loc, l.dtype);
  auto node = std::make_shared<Node>();
  node->kind = OpKind::Binary;
  node->op = "matmul";
  node->operands = {a.node(), b.node()};
  node->shape = std::move(shape);
  node->dtype = l.dtype;
  node->loc = loc;
  return made(node);
}

Tensor kiln::conv2d(const Tensor &x, const Tensor &filter, std::array<int64_t, 2> stride,
                    std::array<int64_t, 2> padding, std::array<int64_t, 2> dilation,
                    int64_t groups, std::source_location loc) {
  const Node &in = nodeOf(x, loc), &w = nodeOf(filter, loc);
  if (in.dtype != w.dtype || !isFloat(in.dtype))
    throw Error(sitePrefix(loc) + "conv2d needs floating-point tensors of one dtype");
  Shape shape = ruled(shapes::conv2d(in.shape, w.shape, stride, padding, dilation, groups),
                      "conv2d", loc);
  auto node = std::make_shared<Node>();
  node->kind = OpKind::Conv2d;
  node->op = "conv2d";
  node->operands = {x.node(), filter.node()};
  node->shape = std::move(shape);
  node->dtype = in.dtype;
  node->loc = loc;
  node->stride = {stride[0], stride[1]};
  node->padding = {padding[0], padding[1]};
  node->dilation = {dilation[0], dilation[1]};
  node->groups = groups;
  return made(node);
}

namespace {
Tensor pool(const char *kind, const Tensor &x, std::array<int64_t, 2> kernel,
            std::array<int64_t, 2> stride, std::array<int64_t, 2> padding, bool ceilMode,
            std::source_location loc) {
  const Node &in = nodeOf(x, loc);
  if (!isFloat(in.dtype))
    throw Error(sitePrefix(loc) + "pooling needs a floating-point tensor");
  Shape shape =
      ruled(shapes::pool2d(in.shape, kernel, stride, padding, ceilMode), "pooling", loc);
  bool pastPadding = false; // a ceil_mode window reaching past the padding
  for (int i = 0; i < 2; ++i)
    pastPadding |= (shape[2 + i] - 1) * stride[i] + kernel[i] > in.shape[2 + i] + 2 * padding[i];
  auto node = std::make_shared<Node>();
  node->kind = OpKind::Pool2d;
  node->op = kind;
  node->operands = {x.node()};
  node->shape = shape;
  node->dtype = in.dtype;
  node->loc = loc;
  node->window = {kernel[0], kernel[1]};
  node->stride = {stride[0], stride[1]};
  node->padding = {padding[0], padding[1]};
  node->ceilMode = ceilMode;
  Tensor y = made(node);
  if (std::string_view(kind) == "max" || !pastPadding)
    return y;
  // A ceil_mode window past the padding: the pool read zeros there and
  // divided by the whole window; PyTorch divides by the part inside the
  // input and its padding.
  CallScope scope("avg_pool2d", loc, {{"x", &x}});
  std::vector<float> factor(size_t(shape[2] * shape[3]));
  for (int64_t i = 0; i < shape[2]; ++i)
    for (int64_t j = 0; j < shape[3]; ++j) {
      int64_t rows = std::min(i * stride[0] + kernel[0], in.shape[2] + 2 * padding[0]) -
                     i * stride[0];
      int64_t cols = std::min(j * stride[1] + kernel[1], in.shape[3] + 2 * padding[1]) -
                     j * stride[1];
      factor[size_t(i * shape[3] + j)] = float(kernel[0] * kernel[1]) / float(rows * cols);
    }
  Tensor f = Tensor::like(x, std::move(factor), {1, 1, shape[2], shape[3]}, loc);
  return mul(y, in.dtype == DType::f32 ? f : f.to(in.dtype, loc), loc);
}
} // namespace

Tensor kiln::max_pool2d(const Tensor &x, std::array<int64_t, 2> kernel,
                        std::array<int64_t, 2> stride, std::array<int64_t, 2> padding,
                        bool ceil_mode, std::source_location loc) {
  return pool("max", x, kernel, stride, padding, ceil_mode, loc);
}

Tensor kiln::avg_pool2d(const Tensor &x, std::array<int64_t, 2> kernel,
                        std::array<int64_t, 2> stride, std::array<int64_t, 2> padding,
                        bool ceil_mode, std::source_location loc) {
  return pool("mean", x, kernel, stride, padding, ceil_mode, loc);
}

Tensor kiln::global_avg_pool2d(const Tensor &x, std::source_location loc) {
  if (nodeOf(x, loc).shape.size() != 4)
    throw Error(sitePrefix(loc) + "global_avg_pool2d needs an NCHW tensor");
  CallScope scope("global_avg_pool2d", loc, {{"x", &x}});
  return mean(x, {2, 3}, true, loc);
}

namespace {
/// A normalization parameter must be exactly [size] (PyTorch's rule).
void checkParameter(const char *op, const char *name, const Tensor &param, int64_t size,
                    const char *sizeName, const Shape &xShape, std::source_location loc) {
  const Node &p = nodeOf(param, loc);
  if (p.shape != Shape{size})
    throw Error(sitePrefix(loc) + op + ": " + name + " has shape " + shapeText(p.shape) +
                "; it must be [" + std::to_string(size) + "], " + sizeName + " " +
                shapeText(xShape));
}
} // namespace

Tensor kiln::batch_norm(const Tensor &x, const Tensor &mean, const Tensor &var,
                        const Tensor &gamma, const Tensor &beta, float eps,
                        std::source_location loc) {
  const Node &in = nodeOf(x, loc);
  if (in.shape.size() < 2)
    throw Error(sitePrefix(loc) + "batch_norm needs a tensor with a channel dimension");
  // As in PyTorch: each parameter is [C]; a [2, 2] mean for C = 4 would
  // otherwise reshape into a different computation without a word.
  for (auto [name, t] : {std::pair{"mean", &mean}, {"var", &var}, {"gamma", &gamma},
                         {"beta", &beta}})
    checkParameter("batch_norm", name, *t, in.shape[1], "the channel count (dimension 1 of x)",
                   in.shape, loc);
  CallScope scope("batch_norm", loc, {{"x", &x}, {"mean", &mean}, {"var", &var},
                                      {"gamma", &gamma}, {"beta", &beta}});
  // Per-channel parameters broadcast over the dimensions after the channel.
  Shape param = {in.shape[1]};
  param.insert(param.end(), in.shape.size() - 2, 1);
  auto p = [&](const Tensor &t) { return t.reshape(param, loc); };
  Tensor scale = mul(p(gamma), rsqrt(add(p(var), scalarLike(eps, var, loc), loc), loc), loc);
  return add(mul(sub(x, p(mean), loc), scale, loc), p(beta), loc);
}

Tensor kiln::layer_norm(const Tensor &x, const Tensor &gamma, const Tensor &beta, float eps,
                        std::source_location loc) {
  const Node &in = nodeOf(x, loc);
  if (in.shape.empty())
    throw Error(sitePrefix(loc) + "layer_norm needs a tensor of rank 1 or more");
  checkParameter("layer_norm", "gamma", gamma, in.shape.back(), "the last dimension of x",
                 in.shape, loc);
  checkParameter("layer_norm", "beta", beta, in.shape.back(), "the last dimension of x",
                 in.shape, loc);
  CallScope scope("layer_norm", loc, {{"x", &x}, {"gamma", &gamma}, {"beta", &beta}});
  Tensor centered = sub(x, kiln::mean(x, {-1}, true, loc), loc);
  Tensor variance = kiln::mean(mul(centered, centered, loc), {-1}, true, loc);
  Tensor normalized = mul(centered, rsqrt(add(variance, scalarLike(eps, x, loc), loc), loc), loc);
  return add(mul(normalized, gamma, loc), beta, loc);
}

Tensor kiln::linear(const Tensor &x, const Tensor &weight, const Tensor &bias,
                    std::source_location loc) {
  CallScope scope("linear", loc, {{"x", &x}, {"weight", &weight}, {"bias", &bias}});
  Tensor product = matmul(x, weight.transpose(-1, -2, loc), loc);
  return bias.defined() ? add(product, bias, loc) : product;
}

Tensor kiln::operator-(At x) { return neg(x.tensor, x.loc); }
Tensor kiln::operator+(At a, const Tensor &b) { return add(a.tensor, b, a.loc); }
Tensor kiln::operator-(At a, const Tensor &b) { return sub(a.tensor, b, a.loc); }
Tensor kiln::operator*(At a, const Tensor &b) { return mul(a.tensor, b, a.loc); }
Tensor kiln::operator/(At a, const Tensor &b) { return div(a.tensor, b, a.loc); }
Tensor kiln::operator+(At a, float b) { return add(a.tensor, scalarLike(b, a.tensor, a.loc), a.loc); }
Tensor kiln::operator-(At a, float b) { return sub(a.tensor, scalarLike(b, a.tensor, a.loc), a.loc); }
Tensor kiln::operator*(At a, float b) { return mul(a.tensor, scalarLike(b, a.tensor, a.loc), a.loc); }
Tensor kiln::operator/(At a, float b) { return div(a.tensor, scalarLike(b, a.tensor, a.loc), a.loc); }
Tensor kiln::operator+(float a, At b) { return add(scalarLike(a, b.tensor, b.loc), b.tensor, b.loc); }
Tensor kiln::operator-(float a, At b) { return sub(scalarLike(a, b.tensor, b.loc), b.tensor, b.loc); }
Tensor kiln::operator*(float a, At b) { return mul(scalarLike(a, b.tensor, b.loc), b.tensor, b.loc); }
Tensor kiln::operator/(float a, At b) { return div(scalarLike(a, b.tensor, b.loc), b.tensor, b.loc); }

std::shared_ptr<const std::string> kiln::currentOpLabel() { return currentLabel; }

kiln::OpLabel::OpLabel(std::string label)
    : previous_(std::exchange(currentLabel,
                              std::make_shared<const std::string>(std::move(label)))) {}

kiln::OpLabel::~OpLabel() { currentLabel = std::move(previous_); }
