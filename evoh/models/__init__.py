"""Models evoh builds itself, so the whole pipeline runs and is tested without a download."""
