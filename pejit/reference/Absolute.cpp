//===- Absolute.cpp - float64 additive absolute position embeddings --------===//

#include "pejit/reference/Absolute.h"

#include <cmath>
#include <string>

namespace pejit::ref {

namespace {

/// Checks x is [b, s, d] and positions match it; returns the position rows
/// (1 = shared by the batch).
int64_t checkEmbeddingInputs(const Tensor &x, const PositionIds &positions) {
  PEJIT_REF_CHECK(x.rank() == 3, "x must be [b, s, d], got " + shapeToString(x.shape));
  int64_t rows = positions.batchRows(/*sectioned=*/false);
  PEJIT_REF_CHECK(positions.length() == x.shape[1] && (rows == 1 || rows == x.shape[0]),
                  "positions " + shapeToString(positions.shape) + " do not match x " +
                      shapeToString(x.shape));
  return rows;
}

} // namespace

Tensor sinusoidalEmbedding(const Tensor &x, const PositionIds &positions, double base) {
  const int64_t rows = checkEmbeddingInputs(x, positions);
  PEJIT_REF_CHECK(base > 0.0, "base must be > 0");
  const int64_t batch = x.shape[0], length = x.shape[1], dim = x.shape[2];
  Tensor out = x;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < length; ++t) {
      double p = double(positions.get(rows == 1 ? 0 : b, t));
      for (int64_t c = 0; c < dim; ++c) {
        // Vaswani et al. 2017, sec. 3.5: channels 2i and 2i+1 share the
        // frequency 1 / base^(2i/d); even gets sin, odd gets cos.
        int64_t evenChannel = c - (c % 2);
        double angle = p / std::pow(base, double(evenChannel) / double(dim));
        out.at(b, t, c) += (c % 2 == 0) ? std::sin(angle) : std::cos(angle);
      }
    }
  return out;
}

Tensor learnedEmbedding(const Tensor &x, const PositionIds &positions, const Tensor &table) {
  const int64_t rows = checkEmbeddingInputs(x, positions);
  const int64_t batch = x.shape[0], length = x.shape[1], dim = x.shape[2];
  PEJIT_REF_CHECK(table.rank() == 2 && table.shape[1] == dim,
                  "table must be [maxPositions, d = " + std::to_string(dim) + "], got " +
                      shapeToString(table.shape));
  Tensor out = x;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < length; ++t) {
      int64_t p = positions.get(rows == 1 ? 0 : b, t);
      PEJIT_REF_CHECK(p >= 0 && p < table.shape[0], "position " + std::to_string(p) +
                                                        " outside the table's " +
                                                        std::to_string(table.shape[0]) + " rows");
      for (int64_t c = 0; c < dim; ++c)
        out.at(b, t, c) += table.at(p, c);
    }
  return out;
}

Tensor tokenEmbedding(const PositionIds &tokens, const Tensor &table, double scale) {
  PEJIT_REF_CHECK(tokens.rank() == 2, "tokens must be [b, s], got " + shapeToString(tokens.shape));
  PEJIT_REF_CHECK(table.rank() == 2, "table must be [vocab, d], got " + shapeToString(table.shape));
  const int64_t batch = tokens.shape[0], length = tokens.shape[1];
  const int64_t vocab = table.shape[0], dim = table.shape[1];
  Tensor out({batch, length, dim});
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < length; ++t) {
      int64_t token = tokens.data[b * length + t];
      PEJIT_REF_CHECK(token >= 0 && token < vocab, "token " + std::to_string(token) +
                                                       " outside the table's " +
                                                       std::to_string(vocab) + " rows");
      for (int64_t c = 0; c < dim; ++c)
        out.at(b, t, c) = table.at(token, c) * scale;
    }
  return out;
}

Tensor embeddingGradient(const Tensor &grad, const PositionIds &ids, int64_t rows, double scale) {
  PEJIT_REF_CHECK(grad.rank() == 3, "grad must be [b, s, d], got " + shapeToString(grad.shape));
  const int64_t batch = grad.shape[0], length = grad.shape[1], dim = grad.shape[2];
  PEJIT_REF_CHECK(ids.rank() == 1 || ids.rank() == 2,
                  "ids must be [s] or [b, s], got " + shapeToString(ids.shape));
  const bool shared = ids.rank() == 1;
  Tensor out({rows, dim});
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < length; ++t) {
      int64_t id = ids.data[shared ? t : b * length + t];
      PEJIT_REF_CHECK(id >= 0 && id < rows, "id " + std::to_string(id) + " outside the table's " +
                                                std::to_string(rows) + " rows");
      for (int64_t c = 0; c < dim; ++c)
        out.at(id, c) += grad.at(b, t, c) * scale;
    }
  return out;
}

} // namespace pejit::ref
