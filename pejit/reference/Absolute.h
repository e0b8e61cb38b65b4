//===- Absolute.h - float64 additive absolute position embeddings ----------===//
//
// Absolute encodings are added to token embeddings (fused into the embedding
// gather, not into attention). Position ids, not sequence indices, pick the row.
//
//===----------------------------------------------------------------------===//
#ifndef PEJIT_RUNTIME_REFERENCE_ABSOLUTE_H
#define PEJIT_RUNTIME_REFERENCE_ABSOLUTE_H

#include "pejit/reference/Tensor.h"

namespace pejit::ref {

/// x: [b, s, d]; positions [s] or [b, s]. Returns x + PE with
/// PE(p, 2i) = sin(p / base^(2i/d)), PE(p, 2i+1) = cos(p / base^(2i/d)).
Tensor sinusoidalEmbedding(const Tensor &x, const PositionIds &positions, double base = 10000.0);

/// x: [b, s, d]; positions [s] or [b, s] in [0, maxPositions); table:
/// [maxPositions, d]. Returns x + table[p].
Tensor learnedEmbedding(const Tensor &x, const PositionIds &positions, const Tensor &table);

/// tokens [b, s] in [0, vocab); table [vocab, d]. Returns [b, s, d] with
/// row (b, t) = table[tokens[b, t]] * scale.
Tensor tokenEmbedding(const PositionIds &tokens, const Tensor &table, double scale);

/// The gradient of a table read by rows at `ids` (pe.embed_grad): grad
/// [b, s, d]; ids [b, s] or [s] (shared by the batch), each in [0, rows).
/// Returns [rows, d] with row v = scale * sum of grad[b, t] over ids = v.
Tensor embeddingGradient(const Tensor &grad, const PositionIds &ids, int64_t rows, double scale);

} // namespace pejit::ref

#endif // PEJIT_RUNTIME_REFERENCE_ABSOLUTE_H
