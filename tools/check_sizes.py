#!/usr/bin/env python3
"""Checks the project's size limits: no product C file over 450 lines, no C function over 60 lines.

Product C files are the tracked *.c and *.h files (git ls-files) outside tests/; tools/ is included, since its
programs are built by the Makefile and maintained like the rest (tests/ is left out: a test file reads as a list
of cases). A function counts from the line of its name (its signature's first line) to its closing brace. The
kernel templates (templates/*.cu, *.cuh) are device code: a template over 450 lines is reported as a note and
does not fail, since one may read better whole (its header comment then says so); their functions are not
counted.

Usage: python3 tools/check_sizes.py [DIR...]
With no DIR, checks this repository. A DIR is checked as a tree of its own (its git-tracked files where it is a
git work tree, else every file under it), with the same rules relative to it (tests/ left out, templates/ noted).
Prints one line per violation, "path:line: function NAME is N lines (max 60)" or "path:1: file is N lines
(max 450)", and exits 1 if there is any; else prints "sizes: N files, M functions checked, all within limits"
and exits 0. Exits 2 where a file cannot be read or its braces do not balance."""
import os
import re
import subprocess
import sys

MAX_FILE = 450
MAX_FUNCTION = 60
C_EXT = (".c", ".h")
KERNEL_EXT = (".cu", ".cuh")
NOT_FUNCTION = {"struct", "union", "enum", "typedef"}
NOT_NAME = {"__attribute__", "__declspec", "_Alignas", "alignas", "sizeof"}


def strip(text):
    """text with comments, string and character literals and preprocessor lines blanked, newlines kept"""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c in " \t":
            out.append(c); i += 1; continue
        if line_start and c == "#":              # a directive, with its continuation lines
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append("\n"); i += 2; continue
                if text.startswith("/*", i):     # a comment in a directive may span lines
                    j = text.find("*/", i + 2); j = n if j < 0 else j + 2
                    out.append("\n" * text.count("\n", i, j)); i = j; continue
                i += 1
            continue
        line_start = c == "\n"
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2); j = n if j < 0 else j + 2
            out.append(" " + "\n" * text.count("\n", i, j)); i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c + "\n" * text.count("\n", i, j + 1)); i = j + 1
        else:
            out.append(c); i += 1
    return "".join(out)


TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\S")


def function_name(head):
    """the name a definition's head declares (the identifier before its last top-level parameter list) with its
    offset in head, or None where the head is not a function's (a struct, an initializer, ...)"""
    toks = [(m.group(), m.start()) for m in TOKEN.finditer(head)]
    if not toks or toks[-1][0] != ")" or toks[0][0] in NOT_FUNCTION:
        return None
    depth, best = 0, None
    for k, (t, _) in enumerate(toks):
        if t == "(":
            if depth == 0 and k > 0 and re.match(r"[A-Za-z_]", toks[k - 1][0]) and toks[k - 1][0] not in NOT_NAME:
                best = toks[k - 1]
            depth += 1
        elif t == ")":
            depth -= 1
        elif t == "=" and depth == 0:
            return None
    return best


def functions(text):
    """(name, first line, line count) of each function defined in C text; raises ValueError on unbalanced braces"""
    s = strip(text)
    found = []
    head_start, i, n = 0, 0, len(s)
    while i < n:
        c = s[i]
        if c == ";" or c == "}":
            if c == "}":
                raise ValueError("line %d: a '}' closes nothing" % (s.count("\n", 0, i) + 1))
            head_start = i + 1
        elif c == "{":
            depth, j = 1, i + 1
            while j < n and depth:
                depth += {"{": 1, "}": -1}.get(s[j], 0)
                j += 1
            if depth:
                raise ValueError("line %d: a '{' is never closed" % (s.count("\n", 0, i) + 1))
            fn = function_name(s[head_start:i])
            if fn:
                first = s.count("\n", 0, head_start + fn[1]) + 1
                last = s.count("\n", 0, j - 1) + 1
                found.append((fn[0], first, last - first + 1))
            # what follows a struct's or initializer's braces ("} Name;", "};") belongs to that declaration
            i, head_start = j, j if fn else head_start
            continue
        i += 1
    return found


def tracked(root):
    """the files of the tree at root, relative to it"""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True, check=True)
        if os.path.samefile(subprocess.run(["git", "-C", root, "rev-parse", "--show-toplevel"], capture_output=True,
                                           check=True, text=True).stdout.strip(), root):
            return [p for p in out.stdout.decode().split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    for d, _, names in os.walk(root):
        files += [os.path.relpath(os.path.join(d, f), root) for f in names]
    return files


def check(root, shown):
    """checks one tree; returns (files, functions, violations, notes, errors) with paths shown under shown"""
    nfiles = nfuncs = 0
    bad, notes, errors = [], [], []
    for rel in sorted(tracked(root)):
        parts = rel.split(os.sep)
        is_c = rel.endswith(C_EXT) and parts[0] != "tests"
        is_kernel = rel.endswith(KERNEL_EXT) and parts[0] == "templates"
        if not (is_c or is_kernel):
            continue
        path = os.path.join(shown, rel) if shown else rel
        try:
            with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError as e:
            errors.append("%s: cannot read: %s" % (path, e.strerror)); continue
        nfiles += 1
        lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        if lines > MAX_FILE:
            msg = "%s:1: file is %d lines (max %d)" % (path, lines, MAX_FILE)
            if is_kernel:
                notes.append("note: " + msg + ": a kernel template, allowed where its header comment says it reads "
                             "better whole")
            else:
                bad.append(msg)
        if is_kernel:
            continue
        try:
            fns = functions(text)
        except ValueError as e:
            errors.append("%s: %s: braces do not balance (not checked)" % (path, e)); continue
        nfuncs += len(fns)
        for name, first, count in fns:
            if count > MAX_FUNCTION:
                bad.append("%s:%d: function %s is %d lines (max %d)" % (path, first, name, count, MAX_FUNCTION))
    return nfiles, nfuncs, bad, notes, errors


def main(argv):
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if any(a.startswith("-") for a in argv):
        print("usage: python3 tools/check_sizes.py [DIR...]", file=sys.stderr)
        return 2
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = [(d, d) for d in argv] or [(here, "")]
    nfiles = nfuncs = 0
    bad, notes, errors = [], [], []
    for root, shown in trees:
        if not os.path.isdir(root):
            errors.append("%s: not a directory" % root); continue
        f, m, b, n, e = check(root, shown)
        nfiles, nfuncs = nfiles + f, nfuncs + m
        bad, notes, errors = bad + b, notes + n, errors + e
    for line in notes + bad:
        print(line)
    for line in errors:
        print("check_sizes: " + line, file=sys.stderr)
    if errors:
        return 2
    if bad:
        return 1
    print("sizes: %d files, %d functions checked, all within limits" % (nfiles, nfuncs))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
