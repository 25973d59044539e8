#!/bin/bash
# One source for the settings (TAP): the tables of --dist-train settings
# and plugstack.conf arguments in the README, the man pages and the
# plugstack.conf snippet are made from the plugin's own table
# (common/settings.c, printed by `dist-train settings`), between
# "BEGIN NAME" and "END NAME" marker lines; srun --help lists every setting
# too. Any difference fails, naming the file and the fix:
#
#   tests/settings-docs.sh --update    rewrite the blocks from the table
#
# DT_TOP_BUILDDIR (set by make check) is where dist-train and
# dist_train.so were built [./build].
set -uo pipefail
top=${DT_TOP_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=${DT_TOP_BUILDDIR:-$top/build}
helper=$build/helper/dist-train
plugin=$build/plugin/.libs/dist_train.so
update=0
[ "${1:-}" = --update ] && update=1

if [ ! -x "$helper" ]; then
	echo "settings-docs: $helper is not built: build first (make), or set DT_TOP_BUILDDIR" >&2
	exit 2
fi

# FILE NAME ARGS...: the block NAME of FILE, against `dist-train settings
# ARGS`.
blocks=(
	"README.md settings --user --format=markdown"
	"README.md site-keys --site --format=markdown"
	"man/dist_train.8 settings --user --format=roff"
	"man/dist_train.8 site-keys --site --format=roff"
	"man/dist-train.1 settings --user --format=roff"
	"contrib/plugstack.conf.d/dist_train.conf site-keys --site --format=conf"
)

# block FILE NAME: the lines between the markers, without them.
block() {
	awk -v name="$2" '
		index($0, "END " name) && inside { inside = 0; found = 1 }
		inside { print }
		index($0, "BEGIN " name) { inside = 1 }
		END { exit found ? 0 : 1 }' "$1"
}

# replace FILE NAME NEWFILE: put NEWFILE's lines between the markers.
replace() {
	awk -v name="$2" -v new="$3" '
		index($0, "END " name) && inside {
			while ((getline line < new) > 0) print line
			inside = 0
		}
		!inside { print }
		index($0, "BEGIN " name) { inside = 1 }' "$1" > "$1.tmp" &&
		cat "$1.tmp" > "$1" && rm -f "$1.tmp"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0 failed=0
echo "1..$(( ${#blocks[@]} + 1 ))"
for b in "${blocks[@]}"; do
	read -r file name args <<<"$b"
	n=$((n + 1))
	# shellcheck disable=SC2086
	"$helper" settings $args > "$tmp/want"
	if ! block "$top/$file" "$name" > "$tmp/have"; then
		echo "not ok $n - $file has no 'BEGIN $name' ... 'END $name' block: add the two marker lines"
		failed=1
		continue
	fi
	if cmp -s "$tmp/want" "$tmp/have"; then
		echo "ok $n - $file: $name as in common/settings.c"
	elif [ $update = 1 ]; then
		replace "$top/$file" "$name" "$tmp/want"
		echo "ok $n - $file: $name rewritten from common/settings.c"
	else
		echo "not ok $n - $file: $name differs from common/settings.c: run tests/settings-docs.sh --update (and edit the table in common/settings.c, not the copies)"
		diff "$tmp/want" "$tmp/have" | sed 's/^/# /'
		failed=1
	fi
done

# srun --help, with the plugin loaded through a plugstack.conf of our own
# (srun reads its configuration, and loads plugins, before --help).
n=$((n + 1))
if ! command -v srun >/dev/null || [ ! -r "$plugin" ]; then
	echo "ok $n # SKIP no srun, or the plugin is not built"
else
	cat > "$tmp/slurm.conf" <<EOF
ClusterName=settingsdocs
SlurmctldHost=localhost
PlugStackConfig=$tmp/plugstack.conf
NodeName=n1 CPUs=1
PartitionName=p Nodes=n1
EOF
	echo "required $plugin" > "$tmp/plugstack.conf"
	SLURM_CONF=$tmp/slurm.conf COLUMNS=80 srun --help > "$tmp/help" 2>&1
	# The usage text is wrapped: compare it as one line.
	flat=$(sed -n '/--dist-train=SETTINGS/,/^$/p' "$tmp/help" | tr -s ' \n' '  ')
	missing=
	for syntax in $("$helper" settings --user --format=conf | sed -n 's/^#   \([^ ]*\) .*/\1/p'); do
		case $flat in
		*" $syntax,"* | *" $syntax."*) ;;
		*) missing="$missing $syntax" ;;
		esac
	done
	if [ -z "$flat" ]; then
		echo "not ok $n - srun --help does not show --dist-train"
		sed 's/^/# /' "$tmp/help" | tail -n 20
		failed=1
	elif [ -n "$missing" ]; then
		echo "not ok $n - srun --help lacks:$missing"
		failed=1
	else
		echo "ok $n - srun --help lists every setting"
	fi
fi
exit $failed
