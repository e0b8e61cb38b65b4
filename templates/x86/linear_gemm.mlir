// The matmul of the x86 linear attention template
// (templates/x86/linear_attention.mlir), put with its blocks in place of
// its `// @pejit-blocks` line: the types are the ones that file defines.
//
// C[0:M, 0:N] = (acc ? C : 0) + A[0:M, 0:K] . B[0:K, 0:N], M % 2 == 0,
// N % 8 == 0: row blocks of 6 (12 accumulators: the FMA latency of two
// pipes hidden with room to spare; 6 broadcasts of A and 2 loads of B per 12
// FMAs), then one of 4 and one of 2 for M % 6. Each block walks its row's
// columns 16 at a time (rows outer: C's rows are read and written in
// order) and unrolls K by 4.
func.func private @gemm(%A: !MAT, %B: !MAT, %C: !MAT, %M: index, %N: index, %K: index,
                        %acc: i1) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c6 = arith.constant 6 : index
  %rest = arith.remui %M, %c6 : index
  %M6 = arith.subi %M, %rest : index
  scf.for %r0 = %c0 to %M6 step %c6 {
    func.call @gemm_rows6(%A, %B, %C, %r0, %N, %K, %acc)
        : (!MAT, !MAT, !MAT, index, index, index, i1) -> ()
  }
  %has4 = arith.cmpi uge, %rest, %c4 : index
  scf.if %has4 {
    func.call @gemm_rows4(%A, %B, %C, %M6, %N, %K, %acc)
        : (!MAT, !MAT, !MAT, index, index, index, i1) -> ()
  }
  %rest2 = arith.remui %rest, %c4 : index
  %has2 = arith.cmpi eq, %rest2, %c2 : index
  scf.if %has2 {
    %r2 = arith.subi %M, %c2 : index
    func.call @gemm_rows2(%A, %B, %C, %r2, %N, %K, %acc)
        : (!MAT, !MAT, !MAT, index, index, index, i1) -> ()
  }
  return
}

// Rows [r0, r0 + 6) of C: 6 x 16 blocks (12 accumulators), then a
// 6 x 8 block where N % 16 == 8.
func.func private @gemm_rows6(%A: !MAT, %B: !MAT, %C: !MAT, %r0: index, %N: index, %K: index,
                             %acc: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  %zv = arith.constant dense<0.0> : !V8
  %n_rest = arith.remui %N, %c16 : index
  %N16 = arith.subi %N, %n_rest : index
  scf.for %e0 = %c0 to %N16 step %c16 {
    %r1 = arith.addi %r0, %c1 : index
    %r2 = arith.addi %r0, %c2 : index
    %r3 = arith.addi %r0, %c3 : index
    %r4 = arith.addi %r0, %c4 : index
    %r5 = arith.addi %r0, %c5 : index
    %e1 = arith.addi %e0, %c8 : index
    %init:12 = scf.if %acc -> (!V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8) {
      %x00 = vector.load %C[%r0, %e0] : !MAT, !V8
      %x01 = vector.load %C[%r0, %e1] : !MAT, !V8
      %x10 = vector.load %C[%r1, %e0] : !MAT, !V8
      %x11 = vector.load %C[%r1, %e1] : !MAT, !V8
      %x20 = vector.load %C[%r2, %e0] : !MAT, !V8
      %x21 = vector.load %C[%r2, %e1] : !MAT, !V8
      %x30 = vector.load %C[%r3, %e0] : !MAT, !V8
      %x31 = vector.load %C[%r3, %e1] : !MAT, !V8
      %x40 = vector.load %C[%r4, %e0] : !MAT, !V8
      %x41 = vector.load %C[%r4, %e1] : !MAT, !V8
      %x50 = vector.load %C[%r5, %e0] : !MAT, !V8
      %x51 = vector.load %C[%r5, %e1] : !MAT, !V8
      scf.yield %x00, %x01, %x10, %x11, %x20, %x21, %x30, %x31, %x40, %x41, %x50, %x51
          : !V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8
    } else {
      scf.yield %zv, %zv, %zv, %zv, %zv, %zv, %zv, %zv, %zv, %zv, %zv, %zv
          : !V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8
    }
    %sum:12 = scf.for %k = %c0 to %K step %c1
        iter_args(%a00 = %init#0, %a01 = %init#1, %a10 = %init#2, %a11 = %init#3,
                  %a20 = %init#4, %a21 = %init#5, %a30 = %init#6, %a31 = %init#7,
                  %a40 = %init#8, %a41 = %init#9, %a50 = %init#10, %a51 = %init#11)
        -> (!V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8) {
      %b0 = vector.load %B[%k, %e0] : !MAT, !V8
      %b1 = vector.load %B[%k, %e1] : !MAT, !V8
      %s0 = memref.load %A[%r0, %k] : !MAT
      %v0 = vector.broadcast %s0 : f32 to !V8
      %s1 = memref.load %A[%r1, %k] : !MAT
      %v1 = vector.broadcast %s1 : f32 to !V8
      %s2 = memref.load %A[%r2, %k] : !MAT
      %v2 = vector.broadcast %s2 : f32 to !V8
      %s3 = memref.load %A[%r3, %k] : !MAT
      %v3 = vector.broadcast %s3 : f32 to !V8
      %s4 = memref.load %A[%r4, %k] : !MAT
      %v4 = vector.broadcast %s4 : f32 to !V8
      %s5 = memref.load %A[%r5, %k] : !MAT
      %v5 = vector.broadcast %s5 : f32 to !V8
      %n00 = vector.fma %v0, %b0, %a00 : !V8
      %n01 = vector.fma %v0, %b1, %a01 : !V8
      %n10 = vector.fma %v1, %b0, %a10 : !V8
      %n11 = vector.fma %v1, %b1, %a11 : !V8
      %n20 = vector.fma %v2, %b0, %a20 : !V8
      %n21 = vector.fma %v2, %b1, %a21 : !V8
      %n30 = vector.fma %v3, %b0, %a30 : !V8
      %n31 = vector.fma %v3, %b1, %a31 : !V8
      %n40 = vector.fma %v4, %b0, %a40 : !V8
      %n41 = vector.fma %v4, %b1, %a41 : !V8
      %n50 = vector.fma %v5, %b0, %a50 : !V8
      %n51 = vector.fma %v5, %b1, %a51 : !V8
      scf.yield %n00, %n01, %n10, %n11, %n20, %n21, %n30, %n31, %n40, %n41, %n50, %n51
          : !V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8
    } {pejit.unroll_factor = 4 : i64}
    vector.store %sum#0, %C[%r0, %e0] : !MAT, !V8
    vector.store %sum#1, %C[%r0, %e1] : !MAT, !V8
    vector.store %sum#2, %C[%r1, %e0] : !MAT, !V8
    vector.store %sum#3, %C[%r1, %e1] : !MAT, !V8
    vector.store %sum#4, %C[%r2, %e0] : !MAT, !V8
    vector.store %sum#5, %C[%r2, %e1] : !MAT, !V8
    vector.store %sum#6, %C[%r3, %e0] : !MAT, !V8
    vector.store %sum#7, %C[%r3, %e1] : !MAT, !V8
    vector.store %sum#8, %C[%r4, %e0] : !MAT, !V8
    vector.store %sum#9, %C[%r4, %e1] : !MAT, !V8
    vector.store %sum#10, %C[%r5, %e0] : !MAT, !V8
    vector.store %sum#11, %C[%r5, %e1] : !MAT, !V8
  }
  scf.for %e0 = %N16 to %N step %c8 {
    %r1 = arith.addi %r0, %c1 : index
    %r2 = arith.addi %r0, %c2 : index
    %r3 = arith.addi %r0, %c3 : index
    %r4 = arith.addi %r0, %c4 : index
    %r5 = arith.addi %r0, %c5 : index
    %init:6 = scf.if %acc -> (!V8, !V8, !V8, !V8, !V8, !V8) {
      %x00 = vector.load %C[%r0, %e0] : !MAT, !V8
      %x10 = vector.load %C[%r1, %e0] : !MAT, !V8
      %x20 = vector.load %C[%r2, %e0] : !MAT, !V8
      %x30 = vector.load %C[%r3, %e0] : !MAT, !V8
      %x40 = vector.load %C[%r4, %e0] : !MAT, !V8
      %x50 = vector.load %C[%r5, %e0] : !MAT, !V8
      scf.yield %x00, %x10, %x20, %x30, %x40, %x50
          : !V8, !V8, !V8, !V8, !V8, !V8
    } else {
      scf.yield %zv, %zv, %zv, %zv, %zv, %zv
          : !V8, !V8, !V8, !V8, !V8, !V8
    }
    %sum:6 = scf.for %k = %c0 to %K step %c1
        iter_args(%a00 = %init#0, %a10 = %init#1, %a20 = %init#2, %a30 = %init#3,
                  %a40 = %init#4, %a50 = %init#5)
        -> (!V8, !V8, !V8, !V8, !V8, !V8) {
      %b0 = vector.load %B[%k, %e0] : !MAT, !V8
      %s0 = memref.load %A[%r0, %k] : !MAT
      %v0 = vector.broadcast %s0 : f32 to !V8
      %s1 = memref.load %A[%r1, %k] : !MAT
      %v1 = vector.broadcast %s1 : f32 to !V8
      %s2 = memref.load %A[%r2, %k] : !MAT
      %v2 = vector.broadcast %s2 : f32 to !V8
      %s3 = memref.load %A[%r3, %k] : !MAT
      %v3 = vector.broadcast %s3 : f32 to !V8
      %s4 = memref.load %A[%r4, %k] : !MAT
      %v4 = vector.broadcast %s4 : f32 to !V8
      %s5 = memref.load %A[%r5, %k] : !MAT
      %v5 = vector.broadcast %s5 : f32 to !V8
      %n00 = vector.fma %v0, %b0, %a00 : !V8
      %n10 = vector.fma %v1, %b0, %a10 : !V8
      %n20 = vector.fma %v2, %b0, %a20 : !V8
      %n30 = vector.fma %v3, %b0, %a30 : !V8
      %n40 = vector.fma %v4, %b0, %a40 : !V8
      %n50 = vector.fma %v5, %b0, %a50 : !V8
      scf.yield %n00, %n10, %n20, %n30, %n40, %n50
          : !V8, !V8, !V8, !V8, !V8, !V8
    } {pejit.unroll_factor = 4 : i64}
    vector.store %sum#0, %C[%r0, %e0] : !MAT, !V8
    vector.store %sum#1, %C[%r1, %e0] : !MAT, !V8
    vector.store %sum#2, %C[%r2, %e0] : !MAT, !V8
    vector.store %sum#3, %C[%r3, %e0] : !MAT, !V8
    vector.store %sum#4, %C[%r4, %e0] : !MAT, !V8
    vector.store %sum#5, %C[%r5, %e0] : !MAT, !V8
  }
  return
}

// Rows [r0, r0 + 4) of C: 4 x 16 blocks (8 accumulators), then a
// 4 x 8 block where N % 16 == 8.
func.func private @gemm_rows4(%A: !MAT, %B: !MAT, %C: !MAT, %r0: index, %N: index, %K: index,
                             %acc: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  %zv = arith.constant dense<0.0> : !V8
  %n_rest = arith.remui %N, %c16 : index
  %N16 = arith.subi %N, %n_rest : index
  scf.for %e0 = %c0 to %N16 step %c16 {
    %r1 = arith.addi %r0, %c1 : index
    %r2 = arith.addi %r0, %c2 : index
    %r3 = arith.addi %r0, %c3 : index
    %e1 = arith.addi %e0, %c8 : index
    %init:8 = scf.if %acc -> (!V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8) {
      %x00 = vector.load %C[%r0, %e0] : !MAT, !V8
      %x01 = vector.load %C[%r0, %e1] : !MAT, !V8
      %x10 = vector.load %C[%r1, %e0] : !MAT, !V8
      %x11 = vector.load %C[%r1, %e1] : !MAT, !V8
      %x20 = vector.load %C[%r2, %e0] : !MAT, !V8
      %x21 = vector.load %C[%r2, %e1] : !MAT, !V8
      %x30 = vector.load %C[%r3, %e0] : !MAT, !V8
      %x31 = vector.load %C[%r3, %e1] : !MAT, !V8
      scf.yield %x00, %x01, %x10, %x11, %x20, %x21, %x30, %x31
          : !V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8
    } else {
      scf.yield %zv, %zv, %zv, %zv, %zv, %zv, %zv, %zv
          : !V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8
    }
    %sum:8 = scf.for %k = %c0 to %K step %c1
        iter_args(%a00 = %init#0, %a01 = %init#1, %a10 = %init#2, %a11 = %init#3,
                  %a20 = %init#4, %a21 = %init#5, %a30 = %init#6, %a31 = %init#7)
        -> (!V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8) {
      %b0 = vector.load %B[%k, %e0] : !MAT, !V8
      %b1 = vector.load %B[%k, %e1] : !MAT, !V8
      %s0 = memref.load %A[%r0, %k] : !MAT
      %v0 = vector.broadcast %s0 : f32 to !V8
      %s1 = memref.load %A[%r1, %k] : !MAT
      %v1 = vector.broadcast %s1 : f32 to !V8
      %s2 = memref.load %A[%r2, %k] : !MAT
      %v2 = vector.broadcast %s2 : f32 to !V8
      %s3 = memref.load %A[%r3, %k] : !MAT
      %v3 = vector.broadcast %s3 : f32 to !V8
      %n00 = vector.fma %v0, %b0, %a00 : !V8
      %n01 = vector.fma %v0, %b1, %a01 : !V8
      %n10 = vector.fma %v1, %b0, %a10 : !V8
      %n11 = vector.fma %v1, %b1, %a11 : !V8
      %n20 = vector.fma %v2, %b0, %a20 : !V8
      %n21 = vector.fma %v2, %b1, %a21 : !V8
      %n30 = vector.fma %v3, %b0, %a30 : !V8
      %n31 = vector.fma %v3, %b1, %a31 : !V8
      scf.yield %n00, %n01, %n10, %n11, %n20, %n21, %n30, %n31
          : !V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8
    } {pejit.unroll_factor = 4 : i64}
    vector.store %sum#0, %C[%r0, %e0] : !MAT, !V8
    vector.store %sum#1, %C[%r0, %e1] : !MAT, !V8
    vector.store %sum#2, %C[%r1, %e0] : !MAT, !V8
    vector.store %sum#3, %C[%r1, %e1] : !MAT, !V8
    vector.store %sum#4, %C[%r2, %e0] : !MAT, !V8
    vector.store %sum#5, %C[%r2, %e1] : !MAT, !V8
    vector.store %sum#6, %C[%r3, %e0] : !MAT, !V8
    vector.store %sum#7, %C[%r3, %e1] : !MAT, !V8
  }
  scf.for %e0 = %N16 to %N step %c8 {
    %r1 = arith.addi %r0, %c1 : index
    %r2 = arith.addi %r0, %c2 : index
    %r3 = arith.addi %r0, %c3 : index
    %init:4 = scf.if %acc -> (!V8, !V8, !V8, !V8) {
      %x00 = vector.load %C[%r0, %e0] : !MAT, !V8
      %x10 = vector.load %C[%r1, %e0] : !MAT, !V8
      %x20 = vector.load %C[%r2, %e0] : !MAT, !V8
      %x30 = vector.load %C[%r3, %e0] : !MAT, !V8
      scf.yield %x00, %x10, %x20, %x30
          : !V8, !V8, !V8, !V8
    } else {
      scf.yield %zv, %zv, %zv, %zv
          : !V8, !V8, !V8, !V8
    }
    %sum:4 = scf.for %k = %c0 to %K step %c1
        iter_args(%a00 = %init#0, %a10 = %init#1, %a20 = %init#2, %a30 = %init#3)
        -> (!V8, !V8, !V8, !V8) {
      %b0 = vector.load %B[%k, %e0] : !MAT, !V8
      %s0 = memref.load %A[%r0, %k] : !MAT
      %v0 = vector.broadcast %s0 : f32 to !V8
      %s1 = memref.load %A[%r1, %k] : !MAT
      %v1 = vector.broadcast %s1 : f32 to !V8
      %s2 = memref.load %A[%r2, %k] : !MAT
      %v2 = vector.broadcast %s2 : f32 to !V8
      %s3 = memref.load %A[%r3, %k] : !MAT
      %v3 = vector.broadcast %s3 : f32 to !V8
      %n00 = vector.fma %v0, %b0, %a00 : !V8
      %n10 = vector.fma %v1, %b0, %a10 : !V8
      %n20 = vector.fma %v2, %b0, %a20 : !V8
      %n30 = vector.fma %v3, %b0, %a30 : !V8
      scf.yield %n00, %n10, %n20, %n30
          : !V8, !V8, !V8, !V8
    } {pejit.unroll_factor = 4 : i64}
    vector.store %sum#0, %C[%r0, %e0] : !MAT, !V8
    vector.store %sum#1, %C[%r1, %e0] : !MAT, !V8
    vector.store %sum#2, %C[%r2, %e0] : !MAT, !V8
    vector.store %sum#3, %C[%r3, %e0] : !MAT, !V8
  }
  return
}

// Rows [r0, r0 + 2) of C: 2 x 16 blocks (4 accumulators), then a
// 2 x 8 block where N % 16 == 8.
func.func private @gemm_rows2(%A: !MAT, %B: !MAT, %C: !MAT, %r0: index, %N: index, %K: index,
                             %acc: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  %zv = arith.constant dense<0.0> : !V8
  %n_rest = arith.remui %N, %c16 : index
  %N16 = arith.subi %N, %n_rest : index
  scf.for %e0 = %c0 to %N16 step %c16 {
    %r1 = arith.addi %r0, %c1 : index
    %e1 = arith.addi %e0, %c8 : index
    %init:4 = scf.if %acc -> (!V8, !V8, !V8, !V8) {
      %x00 = vector.load %C[%r0, %e0] : !MAT, !V8
      %x01 = vector.load %C[%r0, %e1] : !MAT, !V8
      %x10 = vector.load %C[%r1, %e0] : !MAT, !V8
      %x11 = vector.load %C[%r1, %e1] : !MAT, !V8
      scf.yield %x00, %x01, %x10, %x11
          : !V8, !V8, !V8, !V8
    } else {
      scf.yield %zv, %zv, %zv, %zv
          : !V8, !V8, !V8, !V8
    }
    %sum:4 = scf.for %k = %c0 to %K step %c1
        iter_args(%a00 = %init#0, %a01 = %init#1, %a10 = %init#2, %a11 = %init#3)
        -> (!V8, !V8, !V8, !V8) {
      %b0 = vector.load %B[%k, %e0] : !MAT, !V8
      %b1 = vector.load %B[%k, %e1] : !MAT, !V8
      %s0 = memref.load %A[%r0, %k] : !MAT
      %v0 = vector.broadcast %s0 : f32 to !V8
      %s1 = memref.load %A[%r1, %k] : !MAT
      %v1 = vector.broadcast %s1 : f32 to !V8
      %n00 = vector.fma %v0, %b0, %a00 : !V8
      %n01 = vector.fma %v0, %b1, %a01 : !V8
      %n10 = vector.fma %v1, %b0, %a10 : !V8
      %n11 = vector.fma %v1, %b1, %a11 : !V8
      scf.yield %n00, %n01, %n10, %n11
          : !V8, !V8, !V8, !V8
    } {pejit.unroll_factor = 4 : i64}
    vector.store %sum#0, %C[%r0, %e0] : !MAT, !V8
    vector.store %sum#1, %C[%r0, %e1] : !MAT, !V8
    vector.store %sum#2, %C[%r1, %e0] : !MAT, !V8
    vector.store %sum#3, %C[%r1, %e1] : !MAT, !V8
  }
  scf.for %e0 = %N16 to %N step %c8 {
    %r1 = arith.addi %r0, %c1 : index
    %init:2 = scf.if %acc -> (!V8, !V8) {
      %x00 = vector.load %C[%r0, %e0] : !MAT, !V8
      %x10 = vector.load %C[%r1, %e0] : !MAT, !V8
      scf.yield %x00, %x10
          : !V8, !V8
    } else {
      scf.yield %zv, %zv
          : !V8, !V8
    }
    %sum:2 = scf.for %k = %c0 to %K step %c1
        iter_args(%a00 = %init#0, %a10 = %init#1)
        -> (!V8, !V8) {
      %b0 = vector.load %B[%k, %e0] : !MAT, !V8
      %s0 = memref.load %A[%r0, %k] : !MAT
      %v0 = vector.broadcast %s0 : f32 to !V8
      %s1 = memref.load %A[%r1, %k] : !MAT
      %v1 = vector.broadcast %s1 : f32 to !V8
      %n00 = vector.fma %v0, %b0, %a00 : !V8
      %n10 = vector.fma %v1, %b0, %a10 : !V8
      scf.yield %n00, %n10
          : !V8, !V8
    } {pejit.unroll_factor = 4 : i64}
    vector.store %sum#0, %C[%r0, %e0] : !MAT, !V8
    vector.store %sum#1, %C[%r1, %e0] : !MAT, !V8
  }
  return
}
