func.func @graph() -> tensor<4x32xf32> {
  %x = kiln.input 0 : tensor<4x16xf32>
  %w = kiln.input 1 : tensor<16x32xf32>
  %h = kiln.matmul %x, %w : tensor<4x16xf32>, tensor<16x32xf32> -> tensor<4x32xf32>
  %r = kiln.relu %h : tensor<4x32xf32>
  %m = kiln.reduce max %r [1] keepdims : tensor<4x32xf32> -> tensor<4x1xf32>
  %s = kiln.sub %r, %m : tensor<4x32xf32>, tensor<4x1xf32> -> tensor<4x32xf32>
  %e = kiln.exp %s : tensor<4x32xf32>
  %z = kiln.reduce sum %e [1] keepdims : tensor<4x32xf32> -> tensor<4x1xf32>
  %y = kiln.div %e, %z : tensor<4x32xf32>, tensor<4x1xf32> -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}
