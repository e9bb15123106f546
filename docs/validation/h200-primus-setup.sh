#!/usr/bin/env bash
# Builds, on the development machine, what real Primus needs on the lent H200 (issue 42), as
# ../shared/research/primus-on-h200.md §5 describes: .primus/ (Primus fd1eeabb with its pinned
# Megatron-LM d3528a21 in third_party/, trimmed) and .whl/ (the pure-Python wheels the device
# image lacks). Both are ignored by git and carried to the device (`run` with carry); nothing of
# Primus or Megatron-LM is committed. Run from the repository root:
#   P=/work/.mirror/AMD-AGI+Primus/repo M=/work/.mirror/NVIDIA+Megatron-LM/repo \
#     bash docs/validation/h200-primus-setup.sh
# (P and M: bare git mirrors, e.g. from the `fetch` tool.) About 10 minutes on 2 cores, most of
# it building the causal-conv1d wheel (its build environment installs torch).
set -euo pipefail
P=${P:?a Primus git directory}
M=${M:?a Megatron-LM git directory}
PRIMUS=fd1eeabbad15135e3702094087e96142b4b4eacb
MEGATRON=d3528a21301db2d12e92912b3ec025dc8a2ed4d6
rm -rf .primus && mkdir -p .primus/third_party/Megatron-LM .primus/examples/h200 .whl/extra
# A blob of tools/IRLens is missing from the stored snapshot: git archive says so and still
# writes the folders asked for.
git --git-dir="$P" archive "$PRIMUS" primus runner primus_cli.py primus-cli requirements.txt LICENSE |
  tar -x -C .primus
git --git-dir="$M" archive "$MEGATRON" | tar -x -C .primus/third_party/Megatron-LM
(cd .primus/third_party/Megatron-LM && rm -rf tests docs examples images uv.lock tools docker tasks scripts)
cp ../shared/research/primus-on-h200/tiny_llama_cuda.yaml .primus/examples/h200/
cp docs/validation/primus/*.yaml .primus/examples/h200/
py=(--python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
have() { compgen -G ".whl/$1" > /dev/null; }
have 'loguru-*.whl' || python3 -m pip download -q --no-deps --only-binary=:all: "${py[@]}" -d .whl \
  loguru==0.7.3 nltk==3.10.4 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 defusedxml==0.7.1 \
  flash-linear-attention==0.5.2 fla-core==0.5.2
# Megatron d3528a21 imports pydantic unconditionally (megatron/rl); the image may lack it.
# Its dependencies come with it (pydantic-core, annotated-types, typing-inspection,
# typing-extensions); the device script installs only those the image lacks.
have 'extra/pydantic-*.whl' || python3 -m pip download -q --only-binary=:all: "${py[@]}" \
  -d .whl/extra pydantic
if ! have 'causal_conv1d-*.whl'; then
  cc=$(mktemp -d)
  # The package's own switches for a build without CUDA, for the metadata step of the download
  # as for the wheel: its setup.py needs nvcc otherwise.
  export CAUSAL_CONV1D_SKIP_CUDA_BUILD=TRUE CAUSAL_CONV1D_FORCE_BUILD=TRUE
  python3 -m pip download -q --no-deps -d "$cc" causal-conv1d==1.5.2
  tar xzf "$cc"/causal_conv1d-1.5.2.tar.gz -C "$cc"
  python3 -m pip wheel -q --no-deps -w "$PWD/.whl" "$cc/causal_conv1d-1.5.2"
  rm -rf "$cc"
fi
cargo build --release -q
mkdir -p bin && cp target/release/primus-tune bin/ && strip bin/primus-tune
# The device takes at most 64 MiB of working tree and carried paths together, and the tracked
# files alone are about 34 MiB: carry compressed copies (`run` with carry [".carry"]) and unpack
# them there first:
#   tar xzf .carry/primus.tgz; tar xzf .carry/whl.tgz; mkdir -p bin
#   tar xzf .carry/megatron.tgz -C bin    # only where bin/megatron exists here (h200-oom-stop.sh)
#   gunzip -c .carry/primus-tune.gz > bin/primus-tune; chmod +x bin/primus-tune
rm -rf .carry && mkdir .carry
tar czf .carry/primus.tgz .primus && tar czf .carry/whl.tgz .whl
gzip -9 -c bin/primus-tune > .carry/primus-tune.gz
[ -d bin/megatron ] && tar czf .carry/megatron.tgz -C bin megatron
du -sh .primus .whl bin/primus-tune .carry
