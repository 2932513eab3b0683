#!/bin/bash
# Carry (git-ignored .devwork/, named in the device tool's carry): llama.cpp-0c1e57098.tar.gz (the pruned
# PyPI-fallback tree, vendor/ kept), wheels/ (the cp312 wheels toolkit measure needs, nvidia-ml-py),
# gen_mid.py (a copy of benchmarks/gen_mid.py). Output: /tmp/w/out on the device.
# Runs detached on the device: build llama-bench (CUDA), generate a mid-size qwen3moe, then
# `toolkit measure` around the bare-metal llama-bench alone and beside another tenant.
REPO=$(pwd); D=$REPO/.devwork; W=/tmp/w; O=$W/out
mkdir -p $O; exec > $O/driver.log 2>&1; set -x
PY=python3; [ -x /opt/torch/.venv/bin/python ] && PY=/opt/torch/.venv/bin/python
$PY -m pip install -q --no-index --no-deps --target /tmp/site $D/wheels/*.whl
export PYTHONPATH=/tmp/site:$REPO
cd $W && tar xzf $D/llama.cpp-0c1e57098.tar.gz && cd llama.cpp-0c1e57098
( $PY $D/gen_mid.py $W/mid.gguf > $O/gen.log 2>&1 ) &
GEN=$!
cmake -S . -B bcuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_COMMIT=0c1e57098 -DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_APP=OFF -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 > $O/cmake.log 2>&1
s=$(date +%s); ninja -C bcuda -j14 llama-bench > $O/build.log 2>&1; echo "rc=$? wall=$(( $(date +%s) - s ))s" >> $O/build.log
wait $GEN
LB=$W/llama.cpp-0c1e57098/bcuda/bin/llama-bench
SWEEP="-m $W/mid.gguf -fa 1 -ngl 99 -p 512,2048 -ub 512,2048 -n 128 -r 5 -o jsonl --progress"
cd $REPO
$PY -m toolkit measure --results $O/results --label h200-alone --out $O/alone.jsonl -- $LB $SWEEP > $O/alone.stdout 2> $O/alone.stderr
echo "alone rc=$?" >> $O/driver.log
sleep 5
$PY -c "
import time,torch
a=torch.randn(8192,8192,device='cuda',dtype=torch.bfloat16);b=torch.randn_like(a)
end=time.time()+240
while time.time()<end:
  c=a@b;torch.cuda.synchronize()
" > $O/contend.log 2>&1 &
C=$!
sleep 4
$PY -m toolkit measure --results $O/results --label h200-contended --out $O/contended.jsonl -- $LB $SWEEP > $O/contended.stdout 2> $O/contended.stderr
echo "contended rc=$?" >> $O/driver.log
kill $C; wait $C
$PY -m toolkit report --results $O/results > $O/report.md 2> $O/report.stderr
touch $W/DONE
