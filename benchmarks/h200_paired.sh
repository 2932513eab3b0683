#!/bin/bash
# The paired benchmark on a GPU (issue 22: "a paired benchmark shows no effect on measured tok/s"):
# bare-metal CUDA llama-bench alone vs the same command under `toolkit measure` (the sampler at 10 Hz
# reading NVML and the host), PAIRS pairs, order flipped every pair; plus the sampler's own CPU cost
# with the NVML source (benchmarks/telemetry_overhead.py). Analyse with
# `python3 benchmarks/paired_ratios.py OUT`.
# Carry (git-ignored .devwork/, named in the device tool's carry): llama.cpp-0c1e57098.tar.gz (pruned
# PyPI-fallback tree), wheels/ (cp312 wheels incl. nvidia-ml-py), gen_mid.py (copy of benchmarks/gen_mid.py).
# Output: $OUT (the device tool's folder) or /tmp/w/out, also packed as paired.tgz there.
REPO=$(pwd); D=$REPO/.devwork; W=/tmp/w; O=${OUT:-$W/out}; PAIRS=${PAIRS:-8}
mkdir -p $O $W; exec > $O/driver.log 2>&1; set -x
PY=python3; [ -x /opt/torch/.venv/bin/python ] && PY=/opt/torch/.venv/bin/python
$PY -m pip install -q --no-index --no-deps --target /tmp/site $D/wheels/*.whl
export PYTHONPATH=/tmp/site:$REPO
cd $W && tar xzf $D/llama.cpp-0c1e57098.tar.gz && cd llama.cpp-0c1e57098
( $PY $D/gen_mid.py $W/mid.gguf > $O/gen.log 2>&1 ) &
GEN=$!
cmake -S . -B bcuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_COMMIT=0c1e57098 -DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_APP=OFF -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 > $O/cmake.log 2>&1
s=$(date +%s); ninja -C bcuda -j15 llama-bench > $O/build.log 2>&1; echo "rc=$? wall=$(( $(date +%s) - s ))s" >> $O/build.log
wait $GEN
cd $REPO
$PY benchmarks/telemetry_overhead.py --seconds 20 --json > $O/overhead.json 2> $O/overhead.stderr
LB=$W/llama.cpp-0c1e57098/bcuda/bin/llama-bench
SWEEP="-m $W/mid.gguf -fa 1 -ngl 99 -p 512 -ub 512 -n 128 -r 5 -o jsonl"
$LB $SWEEP > /dev/null 2>&1   # warm the page cache and the GPU once, outside the pairs
for i in $(seq 1 $PAIRS); do
  if [ $((i % 2)) = 1 ]; then order="bare measured"; else order="measured bare"; fi
  for k in $order; do
    if [ $k = bare ]; then $LB $SWEEP > $O/bare_$i.jsonl 2> $O/bare_$i.stderr
    else $PY -m toolkit measure --results $O/results --out $O/measured_$i.jsonl -- $LB $SWEEP > /dev/null 2> $O/measured_$i.stderr; fi
  done
done
$PY benchmarks/nvml_call_cost.py > $O/nvml_call_cost.txt 2>&1
tar czf $W/paired.tgz -C $O --exclude paired.tgz . && mv $W/paired.tgz $O/ && touch $O/DONE
