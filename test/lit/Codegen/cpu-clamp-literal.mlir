// RUN: kiln-opt %s --kiln-kernel-to-linalg=coalesce=true --kiln-linalg-to-llvm | FileCheck %s
// (The elementwise loop is scalar here; LLVM vectorizes it.)
// ReLU6 with its bounds as literals in the kernel (a CPU program compiled
// ahead of time copies scalar constants in: kInlineScalarAttr). Against a
// constant that is not NaN the maximum and minimum are one ordered compare
// and select with the constant first (x86 maxps / minps: x when x is NaN):
// no NaN check of the bound. max against +0 keeps the unordered compare
// (IEEE orders +0 above -0; maxps would keep -0).

func.func @relu6(%x: tensor<4096xf32>) -> tensor<4096xf32> {
  %0 = kiln.kernel on "cpu:0" (%x) : (tensor<4096xf32>) -> tensor<4096xf32> {
  ^bb0(%a: tensor<4096xf32>):
    %zero = kiln.constant dense<0.000000e+00> : tensor<f32>
    %six = kiln.constant dense<6.000000e+00> : tensor<f32>
    %m = kiln.max %a, %zero : tensor<4096xf32>, tensor<f32> -> tensor<4096xf32>
    %n = kiln.min %m, %six : tensor<4096xf32>, tensor<f32> -> tensor<4096xf32>
    kiln.yield %n : tensor<4096xf32>
  }
  return %0 : tensor<4096xf32>
}
// CHECK-LABEL: llvm.func @relu6_kernel0
// CHECK-NOT: llvm.fcmp "uno"
// CHECK: llvm.fcmp "ugt" %{{.*}}, %{{.*}} : f32
// CHECK: %[[LT:.*]] = llvm.fcmp "olt" %[[SIX:.*]], %{{.*}} : f32
// CHECK-NEXT: llvm.select %[[LT]], %[[SIX]], %{{.*}} : i1, f32
// CHECK-NOT: llvm.fcmp "uno"

// A bound of -6 for the maximum takes the ordered form too; a minimum
// against -0 keeps the unordered one.
func.func @bounds(%x: tensor<4096xf32>) -> tensor<4096xf32> {
  %0 = kiln.kernel on "cpu:0" (%x) : (tensor<4096xf32>) -> tensor<4096xf32> {
  ^bb0(%a: tensor<4096xf32>):
    %lo = kiln.constant dense<-6.000000e+00> : tensor<f32>
    %nz = kiln.constant dense<-0.000000e+00> : tensor<f32>
    %m = kiln.max %a, %lo : tensor<4096xf32>, tensor<f32> -> tensor<4096xf32>
    %n = kiln.min %m, %nz : tensor<4096xf32>, tensor<f32> -> tensor<4096xf32>
    kiln.yield %n : tensor<4096xf32>
  }
  return %0 : tensor<4096xf32>
}
// CHECK-LABEL: llvm.func @bounds_kernel1
// CHECK: llvm.fcmp "ogt" %{{.*}}, %{{.*}} : f32
// CHECK: llvm.fcmp "ult" %{{.*}}, %{{.*}} : f32
