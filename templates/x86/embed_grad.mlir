// x86 table gradient template: pe.embed_grad (docs/backward.md,
// "Standalone kernels"), the backward of a token table (pe.embed) or a
// learned position table (pe.learned):
//
//   out[v, :] = scale * sum over (b, t) with id(b, t) = v of grad[b, t, :]
//
// No atomics: the runtime sorts the flattened rows r = b S + t by id (a
// stable counting sort), so rows[starts[v] : starts[v + 1]] are table row
// v's entries in ascending r. One work item = table rows [R n, R n + R):
// each row sums its entries in that order into an f32 accumulator on the
// item's stack, then scales and stores, rounded to the table's type (a
// 16-bit table gets a 16-bit gradient, accumulated in f32). Each table row
// is written by one item in one fixed order: bitwise the same at any
// thread count. A row no id reaches is written 0. Plain stores, not
// non-temporal ones: a training step writes each gradient into a freshly
// mapped tensor, where non-temporal stores measured 40% slower (their
// halved time on a written-before buffer aside; bench/RESULTS.md, session
// 26).
//
// Parameters, substituted as text before parsing
// (attn-instantiate-x86-template, pejit/compiler/passes/InstantiateX86EmbedGrad.cpp):
//   ${B} ${S}: grad's batch and length, or `?` where the call gives them
//   ${D} (D % 8 == 0) ${V} the table's rows ${R} table rows per item
//   T, OT: grad's and the gradient's element types (f32, f16, bf16)
//   SCALE: the scale (f32)
//   WIDEN8, NARROW8: the bodies of @widen8 and @narrow8 (a plain return for f32)

!G = memref<${B}x1x${S}x${D}x${T}, strided<[?, ?, ?, 1], offset: ?>>
!ORDER = memref<?xi64>
!OUT = memref<${V}x${D}x${OT}, strided<[?, 1], offset: ?>>
!ACC = memref<${D}xf32>
!V8 = vector<8xf32>
!V8T = vector<8x${T}>
!OUT8 = vector<8x${OT}>

// Item n = table rows [R n, min(R n + R, V)).
func.func @pejit_embed_grad_item(%grad: !G, %rows: !ORDER, %starts: !ORDER, %out: !OUT,
                                 %item: index) attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %R = arith.constant ${R} : index
  %V = arith.constant ${V} : index
  %D = arith.constant ${D} : index
  %scale = arith.constant ${SCALE} : f32
  %S = memref.dim %grad, %c2 : !G
  %v0 = arith.muli %item, %R : index
  %v1a = arith.addi %v0, %R : index
  %v1 = arith.minui %v1a, %V : index
  %zero = arith.constant dense<0.0> : !V8
  %scales = vector.broadcast %scale : f32 to !V8
  %acc = memref.alloca() {alignment = 64 : i64} : !ACC
  scf.for %v = %v0 to %v1 step %c1 {
    scf.for %c = %c0 to %D step %c8 {
      vector.store %zero, %acc[%c] : !ACC, !V8
    }
    %vn = arith.addi %v, %c1 : index
    %e0i = memref.load %starts[%v] : !ORDER
    %e1i = memref.load %starts[%vn] : !ORDER
    %e0 = arith.index_cast %e0i : i64 to index
    %e1 = arith.index_cast %e1i : i64 to index
    scf.for %e = %e0 to %e1 step %c1 {
      %ri = memref.load %rows[%e] : !ORDER
      %r = arith.index_cast %ri : i64 to index
      %t = arith.remui %r, %S : index
      %b = arith.divui %r, %S : index
      scf.for %c = %c0 to %D step %c8 {
        %g = vector.load %grad[%b, %c0, %t, %c] : !G, !V8T
        %w = func.call @widen8(%g) : (!V8T) -> !V8
        %a = vector.load %acc[%c] : !ACC, !V8
        %sum = arith.addf %a, %w : !V8
        vector.store %sum, %acc[%c] : !ACC, !V8
      }
    }
    scf.for %c = %c0 to %D step %c8 {
      %a = vector.load %acc[%c] : !ACC, !V8
      %scaled = arith.mulf %a, %scales : !V8
      %n = func.call @narrow8(%scaled) : (!V8) -> !OUT8
      vector.store %n, %out[%v, %c] : !OUT, !OUT8
    }
  }
  return
}

// 8 lanes of grad's type as f32, and 8 f32 lanes as the gradient's type.
func.func private @widen8(%x: !V8T) -> !V8 {
  ${WIDEN8}
}

func.func private @narrow8(%x: !V8) -> !OUT8 {
  ${NARROW8}
}
