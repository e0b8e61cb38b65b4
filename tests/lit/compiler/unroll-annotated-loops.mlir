// pejit-unroll-annotated-loops: loops marked pejit.unroll are unrolled
// completely (inner first), so register arrays get constant indices.
// RUN: pejit-opt %s --split-input-file --pejit-unroll-annotated-loops --canonicalize --verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @nested
// CHECK-NOT: scf.for
// CHECK-COUNT-6: memref.store
// CHECK: return
func.func @nested(%m: memref<2x3xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %x = arith.constant 1.0 : f32
  scf.for %i = %c0 to %c2 step %c1 {
    scf.for %j = %c0 to %c3 step %c1 {
      memref.store %x, %m[%i, %j] : memref<2x3xf32>
    } {pejit.unroll}
  } {pejit.unroll}
  return
}

// -----

// Unmarked loops stay.
// CHECK-LABEL: func.func @unmarked
// CHECK: scf.for
func.func @unmarked(%m: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %x = arith.constant 1.0 : f32
  scf.for %i = %c0 to %c4 step %c1 {
    memref.store %x, %m[%i] : memref<4xf32>
  }
  return
}

// -----

func.func @dynamic(%m: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = arith.constant 1.0 : f32
  // expected-error @+1 {{loop marked pejit.unroll has no constant trip count}}
  scf.for %i = %c0 to %n step %c1 {
    memref.store %x, %m[%i] : memref<?xf32>
  } {pejit.unroll}
  return
}
