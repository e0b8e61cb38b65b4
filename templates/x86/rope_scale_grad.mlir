// x86 template of pe.rope_scale_grad (docs/backward.md, "Standalone
// kernels"): the runtime position scale's gradient of a standalone RoPE,
//
//   dL/ds = sum over rows and pairs of pos_axis(c) * inv_freq[c] * t_c,
//   t_c = g_b y_a - g_a y_b        g = dy, y = pe.rope(x), pair (a, b)
//
// One work item = (batch b, head h, row tile t) of X [B, H, S, D], as the
// forward's (templates/x86/qk_transform.mlir): its x rows rotated into an
// f32 tile by the RoPE's transform hook (y, the forward's tables), its dy
// rows widened into another, and the RoPE's operand adjoint
// (attn.qk_transform_grad) adds the item's sum (f64 within the tile) to
// its own L entries of the partial buffer, L the scale's length. The
// runtime sums the items' entries in item order, in f64: no atomics, the
// same bits at any thread count.
//
// Parameters, substituted as text before parsing
// (pejit/compiler/passes/InstantiateX86RopeScaleGrad.cpp):
//   B, S: the batch and length, or `?`; H, D (D % 8 == 0), R rows per item
//   T: the element type of x and dy; PB: rows of the ids (axes x (1 or B))
//   E0: the scale's memref type; L: its length (1, or B)
//   WIDEN8: the body of @widen8 (a plain return for f32)

!X = memref<${B}x${H}x${S}x${D}x${T}, strided<[?, ?, ?, 1], offset: ?>>
!POS = memref<${PB}x${S}xi64>
!NOPOS = memref<${PB}x0xi64>
!SCRATCH = memref<?xf32>
!E0 = ${E0}
!ROWS = memref<?x${D}x${T}, strided<[?, 1], offset: ?>>
!TILE = memref<${R}x${D}xf32>
!V8 = vector<8xf32>
!V8T = vector<8x${T}>

// Once per call, before any item, as `step` calls on all cores: the
// RoPE's cos/sin tables for the ids (as the forward's prologue).
func.func @pejit_prologue(%pos: !POS, %none: !NOPOS, %scratch: !SCRATCH, %first: index,
                          %step: index, %e0: !E0) attributes {llvm.emit_c_interface, pejit.cold} {
  attn.qk_prologue %pos, %none, %scratch rows(%first, %step) operands(%e0 : !E0)
      {encoding = 0 : i64} : !POS, !NOPOS, !SCRATCH
  return
}

// Item = (b H + h) NT + t, NT = ceil(S / R); its sums at partial[L item ...].
func.func @pejit_scale_grad_item(%x: !X, %dy: !X, %pos: !POS, %scratch: !SCRATCH,
                                 %partial: !SCRATCH, %e0: !E0, %item: index)
    attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %R = arith.constant ${R} : index
  %H = arith.constant ${H} : index
  %D = arith.constant ${D} : index
  %L = arith.constant ${L} : index
  %S = memref.dim %x, %c2 : !X
  %s_up0 = arith.addi %S, %R : index
  %s_up = arith.subi %s_up0, %c1 : index
  %NT = arith.divui %s_up, %R : index
  %t = arith.remui %item, %NT : index
  %bh = arith.divui %item, %NT : index
  %h = arith.remui %bh, %H : index
  %b = arith.divui %bh, %H : index
  %i0 = arith.muli %t, %R : index
  %left = arith.subi %S, %i0 : index
  %nr = arith.minui %left, %R : index
  %y = memref.alloca() {alignment = 64 : i64} : !TILE
  %g = memref.alloca() {alignment = 64 : i64} : !TILE
  %x_rows = memref.subview %x[%b, %h, %i0, 0] [1, 1, %nr, ${D}] [1, 1, 1, 1] : !X to !ROWS
  %dy_rows = memref.subview %dy[%b, %h, %i0, 0] [1, 1, %nr, ${D}] [1, 1, 1, 1] : !X to !ROWS
  // y = pe.rope(x) on the way into the tile.
  attn.qk_transform %y from %x_rows, %nr, %i0, %b, %scratch lengths(%S, %c0)
      {encoding = 0 : i64} : !TILE from !ROWS, !SCRATCH
  scf.for %r = %c0 to %nr step %c1 {
    scf.for %c = %c0 to %D step %c8 {
      %v = vector.load %dy_rows[%r, %c] : !ROWS, !V8T
      %w = func.call @widen8(%v) : (!V8T) -> !V8
      vector.store %w, %g[%r, %c] : !TILE, !V8
    }
  }
  %start = arith.muli %item, %L : index
  attn.qk_transform_grad %g, %y, %nr, %i0, %b positions(%pos : !POS) operands(%e0 : !E0)
      partial(%partial : !SCRATCH, %start) offsets [0] lengths(%S, %c0) {encoding = 0 : i64}
      : !TILE, !TILE
  return
}

// 8 lanes of x's type as f32.
func.func private @widen8(%x: !V8T) -> !V8 {
  ${WIDEN8}
}
