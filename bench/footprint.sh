#!/usr/bin/env bash
# Where a training run's memory goes (issue 15: the C++ trainer's own footprint). Three
# runs of the Fashion-MNIST CNN, 2 ranks, 2 epochs, each under bench/pss_breakdown.py
# (the peak PSS sample, per process: anonymous, file-backed and shared-memory pages):
#   cpp        the example C++ trainer fed by a private emberd, evaluation included
#   cpp-train  the same stopped after the last training step (--stop-after-steps), no
#              evaluation: evaluation must not raise the peak above this
#   python-none  bench/python_ddp.py --loader none: the ranks' torch and model with no
#              loader and no dataset (one batch of zeros), the floor of any Python
#              loader's total
#   python-ember  bench/python_ddp.py --loader ember, fed by a private emberd
#   python-dataloader  bench/python_ddp.py --loader dataloader --workers 1
# Appends the breakdowns to bench/results/footprint.md. --variants picks some of them.
#
#   bench/footprint.sh [--epochs 2] [--variants "cpp cpp-train python-none python-ember python-dataloader"]
set -euo pipefail
cd "$(dirname "$0")/.."
epochs=2
# shellcheck disable=SC2034  # read by parse_options
variants="cpp cpp-train python-none python-ember python-dataloader"
declare -A options=([--epochs]=epochs [--variants]=variants)
# shellcheck source=bench/lib.sh
source bench/lib.sh
parse_options footprint "$@"

bazel build //daemon:emberd //tools/emberctl:emberctl //tools/ember_run:ember-run \
  //sdk/examples:fashion_mnist_train //sdk/python:ember >/dev/null
make_bench_tmp
steps=$(((60000 + 127) / 128 * epochs))  # global steps of 2 x 64 (the tail rule: ceil)
run=(bazel-bin/tools/ember_run/ember-run --nproc 2)
trainer=(bazel-bin/sdk/examples/fashion_mnist_train --train-dataset fmnist-train
  --test-dataset fmnist-test --epochs "${epochs}" --batch-size 64 --lr 0.001)
out="${tmp}/out.md"
one() {  # title, then the command (the daemon's pid is added when one runs)
  local title="$1"
  shift
  echo "== ${title}"
  {
    echo "**${title}** (peak PSS sample; MiB per process: Pss, Pss_Anon, Pss_File, Pss_Shmem)"
    echo
    echo '```'
    bench/pss_breakdown.py ${daemon_pid:+--pid "${daemon_pid}"} -- "$@" 2>&1 >/dev/null |
      grep -v '^\[' | sed 's/^pss_breakdown: //'
    echo '```'
    echo
  } >>"${out}"
}
# The built `ember` package, as bench/compare lays it out.
python_path="${tmp}/python"
mkdir -p "${python_path}/ember"
cp sdk/python/ember/*.py bazel-bin/sdk/python/ember/_ember.so "${python_path}/ember/"
python_ddp=(/usr/bin/python3 bench/python_ddp.py --task fmnist --epochs "${epochs}" --batch-size 64)
with_daemon() {  # variant: a private emberd with Fashion-MNIST registered
  mkdir -p "${tmp}/$1"
  start_daemon "${tmp}/$1"
  "${ctl[@]}" dataset add fmnist-train --format idx --path /usr/share/datasets/fashion-mnist \
    --split train >/dev/null
  "${ctl[@]}" dataset add fmnist-test --format idx --path /usr/share/datasets/fashion-mnist \
    --split test >/dev/null
}
for variant in ${variants}; do
  rm -f "${tmp}/store"
  case "${variant}" in
    cpp | cpp-train)
      with_daemon "${variant}"
      extra=()
      [[ "${variant}" == cpp ]] || extra=(--stop-after-steps "${steps}")
      one "${variant}: C++ trainer$([[ "${variant}" == cpp ]] && echo ", evaluation included" || echo ", stopped after step ${steps}, no evaluation")" \
        "${run[@]}" --socket "${emberd_socket}" -- "${trainer[@]}" "${extra[@]}"
      stop_daemon
      ;;
    python-none)
      one "python-none: bench/python_ddp.py --loader none (no loader)" "${run[@]}" -- \
        "${python_ddp[@]}" --loader none --store "${tmp}/store"
      ;;
    python-ember)
      with_daemon "${variant}"
      PYTHONPATH="${python_path}" one "python-ember: bench/python_ddp.py --loader ember" \
        "${run[@]}" --socket "${emberd_socket}" -- "${python_ddp[@]}" --loader ember \
        --store "${tmp}/store"
      stop_daemon
      ;;
    python-dataloader)
      one "python-dataloader: bench/python_ddp.py --loader dataloader --workers 1" "${run[@]}" -- \
        "${python_ddp[@]}" --loader dataloader --workers 1 --store "${tmp}/store"
      ;;
    *) echo "footprint: unknown variant '${variant}'" >&2; exit 2 ;;
  esac
done
{
  results_heading "bench/footprint.sh --epochs ${epochs} --variants \"${variants}\""
  cat "${out}"
} | tee -a bench/results/footprint.md
