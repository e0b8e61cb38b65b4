#!/usr/bin/env python3
"""Checks that the docs match the tests (python3, standard library only).

docs/status.md holds pejit's one status table. This script checks:

  (a) the table parses: a header whose first column is the feature and whose
      last is "shown by", and cells from a fixed vocabulary;
  (b) every name in "shown by" exists: `Suite.Name` as a TEST, TEST_F or
      TEST_P in tests/**/*.cpp, a path under tests/ as a file, and
      `tests/python/FILE.py::test_name` as a function in that file;
  (c) a row that claims a feature (any cell other than no, not yet, n/a,
      untested) names at least one test, and each claiming cell of the
      x86, NVIDIA and Python columns names a test of its own kind;
  (d) no other page (README.md, docs/*.md) keeps a status table: a table
      row with two or more status cells (yes, no, fused, done, ...), or a
      table with a "status" or "state" column;
  (e) no other page says "reference only", "specified only" or "not fused
      yet";
  (f) with --gtest-xml DIR: every named GoogleTest (and pytest, when DIR
      holds pytest results) passed in the JUnit XML files under DIR
      (GTEST_OUTPUT=xml:DIR/, pytest --junitxml=DIR/pytest.xml). A skipped
      test did not pass, unless --allow-skipped (a machine without the
      CUDA toolkit skips the NVIDIA tests).

Prints one line per problem, naming the file and the row or line, then
"check_docs: N problems". Exits 1 when there is a problem.
"""
import argparse
import os
import re
import sys
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STATUS = "docs/status.md"

# Cells that claim nothing (no test needed) and cells that claim a feature.
NOT_CLAIMS = {"no", "not yet", "n/a", "untested", ""}
CLAIMS = {"yes", "ptx only"}

# A test's kind, by where it lives, for the column that names that kind.
COLUMN_KINDS = {"x86": "x86", "nvidia": "nvidia", "python": "python"}
KIND_WHERE = {
    "x86": "tests/runtime, tests/cli, tests/fuzz or an x86 lit test",
    "nvidia": "an Nvidia*/GpuCheck* test, tests/cuda or tests/lit/nvidia",
    "python": "tests/python",
}

# Cells that make a row of another page a status row (rule d).
STATUS_WORDS = {"yes", "no", "fused", "not fused", "done", "built", "next", "not yet",
                "refused", "partial", "ptx only"}
STATUS_COLUMNS = {"status", "state"}
BANNED = ["reference only", "specified only", "not fused yet"]

TEST_MACRO = re.compile(r"^\s*TEST(?:_F|_P)?\s*\(\s*(\w+)\s*,\s*(\w+)\s*\)", re.M)
GTEST_NAME = re.compile(r"^[A-Za-z_]\w*\.[A-Za-z_]\w*$")


def rel(path):
    return os.path.relpath(path, ROOT).replace(os.sep, "/")


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def split_row(line):
    """The cells of a markdown table row; `\\|` stays inside its cell."""
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", body)]


def is_separator(cells):
    return all(re.fullmatch(r":?-{3,}:?", c) for c in cells if c) and any(cells)


def tables(text):
    """Markdown tables of a page: (header line number, header cells,
    [(line number, cells), ...])."""
    lines = text.split("\n")
    found, i = [], 0
    while i < len(lines):
        if (lines[i].lstrip().startswith("|") and i + 1 < len(lines)
                and lines[i + 1].lstrip().startswith("|")
                and is_separator(split_row(lines[i + 1]))):
            header, rows, j = split_row(lines[i]), [], i + 2
            while j < len(lines) and lines[j].lstrip().startswith("|"):
                rows.append((j + 1, split_row(lines[j])))
                j += 1
            found.append((i + 1, header, rows))
            i = j
        else:
            i += 1
    return found


def plain(cell):
    """A cell without markup, lower case: `**yes**` -> yes."""
    return re.sub(r"[`*_]", "", cell).strip().lower()


def test_kind(path):
    """x86, nvidia, python, or None (reference, dialect and .npy tests)."""
    low, base = path.lower(), os.path.basename(path).lower()
    if path.startswith("tests/python/"):
        return "python"
    if ("nvidia" in low or base.startswith("gpu") or path.startswith("tests/cuda/")):
        return "nvidia"
    if path.startswith(("tests/runtime/", "tests/cli/", "tests/fuzz/")):
        return "x86"
    if path.startswith("tests/lit/") and ("x86" in base or path.startswith(
            ("tests/lit/examples/", "tests/lit/install/"))):
        return "x86"
    return None


def index_gtests():
    """`Suite.Name` -> the files that define it."""
    names = {}
    for folder, _, files in os.walk(os.path.join(ROOT, "tests")):
        for name in files:
            if not name.endswith((".cpp", ".h")):
                continue
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                for suite, test in TEST_MACRO.findall(f.read()):
                    names.setdefault(f"{suite}.{test}", set()).add(rel(path))
    return names


def shown_by_names(cell):
    return [t for t in (x.strip().strip("`").strip() for x in re.split(r"[,;]|<br>", cell)) if t]


class Checker:
    def __init__(self):
        self.problems = []
        self.gtests = index_gtests()

    def problem(self, where, message):
        self.problems.append(f"{where}: {message}")

    # (b): a name in "shown by" -> the kinds of the tests it names, or None
    # when it names nothing.
    def resolve(self, name, where):
        if GTEST_NAME.match(name):
            files = self.gtests.get(name)
            if not files:
                self.problem(where, f"no TEST/TEST_F/TEST_P({name.replace('.', ', ')}) "
                             "in tests/")
                return None
            return {test_kind(f) for f in files}
        if name.startswith("tests/"):
            path, _, func = name.partition("::")
            if not os.path.isfile(os.path.join(ROOT, path)):
                self.problem(where, f"{path} does not exist")
                return None
            if func and not re.search(rf"^\s*def {re.escape(func)}\s*\(", read(path), re.M):
                self.problem(where, f"{path} has no function {func}")
                return None
            return {test_kind(path)}
        self.problem(where, f"'{name}' is neither Suite.Name nor a path under tests/")
        return None

    def check_status(self):
        """(a)-(c). Returns the named tests: [(name, where)]."""
        named = []
        path = os.path.join(ROOT, STATUS)
        if not os.path.isfile(path):
            self.problem(STATUS, "missing: it holds the status table")
            return named
        found = [t for t in tables(read(STATUS)) if t[1] and plain(t[1][-1]) == "shown by"]
        if len(found) != 1:
            self.problem(STATUS, f"expected one table whose last column is 'shown by', "
                         f"found {len(found)}")
            if not found:
                return named
        line, header, rows = found[0]
        targets = header[1:-1]
        if not targets:
            self.problem(f"{STATUS}:{line}", "the table has no target columns")
        for number, cells in rows:
            feature = cells[0] if cells else ""
            where = f"{STATUS}:{number} row '{feature}'"
            if len(cells) != len(header):
                self.problem(where, f"{len(cells)} cells, the header has {len(header)}")
                continue
            values = [plain(c) for c in cells[1:-1]]
            shown = dict(zip(targets, (c.strip() for c in cells[1:-1])))
            kinds = set()
            for name in shown_by_names(cells[-1]):
                resolved = self.resolve(name, where)
                if resolved is not None:
                    kinds |= resolved
                    if GTEST_NAME.match(name) or name.startswith("tests/python/"):
                        named.append((name, where))
            for column, value in zip(targets, values):
                if value not in CLAIMS | NOT_CLAIMS:
                    self.problem(where, f"{column} cell '{shown[column]}' is not one of "
                                 f"{', '.join(sorted(CLAIMS | NOT_CLAIMS - {''}))}")
            claims = [c for c, v in zip(targets, values) if v in CLAIMS]
            if claims and not shown_by_names(cells[-1]):
                self.problem(where, "claims " + ", ".join(f"{c}: {shown[c]}" for c in claims) +
                             " but names no test in 'shown by'")
                continue
            for column in claims:
                kind = COLUMN_KINDS.get(plain(column))
                if kind and kind not in kinds:
                    self.problem(where, f"{column} says '{shown[column]}' but 'shown by' names "
                                 f"no {column} test ({KIND_WHERE[kind]})")
        return named

    def other_pages(self):
        pages = ["README.md"] + sorted(
            f"docs/{n}" for n in os.listdir(os.path.join(ROOT, "docs")) if n.endswith(".md"))
        return [p for p in pages if p != STATUS and os.path.isfile(os.path.join(ROOT, p))]

    def check_other_pages(self):
        """(d) and (e), and the README's link to the status page."""
        for page in self.other_pages():
            text = read(page)
            for line, header, rows in tables(text):
                columns = [plain(c) for c in header]
                if STATUS_COLUMNS & set(columns):
                    self.problem(f"{page}:{line}", "a table with a status column: status "
                                 f"lives in {STATUS} (link to it)")
                    continue
                for number, cells in [(line, header)] + rows:
                    words = [c for c in cells if plain(c) in STATUS_WORDS]
                    if len(words) >= 2:
                        self.problem(f"{page}:{number}", "a table row of status cells ("
                                     + ", ".join(words) + f"): status lives in {STATUS}")
            for phrase in BANNED:
                pattern = r"\s+".join(map(re.escape, phrase.split()))
                for match in re.finditer(pattern, text, re.I):
                    number = text.count("\n", 0, match.start()) + 1
                    self.problem(f"{page}:{number}", f"says '{phrase}': state what is built "
                                 f"in {STATUS} instead")
        if STATUS not in read("README.md"):
            self.problem("README.md", f"does not link to {STATUS}")

    def check_results(self, folder, named, allow_skipped=False):
        """(f): the named tests passed in the JUnit XML files under folder."""
        outcomes = {}  # (classname, name) -> [outcome]
        files = 0
        for where, _, names in os.walk(folder):
            for name in names:
                if not name.endswith(".xml"):
                    continue
                try:
                    root = ET.parse(os.path.join(where, name)).getroot()
                except ET.ParseError as error:
                    self.problem(os.path.join(where, name), f"unreadable XML: {error}")
                    continue
                files += 1
                for case in root.iter("testcase"):
                    tags = {child.tag for child in case}
                    if tags & {"failure", "error"}:
                        outcome = "failed"
                    elif ("skipped" in tags or case.get("result") == "skipped"
                          or case.get("status") == "notrun"):
                        outcome = "skipped"
                    else:
                        outcome = "passed"
                    key = (case.get("classname", ""), case.get("name", ""))
                    outcomes.setdefault(key, []).append(outcome)
        if not files:
            self.problem(folder, "no .xml test results")
            return
        has_pytest = any(n.startswith("test_") for _, n in outcomes)

        def matches(test):
            if "::" in test:  # tests/python/test_x.py::test_y
                module = os.path.splitext(os.path.basename(test.split("::")[0]))[0]
                func = test.split("::")[1]
                return [o for (c, n), out in outcomes.items()
                        if c.split(".")[-1] == module and re.sub(r"\[.*\]$", "", n) == func
                        for o in out]
            suite, name = test.split(".")
            return [o for (c, n), out in outcomes.items()
                    if c.split("/")[-1] == suite and n.split("/")[0] == name for o in out]

        for test, where in named:
            if "::" in test and not has_pytest:
                continue
            found = matches(test)
            if not found:
                self.problem(where, f"{test} is not in the test results under {folder}")
            elif "failed" in found:
                self.problem(where, f"{test} failed")
            elif "passed" not in found and not allow_skipped:
                self.problem(where, f"{test} was skipped: it did not run")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gtest-xml", metavar="DIR",
                        help="JUnit XML results of a test run; fail when a named test did not pass")
    parser.add_argument("--allow-skipped", action="store_true",
                        help="with --gtest-xml: a skipped test is not a problem")
    args = parser.parse_args(argv)
    checker = Checker()
    named = checker.check_status()
    checker.check_other_pages()
    if args.gtest_xml:
        checker.check_results(args.gtest_xml, named, args.allow_skipped)
    for line in checker.problems:
        print(line)
    print(f"check_docs: {len(checker.problems)} problems")
    return 1 if checker.problems else 0


if __name__ == "__main__":
    sys.exit(main())
