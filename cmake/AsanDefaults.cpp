// Built into every executable of an AddressSanitizer build (CMakeLists.txt).
// LLVM's allocators poison their slabs from inline header code, which is
// compiled into pejit instrumented, while libMLIR (Debian's, not
// instrumented) writes into them unpoisoned: ASan then reports a
// use-after-poison that is no bug of ours nor LLVM's, e.g. while parsing a
// large attribute (a LongRoPE factor list of 48 or more entries). Checking
// user poisoning is therefore off by default, as scripts/sanitize.sh also
// sets; every other check stays on.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
extern "C" const char *__asan_default_options() { return "allow_user_poisoning=0"; }
#endif
#endif
