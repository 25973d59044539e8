#!/usr/bin/env python3
"""Every message dist-train can print names its fix, and doc/troubleshooting.md
lists it (run by tests/messages.sh, which prints this script's TAP).

What a message is
-----------------
The format string (adjacent literals joined, string macros such as DT_NAME
or SLURM_ODD expanded) of each call, in plugin/*.c, common/*.c and
helper/*.c, to:

  dt_log_error, dt_log_info, slurm_error     srun's and slurmstepd's log
  task_error, task_message("error: ...")     a task's stderr (plugin/task.c)
  helper_error                               the dist-train command
  dprintf(STDERR_FILENO, ...), fprintf(stderr, ...) where the format says
                                             "error" or "warning"
  warn(WHO, WHAT, "...")                     a torchrun worker's warning
                                             (helper/worker_lib.c)
  dt_errf(BUF, ...), snprintf/vsnprintf(BUF, ...), refuse(..., FMT, ...),
  dt_join_verdict(..., "...", ...)           one sentence into a message
                                             buffer, which a caller above
                                             prints: BUF is one of
                                             MESSAGE_BUFFERS below

Not messages: a format that is only directives ("%s"), a usage line
("usage: ..."), and a PREFIX: a format whose words are all in
PREFIX_WORDS and that ends in a message buffer ("step %u.%u on %s: %s",
"on %s: %s"): the message it passes on is checked where it is made. A
WRAPPER, a format that ends in ": %s" with a message buffer as that
argument ("not bound: %s"), is a message to list, but the fix is the inner
message's. "out of memory" and the other entries of EXCEPTIONS are allowed
without a fix, each for the reason given there.

The fix clause
--------------
A message has a fix clause when a separator (":", ";", ",", "(", " or ",
" - ") comes after at least one of its words (what went wrong), and a word
after that separator is one of REMEDY_WORDS: an imperative (use, run, set,
give, ask, rerun, remove, unset, install, ...), "see" where the fix is in
another message or a help text, "expected" or "valid" for a value that
does not parse (what to give instead follows), "must" for what a value
must be. Where only the cluster's administrator can act, the message says
"ask your administrator to ...".

A sentence of a pure core (dt_errf in common/) that every caller wraps with
a message naming the fix may go without one only with a marker comment on
one of the four lines above the call:

  /* message: the caller names the fix (common/layout.c) */

naming the callers' files (comma-separated), which must exist. A call may
also be marked

  /* message: not a problem (WHY) */

for the odd line written through an error function that reports nothing
wrong (a timing). Both kinds are counted in the last test line.

The listing
-----------
doc/troubleshooting.md lists each message as the first cell of a table
row, all of it between backquotes, with every printf directive (%s, %u,
%.*s, %zu, %" PRIu32 ", ...) written as "..." and a "|" as "\\|". Both
sides are normalised alike: directives and runs of "..." become one
"...", runs of blanks one blank; the prefixes "dist-train: ", "error: ",
"warning: " and the node's "on ...: " go.

`tests/messages.py --list` prints every message found, with its kind.
"""
import os
import re
import sys

TOP = os.environ.get("DT_TOP_SRCDIR") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..")
SOURCES = ("plugin", "common", "helper")
PAGE = os.path.join(TOP, "doc", "troubleshooting.md")

# The buffers a message is made in before a caller prints it.
MESSAGE_BUFFERS = {
    "err", "why", "site_error", "machine_error", "node_error", "message",
    "unproven", "error", "line",
}

# The words of a prefix that only says where a message comes from.
PREFIX_WORDS = {"step", "on", "rank", "local", "error", "warning"}

# Imperatives and words of remedy that open a fix clause.
REMEDY_WORDS = {
    "add", "allow", "ask", "build", "call", "change", "check", "choose",
    "drop", "enable", "expected", "export", "fix", "free", "give",
    "increase", "install", "keep", "launch", "leave", "let", "load",
    "lower", "make", "mount", "move", "must", "name", "open", "pass", "put",
    "raise", "rebuild", "reinstall", "remove", "rename", "report", "request",
    "rerun", "restart", "retry", "run", "see", "set", "split", "close",
    "start", "submit", "unset", "update", "upgrade", "use", "valid", "wait",
    "widen", "write",
}

# Messages allowed without a fix clause, and why.
EXCEPTIONS = {
    "out of memory": "nothing the user or admin can do but retry, "
                     "which they do without being told",
    "out of memory for ... ranks": "as out of memory",
}

DIRECTIVE = re.compile(
    r"%(?:\d+\$)?[-+ #0']*(?:\d+|\*)?(?:\.(?:\d+|\*))?"
    r"(?:hh|h|ll|l|j|z|t|L)?[diouxXeEfgGcspaA]|%\.\.\.")
MARKER = re.compile(r"/\*\s*message:\s*(.*?)\s*\*/", re.S)
CALLEE = re.compile(r"\b(dt_log_error|dt_log_info|slurm_error|task_message|"
                    r"task_error|helper_error|dprintf|fprintf|dt_errf|"
                    r"snprintf|vsnprintf|refuse|dt_join_verdict|warn)\s*\(")
# (function, index of the format argument, index of the buffer or None)
FORMAT_ARG = {
    "dt_log_error": (0, None), "dt_log_info": (0, None),
    "slurm_error": (0, None), "task_message": (0, None),
    "task_error": (0, None), "dt_join_verdict": (3, None), "warn": (2, None),
    "helper_error": (0, None), "dprintf": (1, None), "fprintf": (1, None),
    "dt_errf": (2, 0), "snprintf": (2, 0), "vsnprintf": (2, 0),
    "refuse": (6, None),
}


def string_macros():
    """#define NAME "text" in the sources' headers and files."""
    macros = {"PRIu32": "u", "PRIu64": "lu", "PRId32": "d", "PRIx32": "x",
              "PRIu16": "u", "PRIu8": "u", "PRIi32": "i"}
    bodies = []
    for d in SOURCES:
        for name in sorted(os.listdir(os.path.join(TOP, d))):
            if not name.endswith((".c", ".h")):
                continue
            with open(os.path.join(TOP, d, name), encoding="utf-8") as f:
                text = f.read().replace("\\\n", " ")
                bodies.extend(re.findall(
                    r'^#define[ \t]+([A-Z_][A-Z0-9_]*)[ \t]+'
                    r'((?:(?:"(?:[^"\\\n]|\\.)*"|[A-Z_][A-Z0-9_]*)[ \t]*)+)$',
                    text, re.M))
    # Bodies of literals and other such macros, expanded until settled.
    for _ in range(4):
        for name, body in bodies:
            value = format_text(body, macros)
            if value is not None and '"' in body:
                macros.setdefault(name, value)
    return macros


def unquote(lit):
    body = lit[1:-1]
    return re.sub(r'\\(.)', lambda m: {"n": "\n", "t": "\t"}.get(
        m.group(1), m.group(1)), body)


def blank_comments(text):
    """TEXT with comments and string contents kept, comments as blanks."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def split_args(code, start):
    """The top-level arguments of the call whose "(" is at START."""
    depth, i, args, cur = 0, start, [], []
    while i < len(code):
        c = code[i]
        if c in "\"'":
            j = i + 1
            while code[j] != c:
                j += 2 if code[j] == "\\" else 1
            cur.append(code[i:j + 1])
            i = j + 1
            continue
        if c in "([{":
            depth += 1
            if depth == 1:
                i += 1
                continue
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                args.append("".join(cur).strip())
                return args, i
        elif c == "," and depth == 1:
            args.append("".join(cur).strip())
            cur = []
            i += 1
            continue
        cur.append(c)
        i += 1
    return args, i


def format_text(arg, macros):
    """The text of a format argument, or None when it is not literal."""
    parts = re.findall(r'"(?:[^"\\]|\\.)*"|[A-Za-z_][A-Za-z0-9_]*|\S', arg)
    text = []
    for p in parts:
        if p.startswith('"'):
            text.append(unquote(p))
        elif p in macros:
            text.append(macros[p])
        else:
            return None
    return "".join(text) if text else None


def last_name(expr):
    names = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", expr)
    return names[-1] if names else ""


def words(text):
    return re.findall(r"[A-Za-z][A-Za-z'_-]*", DIRECTIVE.sub(" ", text))


def directive_args(fmt, args):
    """(directive, argument) pairs of FMT, ARGS being the call's rest."""
    pairs, k = [], 0
    for m in DIRECTIVE.finditer(fmt):
        d = m.group(0)
        if "*" in d:
            k += d.count("*")
        pairs.append((d, args[k] if k < len(args) else ""))
        k += 1
    return pairs


def collect():
    macros = string_macros()
    found = []
    for d in SOURCES:
        for name in sorted(os.listdir(os.path.join(TOP, d))):
            if not name.endswith(".c"):
                continue
            path = os.path.join(d, name)
            with open(os.path.join(TOP, path), encoding="utf-8") as f:
                raw = f.read()
            # Macros' line continuations are blanks to the parser.
            code = blank_comments(raw).replace("\\\n", " \n")
            for m in CALLEE.finditer(code):
                fn = m.group(1)
                # Declarations and definitions are not calls.
                before = code[:m.start()].rstrip()
                if re.search(r"(\bvoid|\bint|\benum \w+|\bstatic)\s*\*?$",
                             before) or before.endswith("#define"):
                    continue
                args, _ = split_args(code, m.end() - 1)
                fi, bi = FORMAT_ARG[fn]
                if len(args) <= fi:
                    continue
                if fn in ("dprintf", "fprintf") and \
                        args[0] not in ("STDERR_FILENO", "stderr"):
                    continue
                if bi is not None and \
                        last_name(args[bi]) not in MESSAGE_BUFFERS:
                    continue
                fmt = format_text(args[fi], macros)
                if fmt is None:
                    continue
                fmt = fmt.rstrip("\n")
                if fn in ("dprintf", "fprintf") and \
                        not re.search(r"\b(error|warning)\b", fmt):
                    continue
                if fn == "task_message" and not fmt.startswith("error:"):
                    continue
                if fmt.startswith("usage:"):
                    continue
                line = raw.count("\n", 0, m.start()) + 1
                # A marker on the lines just above the call.
                above = raw[:m.start()].rsplit("\n", 4)[1:]
                marker = None
                for mm in MARKER.finditer("\n".join(above)):
                    marker = mm.group(1)
                found.append({
                    "file": path, "line": line, "fn": fn, "format": fmt,
                    "pairs": directive_args(fmt, args[fi + 1:]),
                    "marker": marker,
                })
    return found


def strip_prefixes(text):
    text = text.strip()
    for p in ("dist-train: ", "error: ", "warning: "):
        if text.startswith(p):
            text = text[len(p):]
    return text


def normalise(text):
    text = DIRECTIVE.sub("...", strip_prefixes(text))
    # printf's "%%" prints one "%".
    text = text.replace("%%", "%")
    text = re.sub(r"(\.\.\.)+", "...", text)
    # The node a task's or slurmstepd's message comes from.
    if text.startswith("on ...: "):
        text = text[len("on ...: "):]
    text = re.sub(r"\s+", " ", text).strip()
    return text


def kind(msg):
    """'empty', 'prefix', 'wrapper' or 'message'."""
    fmt = strip_prefixes(msg["format"])
    w = [x.lower() for x in words(fmt)]
    if not w:
        return "empty"
    last = msg["pairs"][-1] if msg["pairs"] else None
    passes_on = last is not None and last[0].endswith("s") and \
        last_name(last[1]) in MESSAGE_BUFFERS and fmt.endswith(last[0])
    if passes_on and all(x in PREFIX_WORDS for x in w):
        return "prefix"
    if passes_on and fmt[:-len(last[0])].rstrip().endswith(":"):
        return "wrapper"
    return "message"


def has_fix(text):
    """Whether TEXT holds a fix clause (see the top of this file)."""
    text = DIRECTIVE.sub("X", strip_prefixes(text))
    for m in re.finditer(r"[:;,(]| or | - ", text):
        if words(text[:m.start()]):
            return any(x.lower() in REMEDY_WORDS
                       for x in words(text[m.end():]))
    return False


def page_entries():
    entries = set()
    try:
        with open(PAGE, encoding="utf-8") as f:
            page = f.read()
    except OSError:
        return None
    for line in page.splitlines():
        if not line.startswith("|"):
            continue
        cells = re.split(r"(?<!\\)\|", line)
        m = re.fullmatch(r"\s*`([^`]+)`\s*", cells[1] if len(cells) > 1 else "")
        if m:
            entries.add(normalise(m.group(1).replace("\\|", "|")))
    return entries


def main():
    listing = "--list" in sys.argv
    msgs = collect()
    entries = page_entries()
    results = []
    counted = {"messages": 0, "wrappers": 0, "exempt": 0, "exceptions": 0}
    if entries is None and not listing:
        print("1..1")
        print("not ok 1 - doc/troubleshooting.md is missing")
        return 1
    for msg in msgs:
        k = kind(msg)
        if k in ("empty", "prefix"):
            continue
        where = "%s:%d" % (msg["file"], msg["line"])
        text = normalise(msg["format"])
        if listing:
            print("%-28s %-8s %s" % (where, k, text))
            continue
        marker = msg["marker"] or ""
        if marker.startswith("not a problem"):
            counted["exempt"] += 1
            continue
        problems, notes = [], []
        # The fix clause.
        if k == "wrapper":
            counted["wrappers"] += 1
            notes.append("its message names the fix")
        else:
            counted["messages"] += 1
            if text in EXCEPTIONS:
                counted["exceptions"] += 1
                notes.append("allowed: " + EXCEPTIONS[text])
            elif marker.startswith("the caller names the fix"):
                m = re.search(r"\(([^)]+)\)", marker)
                counted["exempt"] += 1
                notes.append(marker)
                if m is None or not all(
                        os.path.isfile(os.path.join(TOP, f.strip()))
                        for f in m.group(1).split(",")):
                    problems.append("the marker names no caller's file "
                                    "that exists")
            elif not has_fix(msg["format"]):
                problems.append("no fix clause")
        # The listing.
        if text not in entries:
            problems.append("not on doc/troubleshooting.md")
        results.append((not problems, "%s: %s%s" % (
            where, text, " (%s)" % "; ".join(problems or notes)
            if problems or notes else "")))
    if listing:
        return 0
    # The page lists no message the sources no longer print.
    found = set(normalise(m["format"]) for m in msgs)
    stale = sorted(e for e in entries if e not in found)
    results.append((not stale, "doc/troubleshooting.md lists only messages "
                    "the sources print%s" % (
                        ": not found: " + " | ".join(stale) if stale
                        else "")))
    results.append((counted["messages"] > 50,
                    "found %d messages, %d wrappers; %d exempt by a marker, "
                    "%d allowed without a fix" % (
                        counted["messages"], counted["wrappers"],
                        counted["exempt"], counted["exceptions"])))
    print("1..%d" % len(results))
    failed = 0
    for i, (ok, what) in enumerate(results, 1):
        print("%s %d - %s" % ("ok" if ok else "not ok", i, what))
        failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
