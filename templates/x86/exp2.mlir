// 2^x on 8 lanes, shared by the x86 templates: the softmax attention
// kernels (templates/x86/avx2_attention.mlir, avx2_decode.mlir) and linear
// attention's feature maps (templates/x86/linear_attention.mlir). Put with
// the other blocks in place of a template's `// @pejit-blocks` line. A
// polynomial, not math.exp: LLVM lowers a vector math.exp to one libm call
// per lane.

// 2^x for x <= 0 (softmax exponentiates s - max, softmax_keys k - max;
// elu_plus_one keeps only the lanes where x <= 0): x clamped below at -127,
// split x = n + f (n = round(x)), 2^f by a degree-6 polynomial (|f| <= 1/2,
// rel. error ~2e-7), 2^n from the exponent bits. x <= -127 gives exactly 0,
// so masked scores (-inf) add nothing and a row with no visible key keeps
// l = 0. A NaN x gives NaN.
func.func private @exp2_vec(%x: vector<${L}xf32>) -> vector<${L}xf32> {
  %lo = arith.constant dense<-127.0> : vector<${L}xf32>
  %c1 = arith.constant dense<1.0> : vector<${L}xf32>
  %p1 = arith.constant dense<0.693147180559945> : vector<${L}xf32>
  %p2 = arith.constant dense<0.240226506959101> : vector<${L}xf32>
  %p3 = arith.constant dense<0.0555041086648216> : vector<${L}xf32>
  %p4 = arith.constant dense<0.00961812910762848> : vector<${L}xf32>
  %p5 = arith.constant dense<0.00133335581464284> : vector<${L}xf32>
  %p6 = arith.constant dense<0.000154035303933816> : vector<${L}xf32>
  %bias = arith.constant dense<127> : vector<${L}xi32>
  %shift = arith.constant dense<23> : vector<${L}xi32>
  // max(x, lo) that keeps a NaN x (one vmaxps; arith.maximumf takes three).
  %below = arith.cmpf olt, %x, %lo : vector<${L}xf32>
  %xc = arith.select %below, %lo, %x : vector<${L}xi1>, vector<${L}xf32>
  %n = math.roundeven %xc : vector<${L}xf32>
  %f = arith.subf %xc, %n : vector<${L}xf32>
  %t6 = math.fma %p6, %f, %p5 : vector<${L}xf32>
  %t5 = math.fma %t6, %f, %p4 : vector<${L}xf32>
  %t4 = math.fma %t5, %f, %p3 : vector<${L}xf32>
  %t3 = math.fma %t4, %f, %p2 : vector<${L}xf32>
  %t2 = math.fma %t3, %f, %p1 : vector<${L}xf32>
  %t1 = math.fma %t2, %f, %c1 : vector<${L}xf32>
  %ni = arith.fptosi %n : vector<${L}xf32> to vector<${L}xi32>
  %eb = arith.addi %ni, %bias : vector<${L}xi32>
  %bits = arith.shli %eb, %shift : vector<${L}xi32>
  %pow2n = arith.bitcast %bits : vector<${L}xi32> to vector<${L}xf32>
  %r = arith.mulf %t1, %pow2n : vector<${L}xf32>
  return %r : vector<${L}xf32>
}
