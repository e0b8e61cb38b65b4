// ptxas -v on the default tile config (64 x 64, 4 warps, D = 128): the
// attention kernel keeps everything in registers: no stack frame, no spills
// (the register arrays are unrolled to constant indices).
// REQUIRES: ptxas, libdevice
// RUN: %pejit compile %s --target=nvidia:sm_80 --emit=ptx 2>&1 >/dev/null | FileCheck %s --check-prefix=SM80
// RUN: %pejit compile %s --target=nvidia:sm_90 --emit=ptx 2>&1 >/dev/null | FileCheck %s --check-prefix=SM90

// SM80: Compiling entry function 'pejit_attention' for 'sm_80'
// SM80-NEXT: Function properties for pejit_attention
// SM80-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// SM90: Compiling entry function 'pejit_attention' for 'sm_90'
// SM90-NEXT: Function properties for pejit_attention
// SM90-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
func.func @rope_gqa(%q: tensor<1x8x300x128xbf16>, %k: tensor<1x2x300x128xbf16>,
                    %v: tensor<1x2x300x128xbf16>, %pos: tensor<300xi32>) -> tensor<1x8x300x128xbf16> {
  %qr = pe.rope %q, %pos <layout = half, theta = 10000.0> : tensor<1x8x300x128xbf16>, tensor<300xi32>
  %kr = pe.rope %k, %pos <layout = half, theta = 10000.0> : tensor<1x2x300x128xbf16>, tensor<300xi32>
  %o = attn.attention %qr, %kr, %v causal : tensor<1x8x300x128xbf16>, tensor<1x2x300x128xbf16>, tensor<1x2x300x128xbf16> -> tensor<1x8x300x128xbf16>
  return %o : tensor<1x8x300x128xbf16>
}
