#include "pejit/core/KernelMeta.h"

#include <set>
#include <sstream>

namespace pejit {

namespace {

void writeDims(std::ostream &out, const char *key, const std::vector<int64_t> &dims) {
  out << key;
  for (int64_t d : dims)
    out << " " << d;
  out << "\n";
}

/// Reads `count` integers after `key`; false when they are not there.
bool readInts(std::istringstream &line, int64_t *values, int count) {
  for (int i = 0; i < count; ++i)
    if (!(line >> values[i]))
      return false;
  return true;
}

/// Reads `count` dims, each a positive integer or `?` (kDynamicDim).
bool readDims(std::istringstream &line, int64_t *values, int count) {
  for (int i = 0; i < count; ++i) {
    std::string word;
    if (!(line >> word))
      return false;
    if (word == "?") {
      values[i] = kDynamicDim;
      continue;
    }
    std::istringstream number(word);
    if (!(number >> values[i]) || !number.eof() || values[i] <= 0)
      return false;
  }
  return true;
}

} // namespace

std::string writeNvidiaMeta(const NvidiaLaunch &launch, const KernelDescription &description) {
  std::ostringstream out;
  out << "arch " << launch.arch << "\n";
  if (!launch.attention())
    out << "kernel " << launch.kernel << "\n";
  // A shape class's grid and split-KV buffers follow each call's lengths
  // (NvidiaPlan.h): only a static kernel has them here.
  if (!launch.grid.empty())
    writeDims(out, "grid", launch.grid);
  writeDims(out, "block", launch.block);
  out << "dtype " << dtypeName(description.inputDtype) << "\n";
  out << "out " << dtypeName(description.outputDtype) << "\n";
  out << "scratch " << description.scratchFloats << "\n";
  // A backward's floats per row (D, lse and Shaw's terms); 2 is the default.
  if (description.rowScratchFloats != 2)
    out << "row_scratch " << description.rowScratchFloats << "\n";
  out << "splits " << launch.splits << " " << launch.partialOutputFloats << " "
      << launch.partialRowFloats << "\n";
  if (!launch.combineGrid.empty())
    writeDims(out, "combine", launch.combineGrid);
  writeDims(out, "tiles", {description.queryTile, description.keyTile});
  writeDims(out, "tables",
            {description.tableFloatsPerQueryPosition, description.tableFloatsPerKeyPosition});
  const Shape &s = description.shape;
  out << "shape";
  for (int64_t d : {s.batch, s.queryHeads, s.kvHeads, s.querySeq, s.keySeq, s.headDim, s.valueDim})
    out << " " << dimText(d);
  out << "\n";
  writeDims(out, "positions",
            {description.queryPositionRows, description.keyPositionRows, description.positionAxes});
  out << "arguments " << description.signature.str() << "\n";
  return out.str();
}

Status readNvidiaMeta(const std::string &text, NvidiaLaunch &launch,
                      KernelDescription &description) {
  std::istringstream lines(text);
  std::set<std::string> seen;
  for (std::string lineText; std::getline(lines, lineText);) {
    std::istringstream line(lineText);
    std::string key;
    if (!(line >> key))
      continue;
    bool ok = true;
    if (key == "arch") {
      ok = static_cast<bool>(line >> launch.arch);
    } else if (key == "kernel") {
      ok = (line >> launch.kernel) &&
           (launch.kernel == "pejit_attention" || launch.kernel == "pejit_transform" ||
            launch.kernel == "pejit_embed" || launch.kernel == "pejit_linear" ||
            launch.kernel == "pejit_backward");
    } else if (key == "grid" || key == "block" || key == "combine") {
      std::vector<int64_t> &dims = key == "grid"    ? launch.grid
                                   : key == "block" ? launch.block
                                                    : launch.combineGrid;
      dims.assign(3, 0);
      ok = readInts(line, dims.data(), 3) && dims[0] > 0 && dims[1] > 0 && dims[2] > 0;
    } else if (key == "dtype" || key == "out") {
      std::string name;
      std::optional<DType> dtype = (line >> name) ? floatDtypeNamed(name) : std::nullopt;
      ok = dtype.has_value();
      if (ok)
        (key == "dtype" ? description.inputDtype : description.outputDtype) = *dtype;
    } else if (key == "scratch") {
      ok = readInts(line, &description.scratchFloats, 1) && description.scratchFloats >= 0;
    } else if (key == "row_scratch") {
      ok = readInts(line, &description.rowScratchFloats, 1) && description.rowScratchFloats >= 2;
    } else if (key == "splits") {
      int64_t values[3];
      ok = readInts(line, values, 3) && values[0] >= 0 && values[1] >= 0 && values[2] >= 0;
      if (ok) {
        launch.splits = values[0];
        launch.partialOutputFloats = values[1];
        launch.partialRowFloats = values[2];
      }
    } else if (key == "tiles") {
      int64_t v[2];
      ok = readInts(line, v, 2) && v[0] >= 0 && v[1] >= 0;
      if (ok) {
        description.queryTile = v[0];
        description.keyTile = v[1];
      }
    } else if (key == "tables") {
      int64_t v[2];
      ok = readInts(line, v, 2) && v[0] >= 0 && v[1] >= 0;
      if (ok) {
        description.tableFloatsPerQueryPosition = v[0];
        description.tableFloatsPerKeyPosition = v[1];
      }
    } else if (key == "shape") {
      int64_t v[7];
      ok = readDims(line, v, 7) && v[1] > 0 && v[2] > 0 && v[5] > 0 && v[6] > 0;
      if (ok)
        description.shape = Shape{v[0], v[1], v[2], v[3], v[4], v[5], v[6]};
    } else if (key == "positions") {
      int64_t v[3];
      ok = readInts(line, v, 3) && v[0] > 0 && v[1] > 0 && v[2] > 0;
      if (ok) {
        description.queryPositionRows = v[0];
        description.keyPositionRows = v[1];
        description.positionAxes = v[2];
      }
    } else if (key == "arguments") {
      std::string rest;
      std::getline(line >> std::ws, rest);
      if (rest.empty())
        continue; // a kernel without inputs: nothing to bind by
      Expected<KernelSignature> signature = KernelSignature::parse(rest);
      if (!signature)
        return Status::error("kernel meta: " + signature.error());
      description.signature = std::move(*signature);
    } else {
      continue;
    }
    if (!ok)
      return Status::error("kernel meta: malformed '" + key + "' line: '" + lineText + "'");
    seen.insert(key);
  }
  for (const char *required : {"arch", "block", "dtype", "out", "scratch", "splits"})
    if (!seen.count(required))
      return Status::error(std::string("kernel meta: no '") + required + "' line");
  // A static kernel is launched as the meta says; a shape class's launch
  // is planned per call from its tiles and tables.
  if (description.shape.hasDynamicDims()) {
    if (!seen.count("tables") || description.queryTile <= 0 || description.keyTile <= 0)
      return Status::error("kernel meta: a shape class (`?` in 'shape') needs its 'tiles' (both "
                           "positive) and 'tables' lines");
  } else {
    for (const char *required : {"grid", "combine"})
      if (!seen.count(required) && (launch.attention() || std::string(required) == "grid"))
        return Status::error(std::string("kernel meta: no '") + required + "' line");
    if (launch.splits < 1)
      return Status::error("kernel meta: a static kernel's 'splits' must be at least 1");
  }
  return Status();
}

} // namespace pejit
