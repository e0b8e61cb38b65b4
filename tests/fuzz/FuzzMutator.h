// The fuzz lane's inputs: the repo's own IR (examples/ and every lit input,
// split at `// -----`) and attention programs from the C++ builder with
// random, often extreme, parameters, each mutated a few times by text
// operators that know MLIR's shape (numbers, dims, keywords, attributes).
#ifndef PEJIT_TESTS_FUZZ_FUZZMUTATOR_H
#define PEJIT_TESTS_FUZZ_FUZZMUTATOR_H

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace pejit::fuzz {

using Rng = std::mt19937_64;

/// Every .mlir under `sourceDir`/examples and `sourceDir`/tests/lit, split
/// into its `// -----` pieces.
std::vector<std::string> loadCorpus(const std::string &sourceDir);

/// An unfused attention program from the C++ builder: random small shapes
/// (so it can be run and checked), random RoPE scaling, ALiBi, masks and
/// softcap/scale, with extreme values now and then.
std::string randomBuilderProgram(Rng &rng);

/// `seed` with 1 to 4 mutations; `corpus` supplies lines to splice in.
std::string mutate(const std::string &seed, const std::vector<std::string> &corpus, Rng &rng);

} // namespace pejit::fuzz

#endif // PEJIT_TESTS_FUZZ_FUZZMUTATOR_H
