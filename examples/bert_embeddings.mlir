// BERT-base's embedding layer as one pejit kernel (docs/standalone-kernels.md):
// WordPiece rows of the 30522 x 768 token table, plus the learned position
// embeddings (512 positions), gathered and added in one pass over the
// output. (BERT also adds a token-type row and a LayerNorm after this.)
// A position >= 512 or a token >= 30522 is an error at run that names it.
//
//   pejit run examples/bert_embeddings.mlir --input=@tokens.npy \
//       --input=@word_embeddings.npy --input=@position_ids.npy \
//       --input=@position_embeddings.npy --output=@x.npy --check
func.func @bert_embeddings(%tokens: tensor<?x?xi64>, %words: tensor<30522x768xf32>,
                           %positions: tensor<?xi64>, %position_table: tensor<512x768xf32>)
    -> tensor<?x?x768xf32> {
  %t = pe.embed %tokens, %words
      : tensor<?x?xi64>, tensor<30522x768xf32> -> tensor<?x?x768xf32>
  %x = pe.learned %t, %positions, %position_table <max_positions = 512>
      : tensor<?x?x768xf32>, tensor<?xi64>, tensor<512x768xf32>
  return %x : tensor<?x?x768xf32>
}
