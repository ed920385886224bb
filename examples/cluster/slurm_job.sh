#!/bin/bash
# Slurm: two nodes, four GPUs each; srun starts one `distlab launch` per node, which reads the node count, this
# node's place and the rendezvous host (the first node of the step) from Slurm's variables: no torchrun flags.
#SBATCH --job-name=distlab-train
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=4
#SBATCH --cpus-per-task=32
#SBATCH --time=02:00:00
export MASTER_PORT=29400   # the rendezvous port on the first node (29400 when unset)
srun distlab launch train.py --epochs 10
