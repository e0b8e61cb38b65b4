// ptxas -v on the attention backward with Shaw's key and value terms and
// both tables' gradients (docs/backward.md, "NVIDIA"), per-head tables,
// after RoPE, d = 128: no spills on sm_80 and sm_90. The phases that score
// (rows, kv, q) read each row's QaK and dOaV; the q phase sums S and T per
// row; the finish phase adds the key term's dQ' and the tables' gradients.
// REQUIRES: ptxas, libdevice
// RUN: %pejit compile %s --backward --target=nvidia:sm_80 --emit=ptx 2>&1 >/dev/null | FileCheck %s --check-prefix=SM80
// RUN: %pejit compile %s --backward --target=nvidia:sm_90 --emit=ptx 2>&1 >/dev/null | FileCheck %s --check-prefix=SM90

// SM80: Function properties for pejit_backward_q
// SM80-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// SM80: Function properties for pejit_backward_kv
// SM80-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// SM80: Function properties for pejit_backward_rows
// SM80-NEXT: 0 bytes spill stores, 0 bytes spill loads
// SM80: Function properties for pejit_backward_finish
// SM80-NEXT: 0 bytes spill stores, 0 bytes spill loads
// SM90: Function properties for pejit_backward_q
// SM90-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// SM90: Function properties for pejit_backward_kv
// SM90-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// SM90: Function properties for pejit_backward_rows
// SM90-NEXT: 0 bytes spill stores, 0 bytes spill loads
// SM90: Function properties for pejit_backward_finish
// SM90-NEXT: 0 bytes spill stores, 0 bytes spill loads
func.func @shaw_rope(%q: tensor<1x8x?x128xf16>, %k: tensor<1x2x?x128xf16>,
                     %v: tensor<1x2x?x128xf16>, %ak: tensor<8x9x128xf16>,
                     %av: tensor<8x9x128xf16>) -> tensor<1x8x?x128xf16> {
  %o = attn.attention %q, %k, %v causal
      encodings([#pe.rope<layout = half, theta = 10000.0>, #pe.relative_key<clip = 4>,
                 #pe.relative_value<clip = 4>])
      encoding_operands(%ak, %av : tensor<8x9x128xf16>, tensor<8x9x128xf16>)
      : tensor<1x8x?x128xf16>, tensor<1x2x?x128xf16>, tensor<1x2x?x128xf16> -> tensor<1x8x?x128xf16>
  return %o : tensor<1x8x?x128xf16>
}
