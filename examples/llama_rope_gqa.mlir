// A LLaMA-3.1-style attention layer as a user writes it for pejit: RoPE
// (rotate_half, theta 500000, llama3 frequency scaling) on Q and K, grouped
// query attention 32/8, causal, head dim 128. The compiler fuses the two
// pe.rope ops into attn.attention; nothing here is fused yet.
func.func @llama_prefill(%q: tensor<1x32x512x128xf32>, %k: tensor<1x8x512x128xf32>,
                         %v: tensor<1x8x512x128xf32>, %pos: tensor<512xi32>)
    -> tensor<1x32x512x128xf32> {
  %q_rot = pe.rope %q, %pos <layout = half, theta = 500000.0,
      scaling = #pe.llama3<factor = 8.0, low_freq_factor = 1.0,
                           high_freq_factor = 4.0, original_max_position = 8192>>
      : tensor<1x32x512x128xf32>, tensor<512xi32>
  %k_rot = pe.rope %k, %pos <layout = half, theta = 500000.0,
      scaling = #pe.llama3<factor = 8.0, low_freq_factor = 1.0,
                           high_freq_factor = 4.0, original_max_position = 8192>>
      : tensor<1x8x512x128xf32>, tensor<512xi32>
  %o = attn.attention %q_rot, %k_rot, %v causal
      : tensor<1x32x512x128xf32>, tensor<1x8x512x128xf32>, tensor<1x8x512x128xf32>
      -> tensor<1x32x512x128xf32>
  return %o : tensor<1x32x512x128xf32>
}
