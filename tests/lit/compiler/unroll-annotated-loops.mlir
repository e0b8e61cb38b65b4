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

// -----

// pejit.unroll_factor = N: N copies of the body per trip; a dynamic trip
// count keeps a remainder loop for the last (n mod N) trips.
// CHECK-LABEL: func.func @by_factor
// CHECK: scf.for
// CHECK-COUNT-4: memref.store
// CHECK: }
// CHECK-NOT: pejit.unroll_factor
// CHECK: scf.for
// CHECK-COUNT-1: memref.store
// CHECK: return
func.func @by_factor(%m: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = arith.constant 1.0 : f32
  scf.for %i = %c0 to %n step %c1 {
    memref.store %x, %m[%i] : memref<?xf32>
  } {pejit.unroll_factor = 4 : i64}
  return
}

// -----

// A constant trip count that the factor divides: one loop, no remainder.
// CHECK-LABEL: func.func @by_factor_exact
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %[[STEP:.*]] {
// CHECK-COUNT-2: memref.store
// CHECK-NOT: scf.for
// CHECK: return
func.func @by_factor_exact(%m: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %x = arith.constant 1.0 : f32
  scf.for %i = %c0 to %c8 step %c1 {
    memref.store %x, %m[%i] : memref<8xf32>
  } {pejit.unroll_factor = 2 : i64}
  return
}

// -----

func.func @bad_factor(%m: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %x = arith.constant 1.0 : f32
  // expected-error @+1 {{pejit.unroll_factor must be a positive integer}}
  scf.for %i = %c0 to %c8 step %c1 {
    memref.store %x, %m[%i] : memref<8xf32>
  } {pejit.unroll_factor = 0 : i64}
  return
}

// -----

// Inner loops first whichever way each is marked: the fully unrolled inner
// loop is straight-line code in both copies of the outer loop's body and in
// its remainder loop.
// CHECK-LABEL: func.func @mixed_nest
// CHECK: scf.for
// CHECK-COUNT-6: memref.store
// CHECK: }
// CHECK: scf.for
// CHECK-COUNT-3: memref.store
// CHECK-NOT: scf.for
// CHECK: return
func.func @mixed_nest(%m: memref<?x3xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %x = arith.constant 1.0 : f32
  scf.for %i = %c0 to %n step %c1 {
    scf.for %j = %c0 to %c3 step %c1 {
      memref.store %x, %m[%i, %j] : memref<?x3xf32>
    } {pejit.unroll}
  } {pejit.unroll_factor = 2 : i64}
  return
}
