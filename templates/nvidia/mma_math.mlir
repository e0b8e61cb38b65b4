// The tensor-core and float helpers of the NVIDIA attention templates
// (mma_attention.mlir, mma_attention_backward.mlir), put in place of their
// `// @pejit-blocks` line (inside the gpu.module) before parameter
// substitution. They use the including template's !C (vector<2x2xf32>).
//   @mma_f16, @mma_bf16  one m16n8k16 tensor-core step, D = A B + C
//   @out_f32/f16/bf16    output pairs in an output's element type
//   @exp2                2^x by the hardware

// D = A B + C for f16 (nvgpu.mma.sync).
func.func private @mma_f16(%a: vector<4x2xf16>, %b: vector<2x2xf16>, %c: !C) -> !C {
  %d = nvgpu.mma.sync (%a, %b, %c) {mmaShape = [16, 8, 16]}
      : (vector<4x2xf16>, vector<2x2xf16>, !C) -> !C
  return %d : !C
}

// D = A B + C for bf16: nvgpu.mma.sync has no bf16 form, so nvvm.mma.sync
// on the fragments packed two per i32.
func.func private @pack_bf16(%x: vector<2xbf16>) -> i32 {
  %w = vector.bitcast %x : vector<2xbf16> to vector<1xi32>
  %i = vector.extract %w[0] : i32 from vector<1xi32>
  return %i : i32
}
func.func private @mma_bf16(%a: vector<4x2xbf16>, %b: vector<2x2xbf16>, %c: !C) -> !C {
  %a0 = vector.extract %a[0] : vector<2xbf16> from vector<4x2xbf16>
  %a1 = vector.extract %a[1] : vector<2xbf16> from vector<4x2xbf16>
  %a2 = vector.extract %a[2] : vector<2xbf16> from vector<4x2xbf16>
  %a3 = vector.extract %a[3] : vector<2xbf16> from vector<4x2xbf16>
  %b0 = vector.extract %b[0] : vector<2xbf16> from vector<2x2xbf16>
  %b1 = vector.extract %b[1] : vector<2xbf16> from vector<2x2xbf16>
  %pa0 = func.call @pack_bf16(%a0) : (vector<2xbf16>) -> i32
  %pa1 = func.call @pack_bf16(%a1) : (vector<2xbf16>) -> i32
  %pa2 = func.call @pack_bf16(%a2) : (vector<2xbf16>) -> i32
  %pa3 = func.call @pack_bf16(%a3) : (vector<2xbf16>) -> i32
  %pb0 = func.call @pack_bf16(%b0) : (vector<2xbf16>) -> i32
  %pb1 = func.call @pack_bf16(%b1) : (vector<2xbf16>) -> i32
  %c0 = vector.extract %c[0, 0] : f32 from !C
  %c1 = vector.extract %c[0, 1] : f32 from !C
  %c2 = vector.extract %c[1, 0] : f32 from !C
  %c3 = vector.extract %c[1, 1] : f32 from !C
  %d = nvvm.mma.sync A[%pa0, %pa1, %pa2, %pa3] B[%pb0, %pb1] C[%c0, %c1, %c2, %c3]
      {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>,
       multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>,
       shape = #nvvm.shape<m = 16, n = 8, k = 16>}
      : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
  %d0 = llvm.extractvalue %d[0] : !llvm.struct<(f32, f32, f32, f32)>
  %d1 = llvm.extractvalue %d[1] : !llvm.struct<(f32, f32, f32, f32)>
  %d2 = llvm.extractvalue %d[2] : !llvm.struct<(f32, f32, f32, f32)>
  %d3 = llvm.extractvalue %d[3] : !llvm.struct<(f32, f32, f32, f32)>
  %r = vector.from_elements %d0, %d1, %d2, %d3 : !C
  return %r : !C
}

// Output pairs in an element type (f32, f16, bf16): the template picks one.
func.func private @out_f32(%x: vector<2xf32>) -> vector<2xf32> {
  return %x : vector<2xf32>
}
func.func private @out_f16(%x: vector<2xf32>) -> vector<2xf16> {
  %y = arith.truncf %x : vector<2xf32> to vector<2xf16>
  return %y : vector<2xf16>
}
func.func private @out_bf16(%x: vector<2xf32>) -> vector<2xbf16> {
  %y = arith.truncf %x : vector<2xf32> to vector<2xbf16>
  return %y : vector<2xbf16>
}

// 2^x by the hardware (ex2.approx, ~2 ulp); 2^-inf = 0.
func.func private @exp2(%x: f32) -> f32 {
  %r = math.exp2 %x fastmath<afn> : f32
  return %r : f32
}
