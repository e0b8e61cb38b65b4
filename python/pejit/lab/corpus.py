"""The lab's corpus, with no download: the King James Version of the Bible
(1611; its copyright has expired, so the text is in the public domain, as
Debian's bible-kjv-text copyright file says), 4.3 MB of English, read at
setup from Debian's `bible-kjv` package (its `bible` program decodes the
packaged text). Byte-level tokens, one per byte (vocabulary 256).

The split is fixed and the same for every encoding: the first 97% of the
bytes train, the next 1% validate, the last 2% (the end of the New
Testament) test. `--corpus FILE` takes any other file instead, split the
same way."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

KJV_PACKAGE = "bible-kjv"
KJV_LICENCE = ("King James Version (1611), public domain; read from Debian's bible-kjv "
               "package (bible-kjv-text's copyright file: the text's copyright has expired)")


@dataclass
class Corpus:
    name: str
    licence: str
    sha256: str
    train: np.ndarray  # uint8
    valid: np.ndarray
    test: np.ndarray

    @property
    def size(self) -> int:
        return self.train.size + self.valid.size + self.test.size


def _cache_dir() -> Path:
    root = os.environ.get("PEJIT_CACHE_DIR") or os.path.join(Path.home(), ".cache", "pejit")
    return Path(root) / "lab"


def kjv_bytes() -> bytes:
    """The KJV text, one verse per line, cached under $PEJIT_CACHE_DIR/lab."""
    cached = _cache_dir() / "kjv.txt"
    if cached.exists():
        return cached.read_bytes()
    bible = shutil.which("bible")
    if bible is None:
        raise RuntimeError(f"the lab's corpus needs Debian's {KJV_PACKAGE} package "
                           f"(apt-get install {KJV_PACKAGE}; scripts/setup.sh installs it), "
                           f"or pass --corpus FILE")
    text = subprocess.run([bible, "-l", "100000", "Gen1:1-Rev22:21"], check=True,
                          capture_output=True).stdout
    lines = [line.strip() for line in text.splitlines()]
    data = b"\n".join(line for line in lines if line) + b"\n"
    if len(data) < 4_000_000:
        raise RuntimeError(f"bible printed {len(data)} bytes, expected the whole KJV "
                           f"(about 4.3 MB)")
    cached.parent.mkdir(parents=True, exist_ok=True)
    partial = cached.with_suffix(".partial")
    partial.write_bytes(data)
    partial.replace(cached)  # never a half-written cache file
    return data


def load(path: str = "kjv") -> Corpus:
    """The corpus: "kjv" (the default) or a file's bytes, split 97/1/2."""
    if path == "kjv":
        data, name, licence = kjv_bytes(), "kjv", KJV_LICENCE
    else:
        file = Path(path)
        if not file.is_file():
            raise RuntimeError(f"--corpus: no file {path!r}")
        data, name, licence = file.read_bytes(), file.name, "as its file states"
    if len(data) < 100_000:
        raise RuntimeError(f"--corpus: {len(data)} bytes; the lab needs at least 100000")
    tokens = np.frombuffer(data, dtype=np.uint8)
    train_end, valid_end = int(tokens.size * 0.97), int(tokens.size * 0.98)
    return Corpus(name, licence, hashlib.sha256(data).hexdigest(), tokens[:train_end],
                  tokens[train_end:valid_end], tokens[valid_end:])
