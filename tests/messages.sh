#!/bin/bash
# Every message the plugin and the helper can print says what went wrong
# and what to do, naming the setting or option, and is listed on
# doc/troubleshooting.md (TAP). The rules, and how the messages are found,
# are at the top of tests/messages.py; `tests/messages.py --list` prints
# every message found.
top=${DT_TOP_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
if ! command -v python3 >/dev/null; then
	echo "1..0 # SKIP python3 is not installed"
	exit 0
fi
# A release tarball carries the sources but not doc/.
if [ ! -e "$top/doc/troubleshooting.md" ] && [ ! -e "$top/.git" ]; then
	echo "1..0 # SKIP no doc/troubleshooting.md in this tree"
	exit 0
fi
DT_TOP_SRCDIR=$top exec python3 "$top/tests/messages.py" "$@"
