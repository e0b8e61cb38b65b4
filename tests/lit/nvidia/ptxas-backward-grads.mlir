// ptxas -v on the attention backward with every operand gradient it gives
// (docs/backward.md, "NVIDIA"): ALiBi's learned slopes (q phase) and the
// RoPE's position scale and inverse frequencies (finish phase), each lane
// adding into its warp's partial in turn. No spills on sm_80 and sm_90; the
// finish kernel's stack frame is the RoPE adjoint's local arrays, as the
// prologue's is its tables'.
// REQUIRES: ptxas, libdevice
// RUN: %pejit compile %s --backward --target=nvidia:sm_80 --emit=ptx 2>&1 >/dev/null | FileCheck %s --check-prefix=SM80
// RUN: %pejit compile %s --backward --target=nvidia:sm_90 --emit=ptx 2>&1 >/dev/null | FileCheck %s --check-prefix=SM90

// SM80: Function properties for pejit_backward_q
// SM80-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// SM80: Function properties for pejit_backward_kv
// SM80-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// SM80: Function properties for pejit_backward_finish
// SM80-NEXT: bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// SM90: Function properties for pejit_backward_q
// SM90-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// SM90: Function properties for pejit_backward_kv
// SM90-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// SM90: Function properties for pejit_backward_finish
// SM90-NEXT: bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
func.func @slopes_scale_frequencies(%q: tensor<1x8x?x128xbf16>, %k: tensor<1x2x?x128xbf16>,
                                    %v: tensor<1x2x?x128xbf16>, %s: tensor<1xf32>,
                                    %f: tensor<64xf32>, %sl: tensor<8xf32>)
    -> tensor<1x8x?x128xbf16> {
  %o = attn.attention %q, %k, %v causal
      encodings([#pe.rope<layout = half, theta = 10000.0, runtime_scale = true, learned_inv_freq = true>,
                 #pe.alibi<num_heads = 8, form = causal, learned_slopes = true>])
      encoding_operands(%s, %f, %sl : tensor<1xf32>, tensor<64xf32>, tensor<8xf32>)
      : tensor<1x8x?x128xbf16>, tensor<1x2x?x128xbf16>, tensor<1x2x?x128xbf16> -> tensor<1x8x?x128xbf16>
  return %o : tensor<1x8x?x128xbf16>
}
