#!/usr/bin/env python3
"""Compare `dist-train hostnames` with `scontrol show hostnames` (TAP).

Every list scontrol expands must expand identically; every list scontrol
calls invalid must be refused. Lists are a fixed corpus plus random ones
from a seeded generator (DT_HOSTLIST_SEED, DT_HOSTLIST_COUNT).

Where Slurm's releases differ, dist-train takes one side on every release,
and this test says which lists it met of each kind:
- a suffix after the last ']' ("n[1-3].ib"): Slurm 24.11 and later expand
  it (and write such lists for nodes so named); 22.05 calls it invalid.
  dist-train expands it on every release: on 22.05 its expansion is
  checked against the rule instead of scontrol.
- a ']' with no '[' before it ("n[1-2]]"): 24.11 and later keep it as a
  character of the host names ("n1]"); 22.05 calls it invalid. No node
  can be named so; dist-train refuses it on every release.
"""
import os
import random
import subprocess
import sys
import tempfile

CORPUS = [
    "n[1-3]", "rack[1-2]-node[01-04]", "x[1-2]y[3-4]z[5-6]",
    "w[1-2]x[3-4]y[5-6]z[7-8]", "a,b,,c d", "n[3,1,2],n1", "n[010-012]",
    "n[8-12]", "[1-3]", "n[1-2][3]", "n[01-3]", "n[1-03]", "n[1-2],",
    "n[0-65535]", "a[0-65535]b[1-2]", "n[3-1]", "n[]", "n[1,,2]",
    "n[-1]", "n[a-b]", "n[1-3].ib", "n[0-65536]", "a[0-65536]b[1]",
    "n[1-2]]", "login1,gpu[001-004,010],cpu-a[9-11]", "n007", "node",
    "a-1,a-[2-3]", "x[0]y[0]z[0]w[0-1]",
]


def random_range(rng):
    width = rng.choice([1, 1, 1, 2, 3, 4])
    lo = rng.randrange(0, 10 ** width if rng.random() < 0.3 else 40)
    lo_text = str(lo).zfill(width) if rng.random() < 0.6 else str(lo)
    if rng.random() < 0.4:
        return lo_text
    hi = lo + rng.randrange(0, 6) if rng.random() < 0.95 else max(lo - 1, 0)
    return f"{lo_text}-{hi}"


def random_token(rng):
    letters = "abcnx-_."
    text = "".join(rng.choice(letters) for _ in range(rng.randrange(0, 4)))
    if rng.random() < 0.25:
        return (text or "n") + str(rng.randrange(0, 200)).zfill(
            rng.choice([1, 2, 3]))
    out = text
    for g in range(rng.choice([1, 1, 1, 2, 2, 3])):
        if g:
            out += "".join(rng.choice(letters) for _ in range(rng.randrange(0, 3)))
        out += "[" + ",".join(random_range(rng)
                              for _ in range(rng.choice([1, 1, 2, 3]))) + "]"
    if rng.random() < 0.03:
        out += ".ib"
    return out


def random_list(rng):
    seps = [",", ",", " ", ",,", "\t"]
    tokens = [random_token(rng) for _ in range(rng.choice([1, 1, 2, 3]))]
    out = tokens[0]
    for t in tokens[1:]:
        out += rng.choice(seps) + t
    # scontrol would take a leading '-' for an option.
    return "n" + out if out.startswith("-") else out


def tokens_of(hl):
    """Split a list into tokens at separators outside brackets."""
    out, cur, depth = [], "", 0
    for c in hl:
        if c in ", \t" and not depth:
            if cur:
                out.append(cur)
            cur = ""
            continue
        depth = 1 if c == "[" else 0 if c == "]" else depth
        cur += c
    return out + ([cur] if cur else [])


def slurm_drops_silently(hl):
    """Slurm 22.05 ignores a bad range in the groups before the last two
    of a token (its recursion combines return codes with MAX(rc, -1)) and
    drops that token's hosts without a word. dist-train refuses the list."""
    for tok in tokens_of(hl):
        groups = [g.split("]")[0] for g in tok.split("[")[1:]]
        for g in groups[:-2]:
            for r in g.split(","):
                lo, _, hi = r.partition("-")
                if not lo.isdigit() or (hi and not hi.isdigit()):
                    return True
                if hi and int(hi) < int(lo):
                    return True
    return False


def has_suffix(hl):
    """Whether a token has text after its last ']' (and no stray ']')."""
    return any("]" in tok and not tok.endswith("]") and not stray_bracket(tok)
               for tok in tokens_of(hl))


def stray_bracket(tok):
    depth = 0
    for c in tok:
        if c == "[":
            depth += 1
        elif c == "]":
            if not depth:
                return True
            depth -= 1
    return False


def expected_with_suffix(dist_train, hl):
    """Our expansion of HL checked by rule: each token with a suffix
    expands as the token without it, with the suffix on every host."""
    hosts = []
    for tok in tokens_of(hl):
        cut = tok.rfind("]") + 1
        base, suffix = (tok[:cut], tok[cut:]) if cut else (tok, "")
        r = subprocess.run([dist_train, "hostnames", base],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return None
        hosts += [h + suffix for h in r.stdout.split()]
    return "".join(h + "\n" for h in hosts)


def main():
    dist_train = sys.argv[1]
    seed = int(os.environ.get("DT_HOSTLIST_SEED", "20261122"))
    count = int(os.environ.get("DT_HOSTLIST_COUNT", "300"))
    rng = random.Random(seed)
    lists = CORPUS + [random_list(rng) for _ in range(count)]

    with tempfile.TemporaryDirectory() as tmp:
        conf = os.path.join(tmp, "slurm.conf")
        with open(conf, "w") as f:
            f.write("ClusterName=t\nSlurmctldHost=localhost\n"
                    "NodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n")
        env = dict(os.environ, SLURM_CONF=conf)
        failures, agreed, refused, dropped = [], 0, 0, 0
        suffix_22, stray = 0, 0
        for hl in lists:
            ref = subprocess.run(["scontrol", "show", "hostnames", hl],
                                 env=env, capture_output=True, text=True)
            ours = subprocess.run([dist_train, "hostnames", hl],
                                  capture_output=True, text=True)
            slurm_refused = "Invalid hostlist" in ref.stderr + ref.stdout
            if any(stray_bracket(t) for t in tokens_of(hl)):
                # Refused here on every release (see above).
                stray += 1
                if ours.returncode == 0:
                    failures.append(f"{hl!r}: a stray ']' was accepted")
            elif slurm_drops_silently(hl):
                dropped += 1
                if ours.returncode == 0:
                    failures.append(f"{hl!r}: a bad range scontrol drops "
                                    f"silently was accepted")
            elif slurm_refused and has_suffix(hl) and ours.returncode == 0:
                # Slurm 22.05: no suffixes; expanded here by the rule.
                suffix_22 += 1
                if ours.stdout != expected_with_suffix(dist_train, hl):
                    failures.append(f"{hl!r}: suffix expansion "
                                    f"{ours.stdout[:120]!r} breaks the rule")
            elif slurm_refused:
                refused += 1
                if ours.returncode == 0:
                    failures.append(f"{hl!r}: scontrol refuses it, we "
                                    f"printed {ours.stdout[:80]!r}")
            elif ref.returncode != 0:
                failures.append(f"{hl!r}: scontrol failed: {ref.stderr}")
            elif ours.stdout != ref.stdout:
                failures.append(f"{hl!r}: scontrol {ref.stdout[:120]!r} "
                                f"ours {ours.stdout[:120]!r} "
                                f"{ours.stderr.strip()}")
            else:
                agreed += 1

    print("1..1")
    status = "ok" if not failures else "not ok"
    print(f"{status} 1 - {len(lists)} lists (seed {seed}): {agreed} "
          f"expanded identically, {refused} refused by both, {dropped} "
          f"refused here that scontrol silently truncates, {suffix_22} "
          f"with a suffix that this scontrol refuses (22.05) and newer "
          f"Slurm expands, {stray} with a stray ']' refused here that "
          f"newer scontrol keeps in host names")
    for f in failures[:20]:
        print(f"# {f}")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
