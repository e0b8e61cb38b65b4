// ptxas -v on the attention backward (docs/backward.md, "NVIDIA") at its
// largest head dim, d = dv = 128 (16-row steps): RoPE, T5 buckets with the
// table's gradient, a window and a softcap, f16, a shape class. Every
// kernel of the backward keeps its register tiles (dV and dK' of 16 keys:
// 64 + 64 floats per lane) in registers on sm_80 and sm_90: no stack
// frame, no spills. (The prologue is the forward's RoPE tables: its stack
// frame is its local arrays.)
// REQUIRES: ptxas, libdevice
// RUN: %pejit compile %s --backward --target=nvidia:sm_80 --emit=ptx 2>&1 >/dev/null | FileCheck %s --check-prefix=SM80
// RUN: %pejit compile %s --backward --target=nvidia:sm_90 --emit=ptx 2>&1 >/dev/null | FileCheck %s --check-prefix=SM90

// SM80: Function properties for pejit_backward_q
// SM80-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// SM80: Function properties for pejit_backward_kv
// SM80-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// SM80: Function properties for pejit_backward_rows
// SM80-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// SM80: Function properties for pejit_prologue
// SM80-NEXT: 0 bytes spill stores, 0 bytes spill loads
// SM80: Function properties for pejit_backward_finish
// SM80-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// SM80: Function properties for pejit_backward_transform
// SM80-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// SM90: Function properties for pejit_backward_q
// SM90-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// SM90: Function properties for pejit_backward_kv
// SM90-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// SM90: Function properties for pejit_backward_rows
// SM90-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// SM90: Function properties for pejit_prologue
// SM90-NEXT: 0 bytes spill stores, 0 bytes spill loads
// SM90: Function properties for pejit_backward_finish
// SM90-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// SM90: Function properties for pejit_backward_transform
// SM90-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
func.func @t5_rope_window_softcap(%q: tensor<?x8x?x128xf16>, %k: tensor<?x2x?x128xf16>,
                                  %v: tensor<?x2x?x128xf16>, %t: tensor<32x8xf32>)
    -> tensor<?x8x?x128xf32> {
  %o = attn.attention %q, %k, %v window(40) softcap(30.0)
      encodings([#pe.rope<layout = interleaved, theta = 10000.0>,
                 #pe.t5_bias<num_buckets = 32, max_distance = 128, bidirectional = true>])
      encoding_operands(%t : tensor<32x8xf32>)
      : tensor<?x8x?x128xf16>, tensor<?x2x?x128xf16>, tensor<?x2x?x128xf16> -> tensor<?x8x?x128xf32>
  return %o : tensor<?x8x?x128xf32>
}
