// The x86 backward's steps before its phases (attention_backward.mlir puts
// this file in place of its "@pejit-blocks" line, with the helpers of
// attention_backward_blocks.mlir): the f32 copies of 16-bit tensors and
// their narrowing back, and a QK transform's tables and Q', K'. The types
// and $-brace parameters are attention_backward.mlir's.

// 16-bit tensors: the phases run in f32 on dense copies in scratch. Item n
// converts rows [64 n, 64 n + 64) of the flattened [b h s] rows, 8
// channels a vector; rounding to 16 bits is to nearest even (@narrow8).
func.func private @widen8(%x: !V8T) -> !V8 {
  ${WIDEN8}
}

func.func private @narrow8(%x: !V8) -> !V8T {
  ${NARROW8}
}

func.func @pejit_backward_widen(%src: !IN, %dst: !ROWS, %item: index)
    attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %B = memref.dim %src, %c0 : !IN
  %H = memref.dim %src, %c1 : !IN
  %S = memref.dim %src, %c2 : !IN
  %C = memref.dim %src, %c3 : !IN
  %bh = arith.muli %B, %H : index
  %rows = arith.muli %bh, %S : index
  %r0 = arith.muli %item, %c64 : index
  %r1a = arith.addi %r0, %c64 : index
  %r1 = arith.minui %r1a, %rows : index
  scf.for %r = %r0 to %r1 step %c1 {
    %i = arith.remui %r, %S : index
    %rh = arith.divui %r, %S : index
    %h = arith.remui %rh, %H : index
    %b = arith.divui %rh, %H : index
    scf.for %c = %c0 to %C step %c8 {
      %x = vector.load %src[%b, %h, %i, %c] : !IN, !V8T
      %w = func.call @widen8(%x) : (!V8T) -> !V8
      vector.store %w, %dst[%b, %h, %i, %c] : !ROWS, !V8
    }
  }
  return
}

func.func @pejit_backward_narrow(%src: !ROWS, %dst: !IN, %item: index)
    attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %B = memref.dim %dst, %c0 : !IN
  %H = memref.dim %dst, %c1 : !IN
  %S = memref.dim %dst, %c2 : !IN
  %C = memref.dim %dst, %c3 : !IN
  %bh = arith.muli %B, %H : index
  %rows = arith.muli %bh, %S : index
  %r0 = arith.muli %item, %c64 : index
  %r1a = arith.addi %r0, %c64 : index
  %r1 = arith.minui %r1a, %rows : index
  scf.for %r = %r0 to %r1 step %c1 {
    %i = arith.remui %r, %S : index
    %rh = arith.divui %r, %S : index
    %h = arith.remui %rh, %H : index
    %b = arith.divui %rh, %H : index
    scf.for %c = %c0 to %C step %c8 {
      %x = vector.load %src[%b, %h, %i, %c] : !ROWS, !V8
      %n = func.call @narrow8(%x) : (!V8) -> !V8T
      vector.store %n, %dst[%b, %h, %i, %c] : !IN, !V8T
    }
  }
  return
}

func.func @pejit_backward_prologue(%qpos: !QPOS, %kpos: !KPOS, %tables: !SCRATCH, %first: index,
                                   %step: index, %e0: !E0, %e1: !E1, %e2: !E2, %e3: !E3)
    attributes {llvm.emit_c_interface, pejit.cold} {
  attn.qk_prologue %qpos, %kpos, %tables rows(%first, %step)
      operands(%e0, %e1, %e2, %e3 : !E0, !E1, !E2, !E3) : !QPOS, !KPOS, !SCRATCH
  return
}

func.func @pejit_backward_transform(%q: !Q, %k: !K, %tq: !Q, %tk: !K, %tables: !SCRATCH,
                                    %item: index)
    attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %BM = arith.constant ${BM} : index
  %BN = arith.constant ${BN} : index
  %HQ = arith.constant ${HQ} : index
  %HKV = arith.constant ${HKV} : index
  %B = memref.dim %q, %c0 : !Q
  %SQ = memref.dim %q, %c2 : !Q
  %SKV = memref.dim %k, %c2 : !K
  %upq0 = arith.addi %SQ, %BM : index
  %upq = arith.subi %upq0, %c1 : index
  %NQT = arith.divui %upq, %BM : index
  %bhq = arith.muli %B, %HQ : index
  %QITEMS = arith.muli %bhq, %NQT : index
  %is_query = arith.cmpi ult, %item, %QITEMS : index
  scf.if %is_query {
    %b, %h, %i0, %i1 = func.call @query_item(%item, %SQ)
        : (index, index) -> (index, index, index, index)
    %n = arith.subi %i1, %i0 : index
    %from = memref.subview %q[%b, %h, %i0, 0] [1, 1, %n, ${D}] [1, 1, 1, 1] : !Q to !TILE
    %to = memref.subview %tq[%b, %h, %i0, 0] [1, 1, %n, ${D}] [1, 1, 1, 1] : !Q to !TILE
    attn.qk_transform %to from %from, %n, %i0, %b, %tables lengths(%SQ, %SKV)
        : !TILE from !TILE, !SCRATCH
  } else {
    %kitem = arith.subi %item, %QITEMS : index
    %upk0 = arith.addi %SKV, %BN : index
    %upk = arith.subi %upk0, %c1 : index
    %NKT = arith.divui %upk, %BN : index
    %kt = arith.remui %kitem, %NKT : index
    %bk = arith.divui %kitem, %NKT : index
    %hk = arith.remui %bk, %HKV : index
    %b = arith.divui %bk, %HKV : index
    %j0 = arith.muli %kt, %BN : index
    %j1a = arith.addi %j0, %BN : index
    %j1 = arith.minui %j1a, %SKV : index
    %n = arith.subi %j1, %j0 : index
    %from = memref.subview %k[%b, %hk, %j0, 0] [1, 1, %n, ${D}] [1, 1, 1, 1] : !K to !TILE
    %to = memref.subview %tk[%b, %hk, %j0, 0] [1, 1, %n, ${D}] [1, 1, 1, 1] : !K to !TILE
    attn.qk_transform %to from %from, %n, %j0, %b, %tables key lengths(%SQ, %SKV)
        : !TILE from !TILE, !SCRATCH
  }
  return
}

