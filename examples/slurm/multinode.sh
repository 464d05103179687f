#!/bin/bash
# Multi-node torchrun under Slurm: one torchrun per node (srun), rendezvous from SLURM_*.
#
#   tracker submit --sbatch=--nodes=2 --sbatch=--ntasks-per-node=1 --gpus 8 --cpus 64 \
#       -- bash examples/slurm/multinode.sh train.py --epochs 3
#
# NPROC_PER_NODE (default: the GPUs Slurm gave this node, else 1), RDZV_PORT (29500) and
# PYTHON (python) may be set with `tracker submit --env`.
set -euo pipefail
head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
nproc=${NPROC_PER_NODE:-${SLURM_GPUS_ON_NODE:-1}}
exec srun --kill-on-bad-exit=1 "${PYTHON:-python}" -m torch.distributed.run \
    --nnodes="$SLURM_JOB_NUM_NODES" --nproc-per-node="$nproc" \
    --rdzv-id="$SLURM_JOB_ID" --rdzv-backend=c10d --rdzv-endpoint="$head:${RDZV_PORT:-29500}" \
    "$@"
