// The KV-append kernel of a decode loop (docs/standalone-kernels.md): new
// K rows [b, 8 KV heads, s, 128] rotated by Llama-3's RoPE at their
// positions. Run it with the output a strided view of the K cache (rows
// [t, t + s) of [b, 8, capacity, 128]) and K is rotated once per token, as
// it is written; attention then reads the pre-rotated cache with RoPE on Q
// only (examples/paged_decode.mlir, examples/generate_loop.cpp). V rows are
// copied as they are. One kernel for every batch and length.
func.func @kv_append(%k_new: tensor<?x8x?x128xf32>, %positions: tensor<?xi64>)
    -> tensor<?x8x?x128xf32> {
  %k_rot = pe.rope %k_new, %positions <layout = half, theta = 500000.0,
      scaling = #pe.llama3<factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0,
                           original_max_position = 8192>>
      : tensor<?x8x?x128xf32>, tensor<?xi64>
  return %k_rot : tensor<?x8x?x128xf32>
}
