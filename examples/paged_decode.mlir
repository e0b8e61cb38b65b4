// A serving engine's decode step over a paged KV cache (vLLM's layout, see
// docs/shape-classes.md): a batch of users, one new token each, 32 query
// heads on 8 KV heads, d = 128, pages of 16 keys listed per user in a block
// table. K was rotated when it was written (RoPE on Q only). Row n attends
// to its first lens[n] keys, and its query's position defaults to
// lens[n] - 1 (leave %q_pos out). One kernel serves every batch size, cache
// length and page count.
func.func @paged_decode(%q: tensor<?x32x1x128xf32>, %k_pages: tensor<?x16x8x128xf32>,
                        %v_pages: tensor<?x16x8x128xf32>, %table: tensor<?x?xi32>,
                        %lens: tensor<?xi32>, %q_pos: tensor<1xi64>)
    -> tensor<?x32x1x128xf32> {
  %k = attn.paged_kv %k_pages, %table
      : tensor<?x16x8x128xf32>, tensor<?x?xi32> -> tensor<?x8x?x128xf32>
  %v = attn.paged_kv %v_pages, %table
      : tensor<?x16x8x128xf32>, tensor<?x?xi32> -> tensor<?x8x?x128xf32>
  %q_rot = pe.rope %q, %q_pos <layout = half, theta = 500000.0>
      : tensor<?x32x1x128xf32>, tensor<1xi64>
  %o = attn.attention %q_rot, %k, %v key_lengths(%lens : tensor<?xi32>) causal
      : tensor<?x32x1x128xf32>, tensor<?x8x?x128xf32>, tensor<?x8x?x128xf32>
      -> tensor<?x32x1x128xf32>
  return %o : tensor<?x32x1x128xf32>
}
