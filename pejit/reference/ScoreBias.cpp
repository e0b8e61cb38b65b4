//===- ScoreBias.cpp - float64 ALiBi, T5 and Shaw relative-position terms -===//

#include "pejit/reference/ScoreBias.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

namespace pejit::ref {

namespace {

// ALiBi paper code (Press et al. 2022), get_slopes_power_of_2:
// start = 2^(−2^−(log2 n − 3)), slopes = [start·start^i for i in range(n)].
std::vector<double> alibiSlopesPowerOfTwo(int64_t n) {
  double start = std::pow(2.0, -std::pow(2.0, -(std::log2(double(n)) - 3.0)));
  double ratio = start;
  std::vector<double> slopes(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    slopes[i] = start * std::pow(ratio, double(i));
  return slopes;
}

bool isPowerOfTwo(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

} // namespace

std::vector<double> alibiSlopes(int64_t numHeads) {
  PEJIT_REF_CHECK(numHeads > 0, "numHeads must be > 0");
  // ALiBi paper code, get_slopes(n).
  if (isPowerOfTwo(numHeads))
    return alibiSlopesPowerOfTwo(numHeads);
  // Non-power-of-two: slopes of the closest lower power of two, then every
  // other slope of twice that, up to n slopes.
  // closest * 2 < numHeads, written so that it cannot overflow (at
  // numHeads = INT64_MAX the product did, and the loop never ended).
  int64_t closest = 1;
  while (closest <= (numHeads - 1) / 2)
    closest *= 2;
  std::vector<double> slopes = alibiSlopesPowerOfTwo(closest);
  std::vector<double> finer = alibiSlopes(2 * closest);
  for (size_t i = 0; i < finer.size() && static_cast<int64_t>(slopes.size()) < numHeads; i += 2)
    slopes.push_back(finer[i]);
  return slopes;
}

Tensor repeatBatchRows(const Tensor &bias, int64_t rows) {
  PEJIT_REF_CHECK(bias.rank() == 4 && (bias.shape[0] == 1 || bias.shape[0] == rows),
                  "bias must be [1 or " + std::to_string(rows) + ", h, sq, skv], got " +
                      shapeToString(bias.shape));
  if (bias.shape[0] == rows)
    return bias;
  Tensor out({rows, bias.shape[1], bias.shape[2], bias.shape[3]});
  const size_t one = bias.data.size();
  for (int64_t b = 0; b < rows; ++b)
    std::copy(bias.data.begin(), bias.data.end(), out.data.begin() + b * one);
  return out;
}

int64_t RelativeDistance::operator()(int64_t b, int64_t i, int64_t j) const {
  if (queryPositions && keyPositions)
    return keyPositions->get(b, j) - queryPositions->get(b, i);
  return j - (i + skv - sq);
}

int64_t RelativeDistance::batchRows() const {
  if (!queryPositions || !keyPositions)
    return 1;
  return std::max(queryPositions->batchRows(false), keyPositions->batchRows(false));
}

double alibiBase(AlibiForm form, const RelativeDistance &distance, int64_t b, int64_t i,
                 int64_t j) {
  // docs/semantics.md, ALiBi: query − key, from the bottom-right aligned
  // query index (or from the positions).
  const double d = -static_cast<double>(distance(b, i, j));
  if (form == AlibiForm::Bloom) {
    // The key's own coordinate: its index, or its position id.
    const PositionIds *keys = distance.keyPositions;
    return keys ? double(keys->get(keys->batchRows(false) == 1 ? 0 : b, j)) : double(j);
  }
  return form == AlibiForm::Causal ? -d : -std::fabs(d);
}

Tensor alibiBias(int64_t numHeads, int64_t headOffset, int64_t heads, AlibiForm form, int64_t sq,
                 int64_t skv, const std::vector<double> &explicitSlopes) {
  PEJIT_REF_CHECK(sq >= 0 && skv >= 0, "sq and skv must be >= 0");
  return alibiBias(numHeads, headOffset, heads, form, RelativeDistance{sq, skv}, explicitSlopes);
}

Tensor alibiBias(int64_t numHeads, int64_t headOffset, int64_t heads, AlibiForm form,
                 const RelativeDistance &distance, const std::vector<double> &explicitSlopes) {
  PEJIT_REF_CHECK(numHeads > 0 && heads > 0, "head counts must be > 0");
  PEJIT_REF_CHECK(headOffset >= 0 && headOffset + heads <= numHeads,
                  "shard heads [" + std::to_string(headOffset) + ", " +
                      std::to_string(headOffset + heads) + ") exceed numHeads " +
                      std::to_string(numHeads));
  PEJIT_REF_CHECK(explicitSlopes.empty() || static_cast<int64_t>(explicitSlopes.size()) == numHeads,
                  "explicitSlopes must hold numHeads = " + std::to_string(numHeads) + " slopes");
  std::vector<double> slopes = explicitSlopes.empty() ? alibiSlopes(numHeads) : explicitSlopes;
  const int64_t rows = distance.batchRows(), sq = distance.sq, skv = distance.skv;
  Tensor bias({rows, heads, sq, skv});
  for (int64_t b = 0; b < rows; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      double slope = slopes[headOffset + h];
      for (int64_t i = 0; i < sq; ++i) {
        for (int64_t j = 0; j < skv; ++j) {
          bias.at(b, h, i, j) = slope * alibiBase(form, distance, b, i, j);
        }
      }
    }
  return bias;
}

int64_t t5RelativePositionBucket(int64_t relativePosition, bool bidirectional, int64_t numBuckets,
                                 int64_t maxDistance) {
  // T5 `_relative_position_bucket` (Raffel et al. 2020; HF modeling_t5).
  int64_t bucket = 0;
  if (bidirectional) {
    PEJIT_REF_CHECK(numBuckets >= 4, "bidirectional T5 needs numBuckets >= 4");
    numBuckets /= 2;
    if (relativePosition > 0)
      bucket += numBuckets;
    relativePosition = std::llabs(relativePosition);
  } else {
    PEJIT_REF_CHECK(numBuckets >= 2, "causal T5 needs numBuckets >= 2");
    relativePosition = -std::min<int64_t>(relativePosition, 0);
  }
  const int64_t maxExact = numBuckets / 2;
  PEJIT_REF_CHECK(maxDistance > maxExact,
                  "maxDistance must exceed the exact-bucket range " + std::to_string(maxExact));
  if (relativePosition < maxExact)
    return bucket + relativePosition;
  // Logarithmic buckets up to maxDistance; truncation toward zero as T5's
  // .to(long). (Checked: float64 gives the same buckets as T5's float32 for
  // numBuckets <= 128, maxDistance <= 2048, |rel| < 2e5.)
  double logRatio = std::log(double(relativePosition) / double(maxExact)) /
                    std::log(double(maxDistance) / double(maxExact)) *
                    double(numBuckets - maxExact);
  int64_t large = maxExact + static_cast<int64_t>(logRatio);
  return bucket + std::min(large, numBuckets - 1);
}

Tensor t5Bias(const Tensor &table, bool bidirectional, int64_t numBuckets, int64_t maxDistance,
              int64_t sq, int64_t skv) {
  PEJIT_REF_CHECK(sq >= 0 && skv >= 0, "sq and skv must be >= 0");
  return t5Bias(table, bidirectional, numBuckets, maxDistance, RelativeDistance{sq, skv});
}

Tensor t5Bias(const Tensor &table, bool bidirectional, int64_t numBuckets, int64_t maxDistance,
              const RelativeDistance &distance) {
  PEJIT_REF_CHECK(table.rank() == 2 && table.shape[0] == numBuckets,
                  "table must be [numBuckets = " + std::to_string(numBuckets) + ", heads], got " +
                      shapeToString(table.shape));
  const int64_t heads = table.shape[1], rows = distance.batchRows();
  Tensor bias({rows, heads, distance.sq, distance.skv});
  for (int64_t b = 0; b < rows; ++b)
    for (int64_t i = 0; i < distance.sq; ++i) {
      for (int64_t j = 0; j < distance.skv; ++j) {
        // docs/semantics.md, T5; relative = key − query (index or position).
        int64_t bucket =
            t5RelativePositionBucket(distance(b, i, j), bidirectional, numBuckets, maxDistance);
        for (int64_t h = 0; h < heads; ++h)
          bias.at(b, h, i, j) = table.at(bucket, h);
      }
    }
  return bias;
}

int64_t shawRelativeIndex(int64_t i, int64_t j, int64_t clip, int64_t sq, int64_t skv) {
  PEJIT_REF_CHECK(clip >= 0, "clip must be >= 0");
  // Shaw et al. 2018: clip(j − i, −k, k), with the aligned query index.
  return std::clamp<int64_t>(j - (i + skv - sq), -clip, clip);
}

Tensor relativeKeyTerm(const Tensor &q, const Tensor &keyTable, int64_t clip, int64_t skv) {
  PEJIT_REF_CHECK(q.rank() == 4, "q must be [b, h, sq, d], got " + shapeToString(q.shape));
  PEJIT_REF_CHECK(skv >= 0, "skv must be >= 0");
  return relativeKeyTerm(q, keyTable, clip, RelativeDistance{q.shape[2], skv});
}

Tensor relativeKeyTerm(const Tensor &q, const Tensor &keyTable, int64_t clip,
                       const RelativeDistance &distance) {
  const int64_t skv = distance.skv;
  PEJIT_REF_CHECK(q.rank() == 4, "q must be [b, h, sq, d], got " + shapeToString(q.shape));
  const int64_t batch = q.shape[0], heads = q.shape[1], sq = q.shape[2], headDim = q.shape[3];
  PEJIT_REF_CHECK(clip >= 0, "clip must be >= 0");
  const bool perHead = keyTable.rank() == 3;
  PEJIT_REF_CHECK(
      (keyTable.rank() == 2 || (perHead && keyTable.shape[0] == heads)) &&
          keyTable.shape[keyTable.rank() - 2] == 2 * clip + 1 && keyTable.shape.back() == headDim,
      "keyTable must be [(h = " + std::to_string(heads) +
          ",) 2k+1 = " + std::to_string(2 * clip + 1) + ", d = " + std::to_string(headDim) +
          "], got " + shapeToString(keyTable.shape));
  Tensor term({batch, heads, sq, skv});
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < sq; ++i)
        for (int64_t j = 0; j < skv; ++j) {
          // Shaw et al. 2018, eq. (4): q_i · a^K_ij.
          int64_t row = std::clamp<int64_t>(distance(b, i, j), -clip, clip) + clip;
          double dot = 0.0;
          for (int64_t c = 0; c < headDim; ++c)
            dot += q.at(b, h, i, c) * (perHead ? keyTable.at(h, row, c) : keyTable.at(row, c));
          term.at(b, h, i, j) = dot;
        }
  return term;
}

Tensor relativeValueTerm(const Tensor &valueTable, int64_t clip, int64_t sq, int64_t skv) {
  PEJIT_REF_CHECK(clip >= 0, "clip must be >= 0");
  const bool perHead = valueTable.rank() == 3;
  PEJIT_REF_CHECK((valueTable.rank() == 2 || perHead) &&
                      valueTable.shape[valueTable.rank() - 2] == 2 * clip + 1,
                  "valueTable must be [(h,) 2k+1 = " + std::to_string(2 * clip + 1) +
                      ", dv], got " + shapeToString(valueTable.shape));
  PEJIT_REF_CHECK(sq >= 0 && skv >= 0, "sq and skv must be >= 0");
  const int64_t valueDim = valueTable.shape.back(), heads = perHead ? valueTable.shape[0] : 1;
  Tensor term(perHead ? std::vector<int64_t>{heads, sq, skv, valueDim}
                      : std::vector<int64_t>{sq, skv, valueDim});
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < sq; ++i)
      for (int64_t j = 0; j < skv; ++j) {
        // Shaw et al. 2018, eq. (3): a^V_ij.
        int64_t row = shawRelativeIndex(i, j, clip, sq, skv) + clip;
        for (int64_t c = 0; c < valueDim; ++c) {
          if (perHead)
            term.at(h, i, j, c) = valueTable.at(h, row, c);
          else
            term.at(i, j, c) = valueTable.at(row, c);
        }
      }
  return term;
}

} // namespace pejit::ref
