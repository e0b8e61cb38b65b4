// Well-formed pe/attn programs for the fuzz lane, from a small grammar of
// the fused attention op: random encodings (RoPE with a random scaling and
// partial or runtime-scaled forms, ALiBi, T5, Shaw a^K / a^V shared or per
// head, a bias tensor, distances by position), in a random order of the
// function's arguments, random masks (causal, windows, softcap), dtypes and
// shapes inside docs/limits.md, `?` lengths now and then. Each parses and
// verifies by construction (the mutator's inputs mostly do not), so the
// lane's time goes to compiling, running and checking against float64.
#ifndef PEJIT_TESTS_FUZZ_FUZZGRAMMAR_H
#define PEJIT_TESTS_FUZZ_FUZZGRAMMAR_H

#include "tests/fuzz/FuzzMutator.h"

#include <string>

namespace pejit::fuzz {

/// One random fused attention program (a func.func returning the op).
std::string randomGrammarProgram(Rng &rng);

} // namespace pejit::fuzz

#endif // PEJIT_TESTS_FUZZ_FUZZGRAMMAR_H
