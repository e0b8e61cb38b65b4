// A packed batch of prompts of different lengths (FlashAttention's varlen
// API, see docs/shape-classes.md): Q, K and V hold every sequence's rows in
// one batch row, cu_q and cu_k (i32 [n + 1]) say where each starts. Each
// sequence is causal on its own and its positions start at 0 (RoPE theta
// 500000 on Q and K, 32/8 heads, d = 128). One kernel serves every batch.
func.func @varlen_prefill(%q: tensor<1x32x?x128xf32>, %k: tensor<1x8x?x128xf32>,
                          %v: tensor<1x8x?x128xf32>, %cu_q: tensor<?xi32>,
                          %cu_k: tensor<?xi32>) -> tensor<1x32x?x128xf32> {
  %o = attn.attention %q, %k, %v segments(%cu_q, %cu_k : tensor<?xi32>, tensor<?xi32>) causal
      encodings([#pe.rope<layout = half, theta = 500000.0>])
      : tensor<1x32x?x128xf32>, tensor<1x8x?x128xf32>, tensor<1x8x?x128xf32>
      -> tensor<1x32x?x128xf32>
  return %o : tensor<1x32x?x128xf32>
}
