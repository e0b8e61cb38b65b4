// The x86 ISA families (docs/isa.md): attn-instantiate-x86-template{isa=...}
// says the family and lanes in the kernel description and the module's
// pejit.x86_isa, and writes the forward's vectors at the family's lanes:
// 16 for avx512 where d % 16 == 0 and dv % 32 == 0, else 8.
// RUN: pejit-opt %s --split-input-file --attn-instantiate-x86-template="isa=avx2" | FileCheck %s --check-prefix=AVX2
// RUN: pejit-opt %s --split-input-file --attn-instantiate-x86-template="isa=avx512" | FileCheck %s --check-prefix=AVX512
// RUN: not pejit-opt %s --attn-instantiate-x86-template="isa=avx1024" -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// AVX2-LABEL: module attributes
// AVX2-SAME: isa = "avx2"
// AVX2-SAME: lanes = 8 : i64
// AVX2-SAME: target = "x86-avx2"
// AVX2-SAME: pejit.x86_isa = "avx2"
// AVX2: func.func @pejit_s_tile
// AVX2: vector.fma {{.*}} : vector<8xf32>
// AVX512-LABEL: module attributes
// AVX512-SAME: isa = "avx512"
// AVX512-SAME: lanes = 16 : i64
// AVX512-SAME: target = "x86-avx512"
// AVX512-SAME: pejit.x86_isa = "avx512"
// AVX512: func.func @pejit_s_tile
// AVX512: vector.fma {{.*}} : vector<16xf32>
func.func @wide(%q: tensor<1x2x40x64xf32>, %k: tensor<1x2x40x64xf32>, %v: tensor<1x2x40x64xf32>) -> tensor<1x2x40x64xf32> {
  %o = attn.attention %q, %k, %v {causal} : tensor<1x2x40x64xf32>, tensor<1x2x40x64xf32>, tensor<1x2x40x64xf32> -> tensor<1x2x40x64xf32>
  return %o : tensor<1x2x40x64xf32>
}

// -----

// dv = 48 is not two vectors of 16: the avx512 kernel keeps 8 lanes.
// AVX512-LABEL: module attributes
// AVX512-SAME: isa = "avx512"
// AVX512-SAME: lanes = 8 : i64
// AVX512: func.func @pejit_s_tile
// AVX512: vector.fma {{.*}} : vector<8xf32>
// AVX2-LABEL: module attributes
// AVX2-SAME: lanes = 8 : i64
func.func @narrow(%q: tensor<1x2x40x64xf32>, %k: tensor<1x2x40x64xf32>, %v: tensor<1x2x40x48xf32>) -> tensor<1x2x40x48xf32> {
  %o = attn.attention %q, %k, %v : tensor<1x2x40x64xf32>, tensor<1x2x40x64xf32>, tensor<1x2x40x48xf32> -> tensor<1x2x40x48xf32>
  return %o : tensor<1x2x40x48xf32>
}

// UNKNOWN: unknown x86 ISA family 'avx1024' (avx2, avx512, avx512_bf16 or amx)
