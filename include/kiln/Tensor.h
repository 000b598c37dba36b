//===- Tensor.h - lazy tensors ----------------------------------*- C++ -*-===//
//
// Every operation records a node (with the caller's source line) and does
// no work. Reading a result (to_vector, item) compiles and runs exactly what
// it needs; the result keeps its device buffer, so reading again is free.
// Nodes nobody references any more are freed with the last Tensor.
//
// Threads: any number of threads may record ops, read results and realize
// graphs at once, on the same tensors too. Recording touches only the new
// node; realizations and reads run one at a time under a process-wide lock
// (a second thread reading a tensor that another is realizing waits, then
// reads the result without recomputing it). A Tensor handle is a value: one
// handle object must not be assigned in one thread while another uses it
// (copy it instead), as with std::shared_ptr. cpu_view() spans stay valid
// while the tensor lives, from any thread.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TENSOR_H
#define KILN_TENSOR_H

#include "kiln/Device.h"
#include "kiln/Errors.h"

#include <array>
#include <concepts>
#include <cstdint>
#include <memory>
#include <optional>
#include <source_location>
#include <span>
#include <vector>

namespace kiln {

/// bf16: bfloat16 (8 exponent bits, 7 mantissa bits), computed in f32 on the
/// CPU device; .npy files hold its bits as uint16.
enum class DType { f32, f16, i32, boolean, bf16 };
const char *dtype_name(DType dtype);

using Shape = std::vector<int64_t>;
struct Node;

/// An IEEE binary16 value as stored on the device (read f16 tensors with
/// to_vector<half>()); converts to float exactly.
struct half {
  uint16_t bits = 0;
  operator float() const;
};

template <typename T> inline constexpr bool kAlwaysFalse = false;

class Tensor {
public:
  using Loc = std::source_location;

  Tensor() = default;

  /// Host data, uncommitted (follows the devices it meets) or committed.
  static Tensor from(std::vector<float> data, Shape shape, Loc loc = Loc::current());
  static Tensor from(std::vector<float> data, Shape shape, const Device &device,
                     Loc loc = Loc::current());
  /// Host data stored as `dtype`: f16 and bf16 round each value to it (an
  /// f16 model's weights), boolean keeps "not zero", i32 takes integers
  /// only (an error names the first value that is not one).
  static Tensor from(std::vector<float> data, Shape shape, DType dtype, Loc loc = Loc::current());
  /// Integer host data (a std::vector<int32_t>): an i32 tensor, every
  /// value kept exactly (indices). A braced list of numbers stays f32.
  template <typename T>
    requires std::same_as<T, int32_t>
  static Tensor from(std::vector<T> data, Shape shape, Loc loc = Loc::current()) {
    return fromInts(std::move(data), std::move(shape), nullptr, loc);
  }
  template <typename T>
    requires std::same_as<T, int32_t>
  static Tensor from(std::vector<T> data, Shape shape, const Device &device,
                     Loc loc = Loc::current()) {
    return fromInts(std::move(data), std::move(shape), &device, loc);
  }
  /// A rank-0 literal: never conflicts, follows whatever it meets.
  static Tensor scalar(float value, Loc loc = Loc::current());
  static Tensor full(Shape shape, float value, Loc loc = Loc::current());
  static Tensor full(Shape shape, float value, const Device &device,
                     Loc loc = Loc::current());
  static Tensor zeros(Shape shape, Loc loc = Loc::current());
  static Tensor zeros(Shape shape, const Device &device, Loc loc = Loc::current());
  /// Uniform in [0, 1) and standard normal, from a per-process generator
  /// (seed it with manual_seed for repeatable values).
  static Tensor rand(Shape shape, Loc loc = Loc::current());
  static Tensor rand(Shape shape, const Device &device, Loc loc = Loc::current());
  static Tensor randn(Shape shape, Loc loc = Loc::current());
  static Tensor randn(Shape shape, const Device &device, Loc loc = Loc::current());

  /// On `like`'s placement: committed to its device if it is committed,
  /// uncommitted (following what it meets) otherwise.
  static Tensor like(const Tensor &like, std::vector<float> data, Shape shape,
                     Loc loc = Loc::current());
  static Tensor full_like(const Tensor &like, float value, Loc loc = Loc::current());
  static Tensor zeros_like(const Tensor &like, Loc loc = Loc::current());

  // Views: no data moves; the kernel that uses a view reads through it.
  /// Swaps two dimensions (negative dims count from the end).
  Tensor transpose(int64_t dim0, int64_t dim1, Loc loc = Loc::current()) const;
  /// Result dimension i is this tensor's dimension order[i].
  Tensor permute(std::vector<int64_t> order, Loc loc = Loc::current()) const;
  /// The same elements in row-major order; one dimension may be -1.
  Tensor reshape(Shape shape, Loc loc = Loc::current()) const;
  /// numpy broadcasting to `shape`.
  Tensor broadcast_to(Shape shape, Loc loc = Loc::current()) const;
  /// Python's x[start:end:step] along `dim`: unset start/end mean the whole
  /// range in the step's direction; negative indices count from the end.
  Tensor slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
               int64_t step = 1, Loc loc = Loc::current()) const;

  /// The elements converted to `dtype` (float to i32 truncates toward zero;
  /// to bool is "not zero").
  Tensor to(DType dtype, Loc loc = Loc::current()) const;

  /// A copy committed to `device` (no copy if it is already there).
  Tensor to(const Device &device, Loc loc = Loc::current()) const;

  const Shape &shape() const;
  int64_t numel() const;
  DType dtype() const;
  /// Created with a device or moved with .to().
  bool is_committed() const;
  /// The committed device; for an uncommitted tensor, where it was computed
  /// if it was read, else where placement will compute it (the device of the
  /// committed operands it meets, else the default device). Throws
  /// DeviceMismatchError when its operands conflict, as reading it would.
  Device device() const;
  bool is_realized() const;

  /// Compiles and runs what this tensor needs, then copies it to the host.
  /// T is the element's own type, never a lossy conversion: float for f32
  /// (and f16 or bool, which widen exactly), int32_t for i32 (and bool),
  /// bool for bool, half for f16. Another dtype throws an Error that names
  /// the accessor to use; another T does not compile. Without T: float.
  template <typename T = float> std::vector<T> to_vector() const {
    static_assert(kAlwaysFalse<T>, "to_vector<T>: T must be float, int32_t, bool or kiln::half");
    return {};
  }
  template <typename T = float> T item() const {
    static_assert(kAlwaysFalse<T>, "item<T>: T must be float, int32_t, bool or kiln::half");
    return {};
  }
  /// The values of a realized CPU tensor in place: no copy, 64-byte aligned,
  /// valid while this tensor lives. Throws Error for tensors on other
  /// devices (read those with to_vector, or move them with .to(cpu())).
  std::span<const float> cpu_view() const;

  bool defined() const { return node_ != nullptr; }
  const std::shared_ptr<Node> &node() const { return node_; }
  explicit Tensor(std::shared_ptr<Node> node) : node_(std::move(node)) {}

private:
  static Tensor fromInts(std::vector<int32_t> data, Shape shape, const Device *device, Loc loc);
  std::shared_ptr<Node> node_;
};

template <> std::vector<float> Tensor::to_vector<float>() const;
template <> std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template <> std::vector<bool> Tensor::to_vector<bool>() const;
template <> std::vector<half> Tensor::to_vector<half>() const;
template <> float Tensor::item<float>() const;
template <> int32_t Tensor::item<int32_t>() const;
template <> bool Tensor::item<bool>() const;
template <> half Tensor::item<half>() const;

/// Seeds the generator behind rand/randn.
void manual_seed(uint64_t seed);

/// A tensor plus the line that used it: lets operators, which cannot take a
/// defaulted source_location, still record the caller's line.
struct At {
  At(const Tensor &t, std::source_location loc = std::source_location::current())
      : tensor(t), loc(loc) {}
  const Tensor &tensor;
  std::source_location loc;
};

// Elementwise math.
Tensor neg(const Tensor &x, std::source_location loc = std::source_location::current());
Tensor abs(const Tensor &x, std::source_location loc = std::source_location::current());
Tensor exp(const Tensor &x, std::source_location loc = std::source_location::current());
Tensor log(const Tensor &x, std::source_location loc = std::source_location::current());
Tensor sqrt(const Tensor &x, std::source_location loc = std::source_location::current());
Tensor rsqrt(const Tensor &x, std::source_location loc = std::source_location::current());
Tensor tanh(const Tensor &x, std::source_location loc = std::source_location::current());
Tensor sin(const Tensor &x, std::source_location loc = std::source_location::current());
Tensor cos(const Tensor &x, std::source_location loc = std::source_location::current());
/// Rounding to an integer value (the result stays floating): down, up, and
/// to the nearest with ties to even (PyTorch's round, ONNX's Round).
Tensor floor(const Tensor &x, std::source_location loc = std::source_location::current());
Tensor ceil(const Tensor &x, std::source_location loc = std::source_location::current());
Tensor round(const Tensor &x, std::source_location loc = std::source_location::current());
Tensor sigmoid(const Tensor &x, std::source_location loc = std::source_location::current());
Tensor relu(const Tensor &x, std::source_location loc = std::source_location::current());
Tensor gelu(const Tensor &x, std::source_location loc = std::source_location::current());
/// The error function (ONNX's Erf; BERT-style GELU as exported), within
/// 1.5e-7 of the exact value.
Tensor erf(const Tensor &x, std::source_location loc = std::source_location::current());

// Binary ops with numpy broadcasting; shapes are checked here, at the call.
Tensor add(const Tensor &a, const Tensor &b, std::source_location loc = std::source_location::current());
Tensor sub(const Tensor &a, const Tensor &b, std::source_location loc = std::source_location::current());
Tensor mul(const Tensor &a, const Tensor &b, std::source_location loc = std::source_location::current());
Tensor div(const Tensor &a, const Tensor &b, std::source_location loc = std::source_location::current());
Tensor maximum(const Tensor &a, const Tensor &b, std::source_location loc = std::source_location::current());
Tensor minimum(const Tensor &a, const Tensor &b, std::source_location loc = std::source_location::current());
Tensor pow(const Tensor &a, const Tensor &b, std::source_location loc = std::source_location::current());

// Comparisons give boolean tensors; where selects with broadcasting.
Tensor eq(const Tensor &a, const Tensor &b, std::source_location loc = std::source_location::current());
Tensor ne(const Tensor &a, const Tensor &b, std::source_location loc = std::source_location::current());
Tensor lt(const Tensor &a, const Tensor &b, std::source_location loc = std::source_location::current());
Tensor le(const Tensor &a, const Tensor &b, std::source_location loc = std::source_location::current());
Tensor gt(const Tensor &a, const Tensor &b, std::source_location loc = std::source_location::current());
Tensor ge(const Tensor &a, const Tensor &b, std::source_location loc = std::source_location::current());
Tensor where(const Tensor &cond, const Tensor &a, const Tensor &b,
             std::source_location loc = std::source_location::current());

/// `low[d]` / `high[d]` elements of `value` before / after each dimension.
Tensor pad(const Tensor &x, std::vector<int64_t> low, std::vector<int64_t> high,
           float value = 0.0f, std::source_location loc = std::source_location::current());
/// Joins tensors along `axis` (negative counts from the end); the other
/// dimensions must agree.
Tensor concat(const std::vector<Tensor> &tensors, int64_t axis,
              std::source_location loc = std::source_location::current());

/// Slices of `x` along `dim` picked by `indices` (a rank-1 i32 tensor, or
/// a list): PyTorch's index_select. An index outside 0 <= i < size is an
/// Error, as in PyTorch: a list, or indices whose data is known, at the
/// call; indices that are a compiled program's input, when it runs. Indices
/// computed on the device are clamped there (below 0 to the first slice,
/// past the end to the last), so no kernel reads outside `x`.
Tensor index_select(const Tensor &x, int64_t dim, const Tensor &indices,
                    std::source_location loc = std::source_location::current());
Tensor index_select(const Tensor &x, int64_t dim, const std::vector<int64_t> &indices,
                    std::source_location loc = std::source_location::current());

/// Matrix product [..., M, K] x [..., K, N] -> [..., M, N], batch dims
/// broadcast; a rank-1 operand is a row on the left and a column on the
/// right, its dimension dropped from the result (PyTorch's matmul: [K] x [K]
/// is a scalar). Transposed operands: pass x.transpose(-1, -2) (a view,
/// folded into the product's indexing).
Tensor matmul(const Tensor &a, const Tensor &b,
              std::source_location loc = std::source_location::current());
/// x @ weight^T + bias, with weight [out, in] as in PyTorch's Linear; no
/// bias when it is left out (an empty Tensor), as F.linear(x, w).
Tensor linear(const Tensor &x, const Tensor &weight, const Tensor &bias = Tensor(),
              std::source_location loc = std::source_location::current());

/// 2-D convolution, NCHW input and OIHW filter (PyTorch's conv2d), zero
/// padding; depthwise is groups == channels.
Tensor conv2d(const Tensor &x, const Tensor &filter, std::array<int64_t, 2> stride = {1, 1},
              std::array<int64_t, 2> padding = {0, 0}, std::array<int64_t, 2> dilation = {1, 1},
              int64_t groups = 1, std::source_location loc = std::source_location::current());
/// Max pooling. With ceil_mode the output sizes round up: one more window
/// where a partial one still starts inside the input or its leading
/// padding (PyTorch's rule).
Tensor max_pool2d(const Tensor &x, std::array<int64_t, 2> kernel, std::array<int64_t, 2> stride,
                  std::array<int64_t, 2> padding = {0, 0}, bool ceil_mode = false,
                  std::source_location loc = std::source_location::current());
/// Average pooling; padding counts as zeros (PyTorch's count_include_pad),
/// but a ceil_mode window's part past the padding does not count (PyTorch's
/// divisor).
Tensor avg_pool2d(const Tensor &x, std::array<int64_t, 2> kernel, std::array<int64_t, 2> stride,
                  std::array<int64_t, 2> padding = {0, 0}, bool ceil_mode = false,
                  std::source_location loc = std::source_location::current());
/// Mean over H and W, keeping them as size 1.
Tensor global_avg_pool2d(const Tensor &x,
                         std::source_location loc = std::source_location::current());
/// Inference batch norm over channel dim 1: (x - mean) / sqrt(var + eps) *
/// gamma + beta, each parameter of shape [C].
Tensor batch_norm(const Tensor &x, const Tensor &mean, const Tensor &var, const Tensor &gamma,
                  const Tensor &beta, float eps = 1e-5f,
                  std::source_location loc = std::source_location::current());
/// Layer norm over the last dimension with affine gamma and beta of its size.
Tensor layer_norm(const Tensor &x, const Tensor &gamma, const Tensor &beta, float eps = 1e-5f,
                  std::source_location loc = std::source_location::current());

// Reductions over `axes` (empty: all; negative count from the end). With
// keepdims the reduced dimensions stay with size 1.
Tensor sum(const Tensor &x, std::vector<int64_t> axes = {}, bool keepdims = false,
           std::source_location loc = std::source_location::current());
Tensor mean(const Tensor &x, std::vector<int64_t> axes = {}, bool keepdims = false,
            std::source_location loc = std::source_location::current());
Tensor amax(const Tensor &x, std::vector<int64_t> axes = {}, bool keepdims = false,
            std::source_location loc = std::source_location::current());
Tensor amin(const Tensor &x, std::vector<int64_t> axes = {}, bool keepdims = false,
            std::source_location loc = std::source_location::current());
Tensor prod(const Tensor &x, std::vector<int64_t> axes = {}, bool keepdims = false,
            std::source_location loc = std::source_location::current());
/// Position of the largest / smallest element along `axis` (over the whole
/// flattened tensor when unset), as i32; the first on ties, NaN wins.
Tensor argmax(const Tensor &x, std::optional<int64_t> axis = std::nullopt, bool keepdims = false,
              std::source_location loc = std::source_location::current());
Tensor argmin(const Tensor &x, std::optional<int64_t> axis = std::nullopt, bool keepdims = false,
              std::source_location loc = std::source_location::current());
/// Variance with Bessel's correction by default (PyTorch's `var`).
Tensor var(const Tensor &x, std::vector<int64_t> axes = {}, bool keepdims = false,
           int64_t correction = 1, std::source_location loc = std::source_location::current());
Tensor softmax(const Tensor &x, int64_t axis = -1,
               std::source_location loc = std::source_location::current());
Tensor log_softmax(const Tensor &x, int64_t axis = -1,
                   std::source_location loc = std::source_location::current());

Tensor operator-(At x);
Tensor operator+(At a, const Tensor &b);
Tensor operator-(At a, const Tensor &b);
Tensor operator*(At a, const Tensor &b);
Tensor operator/(At a, const Tensor &b);
Tensor operator+(At a, float b);
Tensor operator-(At a, float b);
Tensor operator*(At a, float b);
Tensor operator/(At a, float b);
Tensor operator+(float a, At b);
Tensor operator-(float a, At b);
Tensor operator*(float a, At b);
Tensor operator/(float a, At b);

/// What to do when an op's operands live on different devices.
enum class TransferPolicy {
  error, ///< throw DeviceMismatchError (the default)
  log,   ///< insert transfers and print each one to stderr
  allow, ///< insert transfers silently
};

struct RealizeOptions {
  /// Unset: set_transfer_policy's, else KILN_TRANSFER_POLICY, else error.
  std::optional<TransferPolicy> transfer_policy;
};

/// The policy for the rest of the process (KILN_TRANSFER_POLICY still wins
/// when set; a RealizeOptions policy wins over both).
void set_transfer_policy(TransferPolicy policy);

/// Record the caller's stack at every op's creation, so that a device
/// conflict inside a reusable layer names the frames that led to it (off by
/// default; KILN_TRACE=1 turns it on before the first op). Affects ops
/// created afterwards; costs about a microsecond per op (bench_graphs).
void set_trace(bool enabled);

/// While alive, the ops recorded on this thread carry `label` (an importer
/// sets an ONNX node's name): profiles and kernel listings name them by it
/// rather than by the source line that recorded them. Scopes nest; the
/// innermost wins.
class OpLabel {
public:
  explicit OpLabel(std::string label);
  ~OpLabel();
  OpLabel(const OpLabel &) = delete;
  OpLabel &operator=(const OpLabel &) = delete;

private:
  std::shared_ptr<const std::string> previous_;
};

/// Realizes several tensors in one graph (shared work runs once). Returns
/// when the results are computed.
void realize(const std::vector<Tensor> &tensors, const RealizeOptions &options = {});

} // namespace kiln

#endif // KILN_TENSOR_H
