#!/bin/bash
# Issue 34 on the lent H200 (the `device` tool): a depth curve of a synthetic Qwen3-30B-A3B with
# process-level repeats (intervals), bare-metal CUDA llama-bench under `toolkit measure`.
# Carry (git-ignored .devwork/h200/): llama.cpp-0c1e57098.tar.gz (the pinned source, pruned to
# llama-bench and the CPU/CUDA backends), wheels/ (cp312 wheels toolkit measure needs).
# Start detached: `setsid bash benchmarks/h200_depth.sh & ` ; it writes /tmp/w/out and touches /tmp/w/DONE.
REPO=$(pwd); D=$REPO/.devwork/h200; W=/tmp/w; O=$W/out
mkdir -p $O; exec > $O/driver.log 2>&1; set -x
PY=python3; [ -x /opt/torch/.venv/bin/python ] && PY=/opt/torch/.venv/bin/python
$PY -m pip install -q --no-index --no-deps --target /tmp/site $D/wheels/*.whl
export PYTHONPATH=/tmp/site:$D/src  # the toolkit of a known-good commit (git archive 7ebc358 toolkit, with this commit's toolkit/bench/observe.py and toolkit/analysis/energy.py), not a tree in mid-edit
cd $W && tar xzf $D/llama.cpp-0c1e57098.tar.gz && cd llama.cpp-0c1e57098
( $PY $REPO/benchmarks/gen_30b_q4_0.py $W/q30.gguf > $O/gen.log 2>&1 ) &
GEN=$!
cmake -S . -B bcuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_COMMIT=0c1e57098 -DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_APP=OFF -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 > $O/cmake.log 2>&1
s=$(date +%s); ninja -C bcuda -j14 llama-bench > $O/build.log 2>&1; echo "rc=$? wall=$(( $(date +%s) - s ))s" >> $O/build.log
wait $GEN
LB=$W/llama.cpp-0c1e57098/bcuda/bin/llama-bench
SWEEP="-m $W/q30.gguf -fa 1 -ngl 99 -p 512 -n 128 -ub 512 -b 2048 -d 0,4096,8192,16384,32768 -r 5 -o jsonl --progress"
cd $D/src
# three llama-bench processes in one measured command: the process-level repeats an interval needs
$PY -m toolkit measure --results $O/results --label h200-depth --out $O/depth.jsonl -- \
  sh -c "for i in 1 2 3; do $LB $SWEEP || exit \$?; done" > $O/depth.stdout 2> $O/depth.stderr
echo "depth rc=$?" >> $O/driver.log
touch $W/DONE
