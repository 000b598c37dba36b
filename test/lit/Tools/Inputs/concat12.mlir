// A concat of 12 parts (kiln-compile-profiles.mlir).
func.func @graph() -> tensor<24xf32> {
  %p0 = kiln.input 0 : tensor<2xf32>
  %p1 = kiln.input 1 : tensor<2xf32>
  %p2 = kiln.input 2 : tensor<2xf32>
  %p3 = kiln.input 3 : tensor<2xf32>
  %p4 = kiln.input 4 : tensor<2xf32>
  %p5 = kiln.input 5 : tensor<2xf32>
  %p6 = kiln.input 6 : tensor<2xf32>
  %p7 = kiln.input 7 : tensor<2xf32>
  %p8 = kiln.input 8 : tensor<2xf32>
  %p9 = kiln.input 9 : tensor<2xf32>
  %p10 = kiln.input 10 : tensor<2xf32>
  %p11 = kiln.input 11 : tensor<2xf32>
  %c = kiln.concat %p0, %p1, %p2, %p3, %p4, %p5, %p6, %p7, %p8, %p9, %p10, %p11 axis 0 : (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<24xf32>
  return %c : tensor<24xf32>
}
