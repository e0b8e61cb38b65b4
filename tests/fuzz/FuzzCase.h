// One fuzz input through everything a user's program goes through: the
// nesting guard, parse + verify, print/parse roundtrips (custom and generic
// form), and for an attention program the runtime (fuse, instantiate, JIT),
// a run on random inputs and the float64 reference interpreter. Runs in a
// child process of the driver, so a crash or a hang is caught there.
#ifndef PEJIT_TESTS_FUZZ_FUZZCASE_H
#define PEJIT_TESTS_FUZZ_FUZZCASE_H

#include <cstdint>
#include <string>

namespace pejit::fuzz {

enum class Verdict {
  RejectedParse,   ///< a diagnostic at parse or verify time (a clean error)
  Parsed,          ///< accepted, roundtrips, no attention to compile
  RejectedCompile, ///< accepted IR the runtime refuses with a message
  RejectedRun,     ///< compiled; run() refused the inputs with a message
  Compiled,        ///< compiled; too big to run and check here
  Checked,         ///< ran and matched the float64 reference
  Bounded,         ///< ran; ill-conditioned (huge scores), so checked against bounds
  Overflows,       ///< ran; its scores pass f32's range before any softcap: no result to check
  RoundtripFailure,
  WrongResult,
};

const char *verdictName(Verdict verdict);
bool isFailure(Verdict verdict);

struct CaseResult {
  Verdict verdict = Verdict::RejectedParse;
  std::string detail; ///< the first line of the message, or the error measured
};

/// Runs `text` through the pipeline; `inputSeed` draws the run's inputs.
CaseResult runCase(const std::string &text, uint64_t inputSeed);

} // namespace pejit::fuzz

#endif // PEJIT_TESTS_FUZZ_FUZZCASE_H
