// ptxas -v on linear attention (docs/linear-attention.md, "How it runs
// (NVIDIA)"): elu + 1 with RoPE on the numerator, causal, a carried state,
// d = dv = 128 (64 floats of S per thread, 256 threads): the state stays in
// registers on sm_80 and sm_90, with no stack frame and no spills.
// REQUIRES: ptxas, libdevice
// RUN: %pejit compile %s --target=nvidia:sm_80 --emit=ptx 2>&1 >/dev/null | FileCheck %s --check-prefix=SM80
// RUN: %pejit compile %s --target=nvidia:sm_90 --emit=ptx 2>&1 >/dev/null | FileCheck %s --check-prefix=SM90

// SM80: Compiling entry function 'pejit_linear' for 'sm_80'
// SM80-NEXT: Function properties for pejit_linear
// SM80-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// SM90: Compiling entry function 'pejit_linear' for 'sm_90'
// SM90-NEXT: Function properties for pejit_linear
// SM90-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
func.func @linear_rope(%q: tensor<1x8x?x128xbf16>, %k: tensor<1x8x?x128xbf16>,
                       %v: tensor<1x8x?x128xbf16>, %st: tensor<1x8x128x130xf32>)
    -> tensor<1x8x?x128xbf16> {
  %o = attn.linear_attention %q, %k, %v feature_map(elu_plus_one) causal
      state(%st : tensor<1x8x128x130xf32>)
      encodings([#pe.rope<layout = half, theta = 10000.0>]) rope_placement(rope_on_numerator)
      : tensor<1x8x?x128xbf16>, tensor<1x8x?x128xbf16>, tensor<1x8x?x128xbf16>
      -> tensor<1x8x?x128xbf16>
  return %o : tensor<1x8x?x128xbf16>
}
