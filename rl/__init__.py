"""GGPO training: rollouts, rewards, masks, losses, the accelerate trainer (built in a later issue)."""
