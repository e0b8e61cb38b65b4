// What the extension's files share: pejit.Error, and Expected -> value.
#ifndef PEJIT_PYTHON_COMMON_H
#define PEJIT_PYTHON_COMMON_H

#include "pejit/core/Types.h"

#include <nanobind/nanobind.h>

#include <stdexcept>

namespace pejit::python {

/// Carries pejit's message to Python as pejit.Error (a ValueError).
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The value, or pejit.Error with the message.
template <typename T> T take(Expected<T> value) {
  if (!value)
    throw Error(value.error());
  return std::move(*value);
}

/// Builder.cpp: the C++ builder's structs and the spec text it writes.
void bindBuilder(nanobind::module_ &m);

} // namespace pejit::python

#endif // PEJIT_PYTHON_COMMON_H
