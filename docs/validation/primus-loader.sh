#!/usr/bin/env bash
# Regenerate the answers of Primus' own config loader (docs/validation/primus-loader.py) that
# tests/primus_loader.rs compares primus-tune with, and (with --all) judge every experiment of
# Primus' examples.
#
#   docs/validation/primus-loader.sh PRIMUS_CHECKOUT [--all OUT_DIR]
#
# PRIMUS_CHECKOUT: Primus at fd1eeabb with its Megatron-LM submodule at the pin d3528a21:
#   git clone https://github.com/AMD-AGI/Primus && cd Primus && git checkout fd1eeabb
#   git submodule update --init third_party/Megatron-LM
# (a tree without .git, e.g. from `git archive`, is accepted when PRIMUS_COMMIT and
# MEGATRON_COMMIT name the commits it holds).
# PYTHON: a Python 3.11 with Megatron-LM's import needs, on CPU:
#   python3 -m venv /tmp/pvenv && /tmp/pvenv/bin/pip install torch numpy packaging pyyaml loguru
#   PYTHON=/tmp/pvenv/bin/python
#
# Writes presets/megatron-defaults.tsv (Megatron-LM's argument defaults at the pin, which
# primus-tune shows for a Megatron argument no file sets), tests/fixtures/primus_loader/bundled.json (the bundled example, presets/examples,
# judged with its own presets) and tests/fixtures/primus_loader/amd.json (the sample of
# Primus' experiments listed below). --all OUT_DIR also judges all of
# examples/{megatron,torchtitan}/configs into OUT_DIR/all.json and runs the Rust comparison
# over them (PRIMUS_CHECKOUT and PRIMUS_LOADER_ANSWERS tell tests/primus_loader.rs where).
set -euo pipefail

primus=$(cd "${1:?usage: primus-loader.sh PRIMUS_CHECKOUT [--all OUT_DIR]}" && pwd)
repo=$(cd "$(dirname "$0")/../.." && pwd)
python=${PYTHON:-python3}
want_primus=fd1eeabbad15135e3702094087e96142b4b4eacb
want_megatron=d3528a21301db2d12e92912b3ec025dc8a2ed4d6

head_of() { git -C "$1" rev-parse HEAD 2>/dev/null || true; }
have_primus=$( [ -e "$primus/.git" ] && head_of "$primus" || echo "${PRIMUS_COMMIT:-}")
have_megatron=$( [ -e "$primus/third_party/Megatron-LM/.git" ] && head_of "$primus/third_party/Megatron-LM" || echo "${MEGATRON_COMMIT:-}")
[ "$have_primus" = "$want_primus" ] || { echo "Primus is at '$have_primus', want $want_primus" >&2; exit 2; }
[ "$have_megatron" = "$want_megatron" ] || { echo "Megatron-LM is at '$have_megatron', want $want_megatron" >&2; exit 2; }

# The AMD sample: one experiment (or two) of every preset family, both backends.
sample=(
  examples/megatron/configs/MI300X/llama2_7B-BF16-pretrain.yaml
  examples/megatron/configs/MI300X/llama3.1_8B-BF16-pretrain.yaml
  examples/megatron/configs/MI355X/llama3.1_8B-MXFP8-pretrain.yaml
  examples/megatron/configs/MI300X/llama3.1_70B-FP8-pretrain.yaml
  examples/megatron/configs/MI300X/llama3.2_1B-BF16-pretrain.yaml
  examples/megatron/configs/MI300X/llama4_17B16E-BF16-pretrain.yaml
  examples/megatron/configs/MI300X/qwen2.5_7B-BF16-pretrain.yaml
  examples/megatron/configs/MI300X/qwen3_8B-BF16-pretrain.yaml
  examples/megatron/configs/MI300X/qwen3_30B_A3B-BF16-pretrain.yaml
  examples/megatron/configs/MI300X/deepseek_v2-BF16-pretrain.yaml
  examples/megatron/configs/MI300X/deepseek_v2_lite-BF16-pretrain.yaml
  examples/megatron/configs/MI355X/deepseek_v3-BF16-pretrain.yaml
  examples/megatron/configs/MI300X/mixtral_8x7B_v0.1-FP8-pretrain.yaml
  examples/megatron/configs/MI300X/grok1-BF16-pretrain.yaml
  examples/megatron/configs/MI300X/gpt_oss_20B-BF16-pretrain.yaml
  examples/megatron/configs/MI355X/kimi_k2-BF16-pretrain.yaml
  examples/megatron/configs/MI355X/minimax_m2.5-BF16-pretrain.yaml
  examples/megatron/configs/MI355X/qwen3_5_35B_A3B-BF16-pretrain.yaml
  examples/megatron/configs/MI300X/mamba_370M-pretrain.yaml
  examples/megatron/configs/MI300X/zebra_llama_1B-pretrain.yaml
  examples/megatron/configs/MI300X/zebra_llama_300M_gdn_hybrid-pretrain.yaml
  examples/megatron/configs/MI300X/diffusion/flux_535m_pretrain.yaml
  examples/megatron/configs/MI355X/llama3_8B-BF16-sft.yaml
  examples/torchtitan/configs/MI300X/llama3.1_8B-BF16-pretrain.yaml
  examples/torchtitan/configs/MI300X/deepseek_v3_16b-FP8-pretrain.yaml
  examples/torchtitan/configs/MI300X/qwen3_8B-pretrain.yaml
  examples/torchtitan/configs/MI300X/gpt_oss_20B-BF16-pretrain.yaml
  examples/torchtitan/configs/MI300X/llama4_17Bx16E-FP8-pretrain.yaml
  examples/megatron/configs/MI355X/deepseek_v4_flash-BF16-pretrain.yaml
  examples/megatron/configs/MI355X/kimi_k3-BF16-curve.yaml
  examples/megatron/configs/MI355X/glm5-BF16-pretrain.yaml
  examples/megatron/configs/MI355X/lfm2_8B_A1B-BF16-pretrain.yaml
  examples/megatron/configs/MI355X/gpt_oss_20B-FP8-mlperf-pretrain.yaml
  examples/megatron/configs/MI355X/deepseek1.5B-odc-lbmini.yaml
  examples/megatron/configs/MI355X/qwen14B-odc-dn.yaml
  examples/megatron/configs/MI355X/llama3_8B-BF16-lora-sft.yaml
  examples/megatron/configs/MI355X/qwen3_30B_A3B-BF16-sft-packed.yaml
  examples/megatron/configs/MI355X/diffusion/flux_12b_ddp_energon_schnell_resample_te_spec.yaml
  examples/megatron/configs/MI300X/zebra_llama_1B_gdn_pure_exp7-fsdp-overlap.yaml
  examples/megatron/configs/MI300X/zebra_llama_300M_mamba_hybrid-pretrain.yaml
  examples/megatron/configs/MI355X/lfm2_8B_A1B-FP8-te-precision.yaml
)

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
judge() { # OUT BASE [--configs-root DIR] EXP...
  local out=$1 base=$2; shift 2
  # An empty environment: every ${VAR:default} takes its default, as in the Rust test.
  env -i PATH="$PATH" HOME="$scratch" "$python" "$repo/docs/validation/primus-loader.py" \
    --primus "$primus" --commit "$have_primus" --megatron-commit "$have_megatron" \
    --base "$base" --out "$out" "$@" >"$scratch/log" 2>&1 \
    || { tail -20 "$scratch/log" >&2; exit 1; }
  grep "experiments judged" "$scratch/log" >&2
}

fixtures=$repo/tests/fixtures/primus_loader
mkdir -p "$fixtures"
judge "$fixtures/bundled.json" "$repo" --configs-root "$repo/presets/examples" \
  "$repo"/presets/examples/experiments/*.yaml
judge "$fixtures/amd.json" "$primus" --megatron-defaults "$repo/presets/megatron-defaults.tsv" \
  "${sample[@]/#/$primus/}"

if [ "${2:-}" = "--all" ]; then
  out=$(mkdir -p "${3:?--all needs OUT_DIR}" && cd "$3" && pwd)
  mapfile -t all < <(cd "$primus" && find examples/megatron/configs examples/torchtitan/configs -name '*.yaml' | sort)
  judge "$out/all.json" "$primus" "${all[@]/#/$primus/}"
  cd "$repo"
  PRIMUS_CHECKOUT=$primus PRIMUS_LOADER_ANSWERS=$out/all.json \
    cargo test -q --test primus_loader -- --include-ignored --nocapture 2>&1 | tee "$out/compare.txt"
fi
