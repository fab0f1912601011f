#!/usr/bin/env bash
# The image pipeline at the decode limit, side by side in one run (issue 3's benchmark):
#   - decode limit: bench/decode_limit, one process per core decoding + cropping the same
#     files with emberd's own code, files in memory, no loader;
#   - Ember: `emberctl bench` (emberd + R readers) on the folder, and on its packed copy;
#   - PyTorch DataLoader: torchvision ImageFolder + RandomResizedCrop(224) + flip +
#     ToTensor, R ranks x 2 workers;
#   - data stall: Ember readers that spend 50 ms per batch (sleeping, as a GPU step;
#     then busy, as a CPU step) and the fraction of their time spent waiting for data.
# All with configs/pipelines/imagenet_train.yaml, batch B, R ranks. Memory: peak PSS
# summed over every process of a run. Appends a table to bench/results/images.md.
#
#   bench/image_bench.sh [--dir DIR] [--count 2000] [--ranks 2] [--batch-size 64] [--seconds 10]
# Without --dir, a folder of COUNT JPEGs (256x256, from Fashion-MNIST) is generated.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=""
count=2000
ranks=2
batch=64
seconds=10
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dir) dir="$2"; shift 2 ;;
    --count) count="$2"; shift 2 ;;
    --ranks) ranks="$2"; shift 2 ;;
    --batch-size) batch="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    *) echo "image_bench: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

bazel build //daemon:emberd //sdk/emberctl:emberctl //bench:decode_limit >/dev/null
# shellcheck source=bench/lib.sh
source bench/lib.sh
make_bench_tmp
if [[ -z "${dir}" ]]; then
  dir="${tmp}/jpegs"
  bench/make_jpeg_folder.py "${dir}" --count "${count}"
fi
pipeline=configs/pipelines/imagenet_train.yaml
value() { sed -n "s/^$1=\\([0-9.]*\\).*/\\1/p"; }

echo "== decode limit ($(nproc) processes)"
limit_out="$(bazel-bin/bench/decode_limit --dir "${dir}" --pipeline "${pipeline}" --seconds "${seconds}")"
echo "${limit_out}"
limit="$(sed -n 's/.*images_per_s=\([0-9.]*\).*/\1/p' <<<"${limit_out}")"

start_daemon "${tmp}"
"${ctl[@]}" dataset add images --format imagefolder --path "${dir}" --pipeline "${pipeline}" >/dev/null
"${ctl[@]}" pack "${dir}" "${tmp}/images.packed" --quiet
"${ctl[@]}" dataset add images-packed --format packed --path "${tmp}/images.packed" \
  --pipeline "${pipeline}" >/dev/null
extra_pids="${daemon_pid}"
declare -A rate pss
for name in images images-packed; do
  echo "== Ember: ${name}"
  out="$(peak_pss_of "${ctl[@]}" bench "${name}" --ranks "${ranks}" --batch-size "${batch}" \
    --seconds "${seconds}" 3>"${tmp}/pss")"
  echo "${out}" | tail -n 1
  rate[${name}]="$(sed -n 's/^bench: samples_per_s=\([0-9.]*\).*/\1/p' <<<"${out}")"
  pss[${name}]="$(cat "${tmp}/pss")"
done
declare -A stall
for kind in sleep busy; do
  flag=()
  [[ "${kind}" == busy ]] && flag=(--busy-compute)
  out="$("${ctl[@]}" bench images --ranks "${ranks}" --batch-size "${batch}" --seconds "${seconds}" \
    --compute-ms 50 "${flag[@]}")"
  stall[${kind}]="$(sed -n 's/^data wait: \([0-9.]*\).*/\1/p' <<<"${out}")"
  echo "== data wait with 50 ms ${kind} steps: ${stall[${kind}]}"
done
stop_daemon
extra_pids=""

echo "== PyTorch DataLoader: ${ranks} ranks x 2 workers"
out="$(peak_pss_of bench/dataloader_baseline.py --imagefolder "${dir}" --ranks "${ranks}" \
  --batch-size "${batch}" --workers 2 --seconds "${seconds}" 3>"${tmp}/pss")"
echo "${out}" | tail -n 1
base="$(sed -n 's/^baseline: samples_per_s=\([0-9.]*\).*/\1/p' <<<"${out}")"
base_pss="$(cat "${tmp}/pss")"

mkdir -p bench/results
{
  echo
  echo "## $(date -u +%Y-%m-%dT%H:%MZ) — $(machine)"
  echo
  echo "\`bench/image_bench.sh --count ${count} --ranks ${ranks} --batch-size ${batch} --seconds ${seconds}\`"
  echo "(${pipeline}; $(find "${dir}" -type f | wc -l) files)"
  echo
  echo "| run | images/s | vs DataLoader | vs decode limit | peak PSS | vs DataLoader |"
  echo "|---|---|---|---|---|---|"
  echo "| decode limit ($(nproc) processes, no loader) | ${limit} | $(ratio "${limit}" "${base}")x | 100% | | |"
  for name in images images-packed; do
    echo "| Ember ${name} (emberd + ${ranks} readers) | ${rate[$name]} | $(ratio "${rate[$name]}" "${base}")x | $(pct "${rate[$name]}" "${limit}") | ${pss[$name]} MiB | $(pct "${pss[$name]}" "${base_pss}") |"
  done
  echo "| DataLoader, ${ranks} ranks x 2 workers | ${base} | 1.0x | $(pct "${base}" "${limit}") | ${base_pss} MiB | 100% |"
  echo
  echo "Data wait of Ember readers with 50 ms steps: ${stall[sleep]} of their time (sleeping, a GPU step), ${stall[busy]} (busy CPU step competing with decoding)."
} | tee -a bench/results/images.md
