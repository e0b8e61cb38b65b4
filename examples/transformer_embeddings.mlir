// The original Transformer's embeddings (Vaswani et al. 2017, sec. 3.4 and
// 3.5) as one pejit kernel: token rows scaled by sqrt(d_model) = sqrt(512),
// plus the sinusoidal position embedding computed on the fly (float64
// angles: exact at any position), in one pass. No position table exists.
//
//   pejit run examples/transformer_embeddings.mlir --input=@tokens.npy \
//       --input=@embeddings.npy --input=@position_ids.npy --output=@x.npy --check
func.func @transformer_embeddings(%tokens: tensor<?x?xi64>, %words: tensor<37000x512xf32>,
                                  %positions: tensor<?xi64>) -> tensor<?x?x512xf32> {
  %t = pe.embed %tokens, %words {scale = 22.627416997969522 : f64}
      : tensor<?x?xi64>, tensor<37000x512xf32> -> tensor<?x?x512xf32>
  %x = pe.sinusoidal %t, %positions <base = 10000.0>
      : tensor<?x?x512xf32>, tensor<?xi64>
  return %x : tensor<?x?x512xf32>
}
