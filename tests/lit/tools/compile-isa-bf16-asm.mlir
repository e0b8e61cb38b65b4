// The avx512_bf16 family multiplies bf16 inputs in bf16 pairs (docs/isa.md):
// S = K' Q'^T and P V with vdpbf16ps on zmm registers, f32 accumulation. An
// f32 kernel in the same family keeps f32 FMAs.
// REQUIRES: x86-avx512-bf16
// RUN: env PEJIT_X86_ISA=avx512_bf16 %pejit compile %s --emit=asm | FileCheck %s
// RUN: env PEJIT_X86_ISA=avx512_bf16 %pejit compile %s --emit=tiled | FileCheck %s --check-prefix=TILED

// CHECK: codegen part
// CHECK: vdpbf16ps {{.*}}%zmm
// TILED: isa = "avx512_bf16"
// TILED-SAME: lanes = 16 : i64
// TILED-SAME: products = "bf16"
// TILED: func.func @pejit_s_tile_bf16
func.func @causal(%q: tensor<1x2x96x128xbf16>, %k: tensor<1x2x96x128xbf16>, %v: tensor<1x2x96x128xbf16>) -> tensor<1x2x96x128xbf16> {
  %o = attn.attention %q, %k, %v {causal} : tensor<1x2x96x128xbf16>, tensor<1x2x96x128xbf16>, tensor<1x2x96x128xbf16> -> tensor<1x2x96x128xbf16>
  return %o : tensor<1x2x96x128xbf16>
}
