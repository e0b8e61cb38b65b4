// pejit compile --target=nvidia:sm_XX --emit=ptx: a fused RoPE + causal GQA
// attention as PTX for the requested target. Q.K^T and P.V run on tensor
// cores: mma.sync m16n8k16, f16 (or bf16) operands, f32 accumulators.
// REQUIRES: libdevice
// RUN: %pejit compile %s --target=nvidia:sm_80 --emit=ptx 2>/dev/null | FileCheck %s --check-prefixes=CHECK,SM80,F16
// RUN: %pejit compile %s --target=nvidia:sm_90 --emit=ptx 2>/dev/null | FileCheck %s --check-prefixes=CHECK,SM90,F16
// RUN: sed 's/xf16>/xbf16>/g' %s > %t.bf16.mlir
// RUN: %pejit compile %t.bf16.mlir --target=nvidia:sm_80 --emit=ptx 2>/dev/null | FileCheck %s --check-prefixes=CHECK,SM80,BF16
// RUN: %pejit compile %t.bf16.mlir --target=nvidia:sm_90 --emit=ptx 2>/dev/null | FileCheck %s --check-prefixes=CHECK,SM90,BF16

// SM80: .target sm_80
// SM90: .target sm_90
// CHECK-LABEL: .entry pejit_prologue(
// CHECK-LABEL: .entry pejit_attention(
// F16: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// BF16: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
func.func @rope_gqa(%q: tensor<1x8x200x128xf16>, %k: tensor<1x2x200x128xf16>,
                    %v: tensor<1x2x200x128xf16>, %pos: tensor<200xi32>) -> tensor<1x8x200x128xf32> {
  %qr = pe.rope %q, %pos <layout = half, theta = 500000.0> : tensor<1x8x200x128xf16>, tensor<200xi32>
  %kr = pe.rope %k, %pos <layout = half, theta = 500000.0> : tensor<1x2x200x128xf16>, tensor<200xi32>
  %o = attn.attention %qr, %kr, %v causal : tensor<1x8x200x128xf16>, tensor<1x2x200x128xf16>, tensor<1x2x200x128xf16> -> tensor<1x8x200x128xf32>
  return %o : tensor<1x8x200x128xf32>
}
