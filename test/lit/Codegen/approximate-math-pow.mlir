// RUN: kiln-opt %s --kiln-approximate-math | FileCheck %s --check-prefix=GPU
// RUN: kiln-opt %s --kiln-approximate-math="all=true" | FileCheck %s --check-prefix=CPU
// pow on a graphics device: GLSL's Pow of |x| and C's special cases around
// it (ElementwiseOnEveryDevice.PowAtSpecialValuesAsInC runs them); on the
// CPU libm's powf is left alone. f16 is widened to f32 first.

// GPU-LABEL: func.func @pow_f32
// GPU: %[[A:.*]] = math.absf %arg0
// GPU: math.powf %[[A]], %arg1
// GPU: math.floor %arg1
// GPU: arith.bitcast %arg0 : f32 to i32
// GPU: arith.cmpf uno, %arg0, %arg1
// GPU-NOT: math.powf %arg0
// CPU-LABEL: func.func @pow_f32
// CPU-NEXT: math.powf %arg0, %arg1 : f32
func.func @pow_f32(%x: f32, %y: f32) -> f32 {
  %0 = math.powf %x, %y : f32
  return %0 : f32
}

// GPU-LABEL: func.func @pow_f16_vector
// GPU: arith.extf %arg0 : vector<4xf16> to vector<4xf32>
// GPU: math.absf {{.*}} : vector<4xf32>
// GPU: arith.bitcast {{.*}} : vector<4xf32> to vector<4xi32>
// GPU: arith.truncf {{.*}} : vector<4xf32> to vector<4xf16>
func.func @pow_f16_vector(%x: vector<4xf16>, %y: vector<4xf16>) -> vector<4xf16> {
  %0 = math.powf %x, %y : vector<4xf16>
  return %0 : vector<4xf16>
}
