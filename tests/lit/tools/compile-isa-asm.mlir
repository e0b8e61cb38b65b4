// The instructions each x86 ISA family's kernel is made of (docs/isa.md),
// in the asm stage: avx2 has no AVX-512 register or instruction; avx512
// multiplies in zmm registers, 16 lanes at a time.
// REQUIRES: x86-avx512
// RUN: env PEJIT_X86_ISA=avx2 %pejit compile %s --emit=asm | FileCheck %s --check-prefix=AVX2
// RUN: env PEJIT_X86_ISA=avx512 %pejit compile %s --emit=asm | FileCheck %s --check-prefix=AVX512

// AVX2: codegen part
// AVX2: vfmadd{{[0-9]+}}ps {{.*}}%ymm
// AVX2-NOT: %zmm
// AVX2-NOT: %ymm{{1[6-9]|2[0-9]|3[01]}}
// AVX512: codegen part
// AVX512: vfmadd{{[0-9]+}}ps {{.*}}%zmm
func.func @causal(%q: tensor<1x2x96x128xf32>, %k: tensor<1x2x96x128xf32>, %v: tensor<1x2x96x128xf32>) -> tensor<1x2x96x128xf32> {
  %o = attn.attention %q, %k, %v {causal} : tensor<1x2x96x128xf32>, tensor<1x2x96x128xf32>, tensor<1x2x96x128xf32> -> tensor<1x2x96x128xf32>
  return %o : tensor<1x2x96x128xf32>
}
