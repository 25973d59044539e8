#!/bin/bash
# A new administrator's first hour, in a fresh Debian root: the site's
# Slurm cluster is there (Debian's packages, four nodes started with
# contrib/cluster/dt-cluster, no plugin, Debian's own plugstack.conf); then
# only the commands README.md and doc/admin-guide.md give: build the .deb,
# install it, enable it, run README's first job, disable it, remove it.
# Each command is printed as typed, with what it printed; the trial fails
# where a step does not do what the README says.
#
#   tests/admin-trial.sh [bookworm|trixie|sid]     (root; default bookworm)
#
# The root is made anew each time (debootstrap and the packages: 3 to 5
# minutes), under DT_TRIAL_CACHE [/var/tmp/dist-train-trial].
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)

if [ "${1:-}" != --inside ]; then
	suite=${1:-bookworm}
	case $suite in
	bookworm | trixie | sid) ;;
	*) echo "admin-trial: unknown suite '$suite'; valid: bookworm, trixie, sid" >&2; exit 2 ;;
	esac
	[ "$(id -u)" = 0 ] || { echo "admin-trial: run it as root" >&2; exit 1; }
	export DT_STACK_CACHE=${DT_TRIAL_CACHE:-/var/tmp/dist-train-trial}
	rm -rf "${DT_STACK_CACHE:?}/$suite"
	"$top/tests/stack-root.sh" prepare "$suite"
	exec "$top/tests/stack-root.sh" enter "$suite" tests/admin-trial.sh --inside
fi

# Inside the root, in its copy of the tree.
t0=$(date +%s)
step() { printf '\n[%s s] # %s\n' "$(($(date +%s) - t0))" "$*"; }
typed() { printf '$ %s\n' "$*"; }
fail() { echo "admin-trial: FAILED: $*" >&2; contrib/cluster/dt-cluster stop >/dev/null 2>&1; exit 1; }
export DT_CLUSTER_DIR=/var/lib/dist-train-cluster
cluster=contrib/cluster/dt-cluster
jobs=$DT_CLUSTER_DIR/jobs
snippet=/etc/slurm/plugstack.conf.d/dist_train.conf

step "the site's cluster: Debian's Slurm, 4 nodes, no plugin, Debian's plugstack.conf (not part of the trial)"
$cluster start 2>&1 | tail -n 1
cp /etc/slurm/plugstack.conf "$DT_CLUSTER_DIR/etc/plugstack.conf"
echo "plugstack.conf: $(cat "$DT_CLUSTER_DIR/etc/plugstack.conf")"

step "admin guide, Debian and Ubuntu: build the .deb for this Slurm"
typed contrib/install-deps.sh
contrib/install-deps.sh > /tmp/install-deps.log 2>&1 || fail "install-deps.sh: see /tmp/install-deps.log"
typed contrib/debian/build.sh
contrib/debian/build.sh > /tmp/build-deb.log 2>&1 || fail "build.sh: $(tail -n 5 /tmp/build-deb.log)"
# Named for the Slurm release it was built for (0.1.0+slurm24.11).
deb=$(ls build-deb/dist-train_0.1.0+slurm*_amd64.deb 2>/dev/null | head -n 1)
[ -n "$deb" ] || fail "build.sh made no build-deb/dist-train_0.1.0+slurmMAJOR.MINOR_amd64.deb: $(ls build-deb)"
typed dpkg-deb -f "$deb" Depends
dpkg-deb -f "$deb" Depends

step "README, install"
typed apt-get install "./$deb"
DEBIAN_FRONTEND=noninteractive apt-get install -y -q "./$deb" > /tmp/install.log 2>&1 || fail "apt-get install: $(tail -n 5 /tmp/install.log)"
grep 'dist_train.so' "$snippet"
typed "$cluster run srun -N2 -n2 --dist-train hostname    # a user, before it is enabled"
if $cluster run srun -N2 -n2 --dist-train hostname > /tmp/out 2>&1; then
	fail "--dist-train ran before the plugin was enabled"
fi
head -n 1 /tmp/out

step "README, on"
typed "sed -i 's/^# *optional/optional/' $snippet"
sed -i 's/^# *optional/optional/' "$snippet"
grep '^optional' "$snippet" || fail "the line is not enabled"

step "README, the first job on GPUs (train.py: contrib/examples/train_ddp.py, which trains on the GPU when there is one, on CPUs here)"
cat > "$jobs/first-job.sbatch" <<'EOF'
#!/bin/bash
#SBATCH --nodes=2 --ntasks-per-node=4 --gpus-per-node=4
srun --dist-train python3 train.py
EOF
install -m 0644 contrib/examples/train_ddp.py "$jobs/train.py"
chmod 0644 "$jobs/first-job.sbatch"
cat "$jobs/first-job.sbatch"
typed "$cluster run sbatch --wait -o first-job.out first-job.sbatch"
$cluster run sbatch --wait -o first-job.out first-job.sbatch || fail "the first job: $(tail -n 5 "$jobs/first-job.out")"
grep -m 2 '^rank ' "$jobs/first-job.out"
grep '^training on\|^done:' "$jobs/first-job.out"
[ "$(grep -c '^rank [0-7]/8 ' "$jobs/first-job.out")" = 8 ] &&
	grep -q '^done: learned' "$jobs/first-job.out" || fail "the first job did not train with 8 ranks"

step "README, off"
typed "sed -i 's/^optional/#optional/' $snippet"
sed -i 's/^optional/#optional/' "$snippet"
typed "$cluster run srun -N2 -n2 --dist-train hostname"
if $cluster run srun -N2 -n2 --dist-train hostname > /tmp/out 2>&1; then
	fail "--dist-train still ran once disabled"
fi
head -n 1 /tmp/out
typed "$cluster run srun -N2 -n2 hostname"
$cluster run srun -N2 -n2 hostname || fail "a plain step fails once disabled"

step "README, remove"
typed apt-get remove dist-train
DEBIAN_FRONTEND=noninteractive apt-get remove -y -q dist-train > /tmp/remove.log 2>&1 || fail "apt-get remove: $(tail -n 5 /tmp/remove.log)"
typed "$cluster run srun -N2 -n2 hostname"
$cluster run srun -N2 -n2 hostname || fail "a plain step fails once removed"
$cluster stop >/dev/null 2>&1
step "done: every step as README says"
