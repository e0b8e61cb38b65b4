// The fuzz lane: a fixed seed and a time budget (2 minutes by default), each
// input in a child process (FuzzCase.h) with a timeout. It fails on any
// crash (a signal or an unexpected exit), hang, failed roundtrip or wrong
// result of an accepted program, and writes each failing input to the
// report directory as a reproducer. Longer or other runs:
//   pejit-fuzz-tests --fuzz-seconds=3600 --fuzz-seed=7 --fuzz-out=DIR
// (or PEJIT_FUZZ_SECONDS, PEJIT_FUZZ_SEED, PEJIT_FUZZ_OUT), and one
// reproducer again: pejit-fuzz-tests --fuzz-replay=FILE.
#include "tests/fuzz/FuzzCase.h"
#include "tests/fuzz/FuzzGrammar.h"
#include "tests/fuzz/FuzzMutator.h"

#include "gtest/gtest.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sys/resource.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace pejit::fuzz;
using Clock = std::chrono::steady_clock;

namespace {

struct Settings {
  double seconds = 120;
  uint64_t seed = 20261201;
  std::string out;
  double caseTimeout = 60;
  bool verbose = false; // PEJIT_FUZZ_VERBOSE=1: one line per input
} settings;

/// One input running in a child.
struct Running {
  std::string text;
  uint64_t inputSeed = 0;
  int pipe = -1;
  std::string errFile;
  Clock::time_point start;
};

struct Tally {
  std::map<std::string, int64_t> counts;
  std::vector<std::string> failures;
  int64_t inputs = 0;
};

bool underAddressSanitizer() {
#if defined(__SANITIZE_ADDRESS__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return true;
#endif
#endif
  return false;
}

std::string readAll(int fd) {
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;)
    text.append(buffer, static_cast<size_t>(n));
  return text;
}

/// What a crashed child said: the sanitizer's or LLVM's first report line
/// when there is one, then the end of its stderr.
std::string crashReport(const std::string &path, size_t bytes) {
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  std::string first;
  for (const char *marker : {"runtime error:", "ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                             "Stack dump:", "terminate called"}) {
    size_t at = text.find(marker);
    if (at != std::string::npos) {
      size_t begin = text.rfind('\n', at);
      begin = begin == std::string::npos ? 0 : begin + 1;
      first = text.substr(begin, text.find('\n', at) - begin) + "\n";
      break;
    }
  }
  return first + (text.size() > bytes ? text.substr(text.size() - bytes) : text);
}

pid_t startChild(const std::string &text, uint64_t inputSeed, const std::string &errFile,
                 int &readEnd) {
  int fds[2];
  if (::pipe(fds) != 0)
    return -1;
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = ::fork();
  if (pid != 0) {
    ::close(fds[1]);
    readEnd = fds[0];
    return pid;
  }
  ::close(fds[0]);
  int err = ::open(errFile.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (err >= 0) {
    ::dup2(err, STDERR_FILENO);
    ::close(err);
  }
  ::setenv("PEJIT_DISABLE_CACHE", "1", 1);
  ::setenv("PEJIT_NUM_THREADS", "1", 1);
  if (!underAddressSanitizer()) { // ASan reserves terabytes of shadow address space
    struct rlimit limit = {rlim_t(6) << 30, rlim_t(6) << 30};
    ::setrlimit(RLIMIT_AS, &limit);
  }
  CaseResult result = runCase(text, inputSeed);
  std::string line = std::string(verdictName(result.verdict)) + "\t" + result.detail;
  ssize_t ignored = ::write(fds[1], line.data(), line.size());
  (void)ignored;
  ::_exit(0);
}

void record(Tally &tally, const Running &run, const std::string &kind, const std::string &detail,
            bool failure) {
  tally.counts[kind] += 1;
  if (settings.verbose)
    std::printf("%s\t%s\n", kind.c_str(), detail.substr(0, 200).c_str());
  if (!failure)
    return;
  std::string path =
      settings.out + "/" + kind + "-" + std::to_string(tally.failures.size()) + ".mlir";
  // The report as comments, so the file is the input as it ran.
  std::string comment = "// pejit fuzz: " + kind + ": ";
  for (char c : detail)
    comment += c == '\n' ? std::string("\n//   ") : std::string(1, c);
  std::ofstream(path) << comment << "\n// input seed " << run.inputSeed << "\n" << run.text;
  tally.failures.push_back(kind + ": " + detail + " (reproducer " + path + ")");
}

/// Collects a child that ended or ran past the timeout; true when done.
bool reap(pid_t pid, Running &run, Tally &tally) {
  int status = 0;
  pid_t done = ::waitpid(pid, &status, WNOHANG);
  if (done == 0) {
    double elapsed = std::chrono::duration<double>(Clock::now() - run.start).count();
    if (elapsed < settings.caseTimeout)
      return false;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    ::close(run.pipe);
    record(tally, run, "hang", "no result after " + std::to_string(settings.caseTimeout) + " s",
           true);
    return true;
  }
  std::string line = readAll(run.pipe);
  ::close(run.pipe);
  size_t tab = line.find('\t');
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && tab != std::string::npos) {
    std::string kind = line.substr(0, tab), detail = line.substr(tab + 1);
    bool failure =
        kind == verdictName(Verdict::RoundtripFailure) || kind == verdictName(Verdict::WrongResult);
    record(tally, run, kind, detail, failure);
  } else {
    std::string how = WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                                          : "exit " + std::to_string(WEXITSTATUS(status));
    record(tally, run, "crash", how + ": " + crashReport(run.errFile, 600), true);
  }
  return true;
}

TEST(Fuzz, ParseVerifyRoundtripCompileAndCheck) {
  std::vector<std::string> corpus = loadCorpus(PEJIT_SOURCE_DIR);
  ASSERT_GT(corpus.size(), 50u) << "the corpus (examples/, tests/lit/) was not found";
  fs::create_directories(settings.out);
  Rng rng(settings.seed);
  Tally tally;
  std::set<std::string> seen;
  size_t nextSeed = 0;
  auto nextInput = [&]() -> std::string {
    for (int attempt = 0; attempt < 100; ++attempt) {
      std::string text;
      if (nextSeed < corpus.size())
        text = corpus[nextSeed++]; // every seed once, as it is
      else if (unsigned pickKind = rng() % 10; pickKind < 2)
        text = rng() % 3 == 0 ? mutate(randomBuilderProgram(rng), corpus, rng)
                              : randomBuilderProgram(rng);
      else if (pickKind < 6) // well-formed by construction (FuzzGrammar.h)
        text = rng() % 5 == 0 ? mutate(randomGrammarProgram(rng), corpus, rng)
                              : randomGrammarProgram(rng);
      else
        text = mutate(corpus[rng() % corpus.size()], corpus, rng);
      if (seen.insert(text).second)
        return text;
    }
    return mutate(corpus[rng() % corpus.size()], corpus, rng);
  };
  int workers = std::clamp<int>(static_cast<int>(std::thread::hardware_concurrency()), 1, 2);
  std::map<pid_t, Running> running;
  auto deadline = Clock::now() + std::chrono::milliseconds(int64_t(settings.seconds * 1000));
  while (Clock::now() < deadline || !running.empty()) {
    while (static_cast<int>(running.size()) < workers && Clock::now() < deadline) {
      Running run;
      run.text = nextInput();
      run.inputSeed = rng();
      run.errFile = settings.out + "/.child-" + std::to_string(running.size()) + "-" +
                    std::to_string(tally.inputs) + ".err";
      run.start = Clock::now();
      pid_t pid = startChild(run.text, run.inputSeed, run.errFile, run.pipe);
      ASSERT_GT(pid, 0) << "fork failed: " << std::strerror(errno);
      ++tally.inputs;
      running.emplace(pid, std::move(run));
    }
    for (auto it = running.begin(); it != running.end();) {
      if (reap(it->first, it->second, tally)) {
        fs::remove(it->second.errFile);
        it = running.erase(it);
      } else {
        ++it;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }

  std::string summary;
  for (const auto &[kind, count] : tally.counts)
    summary += " " + kind + " " + std::to_string(count) + ",";
  std::printf("fuzz: %lld inputs in %.0f s (seed %llu, corpus %zu):%s reproducers in %s\n",
              static_cast<long long>(tally.inputs), settings.seconds,
              static_cast<unsigned long long>(settings.seed), corpus.size(), summary.c_str(),
              settings.out.c_str());
  for (const std::string &failure : tally.failures)
    ADD_FAILURE() << failure;
  std::error_code ec;
  if (tally.failures.empty())
    fs::remove(settings.out, ec); // only when empty: never a directory the user filled
  EXPECT_GT(tally.counts["checked"], 0) << "no input was run and checked";
}

std::string optionValue(const std::string &arg, const char *name) {
  std::string prefix = std::string("--") + name + "=";
  return arg.rfind(prefix, 0) == 0 ? arg.substr(prefix.size()) : "";
}

/// Runs one reproducer in this process (its "// input seed N" line gives
/// the inputs) and prints the verdict: exit 1 for a failure.
int replay(const std::string &path) {
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  uint64_t inputSeed = 0;
  if (size_t at = text.find("// input seed "); at != std::string::npos)
    inputSeed = std::strtoull(text.c_str() + at + 14, nullptr, 10);
  // The input as it ran: what follows the report's comment lines.
  size_t body = text.find('\n', text.find("// input seed "));
  if (text.rfind("// pejit fuzz: ", 0) == 0 && body != std::string::npos)
    text = text.substr(body + 1);
  CaseResult result = runCase(text, inputSeed);
  std::printf("%s\t%s\n", verdictName(result.verdict), result.detail.c_str());
  return isFailure(result.verdict) ? 1 : 0;
}

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (const char *v = std::getenv("PEJIT_FUZZ_SECONDS"))
    settings.seconds = std::atof(v);
  if (const char *v = std::getenv("PEJIT_FUZZ_SEED"))
    settings.seed = std::strtoull(v, nullptr, 10);
  if (const char *v = std::getenv("PEJIT_FUZZ_OUT"))
    settings.out = v;
  if (const char *v = std::getenv("PEJIT_FUZZ_VERBOSE"))
    settings.verbose = *v && std::string(v) != "0";
  if (underAddressSanitizer())
    settings.caseTimeout = 180;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (std::string v = optionValue(arg, "fuzz-seconds"); !v.empty())
      settings.seconds = std::atof(v.c_str());
    else if (std::string v = optionValue(arg, "fuzz-seed"); !v.empty())
      settings.seed = std::strtoull(v.c_str(), nullptr, 10);
    else if (std::string v = optionValue(arg, "fuzz-out"); !v.empty())
      settings.out = v;
    else if (std::string v = optionValue(arg, "fuzz-replay"); !v.empty())
      return replay(v);
    else {
      std::fprintf(stderr,
                   "pejit-fuzz-tests: unknown argument '%s' (--fuzz-seconds=N, "
                   "--fuzz-seed=S, --fuzz-out=DIR, --fuzz-replay=FILE)\n",
                   argv[i]);
      return 2;
    }
  }
  if (settings.out.empty())
    settings.out =
        (fs::temp_directory_path() / ("pejit-fuzz-" + std::to_string(::getpid()))).string();
  return RUN_ALL_TESTS();
}

namespace {

// The grammar's programs are well formed by construction: none is refused
// at parse or verify time, and none fails (crash, wrong result); most
// compile, run and match float64. 40 programs from a fixed seed.
TEST(FuzzGrammar, ProgramsParseVerifyAndMostlyCheck) {
  Rng rng(20261205);
  std::map<std::string, int> verdicts;
  for (int n = 0; n < 40; ++n) {
    std::string text = randomGrammarProgram(rng);
    CaseResult result = runCase(text, rng());
    verdicts[verdictName(result.verdict)] += 1;
    EXPECT_NE(result.verdict, Verdict::RejectedParse) << result.detail << "\n" << text;
    EXPECT_FALSE(isFailure(result.verdict)) << result.detail << "\n" << text;
  }
  int ran = verdicts["checked"] + verdicts["bounded"];
  EXPECT_GE(ran, 20);
  for (auto [verdict, count] : verdicts)
    std::printf("  %s: %d\n", verdict.c_str(), count);
}

} // namespace
