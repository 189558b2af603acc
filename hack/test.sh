#!/usr/bin/env bash
# test.sh: what `make test` runs, phase by phase. It samples the machine's CPU every 5 seconds
# while it runs, times each phase, and ends, pass or fail, with hack/testreport's account: the
# phases with their time and CPU, the test packages by wall time, the 20 slowest tests. The
# inputs stay in out/ (phases.tsv, cpu.tsv, test-events.json, test-times.txt) for a later look.
#
# Environment: MAKE (the make that called it), OUT (out/), TALON_REQUIRE (which layers, and so
# which images, the run needs).
set -uo pipefail
cd "$(dirname "$0")/.."
make=${MAKE:-make}
out=${OUT:-out}
mkdir -p "$out"
phases=$out/phases.tsv
cpu=$out/cpu.tsv
: >"$phases"
: >"$cpu"

(while :; do
	echo "$(date +%s) $(head -1 /proc/stat)" >>"$cpu"
	sleep 5
done) &
sampler=$!

report() {
	kill "$sampler" 2>/dev/null
	echo "$(date +%s) $(head -1 /proc/stat)" >>"$cpu"
	echo
	args=(-phases "$phases" -cpu "$cpu")
	[ -s "$out/test-events.json" ] && args+=(-events "$out/test-events.json" -times "$out/test-times.txt")
	go run ./hack/testreport "${args[@]}" || true
}
trap report EXIT

# phase NAME TARGET...: runs make with the targets, and records how long it took.
phase() {
	local name=$1 start status
	shift
	start=$(date +%s)
	echo "=== make $*"
	"$make" --no-print-directory "$@"
	status=$?
	printf '%s\t%s\t%s\t%s\n' "$name" "$start" "$(date +%s)" "$status" >>"$phases"
	if [ "$status" != 0 ]; then
		echo "make $* failed (exit $status)"
		exit "$status"
	fi
}

require=${TALON_REQUIRE:-}
images=()
case ",$require," in *,docker,*) images+=(sim-image) ;; esac
case ",$require," in *,kubelet,*) images+=(pause-image docker-build sidero-images cert-manager) ;; esac

phase verify-gen verify-gen
phase lint lint
phase tools -j2 tools release-manifests build
phase test-deps test-deps
[ ${#images[@]} -eq 0 ] || phase images "${images[@]}"
phase tests test-go
