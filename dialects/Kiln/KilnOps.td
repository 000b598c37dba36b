//===- KilnOps.td - kiln tensor graph ops ------------------*- tablegen -*-===//

#ifndef KILN_OPS_TD
#define KILN_OPS_TD

include "KilnBase.td"
include "KilnInterfaces.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/BuiltinTypes.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/IR/RegionKindInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

class Kiln_Op<string mnemonic, list<Trait> traits = []>
    : Op<Kiln_Dialect, mnemonic,
         traits # [DeclareOpInterfaceMethods<Kiln_PlacedOpInterface>]>;

// Static shapes only: codegen specializes every kernel on its shapes.
def Kiln_FloatTensor : StaticShapeTensorOf<[F32, F16, BF16]>;
def Kiln_AnyTensor : StaticShapeTensorOf<[F32, F16, BF16, I1, I32]>;
def Kiln_BoolTensor : StaticShapeTensorOf<[I1]>;

//===----------------------------------------------------------------------===//
// Sources
//===----------------------------------------------------------------------===//

// Not ConstantLike, and no folder: the canonicalizer would merge equal
// constants committed to different devices.
def Kiln_ConstantOp : Kiln_Op<"constant", [Pure,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "a tensor literal";
  let description = [{
    ```mlir
    %c = kiln.constant dense<2.0> : tensor<4xf32>
    %d = kiln.constant on "vulkan:0" dense<[1.0, 2.0]> : tensor<2xf32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value, OptionalAttr<Kiln_DeviceAttr>:$device);
  let results = (outs Kiln_AnyTensor:$result);
  // The value prints its own type, which is the result type.
  let assemblyFormat = "(`on` custom<Device>($device)^)? attr-dict $value";
  let extraClassDeclaration = [{ bool isPlacementSource() { return true; } }];
}

def Kiln_InputOp : Kiln_Op<"input", [Pure]> {
  let summary = "a tensor supplied by the host at run time";
  let description = [{
    `index` is the position of the buffer in the executable's input list.
    ```mlir
    %x = kiln.input 0 on "vulkan:0" : tensor<8x16xf32>
    ```
  }];
  let arguments = (ins I64Attr:$index, OptionalAttr<Kiln_DeviceAttr>:$device);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = "$index (`on` custom<Device>($device)^)? attr-dict `:` type($result)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{ bool isPlacementSource() { return true; } }];
}

def Kiln_TransferOp : Kiln_Op<"transfer", [Pure, SameOperandsAndResultType,
                                           InferTypeOpInterface]> {
  let summary = "an explicit copy to another device";
  let description = [{
    The only op whose result may live elsewhere than its operand. Inserted
    by the user (`.to(device)`) or by the placement pass under the `log` and
    `allow` transfer policies.
    ```mlir
    %y = kiln.transfer %x to "vulkan:1" : tensor<4xf32>
    ```
  }];
  let arguments = (ins Kiln_AnyTensor:$input, Kiln_DeviceAttr:$device);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = "$input `to` custom<Device>($device) attr-dict `:` type($result)";
  let extraClassDeclaration = [{ bool isPlacementSource() { return true; } }];
}

//===----------------------------------------------------------------------===//
// Elementwise math
//===----------------------------------------------------------------------===//

class Kiln_UnaryOp<string mnemonic, string desc>
    : Kiln_Op<mnemonic, [Pure, Kiln_Elementwise, SameOperandsAndResultType,
                        InferTypeOpInterface]> {
  let summary = desc;
  let arguments = (ins Kiln_FloatTensor:$input, OptionalAttr<Kiln_DeviceAttr>:$device);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input (`on` custom<Device>($device)^)? attr-dict `:` type($result)";
}

def Kiln_NegOp : Kiln_UnaryOp<"neg", "-x">;
def Kiln_AbsOp : Kiln_UnaryOp<"abs", "|x|">;
def Kiln_ExpOp : Kiln_UnaryOp<"exp", "e^x">;
def Kiln_LogOp : Kiln_UnaryOp<"log", "natural logarithm">;
def Kiln_SqrtOp : Kiln_UnaryOp<"sqrt", "square root">;
def Kiln_RsqrtOp : Kiln_UnaryOp<"rsqrt", "1 / sqrt(x)">;
def Kiln_TanhOp : Kiln_UnaryOp<"tanh", "hyperbolic tangent">;
def Kiln_SigmoidOp : Kiln_UnaryOp<"sigmoid", "1 / (1 + e^-x)">;
def Kiln_ReluOp : Kiln_UnaryOp<"relu", "max(x, 0)">;
def Kiln_GeluOp : Kiln_UnaryOp<"gelu", "x * Phi(x), the exact (erf) form">;
def Kiln_ErfOp : Kiln_UnaryOp<"erf", "the error function">;
def Kiln_SinOp : Kiln_UnaryOp<"sin", "sine">;
def Kiln_CosOp : Kiln_UnaryOp<"cos", "cosine">;
def Kiln_FloorOp : Kiln_UnaryOp<"floor", "the largest integer not above x">;
def Kiln_CeilOp : Kiln_UnaryOp<"ceil", "the smallest integer not below x">;
def Kiln_RoundOp : Kiln_UnaryOp<"round", "the nearest integer, ties to even">;

class Kiln_BinaryOp<string mnemonic, string desc>
    : Kiln_Op<mnemonic, [Pure, Kiln_Elementwise, InferTypeOpAdaptor]> {
  let summary = desc;
  let description = [{
    Operands broadcast numpy-style: shapes align at the right, and a
    dimension of size 1 stretches to the other operand's size.
    ```mlir
    %r = kiln.}] # mnemonic # [{ %a, %b : tensor<4x1xf32>, tensor<3xf32> -> tensor<4x3xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$lhs, Kiln_FloatTensor:$rhs,
                       OptionalAttr<Kiln_DeviceAttr>:$device);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`on` custom<Device>($device)^)? attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
}

def Kiln_AddOp : Kiln_BinaryOp<"add", "a + b">;
def Kiln_SubOp : Kiln_BinaryOp<"sub", "a - b">;
def Kiln_MulOp : Kiln_BinaryOp<"mul", "a * b">;
def Kiln_DivOp : Kiln_BinaryOp<"div", "a / b">;
def Kiln_MaxOp : Kiln_BinaryOp<"max", "the larger of a and b (NaN propagates)">;
def Kiln_MinOp : Kiln_BinaryOp<"min", "the smaller of a and b (NaN propagates)">;
def Kiln_PowOp : Kiln_BinaryOp<"pow", "a raised to b">;

def Kiln_CastOp : Kiln_Op<"cast", [Pure, Kiln_Elementwise, SameOperandsAndResultShape]> {
  let summary = "convert elements between f32, f16, i32 and i1";
  let description = [{
    Float to integer truncates toward zero; anything to i1 is "not zero";
    i1 to a number is 0 or 1.
    ```mlir
    %h = kiln.cast %x : tensor<4xf32> -> tensor<4xf16>
    ```
  }];
  let arguments = (ins Kiln_AnyTensor:$input, OptionalAttr<Kiln_DeviceAttr>:$device);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = [{
    $input (`on` custom<Device>($device)^)? attr-dict `:` type($input) `->` type($result)
  }];
}

def Kiln_CmpOp : Kiln_Op<"cmp", [Pure, Kiln_Elementwise, InferTypeOpAdaptor]> {
  let summary = "elementwise comparison with broadcasting";
  let description = [{
    ```mlir
    %m = kiln.cmp lt, %a, %b : tensor<4xf32>, tensor<4xf32> -> tensor<4xi1>
    ```
  }];
  let arguments = (ins Kiln_CmpPredicate:$predicate, Kiln_FloatTensor:$lhs,
                       Kiln_FloatTensor:$rhs, OptionalAttr<Kiln_DeviceAttr>:$device);
  let results = (outs Kiln_BoolTensor:$result);
  let assemblyFormat = [{
    $predicate `,` $lhs `,` $rhs (`on` custom<Device>($device)^)? attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
}

def Kiln_SelectOp : Kiln_Op<"select", [Pure, Kiln_Elementwise, InferTypeOpAdaptor]> {
  let summary = "cond ? a : b, elementwise with broadcasting";
  let arguments = (ins Kiln_BoolTensor:$cond, Kiln_FloatTensor:$lhs,
                       Kiln_FloatTensor:$rhs, OptionalAttr<Kiln_DeviceAttr>:$device);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $cond `,` $lhs `,` $rhs (`on` custom<Device>($device)^)? attr-dict `:` type($cond) `,` type($lhs) `,` type($rhs) `->` type($result)
  }];
}

//===----------------------------------------------------------------------===//
// Views: data movement folded into the indexing of the kernel that uses it
//===----------------------------------------------------------------------===//

class Kiln_ViewOp<string mnemonic, list<Trait> traits = []>
    : Kiln_Op<mnemonic, traits # [Pure, Kiln_View]>;

def Kiln_TransposeOp : Kiln_ViewOp<"transpose", [InferTypeOpAdaptor]> {
  let summary = "permute dimensions: result dim i is operand dim permutation[i]";
  let description = [{
    ```mlir
    %t = kiln.transpose %x [1, 0] : tensor<4x3xf32> -> tensor<3x4xf32>
    ```
  }];
  let arguments = (ins Kiln_AnyTensor:$input, DenseI64ArrayAttr:$permutation,
                       OptionalAttr<Kiln_DeviceAttr>:$device);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = [{
    $input $permutation (`on` custom<Device>($device)^)? attr-dict `:` type($input) `->` type($result)
  }];
}

def Kiln_ReshapeOp : Kiln_ViewOp<"reshape"> {
  let summary = "the same elements in row-major order under another shape";
  let arguments = (ins Kiln_AnyTensor:$input, OptionalAttr<Kiln_DeviceAttr>:$device);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = [{
    $input (`on` custom<Device>($device)^)? attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_BroadcastToOp : Kiln_ViewOp<"broadcast_to"> {
  let summary = "numpy broadcast to a larger shape";
  let arguments = (ins Kiln_AnyTensor:$input, OptionalAttr<Kiln_DeviceAttr>:$device);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = [{
    $input (`on` custom<Device>($device)^)? attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_SliceOp : Kiln_ViewOp<"slice"> {
  let summary = "every step-th element from start, per dimension";
  let description = [{
    Result element `i` along dimension `d` is operand element
    `starts[d] + i * steps[d]`; the result type gives the counts. Steps may
    be negative (a reversed view).
    ```mlir
    %s = kiln.slice %x starts [0, 1] steps [2, 1] : tensor<8x4xf32> -> tensor<4x3xf32>
    ```
  }];
  let arguments = (ins Kiln_AnyTensor:$input, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$steps, OptionalAttr<Kiln_DeviceAttr>:$device);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = [{
    $input `starts` $starts `steps` $steps (`on` custom<Device>($device)^)? attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_PadOp : Kiln_Op<"pad", [Pure, Kiln_GuardedView, InferTypeOpAdaptor]> {
  let summary = "surround with a constant: `low` / `high` elements per dimension";
  let description = [{
    ```mlir
    %p = kiln.pad %x low [1, 0] high [2, 3] value 0.0 : tensor<4x3xf32> -> tensor<7x6xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, DenseI64ArrayAttr:$low,
                       DenseI64ArrayAttr:$high, F64Attr:$value,
                       OptionalAttr<Kiln_DeviceAttr>:$device);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $input `low` $low `high` $high `value` $value (`on` custom<Device>($device)^)? attr-dict
    `:` type($input) `->` type($result)
  }];
}

def Kiln_GatherOp : Kiln_Op<"gather", [Pure, Kiln_GuardedView, InferTypeOpAdaptor]> {
  let summary = "select slices along an axis by index (index_select)";
  let description = [{
    Result element with coordinate `j` along `axis` is the input element at
    `indices[j]` there. Indices outside `[0, size)` are clamped into it.
    ```mlir
    %g = kiln.gather %x, %i axis 0 : tensor<5x3xf32>, tensor<4xi32> -> tensor<4x3xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, StaticShapeTensorOf<[I32]>:$indices,
                       I64Attr:$axis, OptionalAttr<Kiln_DeviceAttr>:$device);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $indices `axis` $axis (`on` custom<Device>($device)^)? attr-dict
    `:` type($input) `,` type($indices) `->` type($result)
  }];
}

def Kiln_ConcatOp : Kiln_Op<"concat", [Pure, Kiln_GuardedView, InferTypeOpAdaptor]> {
  let summary = "join tensors along one axis";
  let description = [{
    ```mlir
    %c = kiln.concat %a, %b axis 1 : (tensor<4x3xf32>, tensor<4x2xf32>) -> tensor<4x5xf32>
    ```
  }];
  let arguments = (ins Variadic<Kiln_FloatTensor>:$inputs, I64Attr:$axis,
                       OptionalAttr<Kiln_DeviceAttr>:$device);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $inputs `axis` $axis (`on` custom<Device>($device)^)? attr-dict `:` `(` type($inputs) `)` `->` type($result)
  }];
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

def Kiln_ReduceOp : Kiln_Op<"reduce", [Pure, Kiln_Reduction, InferTypeOpAdaptor]> {
  let summary = "sum, mean, max, min or product over a set of axes";
  let description = [{
    Reduces `axes` (sorted, distinct); with `keepdims` the reduced dimensions
    stay with size 1, otherwise they are dropped.
    ```mlir
    %s = kiln.reduce sum %x [1] keepdims : tensor<4x3xf32> -> tensor<4x1xf32>
    %m = kiln.reduce max %x [0, 1] : tensor<4x3xf32> -> tensor<f32>
    ```
  }];
  let arguments = (ins Kiln_ReduceKind:$kind, Kiln_FloatTensor:$input,
                       DenseI64ArrayAttr:$axes, UnitAttr:$keepdims,
                       OptionalAttr<Kiln_DeviceAttr>:$device);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $kind $input $axes (`keepdims` $keepdims^)? (`on` custom<Device>($device)^)? attr-dict `:` type($input) `->` type($result)
  }];
  let extraClassDeclaration = [{
    /// Elements combined into each result element.
    int64_t getReducedCount();
  }];
}

def Kiln_MatmulOp : Kiln_Op<"matmul", [Pure, Kiln_Contraction, InferTypeOpAdaptor]> {
  let summary = "(batched) matrix product with numpy broadcasting of batch dims";
  let description = [{
    `[..., M, K] x [..., K, N] -> [..., M, N]`; leading (batch) dimensions
    broadcast. Transposed operands are `kiln.transpose` views, which fusion
    folds into the product's indexing.
    ```mlir
    %c = kiln.matmul %a, %b : tensor<2x4x3xf32>, tensor<3x5xf32> -> tensor<2x4x5xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$lhs, Kiln_FloatTensor:$rhs,
                       OptionalAttr<Kiln_DeviceAttr>:$device);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`on` custom<Device>($device)^)? attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
}

def Kiln_AttentionOp : Kiln_Op<"attention", [Pure]> {
  let summary = "scaled dot-product attention, softmax(q k^T * scale + mask) v";
  let description = [{
    `q: [..., L, E]`, `k: [..., S, E]`, `v: [..., S, Ev]` -> `[..., L, Ev]`;
    the batch dimensions (all but the last two) broadcast. The optional
    mask broadcasts to `[..., L, S]`: a float mask is added to the scores,
    a boolean one keeps the scores where it is true (-inf elsewhere).
    `causal` keeps column j of row i where j <= i (top-left aligned, as
    PyTorch). Its own kernel on the CPU, with an online softmax over blocks
    of keys: no L x S score matrix is ever written. Other devices get the
    decomposition (`kiln-decompose-attention`).
    ```mlir
    %o = kiln.attention %q, %k, %v scale 0.125 causal
        : tensor<8x128x64xf32>, tensor<8x128x64xf32>, tensor<8x128x64xf32> -> tensor<8x128x64xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$query, Kiln_FloatTensor:$key, Kiln_FloatTensor:$value,
                       Optional<Kiln_AnyTensor>:$mask, F64Attr:$scale, UnitAttr:$causal,
                       OptionalAttr<Kiln_DeviceAttr>:$device);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`mask` $mask^)? `scale` $scale (`causal` $causal^)?
    (`on` custom<Device>($device)^)? attr-dict `:` type($query) `,` type($key) `,` type($value)
    (`,` type($mask)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_ArgReduceOp : Kiln_Op<"arg_reduce", [Pure, Kiln_Reduction, InferTypeOpAdaptor]> {
  let summary = "index of the largest (max) or smallest (min) element along axes";
  let description = [{
    The index counts over the reduced axes in row-major order (over one axis,
    the position along it); ties give the first; NaN counts as the largest
    and the smallest (as PyTorch's argmax/argmin).
    ```mlir
    %i = kiln.arg_reduce max %x [1] : tensor<4x3xf32> -> tensor<4xi32>
    ```
  }];
  let arguments = (ins Kiln_ReduceKind:$kind, Kiln_FloatTensor:$input,
                       DenseI64ArrayAttr:$axes, UnitAttr:$keepdims,
                       OptionalAttr<Kiln_DeviceAttr>:$device);
  let results = (outs StaticShapeTensorOf<[I32]>:$result);
  let assemblyFormat = [{
    $kind $input $axes (`keepdims` $keepdims^)? (`on` custom<Device>($device)^)? attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_Pool2dOp : Kiln_Op<"pool2d", [Pure, Kiln_Reduction, InferTypeOpAdaptor]> {
  let summary = "max or average pooling over windows of an NCHW tensor";
  let description = [{
    `kind` is `max` or `mean` (average, padding counted as zeros, as
    PyTorch's default `count_include_pad`). Padding reads as -inf for max.
    With `ceil_mode` the result has one more window where a partial one
    starts inside the input or its leading padding; the part of such a
    window past the padding reads as padding too, and a mean still divides
    by the whole window (the Tensor API rescales it to PyTorch's divisor).
    ```mlir
    %p = kiln.pool2d max %x kernel [2, 2] strides [2, 2] padding [0, 0]
        : tensor<1x4x8x8xf32> -> tensor<1x4x4x4xf32>
    ```
  }];
  let arguments = (ins Kiln_ReduceKind:$kind, Kiln_FloatTensor:$input,
                       DenseI64ArrayAttr:$kernel, DenseI64ArrayAttr:$strides,
                       DenseI64ArrayAttr:$padding, UnitAttr:$ceil_mode,
                       OptionalAttr<Kiln_DeviceAttr>:$device);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $kind $input `kernel` $kernel `strides` $strides `padding` $padding
    (`ceil_mode` $ceil_mode^)? (`on` custom<Device>($device)^)? attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_Conv2dOp : Kiln_Op<"conv2d", [Pure, Kiln_Contraction, InferTypeOpAdaptor]> {
  let summary = "2-D convolution, NCHW, with stride, padding, dilation and groups";
  let description = [{
    `x: [N, C, H, W]`, `w: [Cout, C / groups, Kh, Kw]` ->
    `[N, Cout, Ho, Wo]` with `Ho = (H + 2 ph - dh (Kh - 1) - 1) / sh + 1`.
    Zero padding. Depthwise is `groups = C`.
    ```mlir
    %y = kiln.conv2d %x, %w strides [1, 1] padding [1, 1] dilation [1, 1] groups 1
        : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x8x8xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$filter,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilation, I64Attr:$groups,
                       OptionalAttr<Kiln_DeviceAttr>:$device);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $filter `strides` $strides `padding` $padding `dilation` $dilation `groups` $groups
    (`on` custom<Device>($device)^)? attr-dict `:` type($input) `,` type($filter) `->` type($result)
  }];
}

//===----------------------------------------------------------------------===//
// Fused kernels
//===----------------------------------------------------------------------===//

def Kiln_KernelOp : Kiln_Op<"kernel", [IsolatedFromAbove, SingleBlock,
    RecursiveMemoryEffects]> {
  let summary = "a group of ops that becomes one device kernel";
  let description = [{
    Made by fusion: the body computes every result for each element of the
    iteration space (the shape of the results), reading the kernel operands
    through the block arguments. Smaller operands broadcast.
    ```mlir
    %r = kiln.kernel on "vulkan:0" (%x, %b) : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32> {
    ^bb0(%a: tensor<4x3xf32>, %c: tensor<3xf32>):
      %0 = kiln.add %a, %c : tensor<4x3xf32>, tensor<3xf32> -> tensor<4x3xf32>
      %1 = kiln.tanh %0 : tensor<4x3xf32>
      kiln.yield %1 : tensor<4x3xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<Kiln_AnyTensor>:$inputs,
                       OptionalAttr<Kiln_DeviceAttr>:$device,
                       OptionalAttr<DictionaryAttr>:$config);
  let results = (outs Variadic<Kiln_AnyTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  // `config` (set by kiln-materialize-configs): the form the kernel is
  // built in and its knobs, e.g. {form = "loop", workgroup_size = 256,
  // vector_width = 4}; include/kiln/Codegen/KernelConfigAttr.h lists them.
  let assemblyFormat = [{
    (`on` custom<Device>($device)^)? (`config` $config^)? `(` $inputs `)` attr-dict `:` functional-type($inputs, $results) $body
  }];
  let hasVerifier = 1;
  let skipDefaultBuilders = 1;
  let builders = [OpBuilder<(ins "::mlir::TypeRange":$resultTypes,
                                 "::mlir::ValueRange":$inputs,
                                 "DeviceAttr":$device)>];
}

def Kiln_YieldOp : Op<Kiln_Dialect, "yield", [Pure, Terminator,
                                               HasParent<"KernelOp">, ReturnLike]> {
  let summary = "the results of a kernel";
  let arguments = (ins Variadic<Kiln_AnyTensor>:$values);
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
}

#endif // KILN_OPS_TD
