// ptxas -v on a RoPE with a runtime position scale (its prologue kernel
// reads the scale operand): every kernel without spills, on sm_80 and sm_90.
// REQUIRES: ptxas, libdevice
// RUN: %pejit compile %s --target=nvidia:sm_80 --emit=ptx 2>&1 >/dev/null | FileCheck %s
// RUN: %pejit compile %s --target=nvidia:sm_90 --emit=ptx 2>&1 >/dev/null | FileCheck %s

// CHECK: Compiling entry function 'pejit_attention'
// CHECK-NEXT: Function properties for pejit_attention
// CHECK-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// CHECK: Compiling entry function 'pejit_prologue'
// CHECK-NEXT: Function properties for pejit_prologue
// CHECK-NEXT: bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
func.func @f(%q: tensor<1x8x300x128xbf16>, %k: tensor<1x2x300x128xbf16>, %v: tensor<1x2x300x128xbf16>, %pos: tensor<300xi32>, %s: tensor<1xf32>) -> tensor<1x8x300x128xbf16> {
  %qr = pe.rope %q, %pos scale(%s : tensor<1xf32>) <layout = half, theta = 10000.0, runtime_scale = true> : tensor<1x8x300x128xbf16>, tensor<300xi32>
  %kr = pe.rope %k, %pos scale(%s : tensor<1xf32>) <layout = half, theta = 10000.0, runtime_scale = true> : tensor<1x2x300x128xbf16>, tensor<300xi32>
  %o = attn.attention %qr, %kr, %v causal : tensor<1x8x300x128xbf16>, tensor<1x2x300x128xbf16>, tensor<1x2x300x128xbf16> -> tensor<1x8x300x128xbf16>
  return %o : tensor<1x8x300x128xbf16>
}
