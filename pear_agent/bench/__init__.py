"""Many episodes over tasks x seeds: runner (resumable JSONL), stats, report, paired comparison."""
