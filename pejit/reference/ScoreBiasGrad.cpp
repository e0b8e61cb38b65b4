//===- ScoreBiasGrad.cpp - float64 gradients of the score-side encodings --===//

#include "pejit/reference/ScoreBiasGrad.h"

#include <algorithm>
#include <string>

namespace pejit::ref {

namespace {

void checkScores(const Tensor &dScores, const RelativeDistance &distance) {
  PEJIT_REF_CHECK(
      dScores.rank() == 4 && dScores.shape[2] == distance.sq && dScores.shape[3] == distance.skv,
      "dScores must be [b, h, sq = " + std::to_string(distance.sq) +
          ", skv = " + std::to_string(distance.skv) + "], got " + shapeToString(dScores.shape));
  const int64_t rows = distance.batchRows();
  PEJIT_REF_CHECK(rows == 1 || rows == dScores.shape[0],
                  "position ids have " + std::to_string(rows) + " batch rows, dScores " +
                      std::to_string(dScores.shape[0]));
}

} // namespace

Tensor biasGradient(const Tensor &dScores, const std::vector<int64_t> &biasShape) {
  PEJIT_REF_CHECK(dScores.rank() == 4, "dScores must be [b, h, sq, skv]");
  PEJIT_REF_CHECK(biasShape.size() == 4 &&
                      (biasShape[0] == 1 || biasShape[0] == dScores.shape[0]) &&
                      (biasShape[1] == 1 || biasShape[1] == dScores.shape[1]) &&
                      biasShape[2] == dScores.shape[2] && biasShape[3] == dScores.shape[3],
                  "bias " + shapeToString(biasShape) + " does not broadcast to dScores " +
                      shapeToString(dScores.shape));
  Tensor grad(biasShape);
  for (int64_t b = 0; b < dScores.shape[0]; ++b)
    for (int64_t h = 0; h < dScores.shape[1]; ++h)
      for (int64_t i = 0; i < dScores.shape[2]; ++i)
        for (int64_t j = 0; j < dScores.shape[3]; ++j)
          grad.at(biasShape[0] == 1 ? 0 : b, biasShape[1] == 1 ? 0 : h, i, j) +=
              dScores.at(b, h, i, j);
  return grad;
}

Tensor t5TableGradient(const Tensor &dScores, bool bidirectional, int64_t numBuckets,
                       int64_t maxDistance, const RelativeDistance &distance) {
  checkScores(dScores, distance);
  const int64_t heads = dScores.shape[1], rows = distance.batchRows();
  Tensor grad({numBuckets, heads});
  for (int64_t b = 0; b < dScores.shape[0]; ++b)
    for (int64_t i = 0; i < distance.sq; ++i)
      for (int64_t j = 0; j < distance.skv; ++j) {
        const int64_t bucket = t5RelativePositionBucket(distance(rows == 1 ? 0 : b, i, j),
                                                        bidirectional, numBuckets, maxDistance);
        for (int64_t h = 0; h < heads; ++h)
          grad.at(bucket, h) += dScores.at(b, h, i, j);
      }
  return grad;
}

std::vector<double> alibiSlopeGradient(const Tensor &dScores, AlibiForm form,
                                       const RelativeDistance &distance) {
  checkScores(dScores, distance);
  const int64_t rows = distance.batchRows();
  std::vector<double> grad(static_cast<size_t>(dScores.shape[1]), 0.0);
  for (int64_t b = 0; b < dScores.shape[0]; ++b)
    for (int64_t h = 0; h < dScores.shape[1]; ++h)
      for (int64_t i = 0; i < distance.sq; ++i)
        for (int64_t j = 0; j < distance.skv; ++j)
          grad[h] += alibiBase(form, distance, rows == 1 ? 0 : b, i, j) * dScores.at(b, h, i, j);
  return grad;
}

RelativeKeyTermGradients relativeKeyTermBackward(const Tensor &q, const Tensor &keyTable,
                                                 int64_t clip, const RelativeDistance &distance,
                                                 const Tensor &dKeyTerm) {
  PEJIT_REF_CHECK(q.rank() == 4, "q must be [b, h, sq, d], got " + shapeToString(q.shape));
  const int64_t batch = q.shape[0], heads = q.shape[1], sq = q.shape[2], headDim = q.shape[3];
  PEJIT_REF_CHECK(dKeyTerm.shape == std::vector<int64_t>({batch, heads, sq, distance.skv}),
                  "dKeyTerm must be [b, h, sq, skv], got " + shapeToString(dKeyTerm.shape));
  const bool perHead = keyTable.rank() == 3;
  PEJIT_REF_CHECK((keyTable.rank() == 2 || (perHead && keyTable.shape[0] == heads)) &&
                      keyTable.shape[keyTable.rank() - 2] == 2 * clip + 1 &&
                      keyTable.shape.back() == headDim,
                  "keyTable must be [(h,) 2k+1, d], got " + shapeToString(keyTable.shape));
  const int64_t rows = distance.batchRows();
  RelativeKeyTermGradients grads{Tensor(q.shape), Tensor(keyTable.shape)};
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < sq; ++i)
        for (int64_t j = 0; j < distance.skv; ++j) {
          const double dE = dKeyTerm.at(b, h, i, j);
          if (dE == 0.0)
            continue;
          const int64_t row =
              std::clamp<int64_t>(distance(rows == 1 ? 0 : b, i, j), -clip, clip) + clip;
          for (int64_t c = 0; c < headDim; ++c) {
            double &tableGrad =
                perHead ? grads.dKeyTable.at(h, row, c) : grads.dKeyTable.at(row, c);
            const double tableValue = perHead ? keyTable.at(h, row, c) : keyTable.at(row, c);
            grads.dq.at(b, h, i, c) += dE * tableValue;
            tableGrad += dE * q.at(b, h, i, c);
          }
        }
  return grads;
}

Tensor relativeValueTableGradient(const Tensor &dValueTerm, int64_t clip, int64_t sq, int64_t skv) {
  const bool perHead = dValueTerm.rank() == 4;
  PEJIT_REF_CHECK((dValueTerm.rank() == 3 || perHead) &&
                      dValueTerm.shape[dValueTerm.rank() - 3] == sq &&
                      dValueTerm.shape[dValueTerm.rank() - 2] == skv,
                  "dValueTerm must be [(h,) sq, skv, dv], got " + shapeToString(dValueTerm.shape));
  const int64_t valueDim = dValueTerm.shape.back(), heads = perHead ? dValueTerm.shape[0] : 1;
  Tensor grad(perHead ? std::vector<int64_t>{heads, 2 * clip + 1, valueDim}
                      : std::vector<int64_t>{2 * clip + 1, valueDim});
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < sq; ++i)
      for (int64_t j = 0; j < skv; ++j) {
        const int64_t row = shawRelativeIndex(i, j, clip, sq, skv) + clip;
        for (int64_t c = 0; c < valueDim; ++c)
          (perHead ? grad.at(h, row, c) : grad.at(row, c)) +=
              perHead ? dValueTerm.at(h, i, j, c) : dValueTerm.at(i, j, c);
      }
  return grad;
}

} // namespace pejit::ref
