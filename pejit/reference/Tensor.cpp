//===- Tensor.cpp - float64 tensors and position ids for the reference -----===//

#include "pejit/reference/Tensor.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

namespace pejit::ref {

void fail(const char *where, const std::string &message) {
  std::fprintf(stderr, "pejit reference: %s: %s\n", where, message.c_str());
  std::fflush(stderr);
  std::abort();
}

std::string shapeToString(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

static int64_t productOfShape(const std::vector<int64_t> &shape) {
  int64_t count = 1;
  for (int64_t extent : shape) {
    PEJIT_REF_CHECK(extent >= 0, "shape " + shapeToString(shape) + " has a negative dimension");
    count *= extent;
  }
  return count;
}

Tensor::Tensor(std::vector<int64_t> shapeIn) : shape(std::move(shapeIn)) {
  data.assign(static_cast<size_t>(productOfShape(shape)), 0.0);
}

Tensor::Tensor(std::vector<int64_t> shapeIn, std::vector<double> dataIn)
    : shape(std::move(shapeIn)), data(std::move(dataIn)) {
  PEJIT_REF_CHECK(static_cast<int64_t>(data.size()) == productOfShape(shape),
                  "data has " + std::to_string(data.size()) + " elements but shape " +
                      shapeToString(shape) + " needs " + std::to_string(productOfShape(shape)));
}

int64_t Tensor::dim(int64_t axis) const {
  PEJIT_REF_CHECK(axis >= 0 && axis < rank(), "axis " + std::to_string(axis) +
                                                  " out of range for shape " +
                                                  shapeToString(shape));
  return shape[axis];
}

void Tensor::failOffset(std::initializer_list<int64_t> index) const {
  PEJIT_REF_CHECK(static_cast<int64_t>(index.size()) == rank(),
                  "index of rank " + std::to_string(index.size()) + " into tensor of shape " +
                      shapeToString(shape));
  int64_t axis = 0;
  for (int64_t i : index) {
    PEJIT_REF_CHECK(i >= 0 && i < shape[axis], "index " + std::to_string(i) +
                                                   " out of range on axis " + std::to_string(axis) +
                                                   " of shape " + shapeToString(shape));
    ++axis;
  }
  ::pejit::ref::fail(__func__, "index out of range");
}

PositionIds::PositionIds(std::vector<int64_t> shapeIn, std::vector<int64_t> dataIn)
    : shape(std::move(shapeIn)), data(std::move(dataIn)) {
  PEJIT_REF_CHECK(rank() >= 1 && rank() <= 3,
                  "position ids must have rank 1..3, got shape " + shapeToString(shape));
  PEJIT_REF_CHECK(static_cast<int64_t>(data.size()) == productOfShape(shape),
                  "position ids have " + std::to_string(data.size()) + " elements but shape " +
                      shapeToString(shape));
}

PositionIds PositionIds::shared(std::vector<int64_t> positions) {
  int64_t length = static_cast<int64_t>(positions.size());
  return PositionIds({length}, std::move(positions));
}

int64_t PositionIds::length() const {
  PEJIT_REF_CHECK(rank() >= 1, "position ids are empty");
  return shape.back();
}

int64_t PositionIds::batchRows(bool sectioned) const {
  int64_t plainRank = sectioned ? rank() - 1 : rank();
  PEJIT_REF_CHECK(plainRank == 1 || plainRank == 2, std::string(sectioned ? "sectioned" : "plain") +
                                                        " position ids have unexpected shape " +
                                                        shapeToString(shape));
  return plainRank == 2 ? shape[rank() - 2] : 1;
}

int64_t PositionIds::get(int64_t batch, int64_t index) const {
  PEJIT_REF_CHECK(rank() == 1 || rank() == 2,
                  "plain position ids must be [s] or [b, s], got " + shapeToString(shape));
  PEJIT_REF_CHECK(index >= 0 && index < shape.back(), "position index " + std::to_string(index) +
                                                          " out of range for shape " +
                                                          shapeToString(shape));
  if (rank() == 1)
    return data[index];
  PEJIT_REF_CHECK(batch >= 0 && batch < shape[0], "batch " + std::to_string(batch) +
                                                      " out of range for position ids " +
                                                      shapeToString(shape));
  return data[batch * shape[1] + index];
}

int64_t PositionIds::get(int64_t axis, int64_t batch, int64_t index) const {
  PEJIT_REF_CHECK(rank() == 2 || rank() == 3,
                  "sectioned position ids must be [A, s] or [A, b, s], got " +
                      shapeToString(shape));
  PEJIT_REF_CHECK(axis >= 0 && axis < shape[0], "axis " + std::to_string(axis) +
                                                    " out of range for position ids " +
                                                    shapeToString(shape));
  PEJIT_REF_CHECK(index >= 0 && index < shape.back(), "position index " + std::to_string(index) +
                                                          " out of range for shape " +
                                                          shapeToString(shape));
  if (rank() == 2)
    return data[axis * shape[1] + index];
  PEJIT_REF_CHECK(batch >= 0 && batch < shape[1], "batch " + std::to_string(batch) +
                                                      " out of range for position ids " +
                                                      shapeToString(shape));
  return data[(axis * shape[1] + batch) * shape[2] + index];
}

PositionIds defaultKeyPositions(int64_t skv) {
  PEJIT_REF_CHECK(skv >= 0, "skv must be >= 0");
  std::vector<int64_t> positions(static_cast<size_t>(skv));
  for (int64_t j = 0; j < skv; ++j)
    positions[j] = j;
  return PositionIds::shared(std::move(positions));
}

PositionIds defaultQueryPositions(int64_t sq, int64_t skv) {
  PEJIT_REF_CHECK(sq >= 0 && skv >= 0, "sq and skv must be >= 0");
  std::vector<int64_t> positions(static_cast<size_t>(sq));
  for (int64_t i = 0; i < sq; ++i)
    positions[i] = skv - sq + i;
  return PositionIds::shared(std::move(positions));
}

} // namespace pejit::ref
