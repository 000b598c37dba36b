//===- NetworkOps.h - the ops networks are written with ---------*- C++ -*-===//
//
// Activations, shape helpers, attention and adaptive pooling, with
// PyTorch's names and semantics. Each is recorded as the primitive ops it
// is made of, so it fuses into its neighbours' kernels on every device
// like any other elementwise or view op; profiles name the call.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_NETWORKOPS_H
#define KILN_NETWORKOPS_H

#include "kiln/Tensor.h"

#include <optional>
#include <string_view>
#include <vector>

namespace kiln {

// Activations. Like PyTorch, NaN inputs stay NaN.
/// Each element limited to [min, max]; an unset bound is no limit.
Tensor clamp(const Tensor &x, std::optional<float> min, std::optional<float> max,
             std::source_location loc = std::source_location::current());
/// min(max(x, 0), 6), MobileNet's activation.
Tensor relu6(const Tensor &x, std::source_location loc = std::source_location::current());
/// clamp(x, min_val, max_val).
Tensor hardtanh(const Tensor &x, float min_val = -1.0f, float max_val = 1.0f,
                std::source_location loc = std::source_location::current());
/// x * relu6(x + 3) / 6 (MobileNetV3).
Tensor hardswish(const Tensor &x, std::source_location loc = std::source_location::current());
/// relu6(x + 3) / 6.
Tensor hardsigmoid(const Tensor &x, std::source_location loc = std::source_location::current());
/// x * sigmoid(x), also called swish (EfficientNet).
Tensor silu(const Tensor &x, std::source_location loc = std::source_location::current());
/// GELU with PyTorch's `approximate`: "none" is the exact erf form (as
/// gelu(x)), "tanh" is 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
Tensor gelu(const Tensor &x, std::string_view approximate,
            std::source_location loc = std::source_location::current());

// Shapes (views: no data moves).
/// Dimensions start_dim..end_dim joined into one (torch.flatten).
Tensor flatten(const Tensor &x, int64_t start_dim = 0, int64_t end_dim = -1,
               std::source_location loc = std::source_location::current());
/// Without the size-1 dimensions `dims` (empty: every size-1 dimension).
/// Unlike PyTorch, naming a dimension whose size is not 1 is an error, not
/// a silent no-op.
Tensor squeeze(const Tensor &x, std::vector<int64_t> dims = {},
               std::source_location loc = std::source_location::current());
/// With a new size-1 dimension at `dim` (in [-rank-1, rank]).
Tensor unsqueeze(const Tensor &x, int64_t dim,
                 std::source_location loc = std::source_location::current());
/// Pieces of `split_size` along `dim`, the last one smaller if it does not
/// divide (torch.split with an int).
std::vector<Tensor> split(const Tensor &x, int64_t split_size, int64_t dim = 0,
                          std::source_location loc = std::source_location::current());
/// Pieces of the given sizes, which must add up to the dimension.
std::vector<Tensor> split(const Tensor &x, const std::vector<int64_t> &sizes, int64_t dim = 0,
                          std::source_location loc = std::source_location::current());
/// At most `chunks` pieces of ceil(size / chunks) (torch.chunk).
std::vector<Tensor> chunk(const Tensor &x, int64_t chunks, int64_t dim = 0,
                          std::source_location loc = std::source_location::current());

// Convolution and pooling.
/// conv2d plus a per-output-channel bias of shape [O] (fused into the
/// convolution's epilogue).
Tensor conv2d(const Tensor &x, const Tensor &filter, const Tensor &bias,
              std::array<int64_t, 2> stride = {1, 1}, std::array<int64_t, 2> padding = {0, 0},
              std::array<int64_t, 2> dilation = {1, 1}, int64_t groups = 1,
              std::source_location loc = std::source_location::current());
/// Average pooling to an `output_size` grid, PyTorch's windows: output i
/// covers rows floor(i H / oh) to ceil((i + 1) H / oh).
Tensor adaptive_avg_pool2d(const Tensor &x, std::array<int64_t, 2> output_size,
                           std::source_location loc = std::source_location::current());

/// softmax(q k^T * scale + mask) v over the last two dimensions, batch
/// dimensions broadcast (PyTorch's scaled_dot_product_attention): q is
/// [..., L, E], k [..., S, E], v [..., S, Ev]. `mask` is boolean (true
/// keeps a score) or floating (added to the scores) and broadcasts to
/// [..., L, S]. `causal` keeps the scores with column <= row. `scale`
/// defaults to 1 / sqrt(E). A row with every score masked out gives NaN,
/// as in PyTorch.
Tensor scaled_dot_product_attention(const Tensor &q, const Tensor &k, const Tensor &v,
                                    const Tensor &mask = Tensor(), bool causal = false,
                                    std::optional<float> scale = std::nullopt,
                                    std::source_location loc = std::source_location::current());

} // namespace kiln

#endif // KILN_NETWORKOPS_H
