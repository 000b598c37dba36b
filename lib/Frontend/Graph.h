//===- Graph.h - the lazy graph behind Tensor -------------------*- C++ -*-===//
//
// A Node is one recorded op. Operands are shared_ptrs, so a node lives as
// long as some Tensor or later node needs it. A realized node owns its
// device buffer and drops its operands: the graph above it is freed.
// A node's recorded fields never change; its buffer, bufferDevice and
// operands change when it is realized, under the session lock, and are read
// only under it.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_FRONTEND_GRAPH_H
#define KILN_LIB_FRONTEND_GRAPH_H

#include "kiln/Tensor.h"
#include "kiln/runtime/Device.h"

#include <optional>
#include <string>

namespace kiln {

enum class OpKind {
  Input, Constant, Unary, Binary, Compare, Select, Transfer, View, Reduce, ArgReduce, Conv2d,
  Pool2d, Pad, Concat, Gather, Attention
};

struct Node;
struct CallStack;
namespace rt {
struct Program;
struct ProgramProfile;
} // namespace rt

/// A tensor argument of an API call, under its parameter name in kiln/Tensor.h.
struct CallArg {
  std::string name;
  std::weak_ptr<Node> node;
};

/// An API call that records several nodes (linear, batch_norm, ...): each of
/// them points here, so a conflict inside is reported as the call the user
/// wrote, over its arguments as the user made them.
struct ApiCall {
  const char *name;
  std::source_location loc;
  std::vector<CallArg> args;
  std::shared_ptr<const CallStack> stack; // KILN_TRACE=1
};

/// The label of the innermost live OpLabel on this thread, else null.
std::shared_ptr<const std::string> currentOpLabel();

struct Node {
  OpKind kind;
  std::string op; // "exp", "add", "lt": the kiln op mnemonic or predicate
  std::vector<std::shared_ptr<Node>> operands;
  Shape shape;
  DType dtype = DType::f32;
  /// Committed device (sources and transfers only; computed nodes derive
  /// theirs in the placement pass).
  std::optional<Device> device;
  std::source_location loc;
  /// The OpLabel live when it was recorded (an ONNX node's name), if any.
  std::shared_ptr<const std::string> label = currentOpLabel();
  /// The compound API call that recorded this node, if any; null for an op
  /// the user called directly (add, where, ...).
  std::shared_ptr<const ApiCall> call;
  /// The user's call stack at recording (KILN_TRACE=1), else null.
  std::shared_ptr<const CallStack> stack;
  std::shared_ptr<const std::vector<float>> host; // Input (f32)
  std::shared_ptr<const std::vector<int32_t>> hostInts; // Input (i32)
  float value = 0;                                // Constant (splat), Attention (scale)
  std::vector<int64_t> permutation, starts, steps; // View
  std::vector<int64_t> axes;                       // Reduce (sorted)
  bool keepdims = false;
  std::vector<int64_t> window, stride, padding, dilation; // Conv2d, Pool2d
  int64_t groups = 1;
  bool ceilMode = false; // Pool2d
  bool causal = false;   // Attention
  std::vector<int64_t> low, high; // Pad (value: the fill)
  /// An i32 Input that indexes a table: the values it must hold
  /// (restrictValues), low <= v < high, and what it indexes.
  std::optional<std::pair<int64_t, int64_t>> valueRange;
  std::string valueRangeUse;

  // Set once realized.
  std::shared_ptr<rt::Buffer> buffer;
  std::optional<Device> bufferDevice;

  bool realized() const { return buffer != nullptr; }

  Node() = default;
  Node(const Node &) = delete;
  Node &operator=(const Node &) = delete;
  /// Iterative: a chain of 100k recorded ops must not recurse 100k deep.
  ~Node();
};

int64_t numElements(const Shape &shape);
size_t elementBytes(DType dtype);

/// Compiles and runs everything the roots not yet realized need
/// (lib/Driver/Realize.cpp). A node's buffer is written here, under the
/// session lock, and read only under it (realizedOn, hostDataOf,
/// readNodeInto): two threads may read or realize one tensor at once.
/// What kiln::profile asks of a realize: the graph run `runs` times with
/// every dispatch timed; the program and its profile come back.
struct ProfileRequest {
  int runs = 1;
  std::shared_ptr<const rt::Program> program;
  std::shared_ptr<const rt::ProgramProfile> profile;
};

void realizeNodes(const std::vector<std::shared_ptr<Node>> &roots,
                  const RealizeOptions &options = {}, ProfileRequest *profile = nullptr);

/// Where `node` was computed, if it was.
std::optional<Device> realizedOn(const Node &node);
/// A realized node's host pointer (null off the CPU) and its device.
std::pair<const void *, Device> hostDataOf(const Node &node);

/// The device placement gives `root` when it is realized (building the
/// graph, not running it); throws DeviceMismatchError as realizing would.
Device placedDevice(const std::shared_ptr<Node> &root);

/// An unrealized input node's host data in the stored form (f32, i32, bool
/// as one byte each). Throws for a dtype with no host form.
std::vector<uint8_t> hostBytes(const Node &node);

/// Copies a realized node's buffer to `out` as stored (f32, f16, i32:
/// little-endian; bool: one byte each): numel * elementBytes bytes.
void readNodeInto(Node &node, void *out);

} // namespace kiln

#endif // KILN_LIB_FRONTEND_GRAPH_H
