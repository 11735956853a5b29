#!/usr/bin/env bash
# gpu_check.sh: ember's CUDA path on a real NVIDIA GPU in under 8 minutes, installing nothing.
#
#   bash benchmarks/gpu_check.sh                    # from the repository root, on a machine with a GPU,
#                                                   # CuPy and PyTorch already installed
#   GPU_CHECK_FAKE=1 bash benchmarks/gpu_check.sh   # the same steps on tests/_fakecuda.py (no GPU needed)
#   GPU_CHECK_DRY_RUN=1 bash benchmarks/gpu_check.sh  # print the worst-case schedule and exit
#
# Steps, in order, each under its own `timeout`; a step that fails or times out does not stop the next:
#   info          nvidia-smi, python/numpy/cupy/torch versions, CUDA runtime and driver, NCCL, the
#                 devices ember sees; without a usable GPU it says why and the script exits 2 at once
#   test_*        tests/test_cuda.py, tests/test_cuda_train.py and the parity files (SUITES, read from
#                 tests/test_device_suite.py) under EMBER_TEST_DEVICE=cuda, one pytest run per file
#   train         the main job (`python -m ember train`: the ResMLP on the shipped digits) on --device cuda
#   bench         `python -m ember bench --device cuda`: W1-W3 at batch 128 and 1024 against PyTorch CUDA
# Results go to $OUT if set, else ./gpu-check/: NAME.log per step (its first line is the command),
# summary.txt with one line per step, `NAME STATUS SECONDS NOTE` (STATUS is PASS, FAIL or TIMEOUT; a step
# the budget left no time for is TIMEOUT with the note "not started"), train/ (the model, metrics.json)
# and bench.md / bench.json. The summary is printed at the end; the exit status is 0 only if every step
# passed (1 otherwise, 2 without a GPU).
#
# The time budget (seconds; every step's limit is also cut so that the whole run ends by the deadline
# while each later step keeps at least its minimum; `timeout` may take GRACE=3 s more to kill a step):
#   GPU_CHECK_BUDGET=450          the whole run (8 min = 480 s, less a margin for start-up)
#   GPU_CHECK_INFO_TIMEOUT=45     the info step
#   GPU_CHECK_FILE_TIMEOUT=90     the most one test file may take
#   GPU_CHECK_FILE_MIN=10         the least kept back for each test file still to run
#   GPU_CHECK_TRAIN_TIMEOUT=90    GPU_CHECK_TRAIN_MIN=45    the main job
#   GPU_CHECK_BENCH_TIMEOUT=150   GPU_CHECK_BENCH_MIN=75    the benchmark
# What runs:
#   GPU_CHECK_FILES="..."         test files, space-separated: a bare name is under tests/, anything with
#                                 a / is a path (default: test_cuda.py test_cuda_train.py and SUITES)
#   GPU_CHECK_EPOCHS=2            epochs of the main job
#   GPU_CHECK_MIN_ACCURACY=0.9    the main job fails below this test accuracy (2 epochs reach ~0.94)
#   GPU_CHECK_TRAIN_ARGS="..."    more arguments for `ember train` (default none)
#   GPU_CHECK_BENCH_ARGS="..."    more arguments for `ember bench` (default none; e.g. "--repeats 3")
#   GPU_CHECK_PYTHON=python       the interpreter (default: python, else python3)
#   GPU_CHECK_FAKE=1              CUDA is tests/_fakecuda.py, the CPU stand-in for CuPy, in every step
#                                 (EMBER_DISABLE_CUDA=1 keeps a real GPU out), to test this script's logic
#   GPU_CHECK_DRY_RUN=1           print each step's limit as if every step ran to its limit, then exit 0
# Set EMBER_REQUIRE_TORCH=1 to make the parity tests fail, not skip, where PyTorch cannot be imported.
set -uo pipefail  # no -e: a failing step is recorded and the run goes on

GRACE=3  # seconds `timeout` waits after SIGTERM before SIGKILL (a step stuck in a CUDA call)

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT_DIR=$(realpath -m "${OUT:-./gpu-check}")  # absolute: the steps run from the root
cd "$ROOT" || exit 2

PY=${GPU_CHECK_PYTHON:-$(command -v python || command -v python3)}
[[ -n $PY ]] || { echo "gpu_check: no python or python3 on PATH (set GPU_CHECK_PYTHON)" >&2; exit 2; }
BUDGET=${GPU_CHECK_BUDGET:-450}
INFO_TIMEOUT=${GPU_CHECK_INFO_TIMEOUT:-45}
FILE_TIMEOUT=${GPU_CHECK_FILE_TIMEOUT:-90}
FILE_MIN=${GPU_CHECK_FILE_MIN:-10}
TRAIN_TIMEOUT=${GPU_CHECK_TRAIN_TIMEOUT:-90}
TRAIN_MIN=${GPU_CHECK_TRAIN_MIN:-45}
BENCH_TIMEOUT=${GPU_CHECK_BENCH_TIMEOUT:-150}
BENCH_MIN=${GPU_CHECK_BENCH_MIN:-75}
EPOCHS=${GPU_CHECK_EPOCHS:-2}
MIN_ACCURACY=${GPU_CHECK_MIN_ACCURACY:-0.9}
export GPU_CHECK_FAKE=${GPU_CHECK_FAKE:-0}  # the info step reads it too
FAKE=$GPU_CHECK_FAKE
DRY_RUN=${GPU_CHECK_DRY_RUN:-0}
read -ra TRAIN_ARGS <<< "${GPU_CHECK_TRAIN_ARGS:-}"
read -ra BENCH_ARGS <<< "${GPU_CHECK_BENCH_ARGS:-}"

# ember from this checkout, installed or not
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
if [[ $FAKE == 1 ]]; then
    # tests/conftest.py installs the stand-in for pytest whenever ember sees no CUDA; the CLI steps go
    # through a one-line wrapper that installs it, then calls ember's CLI as `python -m ember` would
    export EMBER_DISABLE_CUDA=1
    EMBER_CLI=("$PY" -c 'import sys; sys.path.insert(0, "tests"); import _fakecuda; _fakecuda.install(); '\
'from ember.cli import main; sys.exit(main(sys.argv[1:]))')
else
    EMBER_CLI=("$PY" -m ember)
fi

SUMMARY=$OUT_DIR/summary.txt
FAILED=0
STEP_PID=""  # the running step's `timeout`, to stop with the script

# `timeout` runs each step in a process group of its own, out of the terminal's reach: Ctrl-C (or a TERM
# to this script) would stop the script but leave the step running, so pass the signal on to it
# shellcheck disable=SC2329  # (invoked by the trap)
interrupted() {
    [[ -n $STEP_PID ]] && kill -TERM "$STEP_PID" 2> /dev/null && wait "$STEP_PID"
    echo "gpu_check: interrupted" >&2
    exit 130
}
trap interrupted INT TERM
CLOCK=0  # the dry run's clock: each step "takes" its whole limit

now() {  # seconds since the epoch, with a fraction: steps are timed to 0.1 s
    if [[ $DRY_RUN == 1 ]]; then echo "$CLOCK"; else date +%s.%N; fi
}

START=$(now)
DEADLINE=$(awk -v s="$START" -v b="$BUDGET" 'BEGIN { printf "%d", s + b }')

limit_for() {  # CAP RESERVE: seconds a step may run, at most CAP, leaving RESERVE (+ its own GRACE)
    awk -v cap="$1" -v keep="$2" -v d="$DEADLINE" -v t="$(now)" -v g="$GRACE" \
        'BEGIN { l = int(d - t - keep - g); print (l < cap ? l : cap) }'
}

record() {  # NAME STATUS SECONDS NOTE: one summary line
    printf '%-24s %-7s %6.1f%s\n' "$1" "$2" "$3" "${4:+  $4}" >> "$SUMMARY"
    [[ $2 == PASS ]] || FAILED=1
}

# run_step NAME LIMIT CMD...: CMD with its output in NAME.log, killed after LIMIT seconds; one summary line
run_step() {
    local name=$1 limit=$2; shift 2
    local log=$OUT_DIR/$name.log
    if [[ $DRY_RUN == 1 ]]; then
        if (( limit < 1 )); then
            printf '%-24s not started (budget spent at +%d s)\n' "$name" "$CLOCK"
        else
            printf '%-24s up to %4d s (+%d s to kill), from +%d s\n' "$name" "$limit" "$GRACE" "$CLOCK"
            CLOCK=$((CLOCK + limit + GRACE))
        fi
        return 0
    fi
    if (( limit < 1 )); then
        echo "not started: the budget (GPU_CHECK_BUDGET=$BUDGET s) left no time for it" > "$log"
        echo "--- $name: not started, the budget is spent"
        record "$name" TIMEOUT 0 "not started (budget spent)"
        return 1
    fi
    echo "--- $name (at most $limit s)"
    { printf '$'; printf ' %q' "$@"; echo; } > "$log"  # the command, to rerun a step by hand
    local t0 t1 rc secs status note
    t0=$(now)
    # in the background and waited for, so that the trap above runs at once on a signal
    timeout --kill-after="$GRACE" "$limit" "$@" >> "$log" 2>&1 &
    STEP_PID=$!
    wait "$STEP_PID"
    rc=$?
    STEP_PID=""
    t1=$(now)
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    # 124: timeout's TERM; 137: its KILL, or any other SIGKILL (the OOM killer): only past the limit a timeout
    if [[ $rc == 124 || $rc == 137 ]] && awk -v s="$secs" -v l="$limit" 'BEGIN { exit !(s >= l) }'; then
        status=TIMEOUT note="killed after $limit s"
    elif [[ $rc == 0 ]]; then
        status=PASS note=""
    else
        status=FAIL note="exit $rc"
    fi
    # pytest's closing line (`3 passed, 1 skipped in 2.0s`) says what a PASS covered
    local counts
    counts=$(grep -E '^=* ?[0-9]+ (passed|failed|errors?|skipped|deselected|xfailed|xpassed)' "$log" | tail -n 1 |
             sed -E 's/^=+ *//; s/ *=+$//')
    note="$note${note:+${counts:+; }}$counts"
    record "$name" "$status" "$secs" "$note"
    echo "    $status in $secs s${note:+ ($note)}"
    if [[ $status != PASS ]]; then  # the log's end on the console too: sometimes the console is all that comes back
        tail -n 25 "$log" | sed 's/^/    | /'
    fi
    [[ $status == PASS ]]
}

# the test files: the two CUDA files, then the parity files, read from the list the CPU run uses
test_files() {
    if [[ -n ${GPU_CHECK_FILES:-} ]]; then
        echo "$GPU_CHECK_FILES"
        return
    fi
    "$PY" - <<'EOF'
import ast
tree = ast.parse(open("tests/test_device_suite.py").read())
suites = next(ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
              and any(getattr(t, "id", None) == "SUITES" for t in node.targets))
print(" ".join(["test_cuda.py", "test_cuda_train.py", *suites]))
EOF
}

# What the machine has, and whether ember sees a GPU (exit 3 and the reason if not). Torch is imported
# only after the GPU is found, so that a machine without one is told so in a second or two.
info_py() {
    cat <<'EOF'
import os, platform, shutil, subprocess, sys


def show(label, value):
    """One line `label: value`, or why there is no value: past the GPU check, nothing here stops the run."""
    try:
        print(f"{label}: {value()}")
    except Exception as e:  # noqa: BLE001 - a missing library or symbol is reported, not fatal
        print(f"{label}: unavailable ({type(e).__name__}: {e})")


def torch_line():
    import torch
    gpu = torch.cuda.is_available()
    return (f"{torch.__version__}, built for CUDA {torch.version.cuda}, torch.cuda.is_available() {gpu}"
            + (f", {torch.cuda.get_device_name(0)}, NCCL {torch.cuda.nccl.version()}" if gpu
               else " (the bench runs ember alone)"))


def nccl_version():
    nccl = ember.backend.CUDA.nccl()  # what ember.distributed uses, or why it cannot
    return nccl if isinstance(nccl, str) else nccl.get_version()


fake = os.environ.get("GPU_CHECK_FAKE") == "1"
smi = shutil.which("nvidia-smi")
if smi:
    r = subprocess.run([smi], capture_output=True, text=True, timeout=20)
    print(r.stdout + r.stderr)
else:
    print("nvidia-smi: not found")
print(f"python: {platform.python_version()} ({sys.executable})")
import numpy
print(f"numpy: {numpy.__version__}")
import ember
if fake:
    sys.path.insert(0, "tests")
    import _fakecuda
    _fakecuda.install()
    print("GPU_CHECK_FAKE=1: CUDA is tests/_fakecuda.py, the CPU stand-in for CuPy (NumPy underneath)")
if not ember.cuda.is_available():
    try:
        ember.zeros(1, device="cuda")
        why = "ember.cuda.is_available() is False"
    except RuntimeError as e:
        why = str(e)
    print(f"NO GPU: {why}")
    sys.exit(3)
cp = ember.backend.CUDA.cp
show("cupy", lambda: cp.__version__)
show("CUDA runtime", lambda: cp.cuda.runtime.runtimeGetVersion())
show("CUDA driver", lambda: cp.cuda.runtime.driverGetVersion())
for i in range(ember.cuda.device_count()):
    show(f"ember cuda:{i}", lambda: ember.cuda.get_device_name(i))
show("NCCL (cupy.cuda.nccl)", nccl_version)
show("torch", torch_line)  # without it the parity tests skip (unless EMBER_REQUIRE_TORCH=1)
if not fake:
    show("cupy.show_config()", lambda: cp.show_config() or "above")  # CUDA root, cuBLAS, cuDNN, NCCL, ...
EOF
}

check_device() {
    # a file, not `python -c`: the log's first line stays short and the step can be rerun by hand
    [[ $DRY_RUN == 1 ]] || info_py > "$OUT_DIR/info.py"
    run_step info "$(limit_for "$INFO_TIMEOUT" 0)" "$PY" "$OUT_DIR/info.py"
    local ok=$?
    [[ $DRY_RUN == 1 ]] && return
    if (( ok == 0 )); then  # (a failed step's log is on the console already)
        tail -n +2 "$OUT_DIR/info.log" | sed 's/^/    /'  # less the command line
    else
        local why
        why=$(grep '^NO GPU: ' "$OUT_DIR/info.log" | cut -c9-)
        print_summary
        echo "gpu_check: no usable CUDA GPU, nothing else was run: ${why:-the info step failed (see $OUT_DIR/info.log)}" >&2
        echo "gpu_check: (GPU_CHECK_FAKE=1 runs the steps on the CPU stand-in tests/_fakecuda.py)" >&2
        exit 2
    fi
}

run_tests() {
    local files f path i=0 n limit keep
    read -ra files <<< "$(test_files)"
    n=${#files[@]}
    if (( BUDGET < INFO_TIMEOUT + n * (FILE_MIN + GRACE) + TRAIN_MIN + BENCH_MIN + 3 * GRACE )); then
        echo "gpu_check: warning: GPU_CHECK_BUDGET=$BUDGET s is less than the steps' minimums add up to;" \
             "a step may not start if those before it take their whole time" >&2
    fi
    for f in "${files[@]}"; do
        i=$((i + 1))
        if [[ $f == */* ]]; then path=$f; else path=tests/$f; fi
        # kept back: the minimum of every test file after this one, of the main job and of the bench
        keep=$(( (n - i) * (FILE_MIN + GRACE) + TRAIN_MIN + GRACE + BENCH_MIN + GRACE ))
        limit=$(limit_for "$FILE_TIMEOUT" "$keep")
        run_step "$(basename "$f" .py)" "$limit" \
            env EMBER_TEST_DEVICE=cuda "$PY" -m pytest -o addopts= -p no:cacheprovider -q --tb=short -rfE --durations=5 "$path"
    done
}

run_train() {
    run_step train "$(limit_for "$TRAIN_TIMEOUT" $((BENCH_MIN + GRACE)))" \
        "${EMBER_CLI[@]}" train --device cuda --epochs "$EPOCHS" --min-accuracy "$MIN_ACCURACY" \
        --out "$OUT_DIR/train" "${TRAIN_ARGS[@]}"
}

run_bench() {
    run_step bench "$(limit_for "$BENCH_TIMEOUT" 0)" \
        "${EMBER_CLI[@]}" bench --device cuda --output "$OUT_DIR/bench.md" --json "$OUT_DIR/bench.json" \
        "${BENCH_ARGS[@]}"
}

print_summary() {
    echo
    echo "=== gpu_check summary ($OUT_DIR/summary.txt; logs beside it)"
    printf '%-24s %-7s %6s  %s\n' step status seconds note
    cat "$SUMMARY"
    awk -v a="$START" -v b="$(now)" -v budget="$BUDGET" \
        'BEGIN { printf "total %.0f s of a %d s budget\n", b - a, budget }'
}

main() {
    if [[ $DRY_RUN == 1 ]]; then
        echo "gpu_check dry run: each step's limit if every step before it ran to its own (budget $BUDGET s)"
    else
        mkdir -p "$OUT_DIR" && : > "$SUMMARY"
        echo "gpu_check: ember's CUDA path$([[ $FAKE == 1 ]] && echo ' on the CPU stand-in (GPU_CHECK_FAKE=1)'); budget $BUDGET s; results in $OUT_DIR"
    fi
    check_device
    run_tests
    run_train
    run_bench
    if [[ $DRY_RUN == 1 ]]; then
        echo "worst case: $CLOCK s"
        exit 0
    fi
    print_summary
    exit "$FAILED"
}

main
