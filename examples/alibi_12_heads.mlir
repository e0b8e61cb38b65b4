// BLOOM/MPT-style attention with ALiBi over 12 heads (a non-power-of-two
// count: slopes follow the ALiBi paper's get_slopes rule), causal.
func.func @alibi_attention(%q: tensor<1x12x256x64xf32>, %k: tensor<1x12x256x64xf32>,
                           %v: tensor<1x12x256x64xf32>) -> tensor<1x12x256x64xf32> {
  %bias = pe.alibi <num_heads = 12, form = causal> : tensor<1x12x256x256xf32>
  %o = attn.attention %q, %k, %v bias(%bias : tensor<1x12x256x256xf32>) causal
      : tensor<1x12x256x64xf32>, tensor<1x12x256x64xf32>, tensor<1x12x256x64xf32>
      -> tensor<1x12x256x64xf32>
  return %o : tensor<1x12x256x64xf32>
}
