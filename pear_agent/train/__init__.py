"""Training: warm start (SFT) and GRPO over whole episodes, every rollout through the ONE turn loop.

Imports torch, transformers, PEFT and TRL lazily (the `train` extra); nothing here is imported by
`pear-agent run`.
"""
