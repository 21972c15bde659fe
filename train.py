"""Train a MiniGPT from raw text into a model folder that loads anywhere and can be pushed to the Hub as is.

    python train.py --preset names                                  # built-in baby names, a few minutes on a CPU
    python train.py --preset shakespeare --max_steps 3000           # built-in Shakespeare plays, byte-level BPE
    torchrun --nproc_per_node=2 train.py --preset names             # data parallel (gloo on CPU, nccl on GPUs)
    python train.py --preset names --resume_from_checkpoint last    # go on after a crash or a kill

The training code is minigpt/training.py (`python train.py --help` lists every flag); `pip install .` gives the same
as the command `minigpt-train`.
"""

from minigpt.training import cli

if __name__ == "__main__":
    cli()
